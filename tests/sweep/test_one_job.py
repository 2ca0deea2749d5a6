"""One sweep job's body (`sweep/one_job.train_and_score`): what a stop says it stopped at."""

from __future__ import annotations

import os

import pytest

from bayesbench.running import interrupt
from bayesbench.sweep import expand, load_sweep
from bayesbench.sweep.one_job import train_and_score
from bayesbench.training.checkpoint import load_checkpoint
from bayesbench.training.trainer import Trainer

SWEEP = """
name = "one"
preset = "quick"
tasks = ["sticky"]
archs = ["mlp"]
seeds = [0]
steps = 20
checkpoint_every = 5
eval_sequences = 16
"""


def test_a_stop_outside_the_trainer_names_the_step_of_the_checkpoint_on_disk(tmp_path, monkeypatch):
    """A stop request that lands after a chunk's last checkpoint is written but before `fit`
    returns (outside the trainer's deferred region: no trainer entry) is reported at the step of
    that checkpoint, the one a rerun resumes from; before, the previous chunk's step (5, with the
    checkpoint at 10: seen once in the SIGINT-to-a-sweep test on a loaded machine)."""
    path = tmp_path / "one.toml"
    path.write_text(SWEEP)
    (sj,) = expand(load_sweep(str(path)))
    fit, calls = Trainer.fit, []

    def fit_then_signal(self, *args, **kwargs):
        out = fit(self, *args, **kwargs)
        calls.append(self.step)
        if len(calls) == 2:
            raise interrupt.Interrupted("SIGTERM")  # as the handler raises outside deferred()
        return out

    monkeypatch.setattr(Trainer, "fit", fit_then_signal)
    runs = str(tmp_path / "runs")
    with pytest.raises(interrupt.Interrupted) as stopped:
        train_and_score(sj, runs, threads=1)
    (entry,) = stopped.value.stopped
    on_disk = load_checkpoint(os.path.join(sj.run_dir(runs), "checkpoint.pt"))["step"]
    assert calls == [5, 10] and on_disk == 10
    assert entry == {"run": sj.label, "phase": "training", "steps": 20, "step": 10,
                     "checkpoint": os.path.join(sj.run_dir(runs), "checkpoint.pt")}
