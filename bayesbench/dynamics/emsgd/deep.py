"""The deep variant of the EM-vs-SGD experiment: a 4-layer, 4-head pre-norm transformer with AdamW.

The authors' script (its `--deep` mode) trains, on the paper variant's sticky-chain data, an input
projection d_x -> d_model, n_layers pre-norm blocks (x += W_O attn(LN x); x += FFN(LN x), FFN
d_model -> 4 d_model -> d_model with GELU), a final LayerNorm and a linear head, with AdamW
(lr 3e-4, weight decay 0.01 on every parameter), cosine annealing to 0 over the run and gradient
clipping at norm 1, and scores a held-out sequence drawn from seed + 10000.

Here every seed is a member of one ensemble model (`bayesbench.models.layers`), trained under two
schedules: `adamw` (the authors') and `adamw-em` (the same, with the value projections W_V at
`value_lr_factor` x the learning rate: the two-timescale idea of the EM-like schedule carried
to AdamW). Departures from the authors' deep mode, both for member-equals-solo exactness: no
dropout (theirs 0.1), and weights start N(0, 0.02^2) with zero biases (theirs: PyTorch's default
uniform init).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...checks import positive_int
from ...models.layers import EnsembleLayerNorm, EnsembleLinear
from ...training.optim import clip_per_member, member_grad_norms
from .chain import ChainData
from .toy import member_losses

DEEP_SCHEDULES = ("adamw", "adamw-em")


@dataclass(frozen=True)
class DeepConfig:
    n_layers: int = 4
    n_heads: int = 4
    d_model: int = 64
    d_x: int = 20
    n_classes: int = 8
    lr: float = 3e-4
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    value_lr_factor: float = 10.0


class _Block(nn.Module):
    def __init__(self, E: int, cfg: DeepConfig) -> None:
        super().__init__()
        d = cfg.d_model
        self.n_heads = cfg.n_heads
        self.ln1, self.ln2 = EnsembleLayerNorm(E, d), EnsembleLayerNorm(E, d)
        self.W_Q, self.W_K, self.W_V, self.W_O = (EnsembleLinear(E, d, d) for _ in range(4))
        self.fc, self.proj = EnsembleLinear(E, d, 4 * d), EnsembleLinear(E, 4 * d, d)

    def forward(self, x: Tensor) -> Tensor:
        E, B, T, d = x.shape
        H = self.n_heads
        h = self.ln1(x)
        q, k, v = (w(h).view(E * B, T, H, d // H).transpose(1, 2) for w in (self.W_Q, self.W_K, self.W_V))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.W_O(a.transpose(1, 2).reshape(E, B, T, d))
        return x + self.proj(F.gelu(self.fc(self.ln2(x))))


class DeepChainModel(nn.Module):
    """E independent deep models over continuous inputs [E, B, T, d_x] -> logits [E, B, T, C]."""

    def __init__(self, E: int, cfg: DeepConfig) -> None:
        super().__init__()
        self.ensemble, self.cfg = E, cfg
        self.input_proj = EnsembleLinear(E, cfg.d_x, cfg.d_model)
        self.blocks = nn.ModuleList(_Block(E, cfg) for _ in range(cfg.n_layers))
        self.ln_f = EnsembleLayerNorm(E, cfg.d_model)
        self.head = EnsembleLinear(E, cfg.d_model, cfg.n_classes)

    def init_members(self, seeds: list[int]) -> None:
        """Member e drawn from a generator seeded seeds[e] (module order), as a solo model would be."""
        for e, s in enumerate(seeds):
            gen = torch.Generator().manual_seed(int(s))
            for m in self.modules():
                reset = getattr(m, "reset_member", None)
                if reset is not None:
                    reset(e, gen)

    def value_parameters(self) -> list[Tensor]:
        return [p for b in self.blocks if isinstance(b, _Block) for p in b.W_V.parameters()]

    def forward(self, x: Tensor) -> Tensor:
        x = self.input_proj(x)
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))


@dataclass
class DeepRun:
    """losses [S, E, steps + 1] (training CE after i updates); test metrics [S, E] on held-out data."""

    schedules: list[str]
    seeds: list[int]
    steps: int
    losses: Tensor
    test_loss: Tensor
    test_entropy: Tensor
    test_accuracy: Tensor


def _cosine(step: int, steps: int) -> float:
    return 0.5 * (1.0 + math.cos(math.pi * step / steps))


def train_deep(train: list[ChainData], test: list[ChainData], seeds: list[int], *, steps: int = 2000,
               cfg: DeepConfig = DeepConfig(), progress: bool = False) -> DeepRun:
    """Train both schedules (one ensemble model each, every seed a member) and score the held-out data."""
    positive_int("steps", steps)
    from tqdm.auto import tqdm

    E = len(seeds)
    x, y = torch.stack([d.inputs for d in train]), torch.stack([d.targets for d in train])
    xt, yt = torch.stack([d.inputs for d in test]), torch.stack([d.targets for d in test])
    losses = torch.empty(len(DEEP_SCHEDULES), E, steps + 1)
    tl, te, ta = (torch.empty(len(DEEP_SCHEDULES), E) for _ in range(3))
    bar = tqdm(total=steps * len(DEEP_SCHEDULES), desc="emsgd deep", disable=not progress, leave=False)
    for j, name in enumerate(DEEP_SCHEDULES):
        model = DeepChainModel(E, cfg)
        model.init_members(seeds)
        values = {id(p) for p in model.value_parameters()}
        factor = cfg.value_lr_factor if name == "adamw-em" else 1.0
        base_lrs = [cfg.lr, cfg.lr * factor]  # each group's rate before the cosine schedule
        groups = [{"params": [p for p in model.parameters() if id(p) not in values], "lr": base_lrs[0]},
                  {"params": model.value_parameters(), "lr": base_lrs[1]}]
        opt = torch.optim.AdamW(groups, lr=cfg.lr, weight_decay=cfg.weight_decay)
        params: list[Tensor] = list(model.parameters())
        for i in range(steps + 1):
            loss = member_losses(model(x), y)
            losses[j, :, i] = loss.detach()
            if i == steps:
                break
            for g, base in zip(opt.param_groups, base_lrs):
                g["lr"] = base * _cosine(i, steps)
            opt.zero_grad(set_to_none=True)
            loss.sum().backward()
            clip_per_member(params, member_grad_norms(params, E), cfg.grad_clip)
            opt.step()
            bar.update(1)
        with torch.no_grad():
            logits = model(xt)
            tl[j] = member_losses(logits, yt)
            p = torch.softmax(logits, -1)
            mask = (yt != -100).float()
            te[j] = (-(p * torch.log(p + 1e-10)).sum(-1) * mask).sum((1, 2)) / mask.sum((1, 2))
            ta[j] = ((logits.argmax(-1) == yt).float() * mask).sum((1, 2)) / mask.sum((1, 2))
    bar.close()
    return DeepRun(list(DEEP_SCHEDULES), [int(s) for s in seeds], steps, losses, tl, te, ta)
