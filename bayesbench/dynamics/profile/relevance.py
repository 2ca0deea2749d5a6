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
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from bayesbench.models.attention import causal_mask

RELEVANCE_NAMES = ("relevant_top1_adv", "relevant_top1_alpha", "relevant_top1_chance", "relevant_alpha_mass",
                   "relevant_adv_rank", "relevant_alpha_rank")


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


def _first_reaching(steps: list[int], values: list[float], level: float, window: int = 5) -> float | None:
    """First step whose running mean over `window` checks (centred) reaches `level`."""
    for k in range(len(values)):
        lo, hi = max(0, k - window // 2), min(len(values), k + window // 2 + 1)
        v = [x for x in values[lo:hi] if math.isfinite(x)]
        if v and sum(v) / len(v) >= level:
            return float(steps[k])
    return None


def relevance_summary(records, level: float = 0.5) -> dict:
    """Per layer: the relevant-key shares over training for each seed's *retrieval head* (the
    head whose largest attention weight is most often on a relevant key over the last tenth of
    the checks); when each share first reaches `level` (running mean over 5 checks), and the lead
    t(alpha) - t(A) with a t-interval over seeds (positive: the advantage points at the relevant
    key before attention does). Empty when the study recorded no relevant-key ranks."""
    from collections import defaultdict

    from ..intervals import bootstrap_interval, t_interval

    cells: dict = defaultdict(lambda: defaultdict(dict))  # (layer, seed, head) -> name -> step -> value
    for r in records:
        if r.name in RELEVANCE_NAMES:
            cells[(r.layer, r.seed, r.head)][r.name][r.step] = r.value
    out: dict = {}
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
            series = {n: [c[n].get(s, math.nan) for s in steps] for n in RELEVANCE_NAMES}
            t_adv = _first_reaching(steps, series["relevant_top1_adv"], level)
            t_alpha = _first_reaching(steps, series["relevant_top1_alpha"], level)
            n0 = max(1, len(steps) // 10)
            per_seed[seed] = {"head": head, "t_adv": t_adv, "t_alpha": t_alpha,
                              "lead": t_alpha - t_adv if t_adv is not None and t_alpha is not None else None,
                              **{f"{n}_first": _nanmean(series[n][:n0]) for n in RELEVANCE_NAMES},
                              **{f"{n}_last": _nanmean(series[n][-n0:]) for n in RELEVANCE_NAMES}}
        leads = [v["lead"] for v in per_seed.values() if v["lead"] is not None]
        adv_first = sum(1 for v in per_seed.values() if _first(v["t_adv"], v["t_alpha"]))
        alpha_first = sum(1 for v in per_seed.values() if _first(v["t_alpha"], v["t_adv"]))
        row = {"per_seed": per_seed, "level": level, "lead": t_interval(leads),
               "adv_first_seeds": adv_first, "alpha_first_seeds": alpha_first,
               "alpha_never_seeds": sum(1 for v in per_seed.values() if v["t_alpha"] is None),
               "sign_test_p": sign_test(adv_first, alpha_first), "seeds": len(per_seed)}
        for n in RELEVANCE_NAMES:
            for when in ("first", "last"):
                row[f"{n}_{when}"] = bootstrap_interval([v[f"{n}_{when}"] for v in per_seed.values()])
        out[layer] = row
    return out


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact binomial (sign) test of wins against losses at p = 1/2 (ties left out);
    1.0 with no untied seeds. A seed where only one event happened counts for that one: its lead
    is censored, but its sign is known."""
    from scipy.stats import binomtest

    n = wins + losses
    return float(binomtest(wins, n, 0.5).pvalue) if n else 1.0


def _first(t: float | None, other: float | None) -> bool:
    """t happened, and before `other` (or `other` never did)."""
    return t is not None and (other is None or t < other)


def _nanmean(xs: list[float]) -> float:
    v = [x for x in xs if math.isfinite(x)]
    return sum(v) / len(v) if v else math.nan
