"""Checks shared by the tests of the recurrent zoo (tests/models/test_{mamba2,deltanet,gated_deltanet,
gla,retnet}.py, issue 43): a mixer's chunked `forward` against its `recurrent_step` looped over
positions (the recurrent-step protocol: the loop is the truth), outputs and gradients, in float64;
and each architecture built the way the leaderboard builds it (the quick preset's job, capacity
matched to the transformer)."""

from __future__ import annotations

import functools

import torch
from torch import Tensor, nn

from bayesbench.models import get_model
from bayesbench.tasks import get_task

TASK = get_task("bijection", V=6)


def mixers(arch: str, seeds: list[int], **cfg) -> list[nn.Module]:
    """The sequence mixers of a float64 model of `arch` (one per block), every parameter moved off
    its initial value by N(0, 0.3^2) noise so gates, decays and biases are exercised away from
    their initial values."""
    model = get_model(arch, TASK, seeds=seeds, **cfg).double()
    g = torch.Generator().manual_seed(sum(seeds) + 17)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    found = [m for m in model.modules() if hasattr(m, "recurrent_step")]
    assert found, f"{arch} has no layer with a recurrent_step"
    return found


def looped(mixer: nn.Module, x: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """`recurrent_step` over the positions of x [E, B, L, d]: (y [E, B, L, d], the final state)."""
    state = None
    out = []
    for t in range(x.shape[2]):
        y, state = mixer.recurrent_step(x[:, :, t], state)
        out.append(y)
    assert state is not None
    return torch.stack(out, dim=2), state


def check_forward_equals_recurrent(mixer: nn.Module, d: int, E: int, B: int, L: int,
                                   seed: int = 0) -> dict[str, Tensor]:
    """forward(x) == recurrent_step looped on x [E, B, L, d], and the gradients of <y, R> (R random)
    with respect to x and every parameter agree; every state tensor leads with [E, B]. Returns the
    final state."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(E, B, L, d, generator=g, dtype=torch.float64, requires_grad=True)
    params = [p for p in mixer.parameters()]
    fast = mixer(x)
    slow, state = looped(mixer, x)
    torch.testing.assert_close(fast, slow, rtol=1e-9, atol=1e-10)
    R = torch.randn(fast.shape, generator=g, dtype=torch.float64)
    # a parameter the output does not depend on (the decay's, at length 1) gets zeros
    g_fast = torch.autograd.grad((fast * R).sum(), [x, *params], allow_unused=True, materialize_grads=True)
    g_slow = torch.autograd.grad((slow * R).sum(), [x, *params], allow_unused=True, materialize_grads=True)
    names = ["x"] + [n for n, _ in mixer.named_parameters()]
    for name, a, b in zip(names, g_fast, g_slow):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-9, msg=lambda m: f"grad of {name}: {m}")
    for key, value in state.items():
        assert tuple(value.shape[:2]) == (E, B), (key, tuple(value.shape))
    return state


@functools.lru_cache(maxsize=None)
def _quick_job(arch: str):
    """The quick preset's job for `arch` on the bijection (resolved once per test session)."""
    from bayesbench.sweep.jobs import make_jobs

    (job,) = make_jobs("quick", tasks=["bijection"], archs=[arch])
    return job


def leaderboard_model(arch: str, seeds: list[int]) -> tuple[nn.Module, int]:
    """`arch` built as the quick leaderboard builds it on the bijection: the preset's job (capacity
    matched to the task's transformer, `sweep.jobs.resolve_model`), then the trainer's `get_model`.
    Returns the model and the parameter count it was matched to (the transformer's)."""
    job = _quick_job(arch)
    assert "match_params" in job.model, job.model
    return get_model(job.arch, job.task, seeds=seeds, max_len=job.max_len, **job.model), job.model["match_params"]


def check_capacity_matched(arch: str) -> None:
    """The leaderboard's build of `arch` has the transformer's count within 1% (one member)."""
    model, target = leaderboard_model(arch, [0])
    assert abs(model.num_params() - target) / target <= 0.01, (arch, model.num_params(), target)
    assert model.num_params() == sum(p.numel() for p in model.parameters())
