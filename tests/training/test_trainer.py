"""The trainer: ensemble members equal solo runs, per-member clipping, schedules, the NaN/inf
guard, and checkpoints that make a resumed run end exactly where an uninterrupted one does."""

from __future__ import annotations

import dataclasses
import math
import os

import pytest
import torch

from bayesbench.tasks import get_task
from bayesbench.training.checkpoint import load_result
from bayesbench.training.config import TrainConfig
from bayesbench.training.optim import FlatMemberAdamW
from bayesbench.training.run import train
from bayesbench.training.seeds import data_seed
from bayesbench.training.stream import MemberStream
from bayesbench.training.trainer import Trainer

TINY = dict(n_layer=2, n_head=2, d_model=16, d_ffn=32)


@pytest.fixture(scope="module")
def bij():
    return get_task("bijection", V=6)


def _cfg(**kw):
    return TrainConfig(**{"steps": 20, "batch_size": 8, "lr": 3e-3, "prefetch": 4, **kw})


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(((a - b).abs() / b.abs().clamp(min=1e-12)).max())


@pytest.mark.parametrize("task_name", ["bijection", "hmm"])
def test_member_equals_solo_run(task_name):
    """Member e of seeds [3, 5, 7] has the per-step losses of a solo run with seed s_e."""
    task = get_task("bijection", V=6) if task_name == "bijection" else get_task("hmm", K=6)
    cfg = _cfg(steps=25 if task_name == "bijection" else 12, schedule="cosine", warmup_steps=3)
    ens = train(task, "transformer", [3, 5, 7], cfg, model_cfg=TINY, progress=False)
    for e, seed in ((0, 3), (2, 7)):
        solo = train(task, "transformer", [seed], cfg, model_cfg=TINY, progress=False)
        assert _rel(ens.losses[:, e], solo.losses[:, 0]) < 1e-5
        for k, v in solo.model.state_dict().items():  # a solo run uses (add)mm, the ensemble baddbmm: AdamW
            torch.testing.assert_close(ens.model.member_state(e)[k], v, rtol=1e-4, atol=3e-5)  # scales rounding


def test_dropout_runs_do_not_depend_on_the_global_rng(bij, tmp_path):
    """Dropout draws from torch's global generator: the trainer seeds it per step from the seeds
    and the step, so a run is the same whatever consumed the global RNG before it, a resumed run
    equals an uninterrupted one, and the caller's RNG state is left as it was."""
    cfg = _cfg(steps=12, checkpoint_every=6)
    drop = {**TINY, "dropout": 0.2}
    torch.manual_seed(123)
    a = train(bij, "transformer", [0, 1], cfg, model_cfg=drop, progress=False).losses
    torch.manual_seed(456)
    torch.rand(1000)
    state = torch.get_rng_state()
    b = train(bij, "transformer", [0, 1], cfg, model_cfg=drop, progress=False).losses
    assert torch.equal(a, b)
    assert torch.equal(torch.get_rng_state(), state)
    run = str(tmp_path / "run")
    train(bij, "transformer", [0, 1], cfg, model_cfg=drop, progress=False, run_dir=run, stop_at=6)
    torch.rand(77)
    c = train(bij, "transformer", [0, 1], cfg, model_cfg=drop, progress=False, run_dir=run, resume=True).losses
    assert torch.equal(a, c)
    nodrop = train(bij, "transformer", [0, 1], cfg, model_cfg=TINY, progress=False).losses
    assert not torch.equal(a, nodrop)  # the dropout is on


def test_mlp_member_equals_solo_run(bij):
    cfg = _cfg(steps=10)
    ens = train(bij, "mlp-prefix", [1, 2], cfg, model_cfg=dict(depth=2, width=16, prefix_dim=4), progress=False)
    solo = train(bij, "mlp-prefix", [2], cfg, model_cfg=dict(depth=2, width=16, prefix_dim=4), progress=False)
    assert _rel(ens.losses[:, 1], solo.losses[:, 0]) < 1e-5


def opt_slice(opt, param) -> slice:
    """Where `param` sits in the optimiser's flat buffers."""
    offset = 0
    for p in opt.params:
        if p is param:
            return slice(offset, offset + p.numel())
        offset += p.numel()
    raise KeyError("not a parameter of this optimiser")


class _TwoParams(torch.nn.Module):
    def __init__(self, E: int) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(E, 4, 5))
        self.b = torch.nn.Parameter(torch.randn(E, 5))


