"""The outside kernels option (issue 43): flash-linear-attention's and mamba-ssm's Triton kernels for
the zoo layers they cover, behind one adapter that maps our tensors and parameterisation to theirs.

A zoo mixer's `kernel` setting picks the code of its sequence recurrence in the fast `forward`:
"torch" (default: `gated_recurrence_chunked`, `delta_rule_chunked`, `chunked_delta_rule`, the pure
PyTorch chunked forms, on any device), "fla" (flash-linear-attention's `fla.ops`) or, for Mamba-2,
"mamba-ssm" (`mamba_chunk_scan_combined`, the SSD kernel of Dao and Gu 2024, arXiv 2405.21060,
Sec. 6). The recurrent reference (`recurrent_step`) is always ours: the outside kernels are checked
against it in float64 by `scripts/external_kernels_check.py` (a step of `scripts/gpu_check.sh`).
The CPU path never needs them: both packages run Triton/CUDA only, so an outside kernel on a CPU
tensor, or one whose package is not importable, is a one-line `SettingError` naming `kernel`.

APIs read from source, versions pinned (docs/architectures.md#outside-kernels):
flash-linear-attention 0.5.2 (fla-org/flash-linear-attention, commit bc3b101; the five functions'
signatures are unchanged in 0.6.0, whose `fla.ops` ship in the `fla-core` distribution) and
mamba-ssm 2.3.2.post1 (state-spaces/mamba, commit e9594ce). Their conventions, and our map onto them:

- layout: theirs [batch, T, heads, D] (`head_first` is gone from fla); ours [E, B, H, L, D] heads
  first. The E members fold into the batch for fla (every fla argument is per sequence, or per
  head and shared, as a RetNet decay is); mamba-ssm's A and dt_bias are per head shared by the
  batch, so the members fold into the heads there (E * H heads, one group of B and C per member).
- scale: fla multiplies q by `scale` (default Dk^-1/2); our layers scale (GLA's q, RetNet's k) or
  normalise (DeltaNet's q) themselves, so `scale=1.0` is passed: the parameterisation stays ours.
- decays: fla takes log decays (natural log; its kernels convert to base 2 inside): GLA's g is our
  log alpha [.., Dk]; `chunk_simple_gla`'s g our scalar log decay per head (Mamba-2's dt A), its
  g_gamma RetNet's log gamma [H]; Gated DeltaNet's g our log alpha [.., H]; RWKV-7's w log(decay).
- RWKV-7: fla's state h [Dk, Dv] evolves as h = diag(exp w) h + b (a^T h) + k v^T, o = h^T r; ours
  is S = h^T, S (diag(w) - kappa^T (a kappa)) + v^T k~, so a = -kappa and b = a * kappa (fla's own
  RWKV7 layer passes a = -kk, b = kk * a the same way), k = k~.
- Mamba-2 through mamba-ssm: h = exp(dt A) h + dt B x^T, y = C^T h, with our dt already through
  softplus (dt_softplus=False, no dt_bias) and D, z left to our block (so its norm and gate stay ours).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Callable

import torch
from torch import Tensor

from ..checks import SettingError, one_of

KERNELS = ("torch", "fla", "mamba-ssm")
#: kernel -> (module to import, the distribution that provides it)
PACKAGES = {"fla": ("fla", "flash-linear-attention"), "mamba-ssm": ("mamba_ssm", "mamba-ssm")}
#: the version whose API the map above was read from (docs/architectures.md#outside-kernels)
READ_VERSIONS = {"fla": "0.5.2", "mamba-ssm": "2.3.2.post1"}
#: which kernels each zoo architecture can run (the layers the packages cover)
COVERED = {"gla": ("torch", "fla"), "retnet": ("torch", "fla"), "deltanet": ("torch", "fla"),
           "gated-deltanet": ("torch", "fla"), "rwkv7": ("torch", "fla"), "mamba2": ("torch", "fla", "mamba-ssm")}
#: kernel -> {our operation: (module, function)}
OPS = {
    "fla": {"gla": ("fla.ops.gla", "chunk_gla"), "simple_gla": ("fla.ops.simple_gla", "chunk_simple_gla"),
            "delta_rule": ("fla.ops.delta_rule", "chunk_delta_rule"),
            "gated_delta_rule": ("fla.ops.gated_delta_rule", "chunk_gated_delta_rule"),
            "rwkv7": ("fla.ops.rwkv7", "chunk_rwkv7")},
    "mamba-ssm": {"ssd": ("mamba_ssm.ops.triton.ssd_combined", "mamba_chunk_scan_combined")},
}


def available(kernel: str) -> bool:
    """Whether the package behind `kernel` is importable here ("torch" always is)."""
    if kernel == "torch":
        return True
    return importlib.util.find_spec(PACKAGES[kernel][0]) is not None


def check_kernel(kernel, allowed: tuple[str, ...]) -> str:
    """A config's `kernel` setting: one of `allowed`, and an outside one only where its package imports."""
    one_of("kernel", kernel, allowed)
    if kernel != "torch" and not available(kernel):
        module, dist = PACKAGES[kernel]
        raise SettingError(f"kernel={kernel!r} needs the {dist} package (import {module}), which is not installed "
                           "here; it runs Triton kernels on a CUDA device only: use kernel='torch' (the default, "
                           "any device)", ("kernel",))
    return kernel


