"""Training to a criterion: the threshold and plateau rules on synthetic curves with known
answers, and `until` stopping each member of an ensemble exactly where a solo run of its seed
stops, frozen from there on (parameters and optimiser moments)."""

from __future__ import annotations

import pytest
import torch

from bayesbench.tasks import get_task
from bayesbench.training.config import TrainConfig
from bayesbench.training.run import train
from bayesbench.training.until import PLATEAU, parse_until, stop_reason

TINY = dict(n_layer=2, n_head=2, d_model=16, d_ffn=32)
STEPS = [1, 2, 3, 4, 6, 7, 10, 13, 18, 24, 32, 42, 56, 75, 100]


def plateau_at(steps: list[int], values: list[float], budget: int) -> int | None:
    """The first curve step at which the plateau rule would stop the member, or None."""
    for i in range(len(steps)):
        if stop_reason(PLATEAU, "entropy_mae", steps[:i + 1], values[:i + 1], budget) is not None:
            return steps[i]
    return None


def test_parse_until():
    assert parse_until(None) is None and parse_until("plateau") == "plateau"
    assert parse_until("0.1") == 0.1 and parse_until(0.25) == 0.25
    for bad in ("0", "-1", "nan", "inf", "soon", True):
        with pytest.raises(ValueError, match="until must be a threshold"):
            parse_until(bad)


def test_plateau_on_synthetic_curves():
    """Known answers: the window at step s is (s/3, s], it needs 3 points and one before it, and
    no stop comes before a tenth of the budget."""
    decay = [1.0 / s ** 0.5 for s in STEPS]  # falls by a factor sqrt(3) over every factor 3 of steps
    assert plateau_at(STEPS, decay, 100) is None
    flat_after_10 = [1.0 - 0.05 * min(s, 10) for s in STEPS]  # 0.5 from step 10 on
    # at s = 24 the window (8, 24] still beats the best before it (0.65 at step 7); at s = 32 the
    # best before it, 0.5 at step 10, is as good as the window's
    assert plateau_at(STEPS, flat_after_10, 100) == 32
    assert plateau_at(STEPS, flat_after_10, 1000) == 100  # not before a tenth of the budget
    assert plateau_at(STEPS, flat_after_10, 2000) is None
    tiny_gain = [0.5 * (1 - 0.001 * i) for i in range(len(STEPS))]  # 0.1% per point: below 1%
    assert plateau_at(STEPS, tiny_gain, 10) == 4  # the first window with 3 points, (1.33, 4]
    staircase = [1.0 if s < 30 else 0.4 for s in STEPS]  # a step down at 30
    assert plateau_at(STEPS, staircase, 300) == 100  # the first window without the step: (33.3, 100]
    assert plateau_at(STEPS, staircase, 20) == 4  # a small budget lets the flat start stop it


def test_stop_reason_sentences():
    assert stop_reason(0.5, "kl", [1, 2, 4], [0.9, 0.6, 0.45], 10)[0] == "threshold"
    kind, sentence = stop_reason(0.5, "kl", [1, 2, 4], [0.9, 0.6, 0.45], 10)
    assert sentence == "threshold: kl 0.45 <= 0.5 bits at step 4"
    assert stop_reason(0.5, "kl", [1, 2, 4], [0.9, 0.6, 0.55], 10) is None
    assert stop_reason(None, "kl", [1], [0.0], 10) is None
    kind, sentence = stop_reason("plateau", "kl", [1, 2, 3, 4, 6], [0.5] * 5, 10)
    assert kind == "plateau" and sentence.startswith("plateau: kl improved by less than 1%")


def _cfg(until, **kw):
    return TrainConfig(**{"steps": 60, "batch_size": 8, "lr": 3e-3, "prefetch": 4, "curve_sequences": 48,
                          "until": until, **kw})


