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


def crp_predictive(seq: Tensor, V: int, theta: float = 1.0, *, backend: str = "auto",
                   dtype: torch.dtype = torch.float32, check: bool = True) -> Tensor:
    """Predictive [B, L, V] of the next label (module docstring), batched: cumulative counts.
    Sequences must be labelled in order of first appearance (the task's sampler's are);
    check=False skips the symbol-range check (a host read)."""
    if check:
        check_sequence_inputs("seq", seq, V)
    check_crp_settings(V, theta)
    require_float_dtype("dtype", dtype)
    use_native("crp_predictive", backend, seq.device)  # checks backend; 'native' raises: no compiled op
    B, L = seq.shape
    counts = torch.nn.functional.one_hot(seq.long(), V).double().cumsum(1)  # [B, L, V] through t
    n = torch.arange(1, L + 1, dtype=torch.float64, device=seq.device).view(1, L, 1)
    K = (counts[..., : V - 1] > 0).sum(-1, keepdim=True)  # labels below V-1 seen: the next new one's
    new = torch.zeros_like(counts).scatter_(2, K, float(theta))
    return ((counts + new) / (n + theta)).to(dtype)


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
