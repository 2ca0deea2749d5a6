"""Training on a continuous tunnel (issue 41) keeps the trainer's guarantees: an ensemble member
is its solo run, a resumed run is the uninterrupted one, and evaluation sets are keyed by the
tunnel's configuration and code."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from bayesbench.scoring.evaluate import eval_set_id
from bayesbench.tasks import get_task
from bayesbench.training.config import TrainConfig
from bayesbench.training.run import train

TINY = dict(n_layer=1, n_head=2, d_model=16, d_ffn=32)


def _cfg(**kw):
    return TrainConfig(**{"steps": 8, "batch_size": 8, "lr": 3e-3, "prefetch": 4, "curve_sequences": 16, **kw})


@pytest.mark.parametrize("name", ["linreg", "mixreg"])
def test_member_equals_solo_run(name):
    task = get_task(name, d=2, n=4)
    ens = train(task, "transformer", [3, 5], _cfg(), model_cfg=TINY, progress=False)
    solo = train(task, "transformer", [5], _cfg(), model_cfg=TINY, progress=False)
    torch.testing.assert_close(ens.losses[:, 1], solo.losses[:, 0], rtol=1e-5, atol=1e-6)
    assert bool(torch.isfinite(ens.losses).all())
    assert set(ens.curve.values) >= {"kl", "nll_regret", "excess_sq"}
    torch.testing.assert_close(torch.tensor(ens.curve.member(1, "kl")), torch.tensor(solo.curve.member(0, "kl")),
                               rtol=1e-4, atol=1e-6)


def test_resume_reaches_the_same_final_numbers(tmp_path):
    task = get_task("kalman", m=2, K=5)
    cfg = _cfg(steps=10, checkpoint_every=5)
    full = train(task, "lstm", [0, 1], cfg, model_cfg=dict(n_layer=1, d_model=16), progress=False)
    run = str(tmp_path / "part")
    train(task, "lstm", [0, 1], cfg, model_cfg=dict(n_layer=1, d_model=16), run_dir=run, progress=False, stop_at=5)
    resumed = train(task, "lstm", [0, 1], cfg, model_cfg=dict(n_layer=1, d_model=16), run_dir=run, resume=True,
                    progress=False)
    assert torch.equal(resumed.losses, full.losses)
    for k, v in full.model.state_dict().items():
        assert torch.equal(resumed.model.state_dict()[k], v), k
    assert resumed.curve.values == full.curve.values


def test_evaluation_sets_are_keyed_by_the_continuous_tunnels_configuration_and_code(monkeypatch):
    task = get_task("linreg", d=2, n=4)
    key = eval_set_id(task, 64)
    assert key == eval_set_id(get_task("linreg", d=2, n=4), 64)
    assert key != eval_set_id(dataclasses.replace(task, sigma=0.5), 64)
    assert key != eval_set_id(get_task("mixreg", d=2, n=4), 64)
    monkeypatch.setattr(type(task), "version", type(task).version + 1)
    assert key != eval_set_id(task, 64)
