"""Checkpoints are read as tensors and plain values only: a `checkpoint.pt` planted in a run folder
(a pickle whose loading would run code) is refused as damaged, and its payload never runs, in every
loader (`eval RUN_DIR`, a resumed run, `profile --run`, the cached evaluation sets)."""

from __future__ import annotations

import os

import pytest
import torch

from bayesbench.cli import main
from bayesbench.training.checkpoint import DamagedFile, load_checkpoint, load_result


class Payload:
    """Unpickling this calls os.mkdir(marker): a stand-in for any code a planted file would run."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def plant(path, marker) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.save({"identity": Payload(str(marker)), "model": {}}, str(path))
    return str(path)


def test_a_planted_payload_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "ran"
    path = plant(tmp_path / "run" / "checkpoint.pt", marker)
    with pytest.raises(DamagedFile, match=r"pickled Python objects, not only tensors: posix.mkdir"):
        load_checkpoint(path)
    with pytest.raises(DamagedFile, match="checkpoint .*checkpoint.pt is damaged"):
        load_result(path)
    assert not marker.exists()


def test_eval_of_a_run_folder_with_a_planted_checkpoint(tmp_path, capsys):
    marker = tmp_path / "ran"
    plant(tmp_path / "run" / "checkpoint.pt", marker)
    assert main(["eval", str(tmp_path / "run"), "--db", str(tmp_path / "r.sqlite")]) == 2
    err = capsys.readouterr().err
    assert "is damaged" in err and "pickled Python objects" in err and len(err.strip().splitlines()) == 1
    assert not marker.exists()


def test_profile_resume_refuses_a_planted_checkpoint(tmp_path):
    from bayesbench.dynamics.config import FieldError
    from bayesbench.dynamics.profile.resume import load_run_state

    marker = tmp_path / "ran"
    path = plant(tmp_path / "run" / "checkpoint.pt", marker)
    with pytest.raises(FieldError, match="pickled Python objects"):
        load_run_state(path, "cpu")
    assert not marker.exists()


def test_a_resumed_run_refuses_a_planted_checkpoint(tmp_path):
    from bayesbench.tasks import get_task
    from bayesbench.training.config import TrainConfig
    from bayesbench.training.run import train

    marker = tmp_path / "ran"
    run_dir = tmp_path / "run"
    plant(run_dir / "checkpoint.pt", marker)
    cfg = TrainConfig(steps=4, batch_size=4, lr=1e-3, prefetch=2)
    with pytest.raises(DamagedFile, match="pickled Python objects"):
        train(get_task("bijection", V=6), "mlp", [0], cfg, model_cfg=dict(depth=1, width=8), run_dir=str(run_dir),
              resume=True, progress=False)
    assert not marker.exists()
