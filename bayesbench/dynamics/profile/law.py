"""The routing law on real training, with the chance baseline each statistic needs.

dL/ds_ij = -alpha_ij A_ij is an identity of the attention backward (Paper II, arXiv 2512.22473,
section 3). Whether one optimiser step then moves the scores along alpha * A depends on everything
the update passes through. For one step theta -> theta + Delta theta, on n sequences of that
step's batch, per (member, layer, head), with alpha, A at theta and Delta s = s(theta + Delta
theta) - s(theta) the actual change of the scaled scores:

A shift common to a query row changes no attention weight and is orthogonal to alpha * A
(sum_j alpha_ij A_ij = 0), so the statistics use the row-centred change Delta s^c_ij = Delta s_ij
- mean_j Delta s_ij (plain mean over the visible keys: the Euclidean projection that removes row
shifts). Free scores under plain SGD move by Delta s = eta alpha A, which is already row-centred,
so there every statistic below but the query test is exactly 1.

Statistics (names in the store, one number per member, layer, head and checked step):

    law_sign_alpha    alpha-weighted share of visible (i, j) with A_ij != 0 where Delta s^c_ij has
                      the sign of A_ij
    law_sign_abs      the same weighted by |alpha_ij A_ij| (the entries the loss pushes hardest)
    law_cosine        cos(Delta s^c, alpha * A) over the rows the loss reaches (A_i not all 0)
    law_query_test    share of those rows (with >= 2 visible keys) where sum_j A_ij Delta alpha_ij > 0,
                      Delta alpha the actual weight change: the step moved query i's weights
                      towards its better-than-average keys (to first order: lowered its loss)
    law_kappa         <Delta s^c, alpha A> / (eta ||alpha A||^2), eta the step's learning rate:
                      1 for free scores under plain SGD (Delta s = eta alpha A); the routing push
                      the real step delivered per unit of a free-score step's (through shared
                      weights, the score kernel J J^T can make it far larger than 1). Under AdamW
                      the update is preconditioned (about eta per coordinate whatever the
                      gradient's size), so kappa's scale is the optimiser's, not the law's
    law_linearity_r2  1 - ||Delta s^c - P^c||^2 / ||Delta s^c||^2, P = J Delta theta the first-order
                      prediction (a JVP along the step): a check that the step is small enough
                      for first-order statements, not a test of the law
    law_own_share     <P_own^c, P^c> / ||P^c||^2: the share of the predicted change that comes
                      from the head's own W_Q / W_K update (P_own: the JVP along those rows of
                      Delta theta only; P - P_own is everything else: embeddings, earlier layers,
                      LayerNorms)
    law_own_cosine    cos(P_own^c, alpha A), law_rest_cosine cos(P^c - P_own^c, alpha A)
    law_row_shift_share  1 - ||Delta s^c||^2 / ||Delta s||^2: the share of the raw change that is a
                      row shift (moves no weight); what an uncentred statistic would count
    law_ds_norm       ||Delta s^c||: the size of the routing update (the cross-lagged analysis of
                      routing and value updates reads it beside value_dv_norm)

The value side (the "M-step" of Paper II): the gradient of a value vector is
dL/dv_j = sum_i alpha_ij u_i (u_i = dL/dg_i), so free values under plain SGD move by
Delta v_j = -eta sum_i alpha_ij u_i. `value_statistics` measures the actual change Delta v of the
value vectors over the step against that push, per (member, layer, head):

    value_cosine      cos(Delta v, -dL/dv) over the sequences, keys and head dimensions
    value_kappa       <Delta v, -dL/dv> / (eta ||dL/dv||^2): 1 for free values under plain SGD
    value_dv_norm     ||Delta v||: the size of the value update

Every statistic but the linearity check and the share has a **shuffle null** `<name>_null`: the
same statistic with each sequence's changes paired with another sequence's alpha and A of the
same step (every cyclic shift b -> b + k of the n sequences, k = 1..n-1, averaged). It keeps
everything common to all sequences (positions, the step itself) and breaks only the pairing of a
sequence's change with its own advantage, so statistic - null is the alignment the law explains.
"""

from __future__ import annotations

import torch
from torch import Tensor

from bayesbench.models.attention import causal_mask

NULLED = ("law_sign_alpha", "law_sign_abs", "law_cosine", "law_query_test", "law_kappa", "law_own_cosine",
          "law_rest_cosine")