def test_until_stops_each_member_as_its_solo_run_does():
    """Threshold 0.93 bits of entropy MAE: seed 3 crosses it at step 32, seed 5 at step 42, seed 7
    never (0.933 at its closest): each member of the ensemble stops where its solo run stops,
    with the same parameters and AdamW moments, and stays frozen while the others train."""
    task = get_task("bijection", V=6)
    ens = train(task, "transformer", [3, 5, 7], _cfg(0.93), model_cfg=TINY, progress=False)
    assert {e: ens.stop(e) for e in range(3)} == {0: (32, "threshold"), 1: (42, "threshold"), 2: (60, "budget")}
    assert ens.stopped[0][2] == f"threshold: entropy_mae {ens.curve.member(0, 'entropy_mae')[10]:.4g} <= 0.93 bits " \
                                "at step 32"
    for e, seed in enumerate([3, 5, 7]):
        solo = train(task, "transformer", [seed], _cfg(0.93), model_cfg=TINY, progress=False)
        assert solo.stop(0) == ens.stop(e)
        assert solo.steps == ens.stop(e)[0]  # a solo run ends where its only member stops
        assert solo.stopped.get(0, (0, "", ""))[:2] == ens.stopped.get(e, (0, "", ""))[:2]
        # the ensemble's baddbmm and the solo run's addmm round differently and AdamW amplifies it
        # (test_member_equals_solo_run): 4e-4 at most here after 60 steps, with or without `until`;
        # a member that went on training after its stop would be ~0.05 away
        for k, v in solo.model.state_dict().items():
            torch.testing.assert_close(ens.model.member_state(e)[k], v, rtol=1e-3, atol=2e-3)
        n = solo.curve.steps.index(solo.steps) + 1
        for name, rows in solo.curve.values.items():
            assert ens.curve.member(e, name)[:n] == pytest.approx([r[0] for r in rows], rel=1e-3, abs=1e-4)
    # the stopped members did not move after their stop: their curve is flat from there
    for e, stop in ((0, 32), (1, 42)):
        after = [v for s, v in zip(ens.curve.steps, ens.curve.member(e, "kl")) if s >= stop]
        assert len(set(after)) == 1, after
    assert ens.steps == 60


def test_until_freezes_the_optimiser_state_of_a_stopped_member():
    """Its AdamW moments stay as they were at its stop step (a diverged member's decay)."""
    from bayesbench.training.trainer import Trainer

    task = get_task("bijection", V=6)
    trainer = Trainer(task, "transformer", [3, 7], _cfg(0.93), model_cfg=TINY)
    trainer.fit(progress=False, stop_at=32)
    assert list(trainer.stopped) == [0] and trainer.stopped[0][0] == 32
    opt = trainer.optimizer
    before = {k: [v[0].clone() for v in opt._member_views(getattr(opt, k))] + [v[1].clone() for v in
                                                                              opt._member_views(getattr(opt, k))]
              for k in ("param", "exp_avg", "exp_avg_sq")}
    trainer.fit(progress=False)
    assert trainer.step == 60 and list(trainer.stopped) == [0]  # seed 7 never reaches it
    for k, saved in before.items():
        views = opt._member_views(getattr(opt, k))
        n = len(views)
        assert all(torch.equal(v[0], b) for v, b in zip(views, saved[:n])), k  # member 0: frozen
        assert not all(torch.equal(v[1], b) for v, b in zip(views, saved[n:])), k  # member 1 trained on


def test_plateau_stops_members_and_the_run_ends_when_all_have():
    task = get_task("bijection", V=6)
    result = train(task, "mlp", [0, 1], _cfg("plateau", steps=300), model_cfg=dict(depth=1, width=8),
                   progress=False)
    # both members flatten at this size (training is deterministic per seed): without a plateau the
    # checks below would have nothing to check
    assert {e: result.stop(e)[1] for e in range(2)} == {0: "plateau", 1: "plateau"}
    assert result.steps == max(result.stop(e)[0] for e in range(2)) < 300  # the run ends at the last stop
    for e in range(2):
        step = result.stop(e)[0]
        i = result.curve.steps.index(step)
        assert plateau_at(result.curve.steps[:i + 1], result.curve.member(e, "entropy_mae")[:i + 1], 300) == step
        solo = train(task, "mlp", [e], _cfg("plateau", steps=300), model_cfg=dict(depth=1, width=8), progress=False)
        assert solo.stop(0) == result.stop(e)


def test_a_stored_row_keeps_the_runs_steps_and_the_members_own_stop_step(tmp_path):
    """Issue 29, section 4: seed 0 stored stop_step 133 beside steps 178 while docs/results.md called
    `steps` "training steps done". `steps`, `wall_s` and the throughputs describe the run (one
    ensemble trained as one: steps_per_s = steps / wall_s in every row), the same for every member,
    and `stop_step` is the member's own; the docs say so."""
    import os

    from bayesbench.scoring.rows import score_run

    task = get_task("bijection", V=6)
    meta = {"eval_sequences": 32, "eval_scored": ["values"], "eval_lengths": []}
    result = train(task, "transformer", [3, 5], _cfg(0.93, steps=42), model_cfg=TINY, progress=False, meta=meta)
    records = score_run(result, cache_dir=str(tmp_path), write=False)
    assert [(r.seed, r.stop_step, r.stop_kind) for r in records] == [(3, 32, "threshold"), (5, 42, "threshold")]
    for r in records:
        assert r.steps == result.steps == 42 and r.steps_per_s == pytest.approx(r.steps / r.wall_s)
    docs = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "results.md")).read()
    row = next(line for line in docs.splitlines() if line.startswith("| `steps`, `wall_s`"))
    assert "the same in every member's row" in row and "`stop_step`" in row, row
