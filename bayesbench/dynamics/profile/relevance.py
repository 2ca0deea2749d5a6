"""Does the advantage point to the Bayes-relevant key before attention concentrates on it?

On the bijection with repeated keys (keys drawn with replacement, Paper I's code variant), the
value of a key x_k seen before is known exactly: it is the value token y_j right after an earlier
occurrence x_j = x_k. A transformer retrieves it in its last attention layer from the query at
x_k's position to that value position 2j + 1 (the key position 2j cannot hold y_j: it comes
before it). So for each such query i the *relevant keys* are R_i = {2j + 1 : j < k, x_j = x_k}.

Per (member, layer, head), over the queries with R_i non-empty, at each law-checked step:

    relevant_top1_adv     share of those queries whose largest advantage A_ij (over visible j)
                          is at a relevant key: the gradient asks for the right key
    relevant_top1_alpha   the same for the largest attention weight: attention already uses it
    relevant_top1_chance  mean |R_i| / n_i (n_i visible keys): either share for a random key
    relevant_alpha_mass   mean sum_{j in R_i} alpha_ij
    relevant_adv_rank     mean normalised rank of the best relevant key under A: the share of the
                          other visible keys ranked above it (0: first, 1: last)
    relevant_alpha_rank   the same under alpha

The prediction ("the advantage leads"): relevant_top1_adv rises well above chance before
relevant_top1_alpha does.

**The label route.** In a bijection the relevant keys are exactly the earlier positions holding
the target token, and A comes from a loss that knows the target: b_ij = u_i . v_j is large where
v_j raises the target's logit, so "the largest advantage is at a relevant key" may only say "the
gradient asks to copy the label from where it sits". The control removes what relevance adds to
that: the advantage recomputed (same parameters, same sequences, a second backward) against
*permuted* targets. The permutation is of the value tokens, one per sequence (`value_permutation`):
the sequence's value classes in order of first appearance c_1, c_2, ..., c_m, and c_k -> c_(k-1)
(c_1 -> c_m). So for a repeated-key query whose value is c_k (k >= 2) the permuted label c_(k-1)
first appears *before* c_k did, at a value position that belongs to another key: an earlier,
non-relevant position of the same query. The control and the relevant share are then read on the
SAME queries (`paired_statistics`): the repeated-key queries whose permuted label sits in their
context. Per (member, layer, head), over those queries:

    label_top1_adv_control     share whose largest permuted-target advantage is at a position
                               holding the permuted label: what copying a label alone gives
    label_adv_rank_control     the normalised rank of the best such position under that advantage
    label_top1_chance_control  mean |R'_i| / n_i for those queries
    relevant_top1_adv_paired   relevant_top1_adv on the same queries (the true targets' advantage)
    relevant_adv_rank_paired   relevant_adv_rank on the same queries

The excess relevant_top1_adv_paired - label_top1_adv_control is what Bayes relevance adds to label
copying. It is read (`relevance_summary`) in a window fixed before the outcome is seen: the checks
before the step at which attention found the relevant key (t_alpha), for a head chosen on the other
half of the checks; after t_alpha attention already sits on the key, and what the advantage does
there says nothing about leading it.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from bayesbench.models.attention import causal_mask

from ...stats import first_reaching, running_mean, sign_test

RELEVANCE_NAMES = ("relevant_top1_adv", "relevant_top1_alpha", "relevant_top1_chance", "relevant_alpha_mass",
                   "relevant_adv_rank", "relevant_alpha_rank")
CONTROL_NAMES = ("label_top1_adv_control", "label_adv_rank_control", "label_top1_chance_control",
                 "relevant_top1_adv_paired", "relevant_adv_rank_paired")
IGNORE = -100


def applies(task) -> bool:
    """True for tasks where `relevant_keys` is defined: the bijection with keys drawn with replacement."""
    return getattr(task, "name", None) == "bijection" and getattr(task, "keys", None) == "replacement"


def relevant_keys(task, tokens: Tensor) -> Tensor:
    """[..., T, T] bool from tokens [..., T] of the bijection: R[i, j] for query i at a key
    position and j the value position right after an earlier occurrence of the same key."""
    if not applies(task):
        raise ValueError(f"relevant keys are defined for the bijection with keys drawn with replacement, got {task!r}")
    T = tokens.shape[-1]
    pos = torch.arange(T, device=tokens.device)
    key_pos = (pos % 2 == 0) & (pos < 2 * task.L)
    if task.query:
        key_pos = key_pos | (pos == 2 * task.L)
    prev = torch.cat([torch.full_like(tokens[..., :1], -1), tokens[..., :-1]], -1)  # the token before j
    value_pos = (pos % 2 == 1) & (pos < 2 * task.L)
    same = tokens.unsqueeze(-1) == prev.unsqueeze(-2)  # [..., i, j]: x at i equals the token before j
    return same & key_pos.view(-1, 1) & value_pos.view(1, -1) & (pos.view(1, -1) < pos.view(-1, 1))


def value_permutation(task, tokens: Tensor) -> Tensor:
    """[..., V] per sequence, the class each value class is sent to by the label-route control:
    the sequence's value classes in order of first appearance c_1..c_m, c_k -> c_(k-1) and
    c_1 -> c_m; classes the sequence does not hold stay. A permuted label of a repeated-key query
    whose value is c_k (k >= 2) therefore first appears before its own value did: an earlier,
    non-relevant value position of the same query (module docstring)."""
    V, L = task.V, task.L
    values = tokens[..., 1:2 * L:2] - V  # [..., L] the value classes in order
    flat = values.reshape(-1, values.shape[-1]).tolist()
    out = torch.arange(V).repeat(len(flat), 1)
    for r, seq in enumerate(flat):
        order = list(dict.fromkeys(c for c in seq if 0 <= c < V))  # first appearances, in order
        for k, c in enumerate(order):
            out[r, c] = order[k - 1]  # k = 0: order[-1], the last to appear
    return out.view(*values.shape[:-1], V).to(tokens.device)


def label_targets(task, tokens: Tensor, permute: bool = False) -> Tensor:
    """[..., T] target classes of the bijection's predictions that the tokens determine (-100
    elsewhere): at key position 2k < 2L the value y_k right after it, at the query position the
    value after an earlier occurrence of the query key (when there is one). `permute`: every
    class sent through its sequence's `value_permutation` (the label-route control's targets)."""
    if not applies(task):
        raise ValueError(f"label targets are defined for the bijection with keys drawn with replacement, got {task!r}")
    V, L = task.V, task.L
    out = torch.full_like(tokens, IGNORE)
    out[..., 0:2 * L:2] = tokens[..., 1:2 * L:2] - V
    if task.query:
        rel = relevant_keys(task, tokens)[..., 2 * L, :]  # [..., T] the value positions after the query key
        seen = rel.any(-1)
        first = rel.to(torch.int64).argmax(-1, keepdim=True)
        value = tokens.gather(-1, first).squeeze(-1) - V
        out[..., 2 * L] = torch.where(seen, value, torch.full_like(value, IGNORE))
    if permute:
        sigma = value_permutation(task, tokens)  # [..., V]
        out = torch.where(out >= 0, sigma.gather(-1, out.clamp(min=0)), out)
    return out


def label_keys(task, tokens: Tensor, targets: Tensor) -> Tensor:
    """[..., T, T] bool: for each query i with a target, the earlier value positions j holding
    the token of that target class. With the true targets these are the relevant keys."""
    T, V, L = tokens.shape[-1], task.V, task.L
    pos = torch.arange(T, device=tokens.device)
    value_pos = (pos % 2 == 1) & (pos < 2 * L)
    holds = tokens.unsqueeze(-2) == (targets + V).unsqueeze(-1)  # [..., i, j]
    return holds & (targets >= 0).unsqueeze(-1) & value_pos.view(1, -1) & (pos.view(1, -1) < pos.view(-1, 1))


def _rank_of_best(score: Tensor, relevant: Tensor, keep: Tensor) -> Tensor:
    """Per row: the share of the other visible keys scored above the best relevant one."""
    neg = torch.finfo(score.dtype).min
    best = torch.where(relevant, score, neg).amax(-1, keepdim=True)
    above = (keep & (score > best)).sum(-1).to(score.dtype)
    others = (keep.sum(-1) - 1).clamp(min=1).to(score.dtype)
    return above / others


def relevance_statistics(advantage: Tensor, alpha: Tensor, relevant: Tensor) -> Tensor:
    """[len(RELEVANCE_NAMES), ..., H] for advantage, alpha [..., B, H, T, T] and relevant
    [..., B, T, T] (broadcast over heads); NaN where no query has a relevant key."""
    if advantage.shape != alpha.shape or advantage.dim() < 4:
        raise ValueError(f"advantage and alpha must share one shape [..., B, H, T, T], got "
                         f"{tuple(advantage.shape)} and {tuple(alpha.shape)}")
    dt = torch.float64 if advantage.dtype == torch.float64 else torch.float32
    advantage, alpha = advantage.to(dt), alpha.to(dt)
    T = alpha.shape[-1]
    keep = causal_mask(T, alpha.device)
    rel = (relevant.unsqueeze(-3) & keep).expand_as(alpha)  # [..., B, H, T, T]
    rows = rel.any(-1)  # [..., B, H, T]
    neg = torch.finfo(dt).min

    def top1(score: Tensor) -> Tensor:
        arg = torch.where(keep, score, neg).argmax(-1, keepdim=True)
        return rel.gather(-1, arg).squeeze(-1).to(dt)

    n_vis = keep.sum(-1).to(dt)  # [T]
    per_row = torch.stack([top1(advantage), top1(alpha), rel.sum(-1).to(dt) / n_vis,
                           torch.where(rel, alpha, 0.0).sum(-1), _rank_of_best(advantage, rel, keep),
                           _rank_of_best(alpha, rel, keep)])  # [6, ..., B, H, T]
    w = rows.to(dt)
    count = w.sum((-3, -1))
    total = (per_row * w).sum((-3, -1))
    return torch.where(count > 0, total / count.clamp(min=1), torch.full_like(total, float("nan")))


def control_statistics(advantage: Tensor, alpha: Tensor, labels: Tensor) -> Tensor:
    """[3, ..., H]: the label-route control's shares (the first three CONTROL_NAMES) from the
    advantage against the permuted targets and `labels` = label_keys of those targets; NaN where
    no query's permuted label occurs in its context."""
    full = relevance_statistics(advantage, alpha, labels)
    return full[[0, 4, 2]]


