"""The adapter (`bayesbench.models.adapter`): any plain nn.Module as an E-seed ensemble.

Member e of an adapted ensemble must be exactly the solo run with seed s_e (init, training,
per-member clipping, weight decay on every matrix, NaN freeze, checkpoints and resume), on both
forward paths: vmap (one batched call) and the loop fallback (torch.nn.GRU cannot be vmapped).
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch
from torch import nn

from bayesbench.models import AdaptedModel, TaskShape, from_module, from_modules, get_model, register_module
from bayesbench.tasks import get_task
from bayesbench.training.checkpoint import load_result
from bayesbench.training.config import TrainConfig
from bayesbench.training.numerics import decays
from bayesbench.training.optim import FlatMemberAdamW
from bayesbench.training.run import train
from bayesbench.training.trainer import Trainer


class GRUNet(nn.Module):
    """torch.nn.GRU between an embedding and a LayerNorm + head (not vmappable: aten::gru)."""

    def __init__(self, spec: TaskShape, width: int = 12) -> None:
        super().__init__()
        self.embed = nn.Embedding(spec.vocab_size, width)
        self.rnn = nn.GRU(width, width, batch_first=True)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, spec.num_classes)

    def forward(self, tokens):
        return self.head(self.norm(self.rnn(self.embed(tokens))[0]))


class PrefixNet(nn.Module):
    """Embedding + learned positions, a causal cumulative mean, an MLP (vmappable)."""

    def __init__(self, spec: TaskShape, width: int = 10) -> None:
        super().__init__()
        self.embed = nn.Embedding(spec.vocab_size, width)
        self.pos = nn.Parameter(torch.randn(spec.max_len, width) * 0.1)
        self.fc = nn.Linear(width, width)
        self.head = nn.Linear(width, spec.num_classes)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        steps = torch.arange(1, tokens.shape[1] + 1, device=tokens.device).view(1, -1, 1)
        return self.head(torch.tanh(self.fc(x.cumsum(1) / steps)))


register_module("test-adapted-gru", GRUNet)
register_module("test-adapted-prefix", PrefixNet)


@pytest.fixture(scope="module")
def bij():
    return get_task("bijection", V=5)


def _cfg(**kw) -> TrainConfig:
    return TrainConfig(**{"steps": 12, "batch_size": 6, "lr": 5e-3, "prefetch": 3, "grad_clip": 0.05, **kw})


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(((a - b).abs() / b.abs().clamp(min=1e-12)).max())


def _member_state(model: AdaptedModel, e: int) -> dict[str, torch.Tensor]:
    return {k: v[0] for k, v in model.member_state(e).items()}


def test_member_init_is_the_solo_module_of_its_seed(bij):
    model = from_module(GRUNet, bij, seeds=[3, 5, 7])
    for e, seed in enumerate([3, 5, 7]):
        torch.manual_seed(seed)
        solo = GRUNet(TaskShape.from_task(bij))
        for k, v in solo.state_dict().items():
            assert torch.equal(_member_state(model, e)["net." + k], v), k
    a, b = (dict(model.named_parameters())["net.rnn.weight_hh_l0"][i] for i in (0, 1))
    assert not torch.equal(a, b)


@pytest.mark.parametrize("arch,path", [("test-adapted-gru", "loop"), ("test-adapted-prefix", "vmap")])
def test_member_equals_solo_run(bij, arch, path):
    """Member e of seeds [3, 5, 7] has the per-step losses and final weights of a solo run with seed s_e
    (grad_clip 0.05 makes the per-member clipping bind on every step)."""
    cfg = _cfg(schedule="cosine", warmup_steps=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ens = train(bij, arch, [3, 5, 7], cfg, progress=False)
        assert ens.model.path == path
        for e, seed in ((0, 3), (2, 7)):
            solo = train(bij, arch, [seed], cfg, progress=False)
            assert _rel(ens.losses[:, e], solo.losses[:, 0]) < 1e-5
            for k, v in solo.model.state_dict().items():
                torch.testing.assert_close(ens.model.member_state(e)[k], v, rtol=1e-5, atol=1e-5)


def test_gru_falls_back_to_the_loop_and_says_why_in_one_line_once(bij, capsys):
    from bayesbench.models import adapter

    adapter._WARNED.discard("fallback-test")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a note, not a warning with its source line
        model = from_module(GRUNet, bij, seeds=[0, 1], spec="fallback-test")
        from_module(GRUNet, bij, seeds=[0, 1], spec="fallback-test")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("bayesbench: note: fallback-test runs its 2 members in a loop")
    assert "vmap over members failed" in err
    assert model.path == "loop" and "gru" in model.cfg.fallback.lower()
    assert from_module(PrefixNet, bij, seeds=[0, 1]).cfg.fallback is None


def test_vmap_and_loop_paths_agree(bij):
    """Forward and gradients of both paths on random tokens of an awkward shape (E=3, B=5, L=7)."""
    model = from_module(PrefixNet, TaskShape.from_task(bij, max_len=13), seeds=[11, 12, 13])
    tokens = torch.randint(0, bij.vocab_size, (3, 5, 7))
    out = {}
    for path in ("vmap", "loop"):
        model.set_path(path)
        model.zero_grad()
        y = model(tokens)
        y.square().mean().backward()
        out[path] = (y.detach(), [p.grad.clone() for p in model.parameters()])
    torch.testing.assert_close(out["vmap"][0], out["loop"][0], rtol=1e-5, atol=1e-6)
    for a, b in zip(out["vmap"][1], out["loop"][1]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_clipping_norms_are_the_solo_modules_norms(bij):
    """The trainer's per-member norms on the stacked parameters = torch's global norm of each solo module."""
    seeds = [2, 4, 6]
    model = from_module(PrefixNet, bij, seeds=seeds)
    opt = FlatMemberAdamW(model, 3, lr=1e-3)
    tokens = torch.randint(0, bij.vocab_size, (3, 4, bij.seq_len))
    model(tokens).square().sum().backward()
    opt.gather_grads()
    norms = opt.member_grad_norms()
    for e, seed in enumerate(seeds):
        torch.manual_seed(seed)
        solo = PrefixNet(TaskShape.from_task(bij))
        solo(tokens[e]).square().sum().backward()
        total = torch.nn.utils.clip_grad_norm_(solo.parameters(), 1e9)
        torch.testing.assert_close(norms[e], total, rtol=1e-5, atol=1e-7)


def test_weight_decay_reaches_every_matrix_and_no_bias(bij):
    model = from_module(GRUNet, bij, seeds=[0, 1])
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for p in model.parameters() if decays(p)}
    assert decayed == {"net.embed.weight", "net.rnn.weight_ih_l0", "net.rnn.weight_hh_l0", "net.head.weight"}
    assert {names[id(p)] for p in model.parameters() if not decays(p)} == {
        "net.rnn.bias_ih_l0", "net.rnn.bias_hh_l0", "net.norm.weight", "net.norm.bias", "net.head.bias"}
    # and it acts: a zero-gradient AdamW step shrinks member e's matrices by lr * wd
    opt = FlatMemberAdamW(model, 2, lr=0.1, weight_decay=0.5, decays=decays)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step(0.1, torch.ones(2, dtype=torch.bool), torch.zeros(2))
    after = dict(model.named_parameters())
    torch.testing.assert_close(after["net.head.weight"], before["net.head.weight"] * (1 - 0.05))
    assert torch.equal(after["net.head.bias"], before["net.head.bias"])


def test_no_weight_decay_flag_is_kept():
    class Flagged(nn.Module):
        def __init__(self, spec):
            super().__init__()
            self.embed = nn.Embedding(spec.vocab_size, 4)
            self.A_log = nn.Parameter(torch.randn(4, 3))
            self.A_log._no_weight_decay = True
            self.head = nn.Linear(4, spec.num_classes)

        def forward(self, tokens):
            return self.head(self.embed(tokens) * self.A_log.sum(-1))

    model = from_module(Flagged, TaskShape(6, 3, 5), seeds=[0, 1])
    assert not decays(model.net.A_log) and decays(model.net.embed.weight)


def test_nan_guard_freezes_only_the_diverged_member(bij):
    cfg = _cfg(steps=6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        trainer = Trainer(bij, "test-adapted-gru", [0, 1, 2], cfg)
        with torch.no_grad():
            trainer.model.net.head.weight[1].fill_(float("nan"))
        before = [p.detach()[1].clone() for p in trainer.model.parameters()]
        result = trainer.fit(progress=False)
        solo = train(bij, "test-adapted-gru", [2], cfg, progress=False)
    assert list(result.diverged) == [1] and torch.isnan(result.losses[:, 1]).all()
    for p, b in zip(trainer.model.parameters(), before):
        assert torch.equal(p.detach()[1].nan_to_num(7.0), b.nan_to_num(7.0))
    assert _rel(result.losses[:, 2], solo.losses[:, 0]) < 1e-5


def test_checkpoint_resume_and_reload_of_a_model_file(bij, tmp_path):
    """An outside model named by file path: resume reproduces the uninterrupted run, and
    load_result rebuilds it from the checkpoint (importing the file itself)."""
    src = tmp_path / "netfile.py"
    src.write_text("import torch\nfrom torch import nn\n\n"
                   "def build(spec):\n"
                   "    return nn.Sequential(nn.Embedding(spec.vocab_size, 8), nn.Linear(8, 8), nn.Tanh(),\n"
                   "                         nn.Linear(8, spec.num_classes))\n")
    spec = f"{src}:build"
    cfg = _cfg(steps=10, checkpoint_every=3)
    full = train(bij, spec, [0, 1], cfg, run_dir=str(tmp_path / "full"), progress=False)
    part = str(tmp_path / "part")
    train(bij, spec, [0, 1], cfg, run_dir=part, progress=False, stop_at=5)
    torch.manual_seed(99)
    resumed = train(bij, spec, [0, 1], cfg, run_dir=part, resume=True, progress=False)
    assert resumed.steps == 10 and torch.equal(resumed.losses, full.losses)
    for k, v in full.model.state_dict().items():
        assert torch.equal(resumed.model.state_dict()[k], v), k
    loaded = load_result(os.path.join(part, "checkpoint.pt"))
    assert isinstance(loaded.model, AdaptedModel) and loaded.model.path == "vmap"
    tokens = torch.randint(0, bij.vocab_size, (2, 3, bij.seq_len))
    torch.testing.assert_close(loaded.model(tokens), full.model(tokens))


def test_header_is_passed_to_modules_that_take_it():
    hmm = get_task("hmm", K=4)

    class WithHeader(nn.Module):
        def __init__(self, spec):
            super().__init__()
            self.embed = nn.Embedding(spec.vocab_size, 6)
            self.proj = nn.Linear(spec.header_dim, 6)
            self.head = nn.Linear(6, spec.num_classes)

        def forward(self, tokens, header):
            x = self.embed(tokens)
            h = self.proj(header)
            return self.head(torch.cat([x[:, : h.shape[1]] + h, x[:, h.shape[1]:]], 1).cumsum(1))

    model = from_module(WithHeader, hmm, seeds=[0, 1])
    batch = hmm.sample(3, torch.Generator().manual_seed(0))
    tokens, header = batch.tokens.expand(2, -1, -1), batch.header.expand(2, -1, -1, -1)
    y = model(tokens, header)
    assert y.shape == (2, 3, hmm.seq_len, hmm.num_classes)
    assert not torch.allclose(y, model(tokens, header * 0))  # the header matters
    with pytest.raises(ValueError, match="must take \\(tokens, header\\)"):
        from_module(PrefixNet, hmm)


def test_from_modules_keeps_trained_weights(bij):
    shape = TaskShape.from_task(bij)
    mods = [PrefixNet(shape), PrefixNet(shape)]
    model = from_modules(mods, shape)
    tokens = torch.randint(0, bij.vocab_size, (2, 3, bij.seq_len))
    for e in range(2):
        torch.testing.assert_close(model(tokens)[e], mods[e](tokens[e]))
    assert mods[0].fc.weight.device.type == "cpu"  # the modules themselves are untouched


def test_num_params_and_breakdown(bij):
    model = from_module(GRUNet, bij, seeds=[0, 1, 2])
    solo = GRUNet(TaskShape.from_task(bij))
    assert model.num_params() == sum(p.numel() for p in solo.parameters())
    assert model.param_breakdown() == {n: sum(p.numel() for p in c.parameters()) for n, c in solo.named_children()}
    assert get_model("test-adapted-gru", bij, seeds=[4]).num_params() == model.num_params()


# ---------------------------------------------------------------- bad factories

def _bad(factory, match, task=None, seeds=(0, 1)):
    with pytest.raises(ValueError, match=match):
        from_module(factory, task or get_task("bijection", V=5), seeds=list(seeds))


def test_bad_factories_fail_clearly():
    class WrongShape(PrefixNet):
        def forward(self, tokens):
            return super().forward(tokens)[..., :-1]

    class NaNLogits(PrefixNet):
        def forward(self, tokens):
            return super().forward(tokens) * float("nan")

    outside = nn.Linear(10, 5)  # bijection V=5: 10 token ids, 5 classes

    class IgnoresItsParameters(PrefixNet):  # uses a module captured from outside, not its own
        def forward(self, tokens):
            return outside(torch.nn.functional.one_hot(tokens, 10).float()) + 0 * self.fc.bias.sum().detach()

    class Tuple(PrefixNet):
        def forward(self, tokens):
            return (super().forward(tokens),)

    shared = PrefixNet(TaskShape.from_task(get_task("bijection", V=5)))
    _bad(WrongShape, r"logits of shape \[2, 10, 4\].*expected \[B=2, L=10, C=5\]")
    _bad(NaNLogits, "NaN or inf")
    _bad(IgnoresItsParameters, "do not depend on their own parameters")
    _bad(lambda spec: shared, "ignores the seed")
    _bad(lambda spec: "not a module", "must return a torch.nn.Module")
    _bad(lambda spec: 1 / 0, "the factory raised ZeroDivisionError")
    _bad(lambda spec: nn.ReLU(), "no parameters")
    _bad(Tuple, "must return a logits tensor")
    _bad(lambda spec: nn.Sequential(nn.Embedding(spec.vocab_size, 4), nn.Linear(3, spec.num_classes)),
         r"forward failed on a random trial batch of tokens \[B=2, L=10\]: RuntimeError")
    _bad(lambda spec: get_model("mlp", spec, depth=1, width=4), "ensemble-native")

    class IntegerLogits(PrefixNet):
        def forward(self, tokens):
            return super().forward(tokens).round().long()

    _bad(IntegerLogits, "must return floating-point logits .* got torch.int64")


def test_a_forward_that_raises_mid_training_names_the_model(bij):
    """The user's module failing at step 3 is a one-line error naming the model, not an internal error."""
    class FailsLater(PrefixNet):
        calls = 0

        def forward(self, tokens):
            FailsLater.calls += 1
            if FailsLater.calls > 8:  # after the trial forwards
                raise ZeroDivisionError("the model's own bug")
            return super().forward(tokens)

    register_module("test-fails-later", FailsLater)
    trainer = Trainer(bij, "test-fails-later", [0], _cfg(steps=50))
    with pytest.raises(ValueError, match=r"FailsLater: the model.s forward raised ZeroDivisionError: the "
                                         r"model's own bug \(on tokens \[1, 6, 10\]"):
        for _ in range(20):
            trainer.train_step()
