"""Per-member learning rates: an ensemble whose members differ only in their rate is the solo
runs at those rates (to the tolerance of the ensemble = solo test, `test_trainer.py`), on the
CPU's foreach path and the accelerator's per-element path of `FlatMemberAdamW`."""

from __future__ import annotations

import os

import pytest
import torch

from bayesbench.tasks import get_task
from bayesbench.training.config import TrainConfig
from bayesbench.training.optim import FlatMemberAdamW
from bayesbench.training.run import train

TINY = dict(n_layer=2, n_head=2, d_model=16, d_ffn=32)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(((a - b).abs() / b.abs().clamp(min=1e-12)).max())


@pytest.mark.parametrize("arch,model_cfg", [("transformer", TINY), ("lstm", dict(n_layer=1, d_model=16))])
def test_member_at_rate_k_equals_solo_run_at_rate_k(arch, model_cfg):
    """Members [seed 3 at 3e-4, seed 5 at 1e-3, seed 7 at 3e-3] (cosine with warm-up, so the
    schedule scales each member's own peak) each equal a solo run at its rate. (The rates stay
    at or below the ensemble = solo test's 3e-3: at 1e-2 AdamW's normalised step turns the
    batched and the solo matmuls' last-digit differences into 1e-4 on parameters with near-zero
    gradients, for an ensemble at one rate as much as for one at several.)"""
    task = get_task("bijection", V=6)
    rates = (3e-4, 1e-3, 3e-3)
    base = dict(steps=25, batch_size=8, prefetch=4, schedule="cosine", warmup_steps=3)
    ens = train(task, arch, [3, 5, 7], TrainConfig(lr=1e-3, member_lrs=rates, **base), model_cfg=model_cfg,
                progress=False)
    for e, seed in enumerate((3, 5, 7)):
        solo = train(task, arch, [seed], TrainConfig(lr=rates[e], **base), model_cfg=model_cfg, progress=False)
        assert _rel(ens.losses[:, e], solo.losses[:, 0]) < 1e-5
        for k, v in solo.model.state_dict().items():
            torch.testing.assert_close(ens.model.member_state(e)[k], v, rtol=1e-4, atol=3e-5)
    # the rates made a difference: member 2 (3e-3) is not member 2 at the shared rate
    same = train(task, arch, [3, 5, 7], TrainConfig(lr=1e-3, **base), model_cfg=model_cfg, progress=False)
    assert _rel(ens.losses[5:, 2], same.losses[5:, 2]) > 1e-3


def _toy(E: int, n: int = 7) -> torch.nn.Module:
    model = torch.nn.Module()
    model.w = torch.nn.Parameter(torch.randn(E, n, 3, generator=torch.Generator().manual_seed(0)))
    model.b = torch.nn.Parameter(torch.randn(E, 5, generator=torch.Generator().manual_seed(1)))
    return model