PLAIN = ("law_linearity_r2", "law_own_share", "law_row_shift_share", "law_ds_norm")
LAW_NAMES = NULLED + tuple(f"{n}_null" for n in NULLED) + PLAIN
VALUE_NULLED = ("value_cosine", "value_kappa")
VALUE_NAMES = VALUE_NULLED + tuple(f"{n}_null" for n in VALUE_NULLED) + ("value_dv_norm",)
# the held-out check (profiler.py, stored with the prefix "heldout_"): the law statistics without the
# own-W_Q/W_K split (that needs a JVP per layer; the self-term question needs the whole change)
HELDOUT_NULLED = tuple(n for n in NULLED if n not in ("law_own_cosine", "law_rest_cosine"))
HELDOUT_LAW = HELDOUT_NULLED + tuple(f"{n}_null" for n in HELDOUT_NULLED) + (
    "law_linearity_r2", "law_row_shift_share", "law_ds_norm")
_RED = (-4, -2, -1)  # B, T, T of [..., B, H, T, T]; the head dim -3 stays


def _safe_div(a: Tensor, b: Tensor) -> Tensor:
    return torch.where(b > 0, a / torch.where(b > 0, b, torch.ones_like(b)), torch.full_like(a, float("nan")))


def _cos(x: Tensor, y: Tensor) -> Tensor:
    return _safe_div((x * y).sum(_RED), x.pow(2).sum(_RED).sqrt() * y.pow(2).sum(_RED).sqrt())


def row_centred(x: Tensor, keep: Tensor) -> Tensor:
    """x minus its plain mean over each row's visible keys (0 above the diagonal)."""
    x = torch.where(keep, x, 0.0)
    return torch.where(keep, x - x.sum(-1, keepdim=True) / keep.sum(-1, keepdim=True), 0.0)


def paired_statistics(change: dict[str, Tensor], alpha: Tensor, advantage: Tensor, lr: float) -> Tensor:
    """The nulled statistics [len(NULLED), ..., H] of the changes in `change` (keys "ds_c"
    row-centred Delta s, "dalpha" Delta alpha, "own_c", "rest_c" row-centred predictions)
    against the weights `alpha` and advantage `advantage` (all
    [..., B, H, T, T]). With the sequences' own alpha and A these are the statistics; with
    another sequence's, the null."""
    T = alpha.shape[-1]
    keep = causal_mask(T, alpha.device)
    z = torch.zeros((), dtype=alpha.dtype, device=alpha.device)
    push = torch.where(keep, alpha * advantage, z)  # -dL/ds
    nonzero = keep & (advantage != 0)
    rows = nonzero.any(-1, keepdim=True)  # the rows the loss reaches
    agree = (torch.sign(change["ds_c"]) == torch.sign(advantage)).to(alpha.dtype)

    def weighted(w: Tensor) -> Tensor:
        w = torch.where(nonzero, w, z)
        return _safe_div((w * agree).sum(_RED), w.sum(_RED))

    def cos_rows(x: Tensor) -> Tensor:
        return _cos(torch.where(rows, x, z), push)

    sq = push.pow(2).sum(_RED)
    gain = (torch.where(keep, advantage * change["dalpha"], z).sum(-1) > 0).to(alpha.dtype)  # [..., B, H, T]
    tested = rows.squeeze(-1) & (keep.sum(-1) >= 2)
    query = _safe_div(torch.where(tested, gain, z).sum((-3, -1)), tested.to(alpha.dtype).sum((-3, -1)))
    return torch.stack([weighted(alpha), weighted(push.abs()), cos_rows(change["ds_c"]), query,
                        _safe_div((change["ds_c"] * push).sum(_RED), lr * sq),
                        cos_rows(change["own_c"]), cos_rows(change["rest_c"])])


def law_statistics(delta_s: Tensor, predicted: Tensor, own: Tensor, advantage: Tensor, alpha: Tensor,
                   lr: float) -> Tensor:
    """[len(LAW_NAMES), ..., H] for inputs [..., B, H, T, T] (B the sequences, causal).

    delta_s: actual score change; predicted: J Delta theta; own: the JVP along the head's own
    W_Q / W_K rows of Delta theta; advantage, alpha at theta; lr the step's learning rate (> 0).
    Entries above the diagonal are ignored. The null needs B >= 2 sequences (NaN otherwise).
    """
    shapes = {tuple(t.shape) for t in (delta_s, predicted, own, advantage, alpha)}
    if len(shapes) != 1:
        raise ValueError(f"delta_s, predicted, own, advantage and alpha must share one shape, got {sorted(shapes)}")
    if delta_s.dim() < 4:
        raise ValueError(f"inputs must be [..., B, H, T, T], got {tuple(delta_s.shape)}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr!r}")
    dt = torch.float64 if delta_s.dtype == torch.float64 else torch.float32
    delta_s, predicted, own, advantage, alpha = (x.to(dt) for x in (delta_s, predicted, own, advantage, alpha))
    T = delta_s.shape[-1]
    keep = causal_mask(T, delta_s.device)
    alpha = torch.where(keep, alpha, 0.0)
    alpha1 = torch.softmax((alpha.log() + delta_s).masked_fill(~keep, float("-inf")), -1)  # softmax(s + Delta s)
    p_c, own_c = row_centred(predicted, keep), row_centred(own, keep)
    change = {"ds_c": row_centred(delta_s, keep),
              "dalpha": torch.where(keep, alpha1 - alpha, 0.0), "own_c": own_c, "rest_c": p_c - own_c}
    stats = paired_statistics(change, alpha, advantage, lr)
    B = delta_s.shape[-4]
    if B >= 2:
        null = torch.stack([paired_statistics(change, alpha.roll(k, -4), advantage.roll(k, -4), lr)
                            for k in range(1, B)]).mean(0)
    else:
        null = torch.full_like(stats, float("nan"))
    ds_c = change["ds_c"]
    r2 = 1 - _safe_div((ds_c - p_c).pow(2).sum(_RED), ds_c.pow(2).sum(_RED))
    share = _safe_div((own_c * p_c).sum(_RED), p_c.pow(2).sum(_RED))
    ds = torch.where(keep, delta_s, 0.0)
    shift = 1 - _safe_div(ds_c.pow(2).sum(_RED), ds.pow(2).sum(_RED))
    return torch.cat([stats, null, torch.stack([r2, share, shift, ds_c.pow(2).sum(_RED).sqrt()])])