def check_device(kernel: str, x: Tensor) -> None:
    """An outside kernel runs on a CUDA tensor only (Triton/CUDA); refuse any other device in one line."""
    if kernel != "torch" and x.device.type != "cuda":
        raise SettingError(f"kernel={kernel!r} runs on a CUDA device only (Triton kernels); this model runs on "
                           f"{x.device.type}: use kernel='torch' there", ("kernel",))


def resolve(kernel: str, op: str) -> Callable:
    """The outside function for our operation `op` under `kernel` (imported on first use)."""
    module, name = OPS[kernel][op]
    return getattr(importlib.import_module(module), name)


def _theirs(x: Tensor) -> Tensor:
    """[E, B, H, L, ...] -> [E * B, L, H, ...], contiguous (fla's layout, members folded into the batch)."""
    return x.flatten(0, 1).transpose(1, 2).contiguous()


def _ours(y: Tensor, E: int) -> Tensor:
    """[E * B, L, H, D] -> [E, B, H, L, D]."""
    return y.transpose(1, 2).unflatten(0, (E, -1))


def gated_recurrence(q: Tensor, k: Tensor, v: Tensor, log_decay: Tensor, *, kernel: str = "fla",
                     op: Callable | None = None) -> Tensor:
    """`gated_recurrence_chunked` (GLA, Mamba-2's SSD through fla) by the outside kernel:
    q, k, log_decay [E, B, H, L, Dk or 1], v [E, B, H, L, Dv] -> o [E, B, H, L, Dv]. A vector
    decay goes to fla's `chunk_gla`, a scalar one per head to `chunk_simple_gla`."""
    E = q.shape[0]
    scalar = log_decay.shape[-1] == 1
    fn = op or resolve(kernel, "simple_gla" if scalar else "gla")
    g = _theirs(log_decay.squeeze(-1) if scalar else log_decay)
    o, _ = fn(_theirs(q), _theirs(k), _theirs(v), g=g, scale=1.0)
    return _ours(o, E)


def retention(q: Tensor, k: Tensor, v: Tensor, log_gamma: Tensor, *, kernel: str = "fla",
              op: Callable | None = None) -> Tensor:
    """RetNet's retention by fla's `chunk_simple_gla` with its fixed decay per head (g_gamma):
    q, k [E, B, H, L, Dk], v [E, B, H, L, Dv], log_gamma [H] -> o [E, B, H, L, Dv]."""
    fn = op or resolve(kernel, "simple_gla")
    o, _ = fn(_theirs(q), _theirs(k), _theirs(v), g_gamma=log_gamma.float().contiguous(), scale=1.0)
    return _ours(o, q.shape[0])


