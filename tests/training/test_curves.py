"""Learning curves: the cadence, points equal to a separate evaluation of the checkpoint at that
step, a resumed run's curve without duplicates or gaps, and training untouched by them."""

from __future__ import annotations

import dataclasses
import math
import os

import pytest
import torch

from bayesbench.metric_table import METRICS, curve_metrics
from bayesbench.scoring.evaluate import evaluate_members
from bayesbench.tasks import get_task
from bayesbench.training.checkpoint import load_checkpoint, load_result, save_atomic
from bayesbench.training.config import TrainConfig
from bayesbench.training.curves import CurveSet, curve_batch, curve_steps
from bayesbench.training.run import train
from bayesbench.training.trainer import Trainer

TINY = dict(n_layer=2, n_head=2, d_model=16, d_ffn=32)


def _cfg(**kw):
    return TrainConfig(**{"steps": 30, "batch_size": 8, "lr": 3e-3, "prefetch": 4, "curve_sequences": 48, **kw})


def test_cadence_is_log_spaced_and_ends_with_the_last_step():
    assert curve_steps(40) == [1, 2, 3, 4, 6, 7, 10, 13, 18, 24, 32, 40]
    assert curve_steps(100)[-3:] == [56, 75, 100] and curve_steps(1) == [1]
    assert curve_steps(50, every=20) == [20, 40, 50] and curve_steps(40, every=20) == [20, 40]
    for steps in (800, 2000, 10_000, 100_000):  # the presets' budgets: 20-40 points
        assert 20 <= len(curve_steps(steps)) <= 40, steps
    with pytest.raises(ValueError, match="curve_every"):
        TrainConfig(steps=10, curve_every=-1)
    with pytest.raises(ValueError, match="until needs the learning curves"):
        TrainConfig(steps=10, curves=False, until=0.1)


@pytest.mark.parametrize("task_name", ["bijection", "hmm"])
def test_curve_points_equal_a_separate_evaluation_of_the_checkpoint(task_name, tmp_path):
    """The point at step 13 (a curve step) equals `evaluate_members` (the scoring path: CPU,
    float64, with intervals) on the checkpoint saved there, on the same curve set."""
    task = get_task("bijection", V=6) if task_name == "bijection" else get_task("hmm", K=5)
    run = str(tmp_path / "run")
    result = train(task, "transformer", [0, 1], _cfg(), model_cfg=TINY, run_dir=run, progress=False, stop_at=13)
    assert result.curve.steps == [1, 2, 3, 4, 6, 7, 10, 13]
    saved = load_result(os.path.join(run, "checkpoint.pt"))
    assert saved.steps == 13
    scores = evaluate_members(saved.model, curve_batch(task, 48))
    for e in range(2):
        # the case split: the next test; the continuous tunnels' metrics: tests/scoring/test_continuous.py
        for name in (n for n in curve_metrics() if ":" not in n and METRICS[n].tasks is None):
            expected = getattr(scores[e], name).mean
            assert result.curve.member(e, name)[-1] == pytest.approx(expected, rel=1e-9, abs=1e-12), (e, name)
    assert saved.curve == result.curve  # the checkpoint carries the curve