@pytest.mark.parametrize("broadcast", [True, False])
@pytest.mark.parametrize("algorithm", ["adamw", "sgd"])
def test_per_member_rates_equal_one_optimiser_per_rate(broadcast, algorithm):
    """Both update paths (CPU foreach over [E, n] views; per-element scale, the accelerator's)
    against E one-member optimisers at the members' rates, with one member's loss not finite
    (it must stay exactly where it was) and weight decay on."""
    E, rates = 3, torch.tensor([1e-4, 1e-3, 3e-2])
    model = _toy(E)
    opt = FlatMemberAdamW(model, E, lr=1.0, weight_decay=0.1, member_scales=rates / 2e-3, algorithm=algorithm)
    opt._broadcast = broadcast
    solos = []
    for e in range(E):
        m = torch.nn.Module()
        m.w = torch.nn.Parameter(model.w.detach()[e:e + 1].clone())
        m.b = torch.nn.Parameter(model.b.detach()[e:e + 1].clone())
        solos.append((m, FlatMemberAdamW(m, 1, lr=1.0, weight_decay=0.1, algorithm=algorithm)))
    alive = torch.ones(E, dtype=torch.bool)
    for step in range(6):
        g = torch.Generator().manual_seed(10 + step)
        gw, gb = torch.randn(E, 7, 3, generator=g), torch.randn(E, 5, generator=g)
        loss = torch.tensor([1.0, float("nan") if step == 3 else 1.0, 1.0])
        before = model.w.detach()[1].clone()
        model.w.grad, model.b.grad = gw.clone(), gb.clone()
        _, ok = opt.step(2e-3, alive, loss)
        if step == 3:
            assert torch.equal(model.w.detach()[1], before)  # the member whose loss is nan did not move
        for e, (m, o) in enumerate(solos):
            if not bool(ok[e]):
                continue
            m.w.grad, m.b.grad = gw[e:e + 1].clone(), gb[e:e + 1].clone()
            o.step(float(rates[e]), torch.ones(1, dtype=torch.bool), loss[e:e + 1])
        alive = torch.ones(E, dtype=torch.bool)
        for e, (m, _) in enumerate(solos):
            if e == 1 and step >= 3:
                continue  # member 1 skipped a step: its AdamW step count differs from the solo's from here
            torch.testing.assert_close(model.w.detach()[e], m.w.detach()[0], rtol=1e-5, atol=1e-7)
            torch.testing.assert_close(model.b.detach()[e], m.b.detach()[0], rtol=1e-5, atol=1e-7)


def test_member_lrs_must_match_the_members():
    task = get_task("bijection", V=6)
    with pytest.raises(ValueError, match="member_lrs names 2 learning rates for 3 seeds"):
        train(task, "transformer", [0, 1, 2], TrainConfig(steps=2, member_lrs=(1e-3, 2e-3)), model_cfg=TINY,
              progress=False)
    with pytest.raises(ValueError, match="member_lrs"):
        TrainConfig(steps=2, member_lrs=(1e-3, -1.0))
    with pytest.raises(ValueError, match="member_lrs"):
        TrainConfig(steps=2, member_lrs="1e-3")


def test_member_lrs_outside_tuning_is_refused_and_never_stored_as_one_row(tmp_path, capsys):
    """`--train-args member_lrs=[1e-4,3e-1]` stored one row whose two "seeds" were two recipes
    (its interval spanned them): member_lrs is tuning's own, refused as a setting wherever one is
    given, and a run trained with several rates outside tuning is not scored into a row."""
    import bayesbench
    from bayesbench.cli import main
    from bayesbench.scoring.rows import score_run

    rule = "member_lrs is set by tuning alone (rule: a row pools seeds trained at one learning rate"
    db = str(tmp_path / "r.sqlite")
    assert main(["run", "--tasks", "sticky", "--archs", "mlp", "--train-args", "member_lrs=[1e-4,3e-1]",
                 "--seeds", "2", "--steps", "2", "--db", db, "--runs-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip()
    assert f"--train-args {rule}" in err and "\n" not in err
    with pytest.raises(ValueError, match=r"train_args=\.\.\.\) member_lrs is set by tuning alone \(rule"):
        bayesbench.run(tasks="sticky", archs="mlp", train_args={"member_lrs": [1e-4, 3e-1]}, seeds=2, steps=2, db=db,
                       runs_dir=str(tmp_path / "runs"), quiet=True)
    sweep = tmp_path / "s.toml"
    sweep.write_text('tasks = ["sticky"]\narchs = ["mlp"]\nseeds = [0, 1]\n[train]\nmember_lrs = [1e-4, 0.3]\n')
    assert main(["sweep", str(sweep), "--db", db, "--runs-dir", str(tmp_path / "runs")]) == 2
    assert "train.member_lrs is set by tuning alone" in capsys.readouterr().err
    result = train(get_task("sticky", V=4, L=8), "mlp", [0, 1], TrainConfig(steps=2, batch_size=4, lr=1e-3,
                                                                            member_lrs=(1e-4, 3e-1)), progress=False)
    with pytest.raises(ValueError, match="its members trained at 2 learning rates; member_lrs is set by tuning"):
        score_run(result, db=db)
    assert not os.path.exists(db) or bayesbench.records(db=db) == []
