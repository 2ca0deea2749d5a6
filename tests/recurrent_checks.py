"""Checks shared by the tests of the recurrent zoo (issue 43; the recurrent-step protocol: a mixer's
`recurrent_step` looped over positions is the truth, its fast `forward` must equal it): in float64,
outputs and gradients, at awkward shapes; the state a reference carries; and an architecture built
the way the leaderboard builds it (the quick preset's job, capacity matched to the transformer).
Two entry points: a mixer's own forward on random inputs (`check_forward_equals_recurrent`, the
files of mamba2, deltanet, gated-deltanet, gla, retnet) and every mixer of a whole model on the
inputs it sees (`check_layers_equal_steps`, `check_awkward_shapes`: every registered architecture
in test_state.py and the files of rwkv7, hyena, based, sliding-window, hybrid)."""

from __future__ import annotations

import functools

import torch
from torch import Tensor, nn

from bayesbench.models import get_model
from bayesbench.models.state import capture_inputs, fast_form, mixers, run_steps
from bayesbench.tasks import get_task

AWKWARD = [(1, 1, 1, 1), (3, 2, 1, 2), (1, 2, 5, 1), (3, 1, 13, 2), (2, 2, 17, 4)]


def perturbed(model, seed: int = 0):
    """The model in float64 with every parameter nudged, so zero-initialised maps (an output
    projection, a LoRA's first factor) take part in the comparison."""
    model = model.double()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model


def check_layers_equal_steps(model, tokens, header=None) -> int:
    """Every mixer's forward against its looped recurrent_step, outputs and gradients (of the layer's
    parameters and its input); returns how many mixers were checked."""
    model.eval()
    inputs = capture_inputs(model, tokens, header)
    checked = 0
    for name, layer in mixers(model):
        if name not in inputs:
            continue
        x = inputs[name].detach().clone()
        fast_x, ref_x = x.clone().requires_grad_(), x.clone().requires_grad_()
        fast = fast_form(layer)(fast_x)
        ref, _ = run_steps(layer, ref_x)
        torch.testing.assert_close(fast, ref, rtol=1e-9, atol=1e-10, msg=f"{name}: forward != looped step")
        w = torch.randn(fast.shape, generator=torch.Generator().manual_seed(1), dtype=fast.dtype)
        params = [p for p in layer.parameters() if p.requires_grad]
        g_fast = torch.autograd.grad((fast * w).sum(), [fast_x, *params], allow_unused=True)
        g_ref = torch.autograd.grad((ref * w).sum(), [ref_x, *params], allow_unused=True)
        for a, b, wrt in zip(g_fast, g_ref, [x, *params]):  # unused (None): a zero gradient (e.g. a decay at L = 1)
            a = torch.zeros_like(wrt) if a is None else a
            b = torch.zeros_like(wrt) if b is None else b
            torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10, msg=f"{name}: gradients differ")
        checked += 1
    return checked


def check_awkward_shapes(arch: str, base: dict, *, heads: bool = True) -> None:
    """The model's mixers against their references at every AWKWARD shape (n_head from the shape
    where the architecture has heads), E members, float64, gradients included."""
    task = get_task("bijection", V=8)  # vocab 16, L up to 17
    for E, B, L, H in AWKWARD:
        cfg = {**base, "n_head": H} if heads else dict(base)
        model = perturbed(get_model(arch, task, seeds=list(range(E)), max_len=20, **cfg), seed=L)
        tokens = torch.randint(0, task.vocab_size, (E, B, L), generator=torch.Generator().manual_seed(E + L))
        assert check_layers_equal_steps(model, tokens) >= 1, (arch, E, B, L, H)


def leaderboard_model(arch: str, task: str = "bijection", seeds: tuple[int, ...] = (0, 1)):
    """Member models of `arch` built the way the leaderboard builds them: the quick preset's job
    (capacity-matched to the task's transformer), its trainer's model, its parameters frozen for reading.
    The wrapper must not re-initialise it (mad-lab #3, flash-linear-attention #739: a wrapper's init
    overwrote Mamba's): the trainer's parameters are checked equal to the architecture's own build
    (`get_model` with the job's settings and seeds), so an init test reading this model tests the
    architecture's initialisation as the leaderboard trains it."""
    from bayesbench.sweep.jobs import make_jobs

    job = make_jobs("quick", tasks=[task], archs=[arch], seeds=list(seeds), device="cpu")[0]
    with job.open_trainer(None) as trainer:
        model = trainer.model.requires_grad_(False)  # read, never trained here
    own = get_model(job.arch, job.task, seeds=list(seeds), max_len=job.max_len, **job.model).state_dict()
    got = model.state_dict()
    assert list(got) == list(own), f"{arch}: the trainer's model has other tensors than its own build"
    for name, value in got.items():
        assert torch.equal(value.cpu(), own[name]), f"{arch}: {name} changed between its build and the trainer"
    return model, job


TASK = get_task("bijection", V=6)


def mixers_of(arch: str, seeds: list[int], **cfg) -> list[nn.Module]:
    """The sequence mixers of a float64 model of `arch` (one per block: the outermost layers with a
    `recurrent_step`, `models.state.mixers`; a short convolution inside a mixer is its parent's),
    every parameter moved off its initial value by N(0, 0.3^2) noise so gates, decays and biases
    are exercised away from their initial values."""
    model = get_model(arch, TASK, seeds=seeds, **cfg).double()
    g = torch.Generator().manual_seed(sum(seeds) + 17)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    found = [m for _, m in mixers(model)]
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


def preset_model(arch: str, seeds: list[int]) -> tuple[nn.Module, int]:
    """`arch` built as the quick leaderboard builds it on the bijection: the preset's job (capacity
    matched to the task's transformer, `sweep.jobs.resolve_model`), then the trainer's `get_model`.
    Returns the model and the parameter count it was matched to (the transformer's)."""
    job = _quick_job(arch)
    assert "match_params" in job.model, job.model
    return get_model(job.arch, job.task, seeds=seeds, max_len=job.max_len, **job.model), job.model["match_params"]


def check_capacity_matched(arch: str) -> None:
    """The leaderboard's build of `arch` has the transformer's count within 1% (one member)."""
    model, target = preset_model(arch, [0])
    assert abs(model.num_params() - target) / target <= 0.01, (arch, model.num_params(), target)
    assert model.num_params() == sum(p.numel() for p in model.parameters())
