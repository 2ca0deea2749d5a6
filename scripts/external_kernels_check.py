"""The outside kernels (models/external_kernels.py) against our float64 recurrent references, on a GPU.

    python scripts/external_kernels_check.py OUT_JSON        (a step of scripts/gpu_check.sh)

For every layer flash-linear-attention or mamba-ssm covers (GLA, RetNet, DeltaNet, Gated DeltaNet,
RWKV-7 and Mamba-2 through fla; Mamba-2 through mamba-ssm) and every awkward shape below (length
1, lengths that are no multiple of any chunk, one head, E = 1 and E > 1), the layer's forward with
`kernel=<package>` in float32 on the GPU is compared with the same layer's `recurrent_step` looped
over the positions in float64 (the truth, ours): the output, and the gradients of <y, R> (R random)
with respect to the input and every parameter. Each comparison's max absolute differences and the
reference's scale go to OUT_JSON, which `gpu_summary.py` puts in summary.json.

Without a CUDA device or without a package, its checks are recorded as skipped with the reason
and the script exits 0; it exits 1 when a difference exceeds TOLERANCE times the reference's scale
(float32 kernels, TF32 matmuls possible inside Triton) or a kernel raises.
"""

from __future__ import annotations

import copy
import importlib
import importlib.metadata
import json
import sys
import time
import traceback

import torch

TOLERANCE = 2e-2  # relative to max(1, max |reference|): float32 kernels against a float64 truth
# (E, B, L, H): one member and three, one head and two, lengths 1, 13 and 77 (no multiple of 16 or 64)
SHAPES = [(1, 1, 1, 1), (3, 2, 13, 2), (2, 1, 77, 1)]
D_MODEL = 64  # head widths 16..64: the sizes the kernels are written for


def config(arch: str, H: int) -> dict:
    """A one-block model of `arch` with H heads at D_MODEL (defaults otherwise)."""
    base = {"n_layer": 1, "n_head": H, "d_model": D_MODEL}
    return base if arch == "mamba2" else {**base, "d_ffn": 4 * D_MODEL}


def compare(arch: str, kernel: str, E: int, B: int, L: int, H: int) -> dict:
    """Max |kernel - reference| of the output and the gradients for one shape."""
    from bayesbench.models import get_model
    from bayesbench.models.state import mixers, run_steps
    from bayesbench.tasks import get_task

    task = get_task("bijection", V=8)
    model = get_model(arch, task, seeds=list(range(E)), max_len=max(L, 20), kernel=kernel, **config(arch, H))
    g = torch.Generator().manual_seed(E * 100 + L)
    with torch.no_grad():  # off the initial values, so zero-initialised maps take part
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    layer = mixers(model)[0][1].cuda()
    reference = copy.deepcopy(layer).double()
    x = torch.randn(E, B, L, D_MODEL, generator=g)
    R = torch.randn(E, B, L, D_MODEL, generator=g, dtype=torch.float64)
    x32 = x.cuda().requires_grad_()
    x64 = x.double().cuda().requires_grad_()
    fast = layer(x32)
    slow, _ = run_steps(reference, x64)
    fast_d, slow_d = fast.detach().double(), slow.detach()
    R = R.cuda()
    g_fast = torch.autograd.grad((fast.double() * R).sum(), [x32, *layer.parameters()], allow_unused=True,
                                 materialize_grads=True)
    g_slow = torch.autograd.grad((slow * R).sum(), [x64, *reference.parameters()], allow_unused=True,
                                 materialize_grads=True)
    grad_diff = max(float((a.double() - b).abs().max()) for a, b in zip(g_fast, g_slow))
    grad_scale = max(float(b.abs().max()) for b in g_slow)
    out = {"arch": arch, "kernel": kernel, "E": E, "B": B, "L": L, "H": H,
           "max_abs_diff_output": float((fast_d - slow_d).abs().max()), "max_abs_output": float(slow_d.abs().max()),
           "max_abs_diff_grad": grad_diff, "max_abs_grad": grad_scale}
    out["within_tolerance"] = (out["max_abs_diff_output"] <= TOLERANCE * max(1.0, out["max_abs_output"])
                               and grad_diff <= TOLERANCE * max(1.0, grad_scale))
    return out


def installed_version(module: str, dist: str) -> str:
    """The version of the package behind `module` (fla >= 0.6 ships its ops as fla-core)."""
    version = getattr(importlib.import_module(module), "__version__", None)
    if version:
        return str(version)
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def run() -> dict:
    """Every covered (architecture, kernel) at every shape, or the reason each kernel was skipped."""
    from bayesbench.models import external_kernels as ek

    result: dict = {"tolerance": TOLERANCE, "read_versions": ek.READ_VERSIONS, "installed": {}, "checks": [],
                    "skipped": [], "errors": []}
    for kernel, (module, dist) in ek.PACKAGES.items():
        reasons = []
        if not ek.available(kernel):
            reasons.append(f"{dist} is not importable (import {module}); docs/architectures.md#outside-kernels "
                           "says how to carry its wheel to a machine without a registry")
        if not torch.cuda.is_available():
            reasons.append("no CUDA device (the kernels are Triton/CUDA only)")
        if reasons:
            result["skipped"].append({"kernel": kernel, "reason": "; ".join(reasons)})
            continue
        result["installed"][kernel] = installed_version(module, dist)
        for arch in sorted(a for a, kernels in ek.COVERED.items() if kernel in kernels):
            for E, B, L, H in SHAPES:
                _check(result, arch, kernel, E, B, L, H)
    if result["installed"]:  # the baseline: our own chunked form in float32 on the same GPU, same shapes
        for arch in sorted(ek.COVERED):
            for E, B, L, H in SHAPES:
                _check(result, arch, "torch", E, B, L, H)
    outside = [c for c in result["checks"] if c["kernel"] != "torch"]
    result["status"] = "skipped" if not outside and not result["errors"] else "checked"
    result["passed"] = not result["errors"] and all(c["within_tolerance"] for c in result["checks"])
    return result


def _check(result: dict, arch: str, kernel: str, E: int, B: int, L: int, H: int) -> None:
    """One comparison into result["checks"], or its exception into result["errors"]."""
    start = time.time()
    try:
        check = compare(arch, kernel, E, B, L, H)
    except Exception as err:  # a kernel that raises is a finding, not the end of the run
        result["errors"].append({"arch": arch, "kernel": kernel, "shape": [E, B, L, H],
                                 "error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc()[-1500:]})
        return
    check["seconds"] = round(time.time() - start, 3)
    result["checks"].append(check)
    print(json.dumps(check))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python scripts/external_kernels_check.py OUT_JSON", file=sys.stderr)
        return 2
    result = run()
    with open(argv[0], "w") as f:
        json.dump(result, f, indent=1)
    for s in result["skipped"]:
        print(f"skipped {s['kernel']}: {s['reason']}")
    for e in result["errors"]:
        print(f"error {e['arch']} kernel={e['kernel']} shape {e['shape']}: {e['error']}")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
