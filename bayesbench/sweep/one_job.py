"""What runs on a worker (a local pool process or a Ray task): train one sweep job, score it,
hand the run records back. Workers never write the results store; the driver does (one writer).

The job checkpoints into its run directory under the shared runs directory every
`checkpoint_every` steps, holding the directory's lock while it trains and evaluates
(`Job.open_trainer`); a worker that finds a checkpoint there (an earlier attempt that died,
or an interrupted sweep) continues from it, and the resumed run is exactly the uninterrupted
one (see bayesbench/training/trainer.py). Progress goes back as small typed events through `report`.
The finished job leaves `run.json` in its run directory (store/run_file.py), and, with `--log`,
its curves in TensorBoard or W&B files there (training/loggers.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
from collections.abc import Callable

from ..store.run_file import RUN_FILE, write_run_file
from .events import Finished, JobEvent, Started, Stepped
from .expand import SweepJob

Report = Callable[[JobEvent], None]


@contextlib.contextmanager
def _logged(sweep_job: SweepJob, trainer, run_dir: str, meta: dict):
    """The job's curves sent to its logger (`sweep_job.log`) while it trains (yielded: None
    without one); the logger closed after."""
    if not sweep_job.log:
        yield None
        return
    from ..training.loggers import attach_logger

    job = sweep_job.job
    logger = attach_logger(sweep_job.log, trainer, run_dir, name=f"{sweep_job.label} {sweep_job.key}",
                           config={"key": sweep_job.key, **meta, "train": dataclasses.asdict(job.train),
                                   "model": job.model})
    try:
        yield logger
    finally:
        logger.close()


def check_still_keyed(sweep_job: SweepJob) -> None:
    """Refuse to train a job whose code changed between its keying (in the driver) and now (in
    the worker, which imports outside files anew): its rows would be stored under the old code's
    key. Raises `training.checkpoint.CodeChanged` naming what changed."""
    from .. import versions
    from ..training.checkpoint import CodeChanged, run_code

    now = {**run_code(sweep_job.job.task, sweep_job.job.arch), "metrics": sweep_job.job.code.get("metrics")}
    changed = versions.changed(sweep_job.job.code, now)
    if changed:
        raise CodeChanged(f"{sweep_job.label}: {'; '.join(changed)} after the job was keyed; run the command again "
                          "to key it by the code as it is now")


def train_and_score(sweep_job: SweepJob, runs_dir: str, threads: int, report: Report | None = None,
                    cache_dir: str | None = None) -> Finished:
    """Train (or finish) the job and evaluate it; returns its `Finished` event (its records).

    `threads`: torch threads for the job (0: leave as they are); `cache_dir`: where evaluation
    sets are cached (default `<runs_dir>/cache`, which every worker of a cluster sees).

    Events sent through `report` (`sweep/events.py`): `Started` once the checkpoint (if any) is
    loaded, then `Stepped` after each checkpoint.
    A stop request (`bayesbench.running.interrupt`) checkpoints the step training had reached and raises
    `Interrupted` naming the job (its label), where it stopped and its checkpoint.
    """
    import torch

    from ..running import interrupt
    from ..scoring.rows import score_run

    if threads:
        torch.set_num_threads(threads)
    send = report or (lambda event: None)
    job = sweep_job.job
    where: dict = {"phase": "setup"}
    trainer = None
    run_dir = sweep_job.run_dir(runs_dir)
    made_here = not os.path.exists(run_dir)
    try:
        meta = {**job.meta(sweep_job.group_id), "sweep_size": sweep_job.size}
        check_still_keyed(sweep_job)
        with job.open_trainer(run_dir, run_id=sweep_job.key, meta=meta, resume=True,
                              spec=job.spec) as trainer, _logged(sweep_job, trainer, run_dir, meta) as logger:
            pruning = _pruning(sweep_job, trainer, runs_dir)
            resumed_from = trainer.step
            send(Started(sweep_job.key, resumed_from, os.getpid(), socket.gethostname()))
            where = {"phase": "training", "steps": job.train.steps}  # its step: the last checkpoint's (below)
            while True:
                result = trainer.fit(progress=False,
                                     stop_at=min(trainer.step + sweep_job.checkpoint_every, job.train.steps))
                send(Stepped(sweep_job.key, trainer.step))
                if trainer.finished:  # every step done, or no member left training (diverged or stopped by `until`)
                    break
            if pruning is not None:
                pruning.finish(trainer)
            where = {"phase": "evaluation", "checkpoint": result.checkpoint}
            records = score_run(result, device=job.device, cache_dir=cache_dir or os.path.join(runs_dir, "cache"),
                                write=False)
            add_flops(records, trainer, job)  # (the state size: score_run, `scoring.rows.scored_state`)
            write_run_file(os.path.join(run_dir, RUN_FILE), records)
            if logger is not None:
                logger.log_result(records)  # the final metrics with their intervals, as the tracker's summary
    except interrupt.Interrupted as stop:
        # stopped outside the trainer's own stop (e.g. in a chunk's last save):
        if where["phase"] == "training" and trainer is not None:
            # the step a rerun resumes from is the last checkpoint's, not the last chunk's
            where = ({**where, "step": trainer.saved_step, "checkpoint": trainer.checkpoint_path()}
                     if trainer.saved_step is not None else {"phase": "setup"})
        interrupt.claim(stop, sweep_job.label, where)
        _remove_if_empty(run_dir, made_here)
        raise
    except BaseException:
        _remove_if_empty(run_dir, made_here)
        raise
    return Finished(sweep_job.key, records, resumed_from, os.getpid(), socket.gethostname())


def _pruning(sweep_job: SweepJob, trainer, runs_dir: str):
    """A selection candidate of a pruned search (`sweep/prune.py`): its Optuna hook on the
    trainer; None otherwise."""
    tuning = sweep_job.job.tuning or {}
    if tuning.get("role") != "selection" or tuning.get("prune", "none") == "none":
        return None
    from .prune import Pruning

    hook = Pruning(runs_dir, tuning["study"], sweep_job.key, tuning["prune"], tuning["metric"])
    trainer.hooks.append(hook)
    return hook


def add_flops(records: list, trainer, job) -> None:
    """Each row's training FLOPs (`training/flops.py`: one step measured by torch's flop counter,
    per member; the total over the steps that member trained), in its config["flops"]."""
    from ..training.flops import flops_record, step_flops

    per_step = step_flops(trainer.model, job.task, job.train.batch_size)
    for r in records:
        trained = r.stop_step if r.stop_step is not None else r.steps
        r.config["flops"] = flops_record(per_step, trained)


def _remove_if_empty(run_dir: str, made_here: bool) -> None:
    """Remove the run directory of a job that failed, if this job made it and left it empty (no
    checkpoint to resume, nothing of anyone else's; its lock is released by then): rmdir refuses a
    directory with anything in it."""
    if made_here:
        with contextlib.suppress(OSError):
            os.rmdir(run_dir)
