"""Triton backward (FlashAttention-2 style) with an optional routing-law probe.

Three launches:
  _bwd_delta  Delta_i = rowsum(dO_i * O_i)  (= E_alpha_i[b], the probe's expected_b)
  _bwd_dkdv   per key block: dv_j = sum_i alpha_ij dO_i, dk_j = scale * sum_i dS_ij q_i;
              stats probe: ||dv_j|| (the value update norm)
  _bwd_dq     per query block: dq_i = scale * sum_j dS_ij k_j, with dS = P * (dP - Delta);
              full probe: u = dO, advantage = Delta - dP, alpha = P (T x T, masked = 0), and
              b = dP, ds = dS only when the probe asks to store them;
              stats probe: entropy (bits), mean and max |advantage| over visible keys,
              ||dS_i|| (the norm of dL/ds over the query's keys).
alpha is rebuilt from the saved base-2 LSE. FULL, STATS, STORE_B, STORE_DS are tl.constexpr, so
without a probe the probe code is not compiled and no probe memory is allocated. Every loop over
blocks is split as in the Triton tutorial: blocks wholly visible run without the causal / bounds
mask (MASK=False), only the diagonal block (causal) or the partial last block (full attention)
pays for it. The grid is 1-D with the (batch, head) index fastest.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .attention_fwd import LOG2E
from .config import Config
from .probe import AttentionProbe


@triton.jit
def _bwd_delta(
    O, DO, DELTA,
    sob, soh, sot, sod,
    sdb, sdh, sdt, sdd,
    H, T, D,
    BLOCK_M: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    heads = tl.num_programs(0) // tl.cdiv(T, BLOCK_M)  # 1-D grid, (batch, head) fastest
    pid_bh = tl.program_id(0) % heads
    pid_m = tl.program_id(0) // heads
    off_b = (pid_bh // H).to(tl.int64)
    off_h = (pid_bh % H).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_m < T)[:, None] & (offs_d < D)[None, :]
    o = tl.load(O + off_b * sob + off_h * soh + offs_m[:, None] * sot + offs_d[None, :] * sod,
                mask=mask, other=0.0).to(tl.float32)
    do = tl.load(DO + off_b * sdb + off_h * sdh + offs_m[:, None] * sdt + offs_d[None, :] * sdd,
                 mask=mask, other=0.0).to(tl.float32)
    tl.store(DELTA + pid_bh.to(tl.int64) * T + offs_m, tl.sum(o * do, 1), mask=offs_m < T)


@triton.jit
def _dkdv_blocks(
    dk, dv, k, v, Q, DO, LSE, DELTA, sqt, sqd, sdt, sdd, offs_n, offs_d, d_ok, T, qk_scale, lo, hi,
    MASK: tl.constexpr,
    UPCAST: tl.constexpr,
    PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    """Query blocks [lo, hi) for one key block. MASK=True only on the causal diagonal; elsewhere
    padded query rows load q = dO = 0 (and LSE = Delta = 0) and add exact zeros, unmasked."""
    for start_m in range(lo, hi, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        row_ok = offs_m < T
        q_mask = row_ok[:, None] & d_ok[None, :]
        q = tl.load(Q + offs_m[:, None] * sqt + offs_d[None, :] * sqd, mask=q_mask, other=0.0)
        do = tl.load(DO + offs_m[:, None] * sdt + offs_d[None, :] * sdd, mask=q_mask, other=0.0)
        if UPCAST:
            q = q.to(tl.float32)
            do = do.to(tl.float32)
        lse = tl.load(LSE + offs_m, mask=row_ok, other=0.0)
        delta = tl.load(DELTA + offs_m, mask=row_ok, other=0.0)
        # Transposed tiles [keys, queries]: pT_ji = alpha_ij.
        st = tl.dot(k, tl.trans(q), input_precision=PRECISION) * qk_scale
        pt = tl.exp2(st - lse[None, :])
        if MASK:
            pt = tl.where(offs_n[:, None] <= offs_m[None, :], pt, 0.0)
        dv += tl.dot(pt.to(do.dtype), do, input_precision=PRECISION)
        dpt = tl.dot(v, tl.trans(do), input_precision=PRECISION)
        dst = pt * (dpt - delta[None, :])
        dk += tl.dot(dst.to(q.dtype), q, input_precision=PRECISION)
    return dk, dv


@triton.jit
def _bwd_dkdv(
    Q, K, V, DO, LSE, DELTA, DK, DV, VNORM,
    sqb, sqh, sqt, sqd,
    skb, skh, skt, skd,
    svb, svh, svt, svd,
    sdb, sdh, sdt, sdd,
    H, T, D, scale, qk_scale,
    CAUSAL: tl.constexpr,
    STATS: tl.constexpr,
    UPCAST: tl.constexpr,
    PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    heads = tl.num_programs(0) // tl.cdiv(T, BLOCK_N)  # 1-D grid, (batch, head) fastest
    pid_bh = tl.program_id(0) % heads
    pid_n = tl.program_id(0) // heads
    off_b = (pid_bh // H).to(tl.int64)
    off_h = (pid_bh % H).to(tl.int64)
    Q += off_b * sqb + off_h * sqh
    K += off_b * skb + off_h * skh
    V += off_b * svb + off_h * svh
    DO += off_b * sdb + off_h * sdh
    row0 = pid_bh.to(tl.int64) * T
    LSE += row0
    DELTA += row0

    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    key_ok = offs_n < T
    d_ok = offs_d < D
    kv_mask = key_ok[:, None] & d_ok[None, :]
    k = tl.load(K + offs_n[:, None] * skt + offs_d[None, :] * skd, mask=kv_mask, other=0.0)
    v = tl.load(V + offs_n[:, None] * svt + offs_d[None, :] * svd, mask=kv_mask, other=0.0)
    if UPCAST:
        k = k.to(tl.float32)
        v = v.to(tl.float32)
    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)

    # Padded keys are never stored. Causal: queries before this key block never see it; the
    # queries of the block's own rows (BLOCK_N is a multiple of BLOCK_M) need the mask, later ones
    # see every key of the block.
    lo = 0
    if CAUSAL:
        lo = pid_n * BLOCK_N
        mid = (pid_n + 1) * BLOCK_N
        dk, dv = _dkdv_blocks(dk, dv, k, v, Q, DO, LSE, DELTA, sqt, sqd, sdt, sdd, offs_n, offs_d, d_ok, T,
                              qk_scale, lo, mid, True, UPCAST, PRECISION, BLOCK_M)
        lo = mid
    dk, dv = _dkdv_blocks(dk, dv, k, v, Q, DO, LSE, DELTA, sqt, sqd, sdt, sdd, offs_n, offs_d, d_ok, T,
                          qk_scale, lo, T, False, UPCAST, PRECISION, BLOCK_M)

    dk *= scale
    out = offs_n[:, None] * D + offs_d[None, :]  # dk, dv are contiguous [B, H, T, D]
    tl.store(DK + row0 * D + out, dk.to(DK.dtype.element_ty), mask=kv_mask)
    tl.store(DV + row0 * D + out, dv.to(DV.dtype.element_ty), mask=kv_mask)
    if STATS:
        tl.store(VNORM + row0 + offs_n, tl.sqrt(tl.sum(dv * dv, 1)), mask=key_ok)


@triton.jit
def _dq_blocks(
    dq, ent, abs_sum, abs_max, ds_sq, q, do, lse, delta, K, V, ADV, ALPHA, BMAT, DSMAT,
    skt, skd, svt, svd, offs_m, offs_n, offs_d, row_ok, d_ok, T, qk_scale, lo, hi,
    MASK: tl.constexpr,
    CAUSAL: tl.constexpr,
    FULL: tl.constexpr,
    STATS: tl.constexpr,
    STORE_B: tl.constexpr,
    STORE_DS: tl.constexpr,
    UPCAST: tl.constexpr,
    PRECISION: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """Key blocks [lo, hi) for one query block: dq, the stats and the full probe's tiles.
    MASK=False: every key of the block is real and visible to every row (no where, no key
    bounds); MASK=True: the causal diagonal block or the partial last block."""
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < T
        if MASK:
            kv_mask = col_ok[:, None] & d_ok[None, :]
        else:
            kv_mask = d_ok[None, :]
        k = tl.load(K + cols[:, None] * skt + offs_d[None, :] * skd, mask=kv_mask, other=0.0)
        v = tl.load(V + cols[:, None] * svt + offs_d[None, :] * svd, mask=kv_mask, other=0.0)
        if UPCAST:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale
        log2p = s - lse[:, None]
        p = tl.exp2(log2p)
        if MASK:
            if CAUSAL:  # for a real row i, j <= i < T also rules out padded keys
                keep = cols[None, :] <= offs_m[:, None]
            else:
                keep = col_ok[None, :]
            p = tl.where(keep, p, 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)  # b_ij = u_i . v_j
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)
        if STATS:  # FULL implies STATS (see attention_backward)
            adv = delta[:, None] - dp
            if MASK:
                adv = tl.where(keep, adv, 0.0)
            abs_adv = tl.abs(adv)
            abs_sum += tl.sum(abs_adv, 1)
            abs_max = tl.maximum(abs_max, tl.max(abs_adv, 1))
            ds_sq += tl.sum(ds * ds, 1)  # ds is 0 where p is (masked keys)
            plogp = p * log2p
            if MASK:
                plogp = tl.where(keep, plogp, 0.0)  # 0 * -inf
            ent += tl.sum(plogp, 1)
        if FULL:
            offs = offs_m[:, None] * T + cols[None, :]
            if MASK:
                out_mask = row_ok[:, None] & col_ok[None, :]
            else:
                out_mask = row_ok[:, None]
            tl.store(ADV + offs, adv.to(ADV.dtype.element_ty), mask=out_mask)
            tl.store(ALPHA + offs, p.to(ALPHA.dtype.element_ty), mask=out_mask)
            if STORE_B:
                bij = dp
                if MASK:
                    bij = tl.where(keep, dp, 0.0)
                tl.store(BMAT + offs, bij.to(BMAT.dtype.element_ty), mask=out_mask)
            if STORE_DS:
                tl.store(DSMAT + offs, ds.to(DSMAT.dtype.element_ty), mask=out_mask)
    return dq, ent, abs_sum, abs_max, ds_sq


@triton.jit
def _bwd_dq(
    Q, K, V, DO, LSE, DELTA, DQ,
    U, ADV, ALPHA, BMAT, DSMAT, ENT, MEANA, MAXA, DSN,
    sqb, sqh, sqt, sqd,
    skb, skh, skt, skd,
    svb, svh, svt, svd,
    sdb, sdh, sdt, sdd,
    H, T, D, scale, qk_scale,
    CAUSAL: tl.constexpr,
    FULL: tl.constexpr,
    STATS: tl.constexpr,
    STORE_B: tl.constexpr,
    STORE_DS: tl.constexpr,
    UPCAST: tl.constexpr,
    PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    # 1-D grid, (batch, head) fastest (no 65535 limit on B*H); causal: longest rows first.
    heads = tl.num_programs(0) // tl.cdiv(T, BLOCK_M)
    pid_bh = tl.program_id(0) % heads
    pid_m = tl.program_id(0) // heads
    if CAUSAL:
        pid_m = tl.cdiv(T, BLOCK_M) - 1 - pid_m
    off_b = (pid_bh // H).to(tl.int64)
    off_h = (pid_bh % H).to(tl.int64)
    Q += off_b * sqb + off_h * sqh
    K += off_b * skb + off_h * skh
    V += off_b * svb + off_h * svh
    DO += off_b * sdb + off_h * sdh
    row0 = pid_bh.to(tl.int64) * T
    # Probe matrices are contiguous [B, H, T, T]: int64 base per head, int32 offsets in a tile
    # (so T * T < 2**31, checked by the wrapper).
    ADV += row0 * T
    ALPHA += row0 * T
    BMAT += row0 * T
    DSMAT += row0 * T
    DQ += row0 * D  # dq and u are contiguous [B, H, T, D]
    U += row0 * D
    LSE += row0
    DELTA += row0
    ENT += row0
    MEANA += row0
    MAXA += row0
    DSN += row0

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    row_ok = offs_m < T
    d_ok = offs_d < D
    q_mask = row_ok[:, None] & d_ok[None, :]
    q = tl.load(Q + offs_m[:, None] * sqt + offs_d[None, :] * sqd, mask=q_mask, other=0.0)
    do = tl.load(DO + offs_m[:, None] * sdt + offs_d[None, :] * sdd, mask=q_mask, other=0.0)
    if FULL:  # u = dL/dg, kept in float32
        tl.store(U + offs_m[:, None] * D + offs_d[None, :], do.to(tl.float32), mask=q_mask)
    if UPCAST:
        q = q.to(tl.float32)
        do = do.to(tl.float32)
    lse = tl.load(LSE + offs_m, mask=row_ok, other=0.0)
    delta = tl.load(DELTA + offs_m, mask=row_ok, other=0.0)
    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    ent = tl.zeros([BLOCK_M], dtype=tl.float32)  # sum_j alpha_ij log2 alpha_ij (stats only)
    abs_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    abs_max = tl.zeros([BLOCK_M], dtype=tl.float32)
    ds_sq = tl.zeros([BLOCK_M], dtype=tl.float32)  # sum_j (dL/ds_ij)^2

    # Unmasked blocks, then masked ones (BLOCK_M is a multiple of BLOCK_N). Causal: keys left of
    # the query block, then its diagonal block; full attention: whole blocks, then the tail.
    if CAUSAL:
        mid = pid_m * BLOCK_M
        end = (pid_m + 1) * BLOCK_M
    else:
        mid = T // BLOCK_N * BLOCK_N
        end = T
    dq, ent, abs_sum, abs_max, ds_sq = _dq_blocks(
        dq, ent, abs_sum, abs_max, ds_sq, q, do, lse, delta, K, V, ADV, ALPHA, BMAT, DSMAT,
        skt, skd, svt, svd, offs_m, offs_n, offs_d, row_ok, d_ok, T, qk_scale, 0, mid,
        False, CAUSAL, FULL, STATS, STORE_B, STORE_DS, UPCAST, PRECISION, BLOCK_N)
    dq, ent, abs_sum, abs_max, ds_sq = _dq_blocks(
        dq, ent, abs_sum, abs_max, ds_sq, q, do, lse, delta, K, V, ADV, ALPHA, BMAT, DSMAT,
        skt, skd, svt, svd, offs_m, offs_n, offs_d, row_ok, d_ok, T, qk_scale, mid, end,
        True, CAUSAL, FULL, STATS, STORE_B, STORE_DS, UPCAST, PRECISION, BLOCK_N)

    dq *= scale
    tl.store(DQ + offs_m[:, None] * D + offs_d[None, :], dq.to(DQ.dtype.element_ty),
             mask=q_mask)
    if FULL:
        if CAUSAL:  # key blocks wholly above the diagonal: write the masked zeros
            zero = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
            for start_n in range(end, T, BLOCK_N):
                cols = start_n + offs_n
                offs = offs_m[:, None] * T + cols[None, :]
                out_mask = row_ok[:, None] & (cols < T)[None, :]
                tl.store(ADV + offs, zero.to(ADV.dtype.element_ty), mask=out_mask)
                tl.store(ALPHA + offs, zero.to(ALPHA.dtype.element_ty), mask=out_mask)
                if STORE_B:
                    tl.store(BMAT + offs, zero.to(BMAT.dtype.element_ty), mask=out_mask)
                if STORE_DS:
                    tl.store(DSMAT + offs, zero.to(DSMAT.dtype.element_ty), mask=out_mask)
    if STATS:
        if CAUSAL:
            count = (offs_m + 1).to(tl.float32)
        else:
            count = tl.zeros([BLOCK_M], dtype=tl.float32) + T
        tl.store(ENT + offs_m, -ent, mask=row_ok)
        tl.store(MEANA + offs_m, abs_sum / count, mask=row_ok)
        tl.store(MAXA + offs_m, abs_max, mask=row_ok)
        tl.store(DSN + offs_m, tl.sqrt(ds_sq), mask=row_ok)


def attention_backward(
    do: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    o: torch.Tensor,
    lse: torch.Tensor,
    causal: bool,
    scale: float,
    cfg: Config,
    probe: AttentionProbe | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return (dq, dk, dv) (contiguous, input dtype); fill `probe` if given."""
    B, H, T, D = q.shape
    dev = q.device
    f32 = torch.float32
    if probe is not None:  # free the previous call's tensors before allocating new ones
        probe.clear()
    delta = torch.empty((B, H, T), dtype=f32, device=dev)
    _bwd_delta[(triton.cdiv(T, cfg.dq.m) * B * H,)](
        o, do, delta, *o.stride(), *do.stride(), H, T, D,
        BLOCK_M=cfg.dq.m, BLOCK_D=cfg.block_d, num_warps=cfg.dq.warps,
    )
    full = probe is not None and probe.full
    stats = probe is not None  # the full mode records the stats too
    store_b = store_ds = False
    # Without a probe the probe pointers are never dereferenced (constexpr-false branches).
    u = adv = alpha = bmat = dsmat = ent = mean_a = max_a = vnorm = dsn = delta
    if probe is not None and probe.full:
        store_b, store_ds = "b" in probe.store, "ds" in probe.store
        mat = probe.matrix_dtype
        u = torch.empty((B, H, T, D), dtype=f32, device=dev)
        adv, alpha = (torch.empty((B, H, T, T), dtype=mat, device=dev) for _ in range(2))
        if store_b:
            bmat = torch.empty((B, H, T, T), dtype=mat, device=dev)
        if store_ds:
            dsmat = torch.empty((B, H, T, T), dtype=mat, device=dev)
    if stats:
        ent, mean_a, max_a, vnorm, dsn = (torch.empty((B, H, T), dtype=f32, device=dev) for _ in range(5))

    dq = torch.empty((B, H, T, D), dtype=q.dtype, device=dev)
    dk = torch.empty((B, H, T, D), dtype=k.dtype, device=dev)
    dv = torch.empty((B, H, T, D), dtype=v.dtype, device=dev)
    strides = (*q.stride(), *k.stride(), *v.stride(), *do.stride())
    common = dict(CAUSAL=causal, STATS=stats, UPCAST=cfg.upcast, PRECISION=cfg.precision, BLOCK_D=cfg.block_d)
    t = cfg.dkdv
    _bwd_dkdv[(triton.cdiv(T, t.n) * B * H,)](
        q, k, v, do, lse, delta, dk, dv, vnorm, *strides, H, T, D, scale, scale * LOG2E,
        BLOCK_M=t.m, BLOCK_N=t.n, num_warps=t.warps, num_stages=t.stages, **common,
    )
    t = cfg.dq
    _bwd_dq[(triton.cdiv(T, t.m) * B * H,)](
        q, k, v, do, lse, delta, dq, u, adv, alpha, bmat, dsmat, ent, mean_a, max_a, dsn,
        *strides, H, T, D, scale, scale * LOG2E,
        FULL=full, STORE_B=store_b, STORE_DS=store_ds,
        BLOCK_M=t.m, BLOCK_N=t.n, num_warps=t.warps, num_stages=t.stages, **common,
    )
    if probe is not None:
        probe.causal, probe.scale = causal, scale
        probe.expected_b = delta
        probe.entropy, probe.mean_abs_advantage = ent, mean_a
        probe.max_abs_advantage, probe.value_update_norm = max_a, vnorm
        probe.ds_norm = dsn
        if full:
            probe.u, probe.advantage, probe.alpha = u, adv, alpha
            probe.b = bmat if store_b else None
            probe.ds = dsmat if store_ds else None
    return dq, dk, dv
