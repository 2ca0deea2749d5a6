"""The bijection recipe sweep as a table (docs/reproducing.md, "The quick bijection's recipe").

Reads the rows a sweep stored (one per seed) and prints one line per job: its training recipe,
the training wall time of the ensemble, the positional entropy MAE at the value positions per
seed and their mean, and for each seed the number of context pairs it uses (`pairs_used`, read
from the job's final checkpoint on the same evaluation set):

    PYTHONPATH=. python scripts/recipe_table.py --db /tmp/recipe.sqlite --group sweep-bijection-recipe
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict

import torch

from bayesbench.scoring.by_case import pairs_used
from bayesbench.scoring.evaluate import eval_set, predict
from bayesbench.store.database import read_records
from bayesbench.tasks import task_from_config
from bayesbench.training.checkpoint import load_result


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--db", required=True)
    p.add_argument("--group", default="sweep-bijection-recipe", help="the stored rows' group (sweep-<name>)")
    p.add_argument("--eval", default="values", help="evaluation set (default values)")
    p.add_argument("--no-pairs", action="store_true", help="skip the pairs-used column (no checkpoint reads)")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    runs = defaultdict(list)
    for r in read_records(a.db, where="group_id = ?", params=(a.group,)):
        runs[r.run_id].append(r)
    if not runs:
        raise SystemExit(f"recipe_table: no rows of group {a.group!r} in {a.db}")
    print(f"| arch | batch | lr | schedule | steps | sequences / seed | wall (s) | positional entropy MAE at the "
          f"{a.eval} positions, per seed | mean | pairs used, per seed |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for rows in runs.values():
        rows.sort(key=lambda r: r.seed)
        t = rows[0].config["train"]
        maes = [r.evaluation.evals[a.eval].entropy_mae_positional.mean for r in rows]
        sched = t["schedule"] + (f", {t['warmup_steps']} warm-up" if t.get("warmup_steps") else "")
        used = "-" if a.no_pairs else " ".join(str(m) for m in _pairs_used(rows, a.eval))
        print(f"| {rows[0].arch} | {t['batch_size']} | {t['lr']:g} | {sched} | {rows[0].steps} | "
              f"{rows[0].steps * t['batch_size']:,} | {rows[0].wall_s:.0f} | {' '.join(f'{m:.3f}' for m in maes)} | "
              f"{sum(maes) / len(maes):.3f} | {used} |")
    return 0


def _pairs_used(rows, eval_name: str) -> list[int]:
    ckpt = rows[0].config.get("checkpoint")
    if not ckpt or not os.path.exists(ckpt):
        return ["?"] * len(rows)
    result = load_result(ckpt)
    ev = rows[0].evaluation.evals[eval_name]
    task = task_from_config({**rows[0].task_config, "supervise": "values" if eval_name == "values" else "both"})
    assert task.describe() == ev.task, (task.describe(), ev.task)
    batch = eval_set(task, ev.entropy_mae.n_sequences)
    log_q = predict(result.model, batch)
    return [pairs_used(task, batch, log_q[result.seeds.index(r.seed)]).best for r in rows]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
