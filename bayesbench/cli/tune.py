"""`bayesbench run --tune`: every (task, arch) at its best learning rate, chosen on a held-out
selection set and re-trained on the preset's seeds (`bayesbench/sweep/tune.py`).

    bayesbench run --preset quick --tune
    bayesbench run --preset quick --tune --tasks sticky --tune-args selection_seeds=1 rule=auc

The options only: `cli/run.request_of` makes them the request's `tuning`, and the engine runs
the search (`sweep/engine.py` `tune_phases`). Two passes, each resumable and exactly once: the
selection jobs (the grid of every pair, one ensemble per pair with per-member rates), then the
chosen rates on the reported seeds. Running the command again skips what is stored.
"""

from __future__ import annotations

from .args import key_values


def add_tune_options(p) -> None:
    p.add_argument("--tune", action="store_true",
                   help="search the learning rate of every (task, arch) before its reported seeds: the preset's grid "
                        "per task (quick: 5 rates over 100x), 2 selection seeds each, chosen on a held-out selection "
                        "set, the winner re-trained on the preset's seeds; tuned rows are ranked apart")
    p.add_argument("--tune-args", nargs="+", type=key_values("--tune-args"), metavar="KEY=VALUE",
                   help="the search over the preset's: lrs=[1e-4,1e-3,1e-2] selection_seeds=2 rule=final|auc "
                        "metric=entropy_mae selection_sequences=512 axes={\"warmup_steps\":[0,100]} packed=true "
                        "prune=none|median|halving (implies --tune)")
