"""`bayesbench run --tune`: every (task, arch) at its best learning rate, chosen on a held-out
selection set and re-trained on the preset's seeds (`bayesbench/sweep/tune.py`).

    bayesbench run --preset quick --tune
    bayesbench run --preset quick --tune --tasks sticky --tune-args selection_seeds=1 rule=auc

Two passes of the sweep engine, each resumable and exactly once: the selection jobs (the grid of
every pair, one ensemble per pair with per-member rates), then the chosen rates on the reported
seeds. Running the command again skips what is stored.
"""

from __future__ import annotations

from .args import as_dict, key_values


def add_tune_options(p) -> None:
    p.add_argument("--tune", action="store_true",
                   help="search the learning rate of every (task, arch) before its reported seeds: the preset's grid "
                        "per task (quick: 5 rates over 100x), 2 selection seeds each, chosen on a held-out selection "
                        "set, the winner re-trained on the preset's seeds; tuned rows are ranked apart")
    p.add_argument("--tune-args", nargs="+", type=key_values("--tune-args"), metavar="KEY=VALUE",
                   help="the search over the preset's: lrs=[1e-4,1e-3,1e-2] selection_seeds=2 rule=final|auc "
                        "metric=entropy_mae selection_sequences=512 axes={\"warmup_steps\":[0,100]} packed=true "
                        "prune=none|median|halving (implies --tune)")


def tune_given(args) -> dict | None:
    """The --tune-args settings, or None when the command does not tune; a fixed rate beside them
    (--train-args lr), which the search would drop, refused."""
    given = as_dict("--tune-args", getattr(args, "tune_args", None))
    if not getattr(args, "tune", False) and not given:
        return None
    if "lr" in as_dict("--train-args", getattr(args, "train_args", None)):
        raise ValueError("--train-args lr=...: --tune chooses the learning rate, a fixed one would be dropped (rule: a "
                         "tuned run trains at the rate its search picks; give the rates to try as --tune-args "
                         "lrs=[...])")
    return given


def run_tuned(args, base, say, run_preset) -> list:
    """`bayesbench run --tune`: tune the jobs `base(place)` (resolved, untuned) on the engine of
    `run` (`run_preset(args, select, say)`, which `cli/run.py` passes: this module never imports
    the command that calls it); returns the final sweep jobs."""
    return tune_phases(base, tune_given(args) or {}, group=f"run-{args.preset}", db=args.db,
                       run_phase=lambda select: run_preset(args, select, say), args=args, say=say)


def tune_phases(base, given: dict, *, group: str, db, run_phase, args, say, where: str = "--tune-args") -> list:
    """The two passes of a tuning on the engine: the selection jobs of every sweep job of
    `base(place)` (untuned; `run_phase(select)` runs the sweep jobs `select(place)` and returns
    them), the choice read from the store, the chosen candidates; returns the final sweep jobs.
    `given`: the search over each task's default (`sweep.tune.spec_for`); `group`: the rows' group."""
    from ..report.selection import select_rows
    from ..sweep.expand import SweepJob
    from ..sweep.tune import choose, final_job, selection_jobs, spec_for
    from .args import with_log

    warned: set[str] = set()

    def searches(place):
        out = [(sweep_job, spec_for(sweep_job.job, given, where)) for sweep_job in base(place)]
        for sweep_job, _ in out:
            if len(sweep_job.job.seeds) < 3 and sweep_job.key not in warned:
                warned.add(sweep_job.key)
                say(f"note: {sweep_job.job.describe()}: the chosen rate is re-trained on {len(sweep_job.job.seeds)} "
                    "seed(s); a tuned row wants at least 3 (--seeds 3) for an interval that means something")
        if any(spec.prune != "none" for _, spec in out):
            from ..sweep.prune import check_optuna

            check_optuna()
        return out

    def selection(place):
        return with_log(args, [SweepJob.of(j, group_id=group, size=sweep_job.size)
                               for sweep_job, spec in searches(place) for j in selection_jobs(sweep_job.job, spec)])

    say("tuning: the selection jobs (each candidate on the reported budget, curves on the held-out selection set)")
    run_phase(selection)

    def finals(place):
        out = []
        for sweep_job, spec in searches(place):
            job = sweep_job.job
            keys = [SweepJob.of(j, group_id=group).key for j in selection_jobs(job, spec)]
            outcome = choose(select_rows(db, run_ids=keys, selection=True), spec)
            final = final_job(job, spec, outcome)
            say(f"tuning: {sweep_job.label.split(' lr ')[0]}: {_outcome_line(spec, outcome)}")
            out.append(SweepJob.of(final, group_id=group, size=sweep_job.size))
        return with_log(args, out)

    say("tuning: the chosen candidates on the reported seeds")
    return run_phase(finals)


def _outcome_line(spec, outcome: dict) -> str:
    from ..store.tuning import tuning_marks

    scores = ", ".join(f"{c['lr']:g}: " + ("pruned" if c.get("pruned") else "diverged" if c["mean"] is None
                                            else f"{c['mean']:.4f}")
                       for c in outcome["candidates"])
    return (f"{'; '.join(tuning_marks({**spec.identity(), **outcome}))} (selection {spec.rule} {spec.metric}, "
            f"mean over {spec.selection_seeds} seed(s): {scores} bits)")
