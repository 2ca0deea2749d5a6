"""Capacity-matched MLP baselines (docs/science.md#architectures-and-training; Paper I, Sec. 3.3-3.4):
no attention, residual layers with LayerNorm.

Both variants embed tokens like the transformer (token + absolute position, header vectors
projected at positions 0..H-1), then apply `depth` residual layers h += W(GELU(LN(h))) of
`width` units, a final LayerNorm and a linear head. They differ in what position t sees:

- `mlp` (position-wise): only its own token and position embedding. It cannot use the context
  at all, so its best predictor is the marginal over contexts at that position: the floor
  that says "this architecture cannot do in-context inference".
- `mlp-prefix`: the whole causal prefix, as one linear map of the zero-padded, flattened
  sequence of embeddings. Its input at t is [e_t ; e_0, e_1, ..., e_t, 0, ..., 0] (the current
  token in its own slot, then every earlier token in its absolute slot, later slots zero), with
  e_j of width `prefix_dim`, projected to `width`. Computed as a cumulative sum over slots,
  h_t = b + e_t W_cur + sum_{j<=t} e_j W_j, which is exactly that linear map and causal by
  construction. Everything after the first layer is position-wise.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..checks import SettingError, boolean, positive_int
from .base import EnsembleModel, InputEmbedding, TaskShape
from .capacity import fit_width
from .initialisers import normal
from .layers import EnsembleLayerNorm, EnsembleLinear, residual_std
from .registry import register_model

PREFERRED_DEPTHS = (18, 19, 20)  # the paper's 18-20 layers
PREFERRED_WIDTHS = tuple(range(384, 401))  # and width 384-400


@dataclass(frozen=True)
class MLPConfig:
    depth: int = 18
    width: int = 384
    prefix: bool = False
    prefix_dim: int = 32  # embedding width per slot of the flattened prefix (mlp-prefix only)

    def __post_init__(self) -> None:
        for f in ("depth", "width", "prefix_dim"):
            positive_int(f, getattr(self, f))
        boolean("prefix", self.prefix)


class ResidualLayer(nn.Module):
    """h + W(GELU(LN(h))): one linear map per layer, pre-norm like the transformer's blocks."""

    def __init__(self, E: int, width: int, depth: int) -> None:
        super().__init__()
        self.ln = EnsembleLayerNorm(E, width)
        self.fc = EnsembleLinear(E, width, width, init_std=residual_std(depth))

    def forward(self, h: Tensor) -> Tensor:
        return h + self.fc(F.gelu(self.ln(h)))


class PrefixProjection(nn.Module):
    """Causal linear map of the flattened zero-padded prefix: [E, B, L, d] -> [E, B, L, width]."""

    def __init__(self, E: int, max_len: int, d: int, width: int, init_std: float = 0.02) -> None:
        super().__init__()
        self.slots = nn.Parameter(torch.empty(E, max_len, d, width))  # W_j for each absolute slot j
        self.current = EnsembleLinear(E, d, width)  # W_cur (and the bias b)
        self.init_std = init_std

    def reset_member(self, e: int, generator: torch.Generator) -> None:
        with torch.no_grad():
            self.slots[e].copy_(normal(tuple(self.slots.shape[1:]), self.init_std, generator))

    def forward(self, x: Tensor) -> Tensor:
        L = x.shape[2]
        per_slot = torch.einsum("ebld,eldw->eblw", x, self.slots[:, :L])
        return self.current(x) + per_slot.cumsum(dim=2)

    def recurrent_step(self, x: Tensor, state: dict[str, Tensor] | None) -> tuple[Tensor, dict[str, Tensor]]:
        """One position t of x [E, B, d]: the running sum of e_j W_j over j <= t ([E, B, width], the
        floats carried) plus e_t W_cur + b; the position t is an integer counter ([E, B], not a float)."""
        E, B, _ = x.shape
        t = x.new_zeros(E, B, dtype=torch.long) if state is None else state["position"] + 1
        slot = self.slots[:, int(t.flatten()[0])]  # [E, d, width]: every sequence is at the same position
        total = torch.bmm(x, slot) if state is None else state["sum"] + torch.bmm(x, slot)
        return self.current(x) + total, {"sum": total, "position": t}


