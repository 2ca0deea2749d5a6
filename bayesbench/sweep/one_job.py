"""What runs on a worker (a local pool process or a Ray task): train one sweep job, score it,
hand the run records back. Workers never write the results store; the driver does (one writer).

The job checkpoints into its run directory under the shared runs directory every
`checkpoint_every` steps; a worker that finds a checkpoint there (an earlier attempt that died,
or an interrupted sweep) continues from it, and the resumed run is exactly the uninterrupted
one (see bayesbench/training/trainer.py). Progress goes back as small event dicts through `report`.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable

from .expand import SweepJob

Report = Callable[[dict], None]


def train_and_score(sj: SweepJob, runs_dir: str, threads: int, report: Report | None = None) -> dict:
    """Train (or finish) the job and evaluate it; returns {"key", "records", "resumed_from", ...}.

    Events sent through `report`: {"kind": "start", "key", "pid", "host", "step"} once the
    checkpoint (if any) is loaded, then {"kind": "step", "key", "step"} after each checkpoint.
    A stop request (`bayesbench.running.interrupt`) checkpoints the step training had reached and raises
    `Interrupted` naming the job (its label), where it stopped and its checkpoint.
    """
    import torch

    from ..running import interrupt
    from ..scoring.rows import record
    from ..training.trainer import Trainer

    if threads:
        torch.set_num_threads(threads)
    send = report or (lambda event: None)
    job = sj.job
    where: dict = {"phase": "setup"}
    try:
        trainer = Trainer(job.task, job.arch, list(job.seeds), job.train, model_cfg=job.model, max_len=job.max_len,
                          device=job.device, run_dir=sj.run_dir(runs_dir), run_id=sj.key,
                          meta={**job.meta(sj.group_id), "sweep_size": sj.size})
        path = trainer.checkpoint_path()
        if os.path.exists(path):
            trainer.load(path)
        resumed_from = trainer.step
        send({"kind": "start", "key": sj.key, "pid": os.getpid(), "host": socket.gethostname(),
              "step": resumed_from})
        while True:
            result = trainer.fit(progress=False, stop_at=min(trainer.step + sj.checkpoint_every, job.train.steps))
            where = {"phase": "training", "step": trainer.step, "steps": job.train.steps,
                     "checkpoint": result.checkpoint}
            send({"kind": "step", "key": sj.key, "step": trainer.step})
            if trainer.finished:  # every step done, or no member left training (diverged or stopped by `until`)
                break
        where = {"phase": "evaluation", "checkpoint": result.checkpoint}
        records = record(result, device=job.device, cache_dir=os.path.join(runs_dir, "cache"), write=False)
    except interrupt.Interrupted as stop:
        interrupt.claim(stop, sj.label, where)
        raise
    return {"key": sj.key, "records": records, "resumed_from": resumed_from, "pid": os.getpid(),
            "host": socket.gethostname()}
