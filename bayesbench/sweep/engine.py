"""The engine of `bayesbench run` and `train` (and of `bayesbench.run`, `bayesbench.train`): a
`RunRequest` in, its jobs trained, scored and stored, a `RunResult` out.

    result = engine.run(RunRequest(tasks=("bijection",), archs=("mlp",), steps=20), sink)

Every front end builds a `RunRequest` (`sweep/request.py`) and renders the events the engine
sends to its `sink` (`sweep/events.py`); nothing here knows a command line or a caller.

1. The jobs: the request's selections resolved against the preset (`sweep.jobs.make_jobs`),
   or an outside model's (`outside_jobs`: the preset's transformer jobs with the architecture
   replaced, each built once with a trial forward), each a `SweepJob` (`sweep.expand`: a stable
   key and a run directory) of group `run-<preset>`; a replay's checked against the stored
   run's identity (`sweep/replay.py`).
2. The executor: one Ray task per job (`ray`, `sweep.ray_executor`), local worker processes
   (`sweep.local.LocalExecutor`), or, for one worker, this process (`InProcessExecutor`).
3. The driver under stop handling (`drive`: `sweep.driver.run_sweep` with SIGINT/SIGTERM as
   stop requests): a job whose rows are stored is skipped, the others train (continuing from
   their checkpoints) and the driver stores each job's rows once.
4. With `tuning`, two passes (`tune_phases`): the selection jobs of every job's search, then
   the chosen candidates on the reported seeds (`sweep/tune.py`).

A job that failed ends the run with its own error once the others are stored; failures the
executor could not hand back end it with `RunFailed`.

Torch threads: numbers differ in their last digits between thread counts, so the default is a
fixed count, not the machine's: one thread per worker (`request.DEFAULT_THREADS`), with at most
cores / threads local workers; every stored row records the count (its environment's
"threads").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from .driver import SweepOutcome
from .events import Event, Say
from .expand import SweepJob
from .request import FieldError, RunRequest, check_folder, field_error

Sink = Callable[[Event], None]
Place = Callable[[str], str]


class RunFailed(Exception):
    """Jobs failed for reasons the executor could not hand back as their own errors (a worker
    process that died too often); the others are stored."""


@dataclass(frozen=True)
class RunResult:
    """What a run did: its final jobs (the reported ones, tuned where tuning) and the outcome of
    their pass (`SweepOutcome`: skipped, trained, failed, retried, resumed)."""

    jobs: tuple[SweepJob, ...]
    outcome: SweepOutcome

    @property
    def keys(self) -> list[str]:
        return [sweep_job.key for sweep_job in self.jobs]


def run(request: RunRequest, sink: Sink) -> RunResult:
    """Run the request: its jobs (tuned first with `tuning`) on its executor, each stored once."""
    check_folder("runs_dir", request.runs_dir)
    ray, place = _placement(request)
    try:
        if request.tuning is None:
            base = plan(request, place, sink)
            return RunResult(tuple(base), _run_phase(request, ray, base, sink))
        sink(SELECTING)  # each (task, arch) at its best rate, chosen on held-out data
        base = plan(request, place, sink)
        outcomes: list[SweepOutcome] = []

        def run_phase(jobs: list[SweepJob]) -> SweepOutcome:
            outcomes.append(_run_phase(request, ray, jobs, sink))
            return outcomes[-1]

        jobs = tune_phases(base, request.tuning, group=request.group, db=request.db, run_phase=run_phase, sink=sink,
                           log=request.log)
        if request.replay is not None:
            from .replay import check_choice

            check_choice(request.replay, jobs, _say(sink))  # type: ignore[arg-type]
        return RunResult(tuple(jobs), outcomes[-1])
    finally:
        if ray is not None:
            ray.close()


def plan(request: RunRequest, place: Place | None, sink: Sink) -> list[SweepJob]:
    """The request's jobs (untuned), resolved and checked before anything runs: built-in archs
    (`make_jobs`) or the outside model's (`outside_jobs`), each of group `run-<preset>`, with
    the request's logger; a replay's checked against the stored run's identity."""
    from .jobs import make_jobs

    if request.model:
        jobs = outside_jobs(request, place, sink)
    else:
        jobs = make_jobs(request.preset, tasks=_list(request.tasks), archs=_list(request.archs),
                         seeds=_list(request.seeds), place=place, model_args=request.model_args or None,
                         **_common(request))
    planned = with_log(request.log, [SweepJob.of(job, group_id=request.group) for job in jobs])
    if request.replay is None:
        return planned
    from .replay import check_jobs

    return check_jobs(request.replay, planned, _say(sink), request.db, request.runs_dir)  # type: ignore[arg-type]


def _list(values) -> list | None:
    return None if values is None else list(values)


