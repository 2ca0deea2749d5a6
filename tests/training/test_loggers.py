"""`--log tensorboard|wandb` (training/loggers.py) and the run file (store/run_file.py): what a run
leaves beside its checkpoint for other tools and other people."""

from __future__ import annotations

import glob
import json
import os
import struct

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


def test_tensorboard_gets_the_settings_as_hparams_with_each_seeds_final_metrics(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    assert main(["train", "--arch", "mlp", *_common(tmp_path), "--log", "tensorboard", "--train-args", "lr=5e-4"]) == 0
    capsys.readouterr()
    (run_dir,) = glob.glob(str(tmp_path / "runs" / "quick" / "sticky-mlp-*"))
    stored = json.load(open(os.path.join(run_dir, "run.json")))
    for seed_doc in stored["seeds"]:
        seed = seed_doc["seed"]
        events = EventAccumulator(os.path.join(run_dir, "tensorboard", f"seed{seed}"))
        events.Reload()
        start = plugin_data_pb2.HParamsPluginData.FromString(
            events.PluginTagToContent("hparams")["_hparams_/session_start_info"]).session_start_info
        hparams = {k: v.number_value if v.HasField("number_value") else v.string_value
                   for k, v in start.hparams.items()}
        assert hparams["train/lr"] == pytest.approx(5e-4) and hparams["task/V"] == 8 and hparams["task/L"] == 32
        assert hparams["seed"] == seed and hparams["arch"] == "mlp" and hparams["threads"] == 1
        assert hparams["group_id"] == "run-quick" and hparams["code/task/version"] == 1
        kl = seed_doc["evals"]["standard"]["kl"]
        for tag, value in ((f"final/seed{seed}/standard/kl", kl["mean"]),
                           (f"final/seed{seed}/standard/kl_ci_low", kl["ci_low"]),
                           (f"final/seed{seed}/standard/kl_ci_high", kl["ci_high"]),
                           (f"final/seed{seed}/standard/n_sequences", 32),
                           ("floor/standard/uniform/kl",
                            seed_doc["evals"]["standard"]["floors"]["uniform"]["kl"]["mean"])):
            (event,) = events.Scalars(tag)
            assert event.value == pytest.approx(value, rel=1e-6), tag


def _wandb_records(path: str) -> list:
    """The records of an offline W&B run file (`run-*.wandb`): W&B's append-only log (a 7-byte
    header, then 32 KiB blocks of records, each with a 7-byte header: crc, length, type),
    read here so the test sees what was written, not what the client holds."""
    from wandb.proto import wandb_internal_pb2

    data = open(path, "rb").read()
    assert data[:4] == b":W&B"
    block, head, pos, part, out = 32768, 7, 7, b"", []
    while pos + head <= len(data):
        left = block - pos % block
        if left < head:  # a block's tail too short for a header is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + head])
        if length == 0 and kind == 0:
            pos += left
            continue
        part += data[pos + head:pos + head + length]
        pos += head + length
        if kind in (1, 4):  # a whole record, or the last piece of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(part)
            out.append(record)
            part = b""
    return out


def test_wandb_offline_run_is_grouped_and_carries_the_result_as_its_summary(tmp_path, capsys, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_PROJECT", "bayesbench-test")
    assert main(["train", "--arch", "lstm", *_common(tmp_path), "--log", "wandb"]) == 0
    capsys.readouterr()
    (run_dir,) = glob.glob(str(tmp_path / "runs" / "quick" / "sticky-lstm-*"))
    (log,) = glob.glob(os.path.join(run_dir, "wandb", "offline-run-*", "run-*.wandb"))
    records = _wandb_records(log)
    (run,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert run.run_group == "run-quick" and run.project == "bayesbench-test"
    summary = {}
    config = {item.key: json.loads(item.value_json) for item in run.config.update}  # what init was given
    for r in records:
        kind = r.WhichOneof("record_type")
        if kind == "summary":
            summary.update({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                            for item in r.summary.update})
        if kind == "config":
            config.update({item.key: json.loads(item.value_json) for item in r.config.update})
    stored = json.load(open(os.path.join(run_dir, "run.json")))
    for seed_doc in stored["seeds"]:
        s = seed_doc["seed"]
        for metric in ("entropy_mae", "kl", "entropy_mae_positional"):
            got = seed_doc["evals"]["standard"][metric]
            assert summary[f"final/seed{s}/standard/{metric}"] == pytest.approx(got["mean"], rel=1e-12)
            assert summary[f"final/seed{s}/standard/{metric}_ci_low"] == pytest.approx(got["ci_low"], rel=1e-12)
            assert summary[f"final/seed{s}/standard/{metric}_ci_high"] == pytest.approx(got["ci_high"], rel=1e-12)
    means = [d["evals"]["standard"]["kl"]["mean"] for d in stored["seeds"]]
    assert summary["final/mean/standard/kl"] == pytest.approx(sum(means) / 2, rel=1e-12)
    assert summary["final/mean/standard/kl_ci_low"] <= summary["final/mean/standard/kl"] \
        <= summary["final/mean/standard/kl_ci_high"]
    assert "floor/standard/uniform/kl" in summary and "loss/seed0" in summary  # and the curves' last values
    assert config["task"]["V"] == 8 and config["threads"] == 1 and config["train"]["steps"] == 30


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


def test_tensorboard_gets_the_mean_over_seeds_and_a_stored_job_says_nothing_is_logged(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert main(["train", "--arch", "mlp", *_common(tmp_path), "--log", "tensorboard"]) == 0
    capsys.readouterr()
    (run_dir,) = glob.glob(str(tmp_path / "runs" / "quick" / "sticky-mlp-*"))
    events = EventAccumulator(os.path.join(run_dir, "tensorboard"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert "final/mean/standard/kl" in tags and "final/mean/standard/kl_ci_high" in tags
    assert main(["train", "--arch", "mlp", *_common(tmp_path), "--log", "tensorboard"]) == 0  # stored: skipped
    out = capsys.readouterr()
    assert "--log tensorboard: the 1 stored job(s) are not trained again, so nothing is logged" in out.out + out.err


def test_wandb_that_cannot_start_is_one_line_naming_the_flag(tmp_path, capsys, monkeypatch):
    wandb = pytest.importorskip("wandb")

    def refuse(**kw):
        raise wandb.errors.UsageError("No API key configured. Use `wandb login` to log in.")

    monkeypatch.setattr(wandb, "init", refuse)
    assert main(["train", "--arch", "mlp", *_common(tmp_path), "--log", "wandb"]) == 2
    err = capsys.readouterr().err
    assert "--log wandb: W&B could not start a run (UsageError: No API key configured" in err
    assert "Traceback" not in err and "internal error" not in err