@pytest.mark.parametrize("variant", ["code", "paper"])
def test_case_points_equal_the_case_scores_of_the_checkpoint(variant, tmp_path):
    """The KL at repeated and at new keys of a curve point equals `scoring.by_case` on the saved
    checkpoint; a case the task has none of (no repeated keys without replacement) is not kept,
    and a run of a task without cases keeps no case curve."""
    from bayesbench.scoring.by_case import case_scores
    from bayesbench.scoring.evaluate import predict
    from bayesbench.scoring.rows import learning_curve

    task = get_task("bijection", V=6, variant=variant, L=5)
    run = str(tmp_path / "run")
    result = train(task, "transformer", [0, 1], _cfg(), model_cfg=TINY, run_dir=run, progress=False, stop_at=13)
    saved = load_result(os.path.join(run, "checkpoint.pt"))
    batch = curve_batch(task, 48)
    log_q = predict(saved.model, batch)
    for e in range(2):
        cases = case_scores(task, batch, log_q[e])
        for case in ("repeated", "new"):
            if case in cases:
                point = result.curve.member(e, f"kl:{case}")[-1]
                assert point == pytest.approx(cases[case].kl.mean, rel=1e-9, abs=1e-12), (e, case)
            else:
                assert variant == "paper" and case == "repeated" and f"kl:{case}" not in result.curve.values
    assert len(result.curve.member(0, "kl:new")) == len(result.curve.steps)
    assert saved.curve == result.curve  # the checkpoint carries the case curves too
    record = learning_curve(result, 0, "standard", task.describe())
    assert ("kl:repeated" in record.values) == (variant == "code") and "kl:new" in record.values
    hmm = train(get_task("hmm", K=5), "transformer", [0], _cfg(steps=3), model_cfg=TINY, progress=False)
    assert set(hmm.curve.values) == set(hmm.curve.uniform) == {"entropy_mae", "entropy_mae_positional", "kl"}
    with pytest.raises(ValueError, match="until_metric 'kl:new' has no positions in hmm"):
        train(get_task("hmm", K=5), "transformer", [0], _cfg(steps=3, until=0.1, until_metric="kl:new"),
              model_cfg=TINY, progress=False)


def test_uniform_floor_of_the_curve_set():
    task = get_task("bijection", V=6)
    floor = CurveSet(task, 48).uniform()
    batch = curve_batch(task, 48)
    from bayesbench.scoring.metrics import score

    uniform = torch.full(batch.posterior.shape, 1 / 6, dtype=torch.float64)
    s = score(batch.posterior, batch.mask, q=uniform)
    assert floor["entropy_mae"] == pytest.approx(s.entropy_mae.mean, rel=1e-12)
    assert floor["kl"] == pytest.approx(s.kl.mean, rel=1e-12)
    assert floor["entropy_mae_positional"] == pytest.approx(s.entropy_mae_positional.mean, rel=1e-12)


def test_a_resumed_run_continues_its_curve_without_duplicates_or_gaps(tmp_path):
    cfg = _cfg(steps=40, checkpoint_every=5)
    full = train(get_task("bijection", V=6), "transformer", [0, 1], cfg, model_cfg=TINY, progress=False)
    run = str(tmp_path / "part")
    first = train(get_task("bijection", V=6), "transformer", [0, 1], cfg, model_cfg=TINY, run_dir=run,
                  progress=False, stop_at=11)  # stopped between curve steps 10 and 13
    assert first.curve.steps == [1, 2, 3, 4, 6, 7, 10]
    resumed = train(get_task("bijection", V=6), "transformer", [0, 1], cfg, model_cfg=TINY, run_dir=run,
                    resume=True, progress=False)
    assert resumed.curve.steps == curve_steps(40) == full.curve.steps
    assert resumed.curve.values == full.curve.values  # exactly: a resumed run is the uninterrupted one
    assert all(b > a for a, b in zip(resumed.curve.wall_s, resumed.curve.wall_s[1:]))


def test_a_checkpoint_from_before_curves_resumes_with_a_note(tmp_path, capsys):
    cfg = _cfg(steps=20)
    task = get_task("bijection", V=6)
    run = str(tmp_path / "old")
    train(task, "mlp", [0], cfg, model_cfg=dict(depth=1, width=8), run_dir=run, progress=False, stop_at=8)
    path = os.path.join(run, "checkpoint.pt")
    state = load_checkpoint(path)
    del state["curve"], state["stopped"]  # as an older bayesbench wrote it
    save_atomic(state, path)
    resumed = train(task, "mlp", [0], cfg, model_cfg=dict(depth=1, width=8), run_dir=run, resume=True,
                    progress=False)
    assert resumed.curve.steps == [10, 13, 18, 20]
    assert "holds no learning curve" in capsys.readouterr().err