def _common(request: RunRequest) -> dict:
    """make_jobs' settings of a request, other than the selection."""
    return dict(steps=request.steps, device=request.device, attention=request.attention, compile=request.compile,
                precision=request.precision, checkpoint_every=request.checkpoint_every,
                eval_sequences=request.eval_sequences, train=request.train(), threads=request.torch_threads,
                task_args=request.task_args or None)


def outside_jobs(request: RunRequest, place: Place | None, sink: Sink) -> list:
    """The jobs of the request's outside model on its tasks: the preset's transformer jobs' points
    with the architecture replaced by the model (`sweep.jobs.make_jobs`), each built with a trial
    forward and its capacity said against the preset's transformer."""
    from ..models.outside import default_name, load_factory, normalise
    from ..scoring.trained_elsewhere import check_name
    from .jobs import make_jobs, trial_forward

    assert request.model is not None  # (plan's condition)
    spec = normalise(request.model)
    load_factory(spec)  # an unimportable model fails here, before anything runs
    try:
        name = check_name(request.name or default_name(spec))
    except ValueError as err:
        raise field_error(err, "name") from None
    model_args = dict(request.model_args)
    common = dict(tasks=_list(request.tasks), seeds=_list(request.seeds), place=place, setups={}, **_common(request))
    reference = make_jobs(request.preset, archs=["transformer"], **common)  # the capacity it is compared with
    jobs = make_jobs(request.preset, archs=[spec], name=name, model_args=model_args or None, **common)
    for job, transformer in zip(jobs, reference):
        try:  # the factory built with its options: a failure there is theirs, and model_args named
            forward = trial_forward(job)
        except ValueError as err:
            if not model_args:
                raise
            given = " ".join(f"{k}={v}" for k, v in model_args.items())
            raise field_error(err, "model_args", f"{{model_args}} {given}: ") from None
        ratio = job.params / transformer.params
        sizes = ", ".join(f"{k} {v}" for k, v in transformer.model.items())
        sink(Say(f"capacity: {name} on {job.setup.label}: {job.params:,} parameters per member = {ratio:.2f}x the "
                 f"preset's transformer ({transformer.params:,}; {sizes})"
                 + ("" if 0.9 <= ratio <= 1.1 else " -- NOT capacity-matched (outside 10%): compare with care")
                 + f"; forward: {forward}"))
    return jobs


def with_log(kind: str | None, jobs: list[SweepJob]) -> list[SweepJob]:
    """The sweep jobs with the logger `kind` (its package checked before anything trains)."""
    if not kind:
        return jobs
    from ..training.loggers import check_logger

    try:
        check_logger(kind)
    except ValueError as err:
        raise field_error(err, "log") from None
    return [dataclasses.replace(sweep_job, log=kind) for sweep_job in jobs]


# ---------------------------------------------------------------- executing

def _placement(request: RunRequest):
    """(the Ray executor or None, where device 'auto' goes): on Ray, the cluster's GPUs when it has
    any; locally, this machine's (`sweep.jobs.resolve_device`)."""
    if not request.ray:
        return None, None
    from .ray_executor import connect
    from .sweep_file import Resources

    return connect(request.ray, Resources(cpus=request.torch_threads), request.max_retries)


def _run_phase(request: RunRequest, ray, jobs: list[SweepJob], sink: Sink) -> SweepOutcome:
    """One pass of the engine over `jobs`: said, driven, and its failures raised."""
    from .local import local_executor

    executor = ray or local_executor(jobs, workers=request.jobs, threads=request.torch_threads,
                                     max_retries=request.max_retries, in_process=True)
    announce(jobs, sink)
    outcome = drive(jobs, executor, db=request.db, runs_dir=request.runs_dir, progress=request.progress, sink=sink,
                    lines=request.lines)
    raise_failures(jobs, outcome)
    return outcome


def raise_failures(jobs: list[SweepJob], outcome: SweepOutcome) -> None:
    """A job that failed, as a one-job run would raise it (its own error), once the others are
    stored; `RunFailed` when the executor could not hand the error back."""
    for key in outcome.failed:
        if key in outcome.errors:
            raise outcome.errors[key]
    if outcome.failed:
        labels = {sweep_job.key: sweep_job.label for sweep_job in jobs}
        first = next(iter(outcome.failed))
        raise RunFailed(f"{len(outcome.failed)} job(s) failed ({labels[first]}: {outcome.failed[first]}); the "
                        "others are stored: fix the cause and run the same command again")


def drive(jobs: list[SweepJob], executor, *, db: str | None, runs_dir: str, progress: bool, sink: Sink,
          lines: bool = False) -> SweepOutcome:
    """`run_sweep` with SIGINT/SIGTERM as stop requests (each running job checkpoints, then
    `interrupt.Interrupted` says where; the front end says it)."""
    from ..running import interrupt
    from .driver import run_sweep

    with interrupt.handling():
        return run_sweep(jobs, executor, db=db, runs_dir=runs_dir, progress=progress, sink=sink, lines=lines)


