"""The value side of Paper II's law (the M-step): Delta v against -dL/dv = -sum_i alpha_ij u_i with
its shuffle null; on a real transformer the upstream gradient the probe keeps gives the autograd
dL/dv; and the cross-lagged analysis of routing and value update sizes against its time-shift null."""

from __future__ import annotations

import math
import random

import pytest
import torch

from bayesbench.dynamics.profile.crosslag import crosslag_summary, lagged, partial_corr
from bayesbench.dynamics.profile.law import VALUE_NAMES, value_push, value_statistics
from bayesbench.dynamics.store import Measurement
from bayesbench.models.attention import causal_mask
from bayesbench.stats import t_interval


def _inputs(seed: int, B: int = 4, H: int = 2, T: int = 6, D: int = 3):
    g = torch.Generator().manual_seed(seed)
    keep = causal_mask(T, "cpu")
    alpha = torch.softmax(torch.randn(B, H, T, T, generator=g, dtype=torch.float64).masked_fill(~keep, -math.inf), -1)
    u = torch.randn(B, H, T, D, generator=g, dtype=torch.float64)
    return alpha, u, g


def _stat(got: torch.Tensor, name: str) -> torch.Tensor:
    return got[VALUE_NAMES.index(name)]


def test_free_values_under_plain_sgd_are_exactly_the_push():
    alpha, u, _ = _inputs(0)
    lr = 0.05
    dv = lr * value_push(alpha, u)  # Delta v_j = -lr dL/dv_j
    got = value_statistics(dv, alpha, u, lr)
    torch.testing.assert_close(_stat(got, "value_cosine"), torch.ones(2, dtype=torch.float64))
    torch.testing.assert_close(_stat(got, "value_kappa"), torch.ones(2, dtype=torch.float64))
    assert (_stat(got, "value_cosine_null") < 0.9).all()  # another sequence's push is not this one's
    # dL/dv by hand for one key: sum over the queries that see it
    manual = -(alpha[0, 0, :, 2].unsqueeze(-1) * u[0, 0]).sum(0)
    torch.testing.assert_close(value_push(alpha, u)[0, 0, 2], manual)


def test_two_sequences_null_is_the_swap_and_independent_changes_sit_at_the_null():
    alpha, u, g = _inputs(1, B=2)
    dv = torch.randn(2, 2, 6, 3, generator=g, dtype=torch.float64)
    got = value_statistics(dv, alpha, u, 0.1)
    swapped = value_statistics(dv, alpha.flip(0), u.flip(0), 0.1)
    torch.testing.assert_close(_stat(got, "value_cosine_null"), _stat(swapped, "value_cosine"))
    excess = []
    for seed in range(8):  # Delta v independent of the push: the excess's interval over seeds holds 0
        alpha, u, g = _inputs(100 + seed, B=8)
        dv = torch.randn(8, 2, 6, 3, generator=g, dtype=torch.float64)
        got = value_statistics(dv, alpha, u, 0.1)
        excess.append(float((_stat(got, "value_cosine") - _stat(got, "value_cosine_null")).mean()))
    ci = t_interval(excess)
    assert ci["ci_low"] < 0 < ci["ci_high"]
    with pytest.raises(ValueError, match="must be"):
        value_statistics(dv[..., :2], alpha, u, 0.1)


