"""What one training step computes with, apart from the model and the optimiser: the loss per
member, the matmul precision and autocast, which parameters decay, whether a model draws dropout.

The loss is per member (a mean over that member's own supervised positions) so that summing it
over members gives each member exactly its solo gradient (`trainer.py`'s module docstring).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def member_losses(logits: Tensor, targets: Tensor, mask: Tensor) -> Tensor:
    """Cross-entropy per member, averaged over that member's supervised positions: [E].

    Hard targets [E,B,L] (IGNORE_INDEX off the mask) or soft targets [E,B,L,C]; real targets
    [E,B,L] (floating point: a continuous tunnel's y) give the negative log-density in nats of
    the continuous head the outputs' width names (`models.heads.head_of_outputs`: 2 a Gaussian,
    3M a mixture of M), the predictive's NLL (issue 41).
    """
    if targets.dim() == 3 and targets.is_floating_point():
        from ..models.heads import head_of_outputs, nll_nats

        y = torch.where(mask, targets.float(), torch.zeros((), device=targets.device))
        ce = nll_nats(logits.float(), y, head_of_outputs(logits.shape[-1]))
    elif targets.dim() == 3:
        ce = F.cross_entropy(logits.flatten(0, 2).float(), targets.flatten(), reduction="none")
        ce = ce.view(mask.shape)
    else:
        ce = -(targets * torch.log_softmax(logits.float(), -1)).sum(-1)
    ce = torch.where(mask, ce, torch.zeros((), device=ce.device, dtype=ce.dtype))
    return ce.sum((1, 2)) / mask.sum((1, 2)).clamp(min=1)


def uses_dropout(model: nn.Module) -> bool:
    """Whether a forward of `model` in training mode may draw dropout masks: an nn.Dropout with
    p > 0, or a module whose `dropout` / `embed_dropout` rate (the functional F.dropout callers
    here) is above 0."""
    for m in model.modules():
        if isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0:
            return True
        if any(isinstance(getattr(m, a, None), float) and getattr(m, a) > 0 for a in ("dropout", "embed_dropout")):
            return True
    return False


def decays(p: Tensor) -> bool:
    """Weight decay on matrices and embeddings (>= 2 dims per member), not on biases, norms or
    parameters flagged `_no_weight_decay` (e.g. Mamba's A_log, which decay would pull to A = -1)."""
    return p.dim() >= 3 and not getattr(p, "_no_weight_decay", False)


def set_matmul_precision(precision: str, device: torch.device) -> None:
    """TF32 matmuls on CUDA for 'auto'/'tf32'/'bf16', exact float32 for 'fp32' (process-wide)."""
    if device.type == "cuda":
        tf32 = precision != "fp32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32


def autocast(precision: str, device: torch.device):
    """bfloat16 autocast of the forward pass for precision='bf16'; a no-op context otherwise."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")