def announce(jobs: list[SweepJob], sink: Sink) -> None:
    """One line per job before it runs: its size, seeds, budget, rate and device."""
    from .expand import seeds_text

    for i, sweep_job in enumerate(jobs, 1):
        job = sweep_job.job
        sink(Say(f"[{i}/{len(jobs)}] {job.setup.label} / {sweep_job.arch}: {job.params:,} params per member, "
                 f"{len(job.seeds)} seeds {seeds_text(job.seeds)} as one ensemble, {job.train.steps} steps x batch "
                 f"{job.train.batch_size}, {_rates(job.train)} ({job.train.schedule}) on {job.device}"
                 + (f"; position table sized {job.max_len} for the longest eval (K={max(job.setup.eval_lengths)})"
                    if job.setup.eval_lengths else "")))


def _rates(train) -> str:
    """'lr 0.0005', or a tuning grid's members' rates: 'lr 0.0001 .. 0.01 per member (5 rates)'."""
    rates = train.member_lrs
    if rates is None:
        return f"lr {train.lr:g}"
    return f"lr {min(rates):g} .. {max(rates):g} per member ({len(set(rates))} rates)"


def _say(sink: Sink) -> Callable[[str], None]:
    return lambda text: sink(Say(text))


# ---------------------------------------------------------------- tuning

SELECTING = Say("tuning: the selection jobs (each candidate on the reported budget, curves on the held-out "
                "selection set)")


def searches(base: list[SweepJob], given: dict, sink: Sink | None = None, where: str = "{tune_args}") -> list:
    """(sweep job, its search) for each job: the preset's search of its task with `given` over it
    (`sweep.tune.spec_for`; `where` names the settings in its errors); with `sink`, a note for a
    job whose chosen rate is re-trained on fewer than 3 seeds."""
    from .tune import spec_for

    try:
        out = [(sweep_job, spec_for(sweep_job.job, given, where)) for sweep_job in base]
    except FieldError:
        raise
    except ValueError as err:
        if where == "{tune_args}":
            raise field_error(err, "tuning") from None
        raise
    if sink is not None:
        for sweep_job, _ in out:
            if len(sweep_job.job.seeds) < 3:
                sink(Say(f"note: {sweep_job.job.describe()}: the chosen rate is re-trained on "
                         f"{len(sweep_job.job.seeds)} seed(s); a tuned row wants at least 3 (--seeds 3) for an "
                         "interval that means something"))
    if any(spec.prune != "none" for _, spec in out):
        from .prune import check_optuna

        check_optuna()
    return out


def tune_phases(base: list[SweepJob], given: dict, *, group: str, db: str | None,
                run_phase: Callable[[list[SweepJob]], SweepOutcome], sink: Sink, log: str | None = None,
                where: str = "{tune_args}") -> list[SweepJob]:
    """The two passes of a tuning on the engine (after the caller said `SELECTING` and made
    `base`, whose notes follow it): the selection jobs of every job of `base`
    (untuned; `run_phase(jobs)` runs them), the choice read from the store, the chosen
    candidates; returns the final sweep jobs. `given`: the search over each task's default
    (`sweep.tune.spec_for`); `group`: the rows' group; `log`: the jobs' logger."""
    from .driver import stored_records
    from .tune import choose, final_job, selection_jobs

    planned = searches(base, given, sink, where)
    selection = [SweepJob.of(j, group_id=group, size=sweep_job.size)
                 for sweep_job, spec in planned for j in selection_jobs(sweep_job.job, spec)]
    run_phase(with_log(log, selection))
    sink(Say("tuning: the chosen candidates on the reported seeds"))
    finals = []
    for sweep_job, spec in planned:
        job = sweep_job.job
        keys = [SweepJob.of(j, group_id=group).key for j in selection_jobs(job, spec)]
        outcome = choose(stored_records(db, keys, selection=True), spec)
        sink(Say(f"tuning: {sweep_job.label.split(' lr ')[0]}: {_outcome_line(spec, outcome)}"))
        try:
            final = final_job(job, spec, outcome)
        except ValueError as err:
            raise (field_error(err, "tuning") if where == "{tune_args}" else err) from None
        finals.append(SweepJob.of(final, group_id=group, size=sweep_job.size))
    finals = with_log(log, finals)
    run_phase(finals)
    return finals


def _outcome_line(spec, outcome: dict) -> str:
    from ..store.tuning import tuning_marks

    scores = ", ".join(f"{c['lr']:g}: " + ("pruned" if c.get("pruned") else "diverged" if c["mean"] is None
                                            else f"{c['mean']:.4f}")
                       for c in outcome["candidates"])
    return (f"{'; '.join(tuning_marks({**spec.identity(), **outcome}))} (selection {spec.rule} {spec.metric}, "
            f"mean over {spec.selection_seeds} seed(s): {scores} bits)")