def paired_statistics(advantage: Tensor, control: Tensor, alpha: Tensor, task, tokens: Tensor) -> Tensor:
    """[len(CONTROL_NAMES), ..., H]: the label-route control and the true advantage's relevant
    share on the SAME queries: the repeated-key queries whose permuted label (`label_targets`
    with permute) sits at an earlier value position. advantage, control (the advantage against
    the permuted targets), alpha [..., B, H, T, T]; tokens [..., B, T]."""
    relevant = relevant_keys(task, tokens)
    labels = label_keys(task, tokens, label_targets(task, tokens, permute=True))
    paired = (relevant.any(-1) & labels.any(-1)).unsqueeze(-1)  # [..., B, T, 1]
    ctrl = control_statistics(control, alpha, labels & paired)
    rel = relevance_statistics(advantage, alpha, relevant & paired)
    return torch.cat([ctrl, rel[[0, 4]]])


def _first_at(steps: list[int], values: list[float], level: float, window: int = 5) -> float | None:
    """The first checked step whose centred running mean over `window` checks reaches `level`."""
    t = first_reaching(steps, running_mean(values, window), level, rising=True)
    return None if t is None else float(t)


def _split_halves(steps: list[int]) -> tuple[list[int], list[int]]:
    """The checks in two interleaved halves: (selection, evaluation) = (even-indexed, odd-indexed).
    The head and the window are chosen on the first, the excess is read on the second."""
    return steps[0::2], steps[1::2]