def delta_rule(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, log_decay: Tensor | None, *, kernel: str = "fla",
               op: Callable | None = None) -> Tensor:
    """`delta_rule_chunked` (DeltaNet; Gated DeltaNet with a log decay) by fla's `chunk_delta_rule` /
    `chunk_gated_delta_rule`: q, k [E, B, H, L, Dk], v [E, B, H, L, Dv], beta and log_decay
    [E, B, H, L] -> o [E, B, H, L, Dv]. q and k arrive L2-normalised (not normalised again inside)."""
    E = q.shape[0]

    def per_head(t: Tensor) -> Tensor:  # [E, B, H, L] -> [E * B, L, H]
        return t.flatten(0, 1).transpose(1, 2).contiguous()

    if log_decay is None:
        fn = op or resolve(kernel, "delta_rule")
        o, _ = fn(_theirs(q), _theirs(k), _theirs(v), per_head(beta), scale=1.0)
    else:
        fn = op or resolve(kernel, "gated_delta_rule")
        o, _ = fn(_theirs(q), _theirs(k), _theirs(v), per_head(log_decay), per_head(beta), scale=1.0)
    return _ours(o, E)


def rwkv7(r: Tensor, decay: Tensor, kappa: Tensor, a_kappa: Tensor, k: Tensor, v: Tensor, *, kernel: str = "fla",
          op: Callable | None = None) -> Tensor:
    """RWKV-7's state update (`rwkv7.chunked_delta_rule`) by fla's `chunk_rwkv7`: every input
    [E, B, H, L, Dh] -> y [E, B, H, L, Dh]; a = -kappa, b = a * kappa, w = log(decay) (module docstring)."""
    fn = op or resolve(kernel, "rwkv7")
    o, _ = fn(_theirs(r), _theirs(torch.log(decay)), _theirs(k), _theirs(v), _theirs(-kappa), _theirs(a_kappa),
              scale=1.0)
    return _ours(o, r.shape[0])


def ssd(x: Tensor, dt: Tensor, A: Tensor, Bm: Tensor, Cm: Tensor, chunk: int, *, kernel: str = "mamba-ssm",
        op: Callable | None = None) -> Tensor:
    """Mamba-2's SSD scan without D and the gate: x [E, B, L, H, P], dt [E, B, L, H, 1] (after
    softplus), A [E, H] (negative), B and C [E, B, L, 1, N] (one group per member) -> y [E, B, L, H, P].
    mamba-ssm: `mamba_chunk_scan_combined` with the members folded into its heads (its A is shared
    by the batch); fla: `chunk_simple_gla` with q = C, k = B, v = dt x and the log decay dt A."""
    E, Bsz, L, H, P = x.shape
    if kernel == "fla":
        g = dt * A.view(E, 1, 1, H, 1)

        def heads(t: Tensor) -> Tensor:  # B or C, one group [E, B, L, 1, N] -> every head's [E, B, H, L, N]
            return t.expand(E, Bsz, L, H, t.shape[-1]).transpose(2, 3)

        y = gated_recurrence(heads(Cm), heads(Bm), (x * dt).transpose(2, 3), g.transpose(2, 3), kernel="fla", op=op)
        return y.transpose(2, 3)
    fn = op or resolve(kernel, "ssd")

    def fold(t: Tensor) -> Tensor:  # [E, B, L, H', D] -> [B, L, E * H', D]
        return t.permute(1, 2, 0, 3, 4).flatten(2, 3).contiguous()

    y = fn(fold(x), fold(dt).squeeze(-1), A.reshape(E * H).contiguous(), fold(Bm), fold(Cm), chunk)
    return y.unflatten(2, (E, H)).permute(2, 0, 1, 3, 4)


__all__ = ["COVERED", "KERNELS", "OPS", "PACKAGES", "READ_VERSIONS", "available", "check_device", "check_kernel",
           "delta_rule", "gated_recurrence", "resolve", "retention", "rwkv7", "ssd"]
