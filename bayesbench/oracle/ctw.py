"""Context-tree weighting: the exact Bayes predictive of a variable-order Markov chain
(docs/science.md#order-k-and-variable-order-markov-chains).

Prior (Willems, Shtarkov and Tjalkens 1995, "The context-tree weighting method: basic
properties", IEEE Trans. Inf. Theory 41(3), Sec. III; the variable-order chains of Zhou, Tian and
Diggavi, "Transformers learn variable-order Markov chains in-context", arXiv 2410.05493): a
context tree of depth at most D over V symbols, where every node at depth d < D is a leaf with
probability `leaf_prob` (1/2 in Willems et al.) and otherwise has V children, one per preceding
symbol; every leaf s has its own next-symbol distribution theta_s ~ Dirichlet(alpha) (alpha = 1/2:
the Krichevsky-Trofimov estimator). The next symbol after x_{..t} is drawn from the leaf that the
suffix x_t, x_{t-1}, ... reaches.

The exact mixture over every tree and every theta is CTW's weighted probability of the root,

    P_w(s) = leaf_prob P_e(s) + (1 - leaf_prob) prod_{a} P_w(a s)   (depth of s < D),
    P_w(s) = P_e(s)                                                    (depth D),
    P_e(s) = Gamma(V alpha) / Gamma(V alpha + n_s) prod_j Gamma(alpha + n_{s,j}) / Gamma(alpha),

with n_{s,j} the number of times symbol j followed context s. The predictive is the ratio
p(j | x_{..t}) = P_w(root; x_{..t} j) / P_w(root; x_{..t}).

Sequences: the first D symbols are the initial context (uniform, no evidence about the tree); the
symbols x_D, x_{D+1}, ... are the tree's. Position t predicts x_{t+1}; positions t < D - 1 have
no full context and get the uniform predictive (what their next symbol is drawn from).

`ctw_predictive` runs the compiled op `bayesbench._C` `ctw_predictive` where it is built (csrc/ctw.h:
the same recursion one sequence at a time, in float64, threads over the batch; a CUDA kernel too),
else the batched PyTorch path `_ctw_batched` (a loop over time and depth, vectorised over the
batch; O(L D V) per sequence; `backend` picks, as for the other oracle ops). In both, only the
D + 1 nodes on the current context's path change at a step, and the ratio of the root's weighted
probability is the recursion

    r_D(j) = f_D(j),   r_d(j) = w_d f_d(j) + (1 - w_d) r_{d+1}(j),   p(j | x) = r_0(j),

with f_d(j) = (alpha + n_{s_d, j}) / (V alpha + n_{s_d}) the node's Dirichlet predictive and
w_d = leaf_prob P_e(s_d) / P_w(s_d) the posterior probability that the node is a leaf.
`ctw_predictive_reference` recomputes P_w from counts for every prefix and candidate symbol in
plain float64 Python (the independent reference; small sizes only).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .. import ops
from ..checks import int_at_least, number_in, positive_number
from .backend import use_native
from .validate import check_sequence_inputs, require_float_dtype


def check_ctw_settings(V: int, depth: int, alpha: float, leaf_prob: float) -> None:
    """The settings' rules, shared by the oracle and the tunnel (one-line SettingErrors)."""
    int_at_least("V", V, 2, "alphabet size")
    int_at_least("depth", depth, 0, "the context tree's maximum depth")
    positive_number("alpha", alpha, "the Dirichlet prior's concentration at each leaf")
    number_in("leaf_prob", leaf_prob, 0, 1, what="the prior probability that a node above the maximum depth is a leaf")


def node_count(V: int, depth: int) -> int:
    """Nodes of the full V-ary context tree of depth `depth`: 1 + V + ... + V^depth."""
    return sum(V**d for d in range(depth + 1))


def context_paths(seq: Tensor, V: int, depth: int) -> Tensor:
    """[B, L, depth + 1] long: the node index, at each depth d, of the context ending at each
    position t (the suffix x_t, ..., x_{t-d+1}); nodes of depth d are numbered from
    node_count(V, d - 1) by sum_{i<d} x_{t-i} V^i. Entries whose context reaches before the
    sequence are meaningless (never read: the first D symbols are the initial context)."""
    B, L = seq.shape
    x = seq.long()
    paths = torch.zeros((B, L, depth + 1), dtype=torch.long, device=seq.device)
    ctx = torch.zeros((B, L), dtype=torch.long, device=seq.device)
    for d in range(1, depth + 1):
        shifted = torch.zeros_like(x)
        shifted[:, d - 1:] = x[:, : L - d + 1]  # x_{t-d+1} at position t
        ctx = ctx + shifted * V ** (d - 1)
        paths[:, :, d] = node_count(V, d - 1) + ctx
    return paths


def ctw_predictive(seq: Tensor, V: int, depth: int, alpha: float = 0.5, leaf_prob: float = 0.5, *,
                   backend: str = "auto", dtype: torch.dtype = torch.float32, check: bool = True) -> Tensor:
    """Predictive [B, L, V] of the next symbol under the CTW mixture (module docstring): the
    compiled op where built ('auto', 'native'), else the batched PyTorch path ('reference').
    check=False skips the symbol-range check of `seq` (a host read): for the task's own sampler."""
    if check:
        check_sequence_inputs("seq", seq, V)
    check_ctw_settings(V, depth, alpha, leaf_prob)
    require_float_dtype("dtype", dtype)
    if use_native("ctw_predictive", backend, seq.device):
        return ops.ctw_predictive(seq, V, depth, float(alpha), float(leaf_prob), dtype)
    return _ctw_batched(seq, V, depth, float(alpha), float(leaf_prob)).to(dtype)


