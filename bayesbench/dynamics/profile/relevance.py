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
*permuted* targets, every target class c replaced by c + 1 mod V, whose label sits at positions
that are not Bayes-relevant for the query. Per (member, layer, head), over the queries whose
permuted label occurs in their context:

    label_top1_adv_control     share whose largest permuted-target advantage is at a position
                               holding the permuted label: what copying a label alone gives
    label_adv_rank_control     the normalised rank of the best such position under that advantage
    label_top1_chance_control  mean |R'_i| / n_i for those queries

The relevant-key share's chance level is the control's share, not |R_i| / n_i: an excess of
relevant_top1_adv over label_top1_adv_control is what Bayes relevance adds to label copying.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from bayesbench.models.attention import causal_mask

from ...stats import first_reaching, running_mean, sign_test

RELEVANCE_NAMES = ("relevant_top1_adv", "relevant_top1_alpha", "relevant_top1_chance", "relevant_alpha_mass",
                   "relevant_adv_rank", "relevant_alpha_rank")
CONTROL_NAMES = ("label_top1_adv_control", "label_adv_rank_control", "label_top1_chance_control")
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


def label_targets(task, tokens: Tensor, permute: bool = False) -> Tensor:
    """[..., T] target classes of the bijection's predictions that the tokens determine (-100
    elsewhere): at key position 2k < 2L the value y_k right after it, at the query position the
    value after an earlier occurrence of the query key (when there is one). `permute`: every
    class c replaced by c + 1 mod V (the label-route control's targets)."""
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
        out = torch.where(out >= 0, (out + 1) % V, out)
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
    """[len(CONTROL_NAMES), ..., H]: the label-route control (module docstring) from the advantage
    against the permuted targets and `labels` = label_keys of those targets; NaN where no query's
    permuted label occurs in its context."""
    full = relevance_statistics(advantage, alpha, labels)
    return full[[0, 4, 2]]


def _first_at(steps: list[int], values: list[float], level: float, window: int = 5) -> float | None:
    """The first checked step whose centred running mean over `window` checks reaches `level`."""
    t = first_reaching(steps, running_mean(values, window), level, rising=True)
    return None if t is None else float(t)


def relevance_summary(records, level: float = 0.5) -> dict:
    """Per layer: the relevant-key shares over training for each seed's *retrieval head* (the
    head whose largest attention weight is most often on a relevant key over the last tenth of
    the checks); when each share first reaches `level` (running mean over 5 checks), and the lead
    t(alpha) - t(A) with a t-interval over seeds (positive: the advantage points at the relevant
    key before attention does), with a sign test over the seeds where one of them happened. With
    the label-route control: the excess of the advantage's relevant share over the control's
    share (module docstring), per seed, first and last tenth, with a t-interval and test over
    seeds. Shares get logit-t intervals over seeds (they stay in [0, 1]). Empty when the study
    recorded no relevant-key ranks."""
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
            heads = [k[2] for k in cells if k[0] == layer and k[1] == seed]

            def late(h: int) -> float:
                series = cells[(layer, seed, h)]["relevant_top1_alpha"]
                steps = sorted(series)
                tail = [series[s] for s in steps[-max(1, len(steps) // 10):] if math.isfinite(series[s])]
                return sum(tail) / len(tail) if tail else -1.0

            head = max(heads, key=late)
            c = cells[(layer, seed, head)]
            steps = sorted(c["relevant_top1_adv"])
            series = {n: [c[n].get(s, math.nan) for s in steps] for n in names}
            t_adv = _first_at(steps, series["relevant_top1_adv"], level)
            t_alpha = _first_at(steps, series["relevant_top1_alpha"], level)
            n0 = max(1, len(steps) // 10)
            excess = [a - b for a, b in zip(series["relevant_top1_adv"], series["label_top1_adv_control"])]
            per_seed[seed] = {"head": head, "t_adv": t_adv, "t_alpha": t_alpha,
                              "lead": t_alpha - t_adv if t_adv is not None and t_alpha is not None else None,
                              **{f"{n}_first": _nanmean(series[n][:n0]) for n in names},
                              **{f"{n}_last": _nanmean(series[n][-n0:]) for n in names},
                              "excess_over_control_first": _nanmean(excess[:n0]),
                              "excess_over_control_last": _nanmean(excess[-n0:])}
        leads = [v["lead"] for v in per_seed.values() if v["lead"] is not None]
        adv_first = sum(1 for v in per_seed.values() if _first(v["t_adv"], v["t_alpha"]))
        alpha_first = sum(1 for v in per_seed.values() if _first(v["t_alpha"], v["t_adv"]))
        row = {"per_seed": per_seed, "level": level, "lead": t_interval(leads, null=0.0),
               "adv_first_seeds": adv_first, "alpha_first_seeds": alpha_first,
               "alpha_never_seeds": sum(1 for v in per_seed.values() if v["t_alpha"] is None),
               "sign_test_p": sign_test(adv_first, alpha_first), "seeds": len(per_seed),
               "control": any(math.isfinite(v["label_top1_adv_control_last"]) for v in per_seed.values())}
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
