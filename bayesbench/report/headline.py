"""The science the leaderboard exists to show, in two lines per task (`headline`): the ranking
by mean entropy MAE with ties where the intervals over seeds overlap, and whether the
transformer beats the position-wise MLP on every seed (Paper I, "The Bayesian Geometry of
Transformer Attention", arXiv 2512.22471, Table 1)."""

from __future__ import annotations

import math

from ..store.records import RunRecord
from .leaderboard import row_marks
from .rows import Row, _sort_key, aggregate, block_key, seed_interval, set_marks


def headline(records: list[RunRecord]) -> list[str]:
    """The science in two lines per task: the ranking by mean headline entropy MAE on the primary
    evaluation set, where two neighbours whose 95% intervals over seeds overlap are a tie ("~"),
    rows at the uniform floor and diverged members are marked; and whether the transformer beats
    the position-wise MLP on every seed (worst transformer seed against best MLP seed), as Paper I
    reports it for the bijection."""
    lines = []
    blocks: dict[tuple, list[Row]] = {}
    for row in aggregate(records, "entropy_mae"):
        if row.primary:
            blocks.setdefault(block_key(row), []).append(row)
    marks = set_marks([row for rows in blocks.values() for row in rows])
    for key, rows in blocks.items():
        (task, ev, n, _), code = key, marks[key].replace(f", {key[2]} seq", "")
        rows = sorted(rows, key=lambda row: _sort_key(row.means["entropy_mae"]))
        text = ""
        for k, row in enumerate(rows):
            if k:
                text += f" {_order(rows[k - 1], row)} "
            mean = row.means["entropy_mae"]
            text += (f"{row.arch} " + (f"{mean:.4f}" if math.isfinite(mean) else "diverged")
                     + row_marks(row, "entropy_mae"))
        lines.append(f"{task} ({ev}, {n} sequences{code}): mean entropy MAE (bits) over seeds, best first: {text} "
                     "('<': 95% intervals over seeds apart; '~': they overlap, a tie at this number of seeds; '<?': "
                     "fewer than two seeds, untested)")
        by_arch = {row.arch: [v for v, st in zip(row.values["entropy_mae"], row.status) if st == "ok"]
                   for row in rows}
        if by_arch.get("transformer") and by_arch.get("mlp"):
            worst_t, best_m = max(by_arch["transformer"]), min(by_arch["mlp"])
            factor = best_m / worst_t if worst_t > 0 else math.inf
            verdict = "below" if factor > 1 else "NOT below"
            lines.append(f"{task}: transformer is {verdict} the position-wise MLP on every seed, by {factor:.1f}x "
                         f"(worst transformer seed {worst_t:.4f} bits, best MLP seed {best_m:.4f} bits)")
    return lines


def _order(a: Row, b: Row) -> str:
    """'<' when b's interval over seeds lies above a's, '~' when they overlap, '<?' without intervals."""
    (_, a_hi), (b_lo, _) = seed_interval(a.values["entropy_mae"]), seed_interval(b.values["entropy_mae"])
    if not (math.isfinite(a_hi) and math.isfinite(b_lo)):
        return "<?"
    return "<" if b_lo > a_hi else "~"