def test_clipping_is_per_member():
    """Each member is clipped by its own global norm, as torch's clip_grad_norm_ would a solo model."""
    torch.manual_seed(0)
    model = _TwoParams(3)
    opt = FlatMemberAdamW(model, 3, lr=1e-3, max_norm=1.0)
    scale = torch.tensor([0.01, 3.0, 50.0])
    grads = [torch.randn(3, 4, 5) * scale.view(3, 1, 1), torch.randn(3, 5) * scale.view(3, 1)]
    for p, g in zip(model.parameters(), grads):
        p.grad = g.clone()
    opt.gather_grads()
    norms = opt.member_grad_norms()
    coef = (1.0 / (norms + 1e-6)).clamp(max=1.0)
    opt.grad.mul_(opt.member_scale(coef))
    for e in range(3):
        solo = [torch.nn.Parameter(torch.zeros_like(g[e])) for g in grads]
        for p, g in zip(solo, grads):
            p.grad = g[e].clone()
        total = torch.nn.utils.clip_grad_norm_(solo, 1.0)
        torch.testing.assert_close(norms[e], total)
        for p, q in zip(model.parameters(), solo):
            torch.testing.assert_close(opt.grad[opt_slice(opt, p)].view_as(p)[e], q.grad)
    clipped_w = opt.grad[opt_slice(opt, model.w)].view_as(model.w)
    assert float(clipped_w[0].abs().sum()) == pytest.approx(float(grads[0][0].abs().sum()))  # small: untouched


@pytest.mark.parametrize("broadcast", [True, False], ids=["foreach-views", "expanded-scale"])
@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_flat_adamw_matches_torch_adamw_per_member(weight_decay, broadcast):
    """Several steps of the flat optimiser = torch.optim.AdamW + clip_grad_norm_ on each member alone;
    a member whose `ok` is False is left exactly as it was. Both ways of applying per-member
    scales (the CPU's foreach over [E, n] views, the accelerators' expanded scale) are checked."""
    torch.manual_seed(1)
    E = 3
    model = _TwoParams(E)
    solos = [[torch.nn.Parameter(p.detach()[e].clone()) for p in model.parameters()] for e in range(E)]
    opt = FlatMemberAdamW(model, E, lr=3e-2, betas=(0.8, 0.95), weight_decay=weight_decay,
                          decays=lambda p: p.dim() >= 3, max_norm=0.5)
    opt._broadcast = broadcast
    torch_opts = [torch.optim.AdamW([{"params": [s[0]], "weight_decay": weight_decay},
                                     {"params": [s[1]], "weight_decay": 0.0}], lr=3e-2, betas=(0.8, 0.95))
                  for s in solos]
    for step in range(5):
        grads = [torch.randn(E, 4, 5) * 3, torch.randn(E, 5)]
        for p, g in zip(model.parameters(), grads):
            p.grad = g.clone()
        ok = torch.tensor([True, step < 2, True])
        frozen = [p.detach()[1].clone() for p in model.parameters()]
        _, updated = opt.step(3e-2, ok, torch.zeros(E))
        assert torch.equal(updated, ok)
        for e in range(E):
            if not ok[e]:
                for p, f in zip(model.parameters(), frozen):
                    assert torch.equal(p.detach()[e], f)
                continue
            for s, g in zip(solos[e], grads):
                s.grad = g[e].clone()
            torch.nn.utils.clip_grad_norm_(solos[e], 0.5)
            torch_opts[e].step()
            for p, s in zip(model.parameters(), solos[e]):
                torch.testing.assert_close(p.detach()[e], s.detach(), rtol=1e-5, atol=1e-6)


def test_scale_members_paths_agree():
    """scale_members: the foreach path over [E, n] views = the expanded per-element scale."""
    torch.manual_seed(3)
    model = _TwoParams(3)
    opt = FlatMemberAdamW(model, 3, lr=1e-3)
    flat, per_member = torch.randn(opt.param.numel()), torch.tensor([0.5, -2.0, 0.0])
    views = flat.clone()
    opt.scale_members(views, per_member)
    assert torch.equal(views, flat * opt.member_scale(per_member))


def test_flat_adamw_rejects_parameters_without_the_member_dimension():
    model = torch.nn.Linear(3, 4)
    with pytest.raises(ValueError, match="leading member dimension"):
        FlatMemberAdamW(model, 2, lr=1e-3)


def test_schedules():
    const = TrainConfig(steps=100, lr=1e-3)
    assert const.lr_at(0) == const.lr_at(99) == 1e-3
    cos = TrainConfig(steps=110, lr=3e-4, schedule="cosine", warmup_steps=10)
    assert cos.lr_at(0) == pytest.approx(3e-5)
    assert cos.lr_at(9) == pytest.approx(3e-4)
    assert cos.lr_at(10) == pytest.approx(3e-4)
    assert cos.lr_at(60) == pytest.approx(1.5e-4)
    assert cos.lr_at(109) < 1e-6
    with pytest.raises(ValueError, match="schedule"):
        TrainConfig(steps=10, schedule="linear")
    with pytest.raises(ValueError, match="steps"):
        TrainConfig(steps=0)