def relevance_summary(records, level: float = 0.5) -> dict:
    """Per layer, per seed, the relevant-key shares of one *retrieval head* and the label-route
    excess in a window fixed before the outcome is read (module docstring).

    The checks are split in two interleaved halves (`_split_halves`). On the selection half only:
    the head is the one whose largest attention weight is most often on a relevant key (mean
    relevant_top1_alpha), and t_alpha(selection) is the first check where that head's share, as a
    running mean over 5 checks, reaches `level`. On the evaluation half: the primary statistic,
    the mean over the checks before t_alpha(selection) (every check where attention never got
    there) of relevant_top1_adv_paired - label_top1_adv_control, the excess of the advantage's
    relevant share over the label route's on the same queries; a t-interval and test over seeds.
    A seed whose window holds no check (attention found the key by the first check) is
    untestable and counted ("untestable_seeds"). Described beside it: the lead t(alpha) - t(A) on
    every check of that head (a t-interval, and a sign test over the seeds where one of them
    happened), the shares of the first and last tenth (logit-t intervals) and the excess there.
    Empty when the study recorded no relevant-key ranks; "control" False when it recorded no
    same-query control (studies before issue 44 recorded the control on other queries)."""
    from collections import defaultdict

    from ...stats import logit_interval, t_interval

    cells: dict = defaultdict(lambda: defaultdict(dict))  # (layer, seed, head) -> name -> step -> value
    for r in records:
        if r.name in RELEVANCE_NAMES or r.name in CONTROL_NAMES:
            cells[(r.layer, r.seed, r.head)][r.name][r.step] = r.value
    out: dict = {}
    names = RELEVANCE_NAMES + CONTROL_NAMES
    for layer in sorted({k[0] for k in cells}):
        per_seed = {}
        for seed in sorted({k[1] for k in cells if k[0] == layer}):
            heads = sorted(k[2] for k in cells if k[0] == layer and k[1] == seed)
            all_steps = sorted({s for h in heads for s in cells[(layer, seed, h)]["relevant_top1_alpha"]})
            select, evaluate = _split_halves(all_steps)

            def chosen_by(h: int) -> float:
                series = cells[(layer, seed, h)]["relevant_top1_alpha"]
                v = [series[s] for s in select if s in series and math.isfinite(series[s])]
                return sum(v) / len(v) if v else -1.0

            head = max(heads, key=chosen_by)
            c = cells[(layer, seed, head)]
            steps = sorted(c["relevant_top1_adv"])
            series = {n: [c[n].get(s, math.nan) for s in steps] for n in names}
            t_adv = _first_at(steps, series["relevant_top1_adv"], level)
            t_alpha = _first_at(steps, series["relevant_top1_alpha"], level)
            t_sel = _first_at(select, [c["relevant_top1_alpha"].get(s, math.nan) for s in select], level)
            window = [s for s in evaluate if t_sel is None or s < t_sel]
            paired = [c["relevant_top1_adv_paired"].get(s, math.nan) - c["label_top1_adv_control"].get(s, math.nan)
                      for s in window]
            n0 = max(1, len(steps) // 10)
            excess = [a - b for a, b in zip(series["relevant_top1_adv_paired"], series["label_top1_adv_control"])]
            per_seed[seed] = {"head": head, "t_adv": t_adv, "t_alpha": t_alpha, "t_alpha_selection": t_sel,
                              "window_checks": len(window), "excess_before_alpha": _nanmean(paired),
                              "lead": t_alpha - t_adv if t_adv is not None and t_alpha is not None else None,
                              **{f"{n}_first": _nanmean(series[n][:n0]) for n in names},
                              **{f"{n}_last": _nanmean(series[n][-n0:]) for n in names},
                              "excess_over_control_first": _nanmean(excess[:n0]),
                              "excess_over_control_last": _nanmean(excess[-n0:])}
        leads = [v["lead"] for v in per_seed.values() if v["lead"] is not None]
        adv_first = sum(1 for v in per_seed.values() if _first(v["t_adv"], v["t_alpha"]))
        alpha_first = sum(1 for v in per_seed.values() if _first(v["t_alpha"], v["t_adv"]))
        before = [v["excess_before_alpha"] for v in per_seed.values()]
        row = {"per_seed": per_seed, "level": level, "lead": t_interval(leads, null=0.0),
               "adv_first_seeds": adv_first, "alpha_first_seeds": alpha_first,
               "alpha_never_seeds": sum(1 for v in per_seed.values() if v["t_alpha"] is None),
               "sign_test_p": sign_test(adv_first, alpha_first), "seeds": len(per_seed),
               "control": any(math.isfinite(x) for x in before),
               "excess_before_alpha": t_interval(before, null=0.0),
               "untestable_seeds": sum(1 for x in before if not math.isfinite(x)),
               "window": "evaluation-half checks before t_alpha of the selection half (head chosen there too)"}
        for n in names:
            for when in ("first", "last"):
                row[f"{n}_{when}"] = logit_interval([v[f"{n}_{when}"] for v in per_seed.values()])
        for when in ("first", "last"):
            row[f"excess_over_control_{when}"] = t_interval(
                [v[f"excess_over_control_{when}"] for v in per_seed.values()], null=0.0)
        out[layer] = row
    return out


def _first(t: float | None, other: float | None) -> bool:
    """t happened, and before `other` (or `other` never did)."""
    return t is not None and (other is None or t < other)


def _nanmean(xs: list[float]) -> float:
    v = [x for x in xs if math.isfinite(x)]
    return sum(v) / len(v) if v else math.nan