_VRED = (-4, -2, -1)  # B, T, Dh of [..., B, H, T, Dh]


def value_push(alpha: Tensor, upstream: Tensor) -> Tensor:
    """-dL/dv [..., B, H, T, Dh] = -alpha^T u: how plain SGD on free values would move each value
    vector (alpha [..., B, H, T, T] causal, upstream u = dL/dg [..., B, H, T, Dh])."""
    T = alpha.shape[-1]
    alpha = torch.where(causal_mask(T, alpha.device), alpha, 0.0)
    return -torch.matmul(alpha.transpose(-1, -2), upstream.to(alpha.dtype))


def _value_pair(delta_v: Tensor, push: Tensor, lr: float) -> Tensor:
    dot = (delta_v * push).sum(_VRED)
    sq = push.pow(2).sum(_VRED)
    return torch.stack([_safe_div(dot, delta_v.pow(2).sum(_VRED).sqrt() * sq.sqrt()), _safe_div(dot, lr * sq)])


def value_statistics(delta_v: Tensor, alpha: Tensor, upstream: Tensor, lr: float) -> Tensor:
    """[len(VALUE_NAMES), ..., H] for delta_v, upstream [..., B, H, T, Dh] and alpha [..., B, H, T, T]
    (B the sequences): the value update against the value push -dL/dv (module docstring), with
    the shuffle null of the routing law (each sequence's Delta v against another sequence's
    push, every cyclic shift averaged; NaN for B < 2)."""
    if delta_v.shape != upstream.shape or delta_v.shape[:-1] != alpha.shape[:-1] or delta_v.dim() < 4:
        raise ValueError(f"delta_v and upstream must be [..., B, H, T, Dh] and alpha [..., B, H, T, T], got "
                         f"{tuple(delta_v.shape)}, {tuple(upstream.shape)} and {tuple(alpha.shape)}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr!r}")
    dt = torch.float64 if delta_v.dtype == torch.float64 else torch.float32
    delta_v, alpha = delta_v.to(dt), alpha.to(dt)
    push = value_push(alpha, upstream)
    stats = _value_pair(delta_v, push, lr)
    B = delta_v.shape[-4]
    if B >= 2:
        null = torch.stack([_value_pair(delta_v, push.roll(k, -4), lr) for k in range(1, B)]).mean(0)
    else:
        null = torch.full_like(stats, float("nan"))
    return torch.cat([stats, null, delta_v.pow(2).sum(_VRED).sqrt().unsqueeze(0)])


def own_qk_tangent(model, delta: list[Tensor], layer: int) -> list[Tensor]:
    """`delta` (one tensor per parameter, `model.parameters()` order) with everything zeroed but
    layer `layer`'s query and key rows (the first 2 d_model output columns of its qkv weight and
    bias): the head's own W_Q / W_K update, for every head of that layer at once (a head's own
    rows are the only rows of that layer that reach its scores)."""
    attn = model.blocks[layer].attn
    d = attn.d_model
    own = {id(attn.qkv.weight): attn.qkv.weight}
    if attn.qkv.bias is not None:
        own[id(attn.qkv.bias)] = attn.qkv.bias
    out = []
    for p, t in zip(model.parameters(), delta):
        if id(p) in own:
            z = torch.zeros_like(t)
            z[..., :2 * d] = t[..., :2 * d]
            out.append(z)
        else:
            out.append(torch.zeros_like(t))
    return out
