"""Shared checks of the recurrent references (issue 43): a mixer's fast forward against its
`recurrent_step` looped over positions, in float64, outputs and gradients; the leaderboard's build
path for an architecture; awkward shapes for the per-architecture test files."""

from __future__ import annotations

import torch

from bayesbench.models import get_model
from bayesbench.models.state import capture_inputs, fast_form, mixers, run_steps
from bayesbench.tasks import get_task

#: (E, B, L, n_head): one member and three, length 1 and odd lengths, one head
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


def leaderboard_model(arch: str, task: str = "bijection"):
    """Member models of `arch` built the way the leaderboard builds them: the quick preset's job
    (capacity-matched to the task's transformer), its trainer's model, its parameters frozen for reading."""
    from bayesbench.sweep.jobs import make_jobs

    job = make_jobs("quick", tasks=[task], archs=[arch], seeds=[0, 1], device="cpu")[0]
    with job.open_trainer(None) as trainer:
        return trainer.model.requires_grad_(False), job  # read, never trained here
