"""The exact predictive of a Chinese restaurant process over a capped vocabulary
(docs/science.md#chinese-restaurant-process; Aldous 1985, "Exchangeability and related topics";
Pitman 2006, "Combinatorial Stochastic Processes", Ch. 3).

Customers x_0, x_1, ... sit at tables: the next one joins table k with probability
n_k / (n + theta) and opens a new table with probability theta / (n + theta), n the customers so
far. A token is the table's label in order of opening (the first table 0, the next 1, ...), so
that new symbols keep arriving. With V labels, the tables from the V-th on all share the last
label V - 1 (the overflow). The predictive after x_0..x_t (n = t + 1) is exact under that
labelling: with n_k the count of label k and K the number of labels below V - 1 seen so far,

    p(k) = n_k / (n + theta)                       for k < K,
    p(K) = (n_K + theta) / (n + theta)             (K < V - 1: the new label, n_K = 0;
                                                    K = V - 1: the overflow, which a new table
                                                    and the overflow's own tables both reach),
    p(k) = 0                                       for K < k,

since a new table is labelled K while labels remain and V - 1 after, and every customer of an
overflow table was counted under V - 1.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..checks import int_at_least, positive_number
from .backend import use_native
from .validate import check_sequence_inputs, require_float_dtype


def check_crp_settings(V: int, theta: float) -> None:
    int_at_least("V", V, 2, "the vocabulary cap: labels 0..V-2 for the first tables, V-1 for every later one")
    positive_number("theta", theta, "the CRP's concentration")


def check_opening_order(seq: Tensor) -> None:
    """Tables are labelled in order of opening: x_0 = 0 and each label at most one above every
    label before it (ValueError naming the first sequence and position that break it)."""
    if seq.numel() == 0:
        return
    x = seq.long()
    before = torch.cat([torch.full_like(x[:, :1], -1), x[:, :-1].cummax(1).values], 1)
    bad = x > before + 1
    if bool(bad.any()):
        b, t = (int(i) for i in bad.nonzero()[0])
        raise ValueError(f"seq must label tables in order of opening (the first 0, each new one the next label): "
                         f"sequence {b} has label {int(x[b, t])} at position {t} after labels up to "
                         f"{int(before[b, t])}")


def crp_predictive(seq: Tensor, V: int, theta: float = 1.0, *, backend: str = "auto",
                   dtype: torch.dtype = torch.float32, check: bool = True) -> Tensor:
    """Predictive [B, L, V] of the next label (module docstring), batched: cumulative counts.
    Sequences must be labelled in order of first appearance (the task's sampler's are);
    check=False skips the symbol-range check (a host read)."""
    if check:
        check_sequence_inputs("seq", seq, V)
        check_opening_order(seq)
    check_crp_settings(V, theta)
    require_float_dtype("dtype", dtype)
    use_native("crp_predictive", backend, seq.device)  # checks backend; 'native' raises: no compiled op
    B, L = seq.shape
    x = seq.long()
    counts = torch.zeros((B, L, V), dtype=torch.float64, device=seq.device).scatter_(2, x.unsqueeze(-1), 1.0)
    counts = counts.cumsum_(1)  # [B, L, V]: label counts through t
    # Labels open in order, so the labels below V-1 seen through t are 0..max, capped at V-1:
    # the next new table's label.
    K = (x.cummax(1).values + 1).clamp_(max=V - 1).unsqueeze(-1)
    counts.scatter_add_(2, K, torch.full_like(K, float(theta), dtype=torch.float64))
    n = torch.arange(1, L + 1, dtype=torch.float64, device=seq.device).view(1, L, 1)
    return counts.div_(n + theta).to(dtype)


def crp_predictive_reference(seq: Tensor, V: int, theta: float = 1.0, dtype: torch.dtype = torch.float64) -> Tensor:
    """The same predictive by a plain Python pass per sequence (float64)."""
    check_sequence_inputs("seq", seq, V)
    check_crp_settings(V, theta)
    B, L = seq.shape
    out = torch.zeros((B, L, V), dtype=torch.float64)
    for b in range(B):
        counts = [0] * V
        for t, x in enumerate(int(v) for v in seq[b].tolist()):
            counts[x] += 1
            labels = sum(1 for k in range(V - 1) if counts[k] > 0)
            row = [c / (t + 1 + theta) for c in counts]
            row[labels] += theta / (t + 1 + theta)
            out[b, t] = torch.tensor(row, dtype=torch.float64)
    return out.to(dtype)