def test_data_streams_are_per_member_and_replayable(bij):
    a, b = MemberStream(bij, 0, 4, prefetch=3), MemberStream(bij, 1, 4, prefetch=3)
    assert not torch.equal(a.next().tokens, b.next().tokens)
    for _ in range(3):
        a.next()
    state = a.state_dict()
    expected = [a.next().tokens for _ in range(4)]
    c = MemberStream(bij, 0, 4, prefetch=3)
    c.load_state_dict(state)
    assert all(torch.equal(c.next().tokens, t) for t in expected)
    assert data_seed(0) != data_seed(1) and data_seed(0) < 2**61


def test_nan_guard_freezes_only_the_diverged_member(bij):
    cfg = _cfg(steps=8)
    trainer = Trainer(bij, "transformer", [0, 1, 2], cfg, model_cfg=TINY)
    with torch.no_grad():
        trainer.model.head.weight[1].fill_(float("nan"))
    before = [p.detach()[1].clone() for p in trainer.model.parameters()]
    result = trainer.fit(progress=False)
    assert list(result.diverged) == [1] and "diverged at step 0" in result.diverged[1]
    assert torch.isnan(result.losses[:, 1]).all()
    for p, b in zip(trainer.model.parameters(), before):
        assert torch.equal(p.detach()[1].nan_to_num(7.0), b.nan_to_num(7.0))  # frozen
    solo = train(bij, "transformer", [2], cfg, model_cfg=TINY, progress=False)
    assert _rel(result.losses[:, 2], solo.losses[:, 0]) < 1e-5  # the others are untouched


def test_all_members_diverged_stops_the_run(bij):
    trainer = Trainer(bij, "mlp", [0, 1], _cfg(steps=50), model_cfg=dict(depth=1, width=8))
    with torch.no_grad():
        trainer.model.head.bias.fill_(float("inf"))
    result = trainer.fit(progress=False)
    assert result.steps == 1 and set(result.diverged) == {0, 1}


def test_resume_reaches_the_same_final_numbers(bij, tmp_path):
    cfg = _cfg(steps=20, checkpoint_every=5, schedule="cosine", warmup_steps=4)
    full = train(bij, "transformer", [0, 1], cfg, model_cfg=TINY, run_dir=str(tmp_path / "full"), progress=False)
    part = str(tmp_path / "part")
    first = train(bij, "transformer", [0, 1], cfg, model_cfg=TINY, run_dir=part, progress=False, stop_at=10)
    assert first.steps == 10
    torch.manual_seed(1234)  # a resumed process starts with other global RNG state
    resumed = train(bij, "transformer", [0, 1], cfg, model_cfg=TINY, run_dir=part, resume=True, progress=False)
    assert resumed.steps == 20 and resumed.run_id == first.run_id
    assert torch.equal(resumed.losses, full.losses)
    for k, v in full.model.state_dict().items():
        assert torch.equal(resumed.model.state_dict()[k], v), k
    loaded = load_result(os.path.join(part, "checkpoint.pt"))
    assert loaded.steps == 20 and torch.equal(loaded.losses, full.losses)
    other = TrainConfig(**{**cfg.__dict__, "lr": 1e-2})
    with pytest.raises(ValueError, match="train differs"):
        train(bij, "transformer", [0, 1], other, model_cfg=TINY, run_dir=part, resume=True, progress=False)


def test_resume_with_checkpoint_mid_prefetch_chunk(bij, tmp_path):
    """Interrupt between checkpoints: the resumed run replays from the last checkpoint."""
    cfg = _cfg(steps=12, checkpoint_every=3, prefetch=5)
    full = train(bij, "mlp", [4], cfg, model_cfg=dict(depth=2, width=12), progress=False)
    trainer = Trainer(bij, "mlp", [4], cfg, model_cfg=dict(depth=2, width=12), run_dir=str(tmp_path))
    trainer.fit(progress=False, stop_at=7)  # checkpoint at 6, then one more step is "lost"
    resumed = train(bij, "mlp", [4], cfg, model_cfg=dict(depth=2, width=12), run_dir=str(tmp_path), resume=True,
                    progress=False)
    assert torch.equal(resumed.losses, full.losses)
    assert math.isfinite(resumed.final_loss()[0])


