"""Triton forward: softmax(scale * q k^T) v with online softmax, saving the log-sum-exp.

One program owns BLOCK_M queries of one (batch, head) and streams key/value blocks through an
online softmax (running max m, running sum l) in base 2: scores are multiplied by
scale * log2(e) so exp2 can be used, and the saved LSE is log2 sum_j 2^(s2_ij). The backward
rebuilds alpha_ij = 2^(s2_ij - LSE_i) from it without storing the T x T weights.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import compat
from .config import Config

compat.apply()

LOG2E = 1.4426950408889634


@triton.jit
def _fwd_blocks(
    acc, l_i, m_i, q, K, V, skt, skd, svt, svd, offs_m, offs_n, offs_d, d_ok, T, qk_scale, lo, hi,
    MASK: tl.constexpr,
    CAUSAL: tl.constexpr,
    UPCAST: tl.constexpr,
    PRECISION: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """Key blocks [lo, hi) through the online softmax. MASK=False: every key is visible to every
    row of the tile (blocks left of the diagonal, or full blocks without causality), so the
    causal / bounds test is compiled out; MASK=True: the diagonal block or the partial last one."""
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        if MASK:
            col_ok = cols < T
            kt = tl.load(K + cols[None, :] * skt + offs_d[:, None] * skd,
                         mask=col_ok[None, :] & d_ok[:, None], other=0.0)
            v = tl.load(V + cols[:, None] * svt + offs_d[None, :] * svd,
                        mask=col_ok[:, None] & d_ok[None, :], other=0.0)
        else:
            kt = tl.load(K + cols[None, :] * skt + offs_d[:, None] * skd, mask=d_ok[:, None], other=0.0)
            v = tl.load(V + cols[:, None] * svt + offs_d[None, :] * svd, mask=d_ok[None, :], other=0.0)
        if UPCAST:
            kt = kt.to(tl.float32)
            v = v.to(tl.float32)
        s = tl.dot(q, kt, input_precision=PRECISION) * qk_scale
        if MASK:
            if CAUSAL:  # for a real row i, j <= i < T also rules out padded keys
                keep = cols[None, :] <= offs_m[:, None]
            else:
                keep = col_ok[None, :]
            s = tl.where(keep, s, float("-inf"))
        # Key 0 is in the first block and visible to every row, so m_i is finite from then on.
        m_new = tl.maximum(m_i, tl.max(s, 1))
        rescale = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * rescale + tl.sum(p, 1)
        acc = acc * rescale[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _attn_fwd(
    Q, K, V, O, LSE,
    sqb, sqh, sqt, sqd,
    skb, skh, skt, skd,
    svb, svh, svt, svd,
    sob, soh, sot, sod,
    H, T, D, qk_scale,
    CAUSAL: tl.constexpr,
    UPCAST: tl.constexpr,
    PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    # 1-D grid, (batch, head) fastest: programs launched together work on the same query block
    # of different heads (equal work under causality); no 65535 limit on B*H. Causal: the
    # longest rows (last query blocks) first.
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
    O += off_b * sob + off_h * soh
    LSE += pid_bh.to(tl.int64) * T

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    row_ok = offs_m < T
    d_ok = offs_d < D

    q = tl.load(Q + offs_m[:, None] * sqt + offs_d[None, :] * sqd,
                mask=row_ok[:, None] & d_ok[None, :], other=0.0)
    if UPCAST:
        q = q.to(tl.float32)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    # Unmasked blocks first, then the masked ones (BLOCK_M is a multiple of BLOCK_N). Causal:
    # keys left of the query block, then the diagonal block. Full: whole blocks, then the tail.
    if CAUSAL:
        mid = pid_m * BLOCK_M
        end = (pid_m + 1) * BLOCK_M
    else:
        mid = T // BLOCK_N * BLOCK_N
        end = T
    acc, l_i, m_i = _fwd_blocks(acc, l_i, m_i, q, K, V, skt, skd, svt, svd, offs_m, offs_n, offs_d, d_ok,
                                T, qk_scale, 0, mid, False, CAUSAL, UPCAST, PRECISION, BLOCK_N)
    acc, l_i, m_i = _fwd_blocks(acc, l_i, m_i, q, K, V, skt, skd, svt, svd, offs_m, offs_n, offs_d, d_ok,
                                T, qk_scale, mid, end, True, CAUSAL, UPCAST, PRECISION, BLOCK_N)

    acc = acc / l_i[:, None]
    tl.store(O + offs_m[:, None] * sot + offs_d[None, :] * sod, acc.to(O.dtype.element_ty),
             mask=row_ok[:, None] & d_ok[None, :])
    tl.store(LSE + offs_m, m_i + tl.log2(l_i), mask=row_ok)


def attention_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float, cfg: Config
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (o [B,H,T,D] in q's dtype, lse [B,H,T] float32 in base 2). Inputs may be strided."""
    B, H, T, D = q.shape
    o = torch.empty((B, H, T, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H, T), dtype=torch.float32, device=q.device)
    tile = cfg.fwd
    _attn_fwd[(triton.cdiv(T, tile.m) * B * H,)](
        q, k, v, o, lse,
        *q.stride(), *k.stride(), *v.stride(), *o.stride(),
        H, T, D, scale * LOG2E,
        CAUSAL=causal, UPCAST=cfg.upcast, PRECISION=cfg.precision,
        BLOCK_M=tile.m, BLOCK_N=tile.n, BLOCK_D=cfg.block_d,
        num_warps=tile.warps, num_stages=tile.stages,
    )
    return o, lse