class MLP(EnsembleModel):
    """E independent residual MLPs (position-wise or prefix): tokens [E, B, L] -> logits [E, B, L, C]."""

    @property
    def mixes_positions(self) -> bool:
        """Whether an output reads earlier positions (`models.state`): the prefix MLP's projection
        does; the position-wise MLP holds nothing from one position to the next (0 state floats)."""
        return self.cfg.prefix

    def __init__(self, shape: TaskShape, cfg: MLPConfig, ensemble: int = 1) -> None:
        super().__init__(shape, ensemble)
        self.cfg = cfg
        if cfg.prefix:
            self.embed = InputEmbedding(ensemble, shape, cfg.prefix_dim)
            self.prefix = PrefixProjection(ensemble, shape.max_len, cfg.prefix_dim, cfg.width)
        else:
            self.embed = InputEmbedding(ensemble, shape, cfg.width)
        self.layers = nn.ModuleList(ResidualLayer(ensemble, cfg.width, cfg.depth) for _ in range(cfg.depth))
        self.ln_f = EnsembleLayerNorm(ensemble, cfg.width)
        self.head = EnsembleLinear(ensemble, cfg.width, shape.num_classes)

    def forward(self, tokens: Tensor, header: Tensor | None = None) -> Tensor:
        self.check_inputs(tokens, header)
        h = self.embed(tokens, header)
        if self.cfg.prefix:
            h = self.prefix(h)
        for layer in self.layers:
            h = layer(h)
        return self.head(self.ln_f(h))


def mlp_param_count(shape: TaskShape, cfg: MLPConfig) -> int:
    """Parameters of one member, in closed form (the tests check it against the module)."""
    w, C = cfg.width, shape.num_classes
    d = cfg.prefix_dim if cfg.prefix else w
    embed = (shape.vocab_size + shape.max_len) * d + shape.header_dim * d
    prefix = shape.max_len * d * w + d * w + w if cfg.prefix else 0
    layers = cfg.depth * (w * w + w + 2 * w)
    return embed + prefix + layers + 2 * w + w * C + C


def match_mlp(shape: TaskShape, target: int, *, prefix: bool = False, prefix_dim: int = 32,
              depths: tuple[int, ...] | None = None, widths: tuple[int, ...] | None = None,
              tolerance: float = 0.01) -> MLPConfig:
    """The MLP config whose parameter count is closest to `target` (within `tolerance`).

    Searches the given depths and widths (default: the paper's 18-20 layers and width 384-400);
    when nothing there is within tolerance (e.g. a small quick-preset target), keeps the depths
    and frees the width, then frees the depth (1..64) too. Ties go to the earlier candidate.
    """
    positive_int("target", target, "parameter count")
    depths = tuple(depths or PREFERRED_DEPTHS)

    def make(d: int, w: int) -> MLPConfig:
        return MLPConfig(depth=d, width=w, prefix=prefix, prefix_dim=prefix_dim)

    def gap(cfg: MLPConfig) -> float:
        return abs(mlp_param_count(shape, cfg) - target) / target

    def free_width(ds: Iterable[int]) -> Iterator[MLPConfig]:  # the count grows with width: the closest per depth
        for d in ds:
            yield make(d, fit_width(lambda w: mlp_param_count(shape, make(d, w)), target))

    searches = [[make(d, w) for d in depths for w in (widths or PREFERRED_WIDTHS)],
                list(free_width(depths)), list(free_width(range(1, 65)))]
    best: MLPConfig | None = None
    for candidates in searches:
        for cfg in candidates:
            if best is None or gap(cfg) < gap(best):
                best = cfg
        if best is not None and gap(best) <= tolerance:
            return best
    assert best is not None  # the last search (depths 1..64) is never empty
    raise ValueError(f"no MLP within {tolerance:.0%} of {target} parameters "
                     f"(closest: {mlp_param_count(shape, best)} with {best})")


def _build(shape: TaskShape, ensemble: int, prefixed: bool, match_params: int | None, **cfg) -> MLP:
    if "prefix" in cfg:  # which of the two architectures it is, not an option of either
        raise SettingError(f"prefix is chosen by the architecture (mlp: false, mlp-prefix: true), got prefix="
                           f"{cfg['prefix']!r}", ("prefix",))
    if match_params is not None:
        if "width" in cfg:
            raise ValueError("give either width or match_params, not both")
        depth = cfg.pop("depth", None)
        config = match_mlp(shape, int(match_params), prefix=prefixed, depths=(depth,) if depth else None, **cfg)
    else:
        config = MLPConfig(prefix=prefixed, **cfg)
    return MLP(shape, config, ensemble)


@register_model("mlp", "position-wise residual MLP: each position sees only its own token and position",
                config=MLPConfig)
def build_mlp(shape: TaskShape, ensemble: int, match_params: int | None = None, **cfg) -> MLP:
    """depth/width directly, or match_params=N to pick the width (and depth) within 1% of N."""
    return _build(shape, ensemble, False, match_params, **cfg)


@register_model("mlp-prefix", "residual MLP on the zero-padded flattened causal prefix of embeddings",
                config=MLPConfig)
def build_mlp_prefix(shape: TaskShape, ensemble: int, match_params: int | None = None, **cfg) -> MLP:
    return _build(shape, ensemble, True, match_params, **cfg)