def test_the_probe_upstream_gives_the_autograd_gradient_of_the_values():
    """dL/dv from the probe's u and alpha (what the profiler uses) against autograd on a float64
    transformer."""
    from bayesbench.dynamics.profile.probes import ProbeSet
    from bayesbench.dynamics.profile.routing import transformer_values
    from bayesbench.models import get_model
    from bayesbench.tasks import get_task

    task = get_task("bijection", V=4)
    model = get_model("transformer", task, seeds=[0, 1], n_layer=2, n_head=2, d_model=16, d_ffn=32).double()
    batch = task.sample(3, torch.Generator().manual_seed(0))
    tokens = batch.tokens.unsqueeze(0).expand(2, *batch.tokens.shape)
    probes = ProbeSet(model, "reference")
    probes.attach("full")
    captured = {}

    def keep_values(module, inputs, output):
        captured.setdefault("qkv", []).append(output)
        output.retain_grad()

    hooks = [model.blocks[i].attn.qkv.register_forward_hook(keep_values) for i in probes.layers]
    logits = model(tokens)
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 2), batch.targets.unsqueeze(0).expand(2, -1, -1)
                                             .flatten().clamp(min=0), reduction="none")
    (loss * batch.mask.unsqueeze(0).expand(2, -1, -1).flatten()).sum().backward()
    for h in hooks:
        h.remove()
    upstream, alpha = probes.upstream(), torch.stack([p.alpha.view(2, 3, *p.alpha.shape[1:]) for p in probes.probes])
    probes.detach()
    push = value_push(alpha.double(), upstream.double())  # [L, E, B, H, T, Dh]
    for li, qkv in enumerate(captured["qkv"]):
        E, B, T, three_d = qkv.shape
        d = three_d // 3
        grad_v = qkv.grad[..., 2 * d:].view(E, B, T, 2, d // 2).permute(0, 1, 3, 2, 4)  # [E, B, H, T, Dh]
        torch.testing.assert_close(push[li], -grad_v, rtol=1e-6, atol=1e-9)
    assert transformer_values(model, tokens).shape == (2, 2, 3, 2, tokens.shape[-1], 8)


def test_partial_and_lagged_correlations_by_construction():
    assert partial_corr([1, 2, 3, 4], [2, 4, 6, 8.5]) == pytest.approx(
        float(torch.corrcoef(torch.tensor([[1, 2, 3, 4], [2, 4, 6, 8.5]]))[0, 1]))
    rng = random.Random(0)
    n = 300
    cause = [rng.gauss(0, 1) - 0.01 * t for t in range(n)]  # a trend beside the fluctuations
    effect = [0.0]
    for t in range(1, n):  # effect at t follows cause at t - 1 (one way)
        effect.append(0.5 * effect[-1] + (cause[t - 1] + 0.01 * (t - 1)) + 0.5 * rng.gauss(0, 1) - 0.02 * t)
    assert lagged(cause, effect) > 0.8
    assert abs(lagged(effect, cause)) < 3 / math.sqrt(n)  # no feed back: a null-sized correlation


def _series(lead: bool, seed: int, n: int = 60) -> tuple[list[float], list[float]]:
    """Log update sizes on a falling trend; with `lead` the routing size at t + 1 follows the value
    size at t."""
    rng = random.Random(seed)
    v = [rng.gauss(0, 1) for _ in range(n)]
    r = [rng.gauss(0, 1) for _ in range(n)]
    if lead:
        r = [r[0]] + [0.8 * v[t - 1] + 0.6 * r[t] for t in range(1, n)]
    return [-2 - 0.02 * t + x * 0.1 for t, x in enumerate(v)], [-3 - 0.02 * t + x * 0.1 for t, x in enumerate(r)]


@pytest.mark.parametrize("lead", [True, False])
def test_crosslag_against_its_time_shift_null(lead):
    rows = []
    for seed in range(6):
        v, r = _series(lead, seed)
        for t, (a, b) in enumerate(zip(v, r)):
            for head in (0, 1):
                rows.append(Measurement(seed, 10 * t, 0, head, "value_dv_norm", math.exp(a)))
                rows.append(Measurement(seed, 10 * t, 0, head, "law_ds_norm", math.exp(b)))
    got = crosslag_summary(rows)[0]
    assert got["seeds"] == 6
    feed = got["value_to_routing"]["excess"]
    if lead:
        assert feed["ci_low"] > 0 and feed["p"] < 0.01
        back = got["routing_to_value"]["excess"]
        assert back["ci_low"] < 0 < back["ci_high"]  # one way: no feed back
    else:
        assert feed["ci_low"] < 0 < feed["ci_high"]
    assert crosslag_summary([]) == {}


def test_crosslag_divides_out_the_learning_rate_schedule():
    """Independent update sizes that both follow a cosine schedule to 0: with the sizes divided by
    the learning rate no feed is found (without it, the schedule's sharp end, which no smooth trend
    follows, made one up in the sticky profiles)."""
    n, every = 80, 10
    lr = lambda step: 0.5 * (1 + math.cos(math.pi * step / (n * every))) + 1e-3  # noqa: E731
    rows = []
    for seed in range(8):
        rng = random.Random(seed)
        for t in range(n):
            for head in (0, 1):
                for name in ("value_dv_norm", "law_ds_norm"):
                    size = lr(every * t) * math.exp(0.1 * rng.gauss(0, 1))
                    rows.append(Measurement(seed, every * t, 0, head, name, size))
    got = crosslag_summary(rows, lr)[0]
    for direction in ("value_to_routing", "routing_to_value"):
        d = got[direction]["excess"]
        assert d["ci_low"] < 0 < d["ci_high"], (direction, d)
