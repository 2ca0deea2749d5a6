"""`--log tensorboard|wandb` (training/loggers.py) and the run file (store/run_file.py): what a run
leaves beside its checkpoint for other tools and other people."""

from __future__ import annotations

import glob
import json
import os

import pytest

from bayesbench.cli import main
from bayesbench.tasks import get_task
from bayesbench.training.config import TrainConfig
from bayesbench.training.loggers import CurveLogger, check_logger
from bayesbench.training.trainer import Trainer


def _common(tmp_path) -> list[str]:
    return ["--task", "sticky", "--seeds", "0,1", "--steps", "30", "--eval-sequences", "32", "--curve-sequences", "32",
            "--db", str(tmp_path / "r.sqlite"), "--runs-dir", str(tmp_path / "runs"), "--no-progress"]


def test_the_hook_sends_every_loss_window_and_curve_point_once_per_seed():
    trainer = Trainer(get_task("sticky", V=4, L=8), "mlp", [3, 5], TrainConfig(steps=12, batch_size=4, sync_every=4,
                                                                                curve_sequences=16))
    sent = []
    trainer.hooks.append(CurveLogger(trainer.seeds, lambda tag, v, step: sent.append((tag, step, v)), lambda: None))
    trainer.fit(progress=False)
    losses = [s for s in sent if s[0].startswith("loss/")]
    assert sorted({t for t, _, _ in losses}) == ["loss/seed3", "loss/seed5"] and {s for _, s, _ in losses} == {4, 8, 12}
    window = [float(r[0]) for r in trainer.losses[4:8]]
    assert ("loss/seed3", 8, pytest.approx(sum(window) / 4)) in [(t, s, v) for t, s, v in losses]
    points = [s for s in sent if s[0] == "curve/kl/seed5"]
    assert [s for _, s, _ in points] == trainer.curve.steps  # each point once
    assert [v for _, _, v in points] == pytest.approx(trainer.curve.member(1, "kl"))


def test_tensorboard_files_hold_the_curves(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert main(["train", "--arch", "mlp", *_common(tmp_path), "--log", "tensorboard"]) == 0
    capsys.readouterr()
    (run_dir,) = glob.glob(str(tmp_path / "runs" / "quick" / "sticky-mlp-*"))
    events = EventAccumulator(os.path.join(run_dir, "tensorboard"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert {"loss/seed0", "loss/seed1", "curve/kl/seed0", "curve/entropy_mae_positional/seed1"} <= set(tags)
    stored = json.load(open(os.path.join(run_dir, "run.json")))
    curve = stored["seeds"][0]["learning_curve"]
    logged = events.Scalars("curve/kl/seed0")
    assert [e.step for e in logged] == curve["step"]
    assert [e.value for e in logged] == pytest.approx(curve["values"]["kl"], rel=1e-6)


def test_wandb_offline_run_is_written_beside_the_checkpoint(tmp_path, capsys, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    assert main(["train", "--arch", "lstm", *_common(tmp_path), "--log", "wandb"]) == 0
    capsys.readouterr()
    (run_dir,) = glob.glob(str(tmp_path / "runs" / "quick" / "sticky-lstm-*"))
    (log,) = glob.glob(os.path.join(run_dir, "wandb", "offline-run-*", "run-*.wandb"))
    assert os.path.getsize(log) > 0


def test_a_logger_that_is_not_installed_is_refused_before_training(tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(ValueError, match=r"--log wandb needs the wandb package: pip install 'bayesbench\[log\]'"):
        check_logger("wandb")
    assert main(["train", "--arch", "mlp", *_common(tmp_path), "--log", "wandb"]) == 2
    assert "needs the wandb package" in capsys.readouterr().err and not (tmp_path / "runs").exists()


def test_the_run_file_says_what_was_trained_where_and_what_came_out(tmp_path, capsys):
    assert main(["train", "--arch", "mlp", *_common(tmp_path), "--train-args", "lr=5e-4"]) == 0
    capsys.readouterr()
    (path,) = glob.glob(str(tmp_path / "runs" / "quick" / "sticky-mlp-*" / "run.json"))
    doc = json.load(open(path))
    assert doc["task"] == "sticky" and doc["arch"] == "mlp" and doc["config"]["train"]["lr"] == 5e-4
    assert doc["overrides"]["train"]["lr"] == 5e-4 and [s["seed"] for s in doc["seeds"]] == [0, 1]
    env = doc["environment"]
    assert {"bayesbench", "torch", "python", "device", "threads", "git_commit", "git_dirty"} <= set(env)
    ev = doc["seeds"][0]["evals"]["standard"]
    assert ev["kl"]["ci_low"] <= ev["kl"]["mean"] <= ev["kl"]["ci_high"] and ev["kl"]["n_sequences"] == 32
    assert doc["seeds"][1]["learning_curve"]["step"][-1] == 30 and doc["seeds"][1]["stop_reason"] == "budget"