def _ctw_batched(seq: Tensor, V: int, depth: int, alpha: float, q: float) -> Tensor:
    B, L = seq.shape
    dev = seq.device
    out = torch.full((B, L, V), 1.0 / V, dtype=torch.float64, device=dev)
    if B == 0 or L == 0 or depth > L:  # depth > L: no symbol of the tree's is seen or predicted
        return out
    N, D = node_count(V, depth), depth
    # Per-node state of every sequence's tree, flat over (sequence, node) so that a step reads
    # and writes its D + 1 path nodes with index_select / index_add_ (no advanced indexing).
    counts = torch.zeros(B * N * V, dtype=torch.float64, device=dev)
    lpe = torch.zeros(B * N, dtype=torch.float64, device=dev)  # log P_e of each node
    lcp = torch.zeros(B * N, dtype=torch.float64, device=dev)  # log prod_a P_w(a s) (internal nodes)
    log_q = math.log(q) if q > 0 else -math.inf
    log_1q = math.log1p(-q) if q < 1 else -math.inf
    nodes = context_paths(seq, V, D) + N * torch.arange(B, device=dev).view(B, 1, 1)  # [B, L, D+1]
    x = seq.long()
    ones = torch.ones(B * (D + 1), dtype=torch.float64, device=dev)
    for s in range(D, L + 1):  # x_s is the tree's symbol; its context ends at s - 1
        path = nodes[:, s - 1] if D > 0 else nodes[:, 0]  # [B, D+1]; depth 0: the root only
        flat = path.reshape(-1)
        c = (counts.view(B * N, V).index_select(0, flat)).view(B, D + 1, V)
        f = (alpha + c) / (V * alpha + c.sum(-1, keepdim=True))
        inner = path[:, :D].reshape(-1)
        w = torch.sigmoid((log_q + lpe.index_select(0, inner)) - (log_1q + lcp.index_select(0, inner))).view(B, D, 1)
        r = [f[:, D]] * (D + 1)
        for d in range(D - 1, -1, -1):
            r[d] = w[:, d] * f[:, d] + (1 - w[:, d]) * r[d + 1]
        if s >= 1:
            out[:, s - 1] = r[0]
        if s == L:
            break
        y = x[:, s].view(B, 1, 1)
        lpe.index_add_(0, flat, torch.log(f.gather(2, y.expand(B, D + 1, 1))).view(-1))
        if D > 0:
            ratios = torch.stack(r[1:], 1)  # [B, D, V]: each path child's ratio P_w(new) / P_w(old)
            lcp.index_add_(0, inner, torch.log(ratios.gather(2, y.expand(B, D, 1))).view(-1))
        counts.index_add_(0, (path * V + y.view(B, 1)).view(-1), ones)
    return out


def _log_pe(c: list[int] | list[float], alpha: float) -> float:
    """log of the Dirichlet(alpha)-categorical marginal likelihood of counts c (the KT estimator
    for alpha = 1/2)."""
    V = len(c)
    return (math.lgamma(V * alpha) - math.lgamma(V * alpha + sum(c))
            + sum(math.lgamma(alpha + n) - math.lgamma(alpha) for n in c))


def _log_pw(counts: dict[tuple[int, ...], list[int]], ctx: tuple[int, ...], V: int, depth: int, alpha: float,
            q: float) -> float:
    """log P_w of the node whose context is `ctx` (most recent symbol first), by the recursion."""
    c = counts.get(ctx)
    if c is None:
        return 0.0  # no symbol seen in this context: P_e = P_w = 1
    pe = _log_pe(c, alpha)
    if len(ctx) == depth:
        return pe
    children = sum(_log_pw(counts, ctx + (a,), V, depth, alpha, q) for a in range(V))
    terms = [t for t in ((math.log(q) + pe) if q > 0 else None, (math.log1p(-q) + children) if q < 1 else None)
             if t is not None]
    top = max(terms)
    return top + math.log(sum(math.exp(t - top) for t in terms))


def ctw_predictive_reference(seq: Tensor, V: int, depth: int, alpha: float = 0.5, leaf_prob: float = 0.5,
                             dtype: torch.dtype = torch.float64) -> Tensor:
    """The predictive [B, L, V] by recomputing log P_w(root) from the counts for every prefix and
    candidate next symbol (plain float64 Python; small sizes only)."""
    check_sequence_inputs("seq", seq, V)
    check_ctw_settings(V, depth, alpha, leaf_prob)
    B, L = seq.shape
    out = torch.full((B, L, V), 1.0 / V, dtype=torch.float64)
    for b in range(B):
        x = [int(v) for v in seq[b].tolist()] + [0]  # x[L]: a slot for the candidate after the last symbol
        counts: dict[tuple[int, ...], list[int]] = {}

        def add(s: int, sign: int) -> None:
            for d in range(depth + 1):
                ctx = tuple(x[s - 1 - i] for i in range(d))
                counts.setdefault(ctx, [0] * V)[x[s]] += sign

        for s in range(depth, L + 1):
            if s >= 1:
                seen, logs = x[s], []
                for j in range(V):  # log P_w(root) with x_s = j appended to x_{..s-1}
                    x[s] = j
                    add(s, 1)
                    logs.append(_log_pw(counts, (), V, depth, alpha, leaf_prob))
                    add(s, -1)
                x[s] = seen
                top = max(logs)
                p = [math.exp(v - top) for v in logs]
                out[b, s - 1] = torch.tensor([v / sum(p) for v in p], dtype=torch.float64)
            if s < L:
                add(s, 1)
    return out.to(dtype)
