"""Continuous heads (issue 41): read once from the C outputs every architecture gives, so every
built-in architecture, an outside module and the real-vector read-in work on the continuous
tunnels with no code of their own; the discrete shapes are unchanged."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from bayesbench.models import get_model
from bayesbench.models.adapter import from_module
from bayesbench.models.base import TaskShape
from bayesbench.models.heads import head_of_outputs, head_outputs, nll_nats, parse_head, predictive, read_outputs
from bayesbench.tasks import get_task
from bayesbench.training.numerics import member_losses

SMALL = {"transformer": dict(n_layer=1, n_head=2, d_model=16, d_ffn=32),
         "transformer-no-late-attention": dict(n_layer=2, n_head=2, d_model=16, d_ffn=32, attn_off_top=1),
         "linear-attention": dict(n_layer=1, n_head=2, d_model=16, d_ffn=32),
         "mamba": dict(n_layer=1, d_model=16), "lstm": dict(n_layer=1, d_model=16), "gru": dict(n_layer=1, d_model=16),
         "mlp": dict(depth=1, width=16), "mlp-prefix": dict(depth=1, width=16), "toy-attention": dict(d_model=16)}


def test_head_names_and_sizes():
    assert parse_head("mixture:3") == ("mixture", 3) and head_outputs("gaussian") == 2
    assert head_outputs("mixture:3") == 9 and head_outputs("categorical", 7) == 7
    assert head_of_outputs(2) == "gaussian" and head_of_outputs(6) == "mixture:2"
    for bad in ("mixture:0", "mixture", "normal", "mixture:x"):
        with pytest.raises(ValueError, match="head must be 'categorical', 'gaussian' or 'mixture:M'"):
            parse_head(bad)


def test_the_nll_is_the_density_of_the_predictive():
    g = torch.Generator().manual_seed(0)
    raw, y = torch.randn(4, 5, 2, generator=g, dtype=torch.float64), torch.randn(4, 5, generator=g, dtype=torch.float64)
    want = -torch.distributions.Normal(raw[..., 0], raw[..., 1].exp().sqrt()).log_prob(y)
    torch.testing.assert_close(nll_nats(raw, y, "gaussian"), want)
    raw = torch.randn(4, 5, 9, generator=g, dtype=torch.float64)
    w, m, v = predictive(raw, "mixture:3").split(3, -1)
    torch.testing.assert_close(w.sum(-1), torch.ones(4, 5, dtype=torch.float64))
    dens = (w * torch.exp(-0.5 * (y.unsqueeze(-1) - m) ** 2 / v) / (2 * math.pi * v).sqrt()).sum(-1)
    torch.testing.assert_close(nll_nats(raw, y, "mixture:3"), -dens.log())
    assert torch.equal(read_outputs(raw, "categorical"), torch.log_softmax(raw, -1))


def test_the_loss_of_real_targets_is_the_mean_nll_per_member():
    g = torch.Generator().manual_seed(1)
    raw, y = torch.randn(2, 3, 4, 2, generator=g), torch.randn(2, 3, 4, generator=g)
    mask = torch.rand(2, 3, 4, generator=g) > 0.3
    loss = member_losses(raw, y, mask)
    nll = nll_nats(raw, y, "gaussian")
    for e in range(2):
        torch.testing.assert_close(loss[e], nll[e][mask[e]].mean())


@pytest.mark.parametrize("arch", sorted(SMALL))
def test_every_architecture_reads_real_vectors_and_gives_the_head_outputs(arch):
    """Built with the task's shape, each architecture gives C = 2 (Gaussian) or 6 (a mixture of
    2) outputs at every position, and its outputs depend on the real vectors read in."""
    for name in ("linreg", "mixreg"):
        task = get_task(name, d=2, n=4)
        model = get_model(arch, task, seeds=[0, 1], **SMALL[arch])
        b = task.sample(3, torch.Generator().manual_seed(0))
        tokens, header = b.tokens.expand(2, 3, -1), b.header.expand(2, 3, -1, -1)
        out = model(tokens, header)
        assert out.shape == (2, 3, task.seq_len, task.num_classes)
        other = model(tokens, header + 1.0)
        assert not torch.allclose(out, other)


def test_a_model_reads_longer_sequences_with_a_dense_header():
    """kalman trained at K = 5, scored at K = 9: the header is as long as the tokens."""
    task, longer = get_task("kalman", m=2, K=5), get_task("kalman", m=2, K=9)
    shape = TaskShape.from_task(task, max_len=longer.seq_len)
    assert shape.dense_header and shape.header_len == longer.seq_len and shape.head == "gaussian"
    model = get_model("transformer", task, seeds=[0], max_len=longer.seq_len, **SMALL["transformer"])
    for t in (task, longer):
        b = t.sample(2, torch.Generator().manual_seed(0))
        assert model(b.tokens.unsqueeze(0), b.header.unsqueeze(0)).shape == (1, 2, t.seq_len, 2)
    b = longer.sample(2, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="header must have shape"):
        model(b.tokens.unsqueeze(0), b.header[:, :-1].unsqueeze(0))


def test_a_discrete_shape_is_unchanged():
    shape = TaskShape.from_task(get_task("hmm", K=5))
    assert shape.head == "categorical" and not shape.dense_header and shape.header_len == 10


class Plain(nn.Module):
    """An outside module of the simplest kind: (tokens, header) -> [B, L, C]."""

    def __init__(self, shape: TaskShape) -> None:
        super().__init__()
        self.read = nn.Linear(shape.header_dim, 8)
        self.out = nn.Linear(8, shape.num_classes)

    def forward(self, tokens, header):
        return self.out(torch.tanh(self.read(header)).cumsum(1))


def test_an_outside_module_gets_the_same_head_and_read_in():
    task = get_task("linreg", d=2, n=4)
    model = from_module(Plain, task, seeds=[0, 1])
    b = task.sample(3, torch.Generator().manual_seed(0))
    out = model(b.tokens.expand(2, 3, -1), b.header.expand(2, 3, -1, -1))
    assert out.shape == (2, 3, 8, 2)
    loss = member_losses(out, b.targets.expand(2, 3, -1), b.mask.expand(2, 3, -1))
    assert loss.shape == (2,) and bool(torch.isfinite(loss).all())


def test_an_hf_model_gets_the_same_head_and_read_in():
    """`hf:gpt2` on linreg: the real vectors at every position are read, C = 2 outputs come out."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    pytest.importorskip("transformers")
    task = get_task("linreg", d=2, n=4)
    model = get_model("hf:gpt2", task, seeds=[0, 1], n_layer=1, n_head=2, d_model=8, d_ffn=16)
    b = task.sample(3, torch.Generator().manual_seed(0))
    tokens, header = b.tokens.expand(2, 3, -1), b.header.expand(2, 3, -1, -1)
    out = model(tokens, header)
    assert out.shape == (2, 3, 8, 2) and not torch.allclose(out, model(tokens, header + 1.0))