def test_open_trainer_locks_the_run_directory_removes_leftovers_and_resumes(bij, tmp_path):
    """The one constructor of a run's Trainer: the run directory locked for the block, temporary
    files of a killed save removed, the checkpoint loaded with resume=True (and said), the same
    numbers as an uninterrupted run."""
    from bayesbench.running.runlock import LOCK_NAME
    from bayesbench.training.run import open_trainer

    cfg = _cfg(steps=8)
    full = train(bij, "mlp", [2], cfg, model_cfg=dict(depth=1, width=8), progress=False)
    run_dir = str(tmp_path / "run")
    train(bij, "mlp", [2], cfg, model_cfg=dict(depth=1, width=8), run_dir=run_dir, progress=False, stop_at=5)
    leftover = tmp_path / "run" / "checkpoint.pt.tmp12345"
    leftover.write_bytes(b"half a checkpoint")
    half_run_file = tmp_path / "run" / "run.json.tmp12345"  # a killed job's write_run_file: left forever before
    half_run_file.write_text('{"format"')
    said = []
    with open_trainer(bij, "mlp", [2], cfg, model_cfg=dict(depth=1, width=8), run_dir=run_dir, resume=True,
                      say=said.append) as trainer:
        assert (tmp_path / "run" / LOCK_NAME).exists() and not leftover.exists() and not half_run_file.exists()
        assert trainer.step == 5 and said == [f"bayesbench: resumed {bij.name} / mlp seeds [2] from step 5 of 8 "
                                              f"({os.path.join(run_dir, 'checkpoint.pt')})"]
        resumed = trainer.fit(progress=False)
    assert not (tmp_path / "run" / LOCK_NAME).exists()
    assert torch.equal(resumed.losses, full.losses)
    with open_trainer(bij, "mlp", [2], cfg, model_cfg=dict(depth=1, width=8)) as fresh:  # no run directory
        assert fresh.step == 0 and fresh.run_dir is None
    with pytest.raises(ValueError, match="resume=True needs run_dir"):
        with open_trainer(bij, "mlp", [2], cfg, resume=True):
            pass


def test_a_checkpoint_of_another_run_is_refused_naming_the_field(bij, tmp_path):
    """The run's identity (`bayesbench.identity`) is recorded in the checkpoint and compared on
    resume: a field that changes the numbers is refused by name, with both values; a read-back
    interval is no part of it; the label (where the rows go) is."""
    cfg = _cfg(steps=8)
    run = str(tmp_path / "run")
    meta = {"label": "bij", "eval_sequences": 64}
    train(bij, "mlp", [0], cfg, model_cfg=dict(depth=1, width=8), run_dir=run, progress=False, stop_at=4, meta=meta)
    state = torch.load(os.path.join(run, "checkpoint.pt"), weights_only=True)
    assert state["identity"]["label"] == "bij" and state["identity"]["threads"] == torch.get_num_threads()
    assert state["identity"]["seeds"] == [0] and "sync_every" not in state["identity"]["train"]
    resumed = train(bij, "mlp", [0], TrainConfig(**{**cfg.__dict__, "sync_every": 3}), model_cfg=dict(depth=1, width=8),
                    run_dir=run, resume=True, progress=False, meta=meta)
    assert resumed.steps == 8
    with pytest.raises(ValueError, match=r"written for another run: label differs \('bij' there, 'other' here\)"):
        train(bij, "mlp", [0], cfg, model_cfg=dict(depth=1, width=8), run_dir=run, resume=True, progress=False,
              meta={**meta, "label": "other"})
    with pytest.raises(ValueError, match=r"written for another run: train differs"):
        train(bij, "mlp", [0], TrainConfig(**{**cfg.__dict__, "compile": True}), model_cfg=dict(depth=1, width=8),
              run_dir=run, resume=True, progress=False, meta=meta)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(threads + 1)
        with pytest.raises(ValueError, match=rf"threads differs \({threads} there, {threads + 1} here\)"):
            train(bij, "mlp", [0], cfg, model_cfg=dict(depth=1, width=8), run_dir=run, resume=True, progress=False,
                  meta=meta)
    finally:
        torch.set_num_threads(threads)


def test_a_trainer_keyed_by_another_identity_is_refused(bij):
    """A job's key must describe its checkpoint: the spec the caller keyed the run by is checked
    against the trainer's own settings when it is built, and its identity is the trainer's."""
    cfg = _cfg(steps=4)
    own = Trainer(bij, "mlp", [0], cfg, model_cfg=dict(depth=1, width=8))
    keyed = dataclasses.replace(own.spec, label="bij keyed", eval_sequences=64)  # the caller's to say
    trainer = Trainer(bij, "mlp", [0], cfg, model_cfg=dict(depth=1, width=8), spec=keyed)
    assert trainer.identity() == {**keyed.identity, "seeds": [0]} and trainer.spec is keyed
    with pytest.raises(ValueError, match=r"not the run it was keyed by: max_len differs"):
        Trainer(bij, "mlp", [0], cfg, model_cfg=dict(depth=1, width=8), spec=dataclasses.replace(keyed, max_len=99))