@pytest.mark.parametrize("dropout", [0.0, 0.2])
def test_curves_do_not_change_training(dropout):
    """Curves on and off: the same losses and parameters bit for bit (so the same final numbers);
    with dropout too (the curve draws from no random stream)."""
    task = get_task("bijection", V=6)
    model_cfg = {**TINY, "dropout": dropout}
    on = train(task, "transformer", [0, 1], _cfg(), model_cfg=model_cfg, progress=False)
    off = train(task, "transformer", [0, 1], _cfg(curves=False), model_cfg=model_cfg, progress=False)
    assert on.curve is not None and off.curve is None
    assert torch.equal(on.losses, off.losses)
    for k, v in off.model.state_dict().items():
        assert torch.equal(on.model.state_dict()[k], v), k


def test_the_bijection_curve_scores_the_primary_evaluation():
    """A run scored at the value positions first (the presets' eval_scored) measures its curve
    there, though it trains on the values and the query."""
    task = get_task("bijection", V=6, variant="code", L=5)
    trainer = Trainer(task, "mlp", [0], _cfg(), model_cfg=dict(depth=1, width=8),
                      meta={"eval_scored": ["values", "values+query"]})
    assert trainer.curve_task() == dataclasses.replace(task, supervise="values")
    assert trainer.curve.task == dataclasses.replace(task, supervise="values").describe()
    assert Trainer(task, "mlp", [0], _cfg(), model_cfg=dict(depth=1, width=8)).curve_task() == task


def test_identities_name_the_curve_fields_only_when_set():
    """An optional feature's fields enter a run's identity only where a run uses them."""
    plain = _cfg().identity()
    assert "curves" not in plain and "until" not in plain and plain["curve_sequences"] == 48
    assert _cfg(until=0.2).identity()["until"] == 0.2
    assert _cfg(until="0.5").until == 0.5  # parsed
    assert "curve_sequences" not in TrainConfig(steps=3).identity()
    assert "compile" not in plain and _cfg(compile=True).identity()["compile"] is True
    assert not {"checkpoint_every", "sync_every"} & set(_cfg(checkpoint_every=3, sync_every=2).identity())


def test_diverged_member_scores_nan_and_the_others_keep_theirs():
    task = get_task("bijection", V=6)
    trainer = Trainer(task, "mlp", [0, 1], _cfg(steps=6), model_cfg=dict(depth=1, width=8))
    with torch.no_grad():
        trainer.model.head.weight[1].fill_(float("nan"))
    result = trainer.fit(progress=False)
    assert all(math.isnan(v) for v in result.curve.member(1, "kl"))
    assert all(math.isfinite(v) for v in result.curve.member(0, "kl"))
    assert result.stop(1) == (0, "diverged") and result.stop(0) == (6, "budget")


@pytest.mark.parametrize("arch", ["transformer", "mlp", "mlp-prefix", "lstm", "gru", "mamba", "linear-attention"])
def test_a_curve_point_is_the_same_bit_for_bit_whatever_its_chunk(arch):
    """The chunk (`curves.CURVE_CHUNK`: 64 sequences on a CPU, the cost of a point) changes no bit of
    a point: each sequence is computed on its own. 70 sequences: chunks of 64 + 6, 5 x 13 + 5 and
    one of 70, two members; the HMM's header too."""
    from bayesbench.models.registry import build_model
    from bayesbench.training.curves import CURVE_CHUNK

    assert CURVE_CHUNK["cpu"] == 64
    for task in (get_task("sticky", V=5, L=9), get_task("hmm", K=4)):
        torch.manual_seed(0)
        model = build_model(arch, task, ensemble=2)
        points = [CurveSet(task, 70, chunk=chunk).score(model) for chunk in (None, 13, 512)]
        assert CurveSet(task, 70).chunk == 64
        for other in points[1:]:
            assert torch.equal(torch.nan_to_num(points[0], nan=-1.0), torch.nan_to_num(other, nan=-1.0)), (arch, task)
