"""EM-like vs plain SGD on Paper II's one-head attention toy, many seeds as one batched computation.

Paper II (arXiv 2512.22473, section 7.2) trains one causal attention head with no residual stream
and no LayerNorm,

    Q = x W_Q, K = x W_K, V = x W_V (W_Q, W_K: d_x x d_k; W_V: d_x x d_v),
    alpha = softmax(Q K^T / sqrt(d_k) + causal mask),  logits = (alpha V) W_O (W_O: d_v x C),

with full-batch gradient descent on the mean cross-entropy, under two schedules that take the
same gradient: plain SGD (lr 0.01 on every matrix) and the EM-like one (lr 0.1 on W_V, the
"M-step" on the value prototypes; lr 0.01 on W_Q, W_K, W_O). Weights start N(0, 0.1^2), drawn per
seed in the order W_Q, W_K, W_V, W_O from a generator seeded with the seed (both schedules start
from the same weights).

Every (schedule, seed) pair is one *member*: parameters carry a leading member dimension and one
`torch.bmm` chain computes all of them. The total loss is the sum of the members' own mean
cross-entropies, so each member's gradient is exactly its solo gradient (`tests/dynamics/test_emsgd.py`
checks a member against a one-member run). `train_toy` also records what the section 7.1 figures
need: attention entropy over training, heatmap snapshots and the value prototypes mu_s W_V.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from ...checks import positive_int
from ...models.attention import attention_weights
from .chain import ChainData

WEIGHTS = ("W_Q", "W_K", "W_V", "W_O")
SCHEDULES: dict[str, dict[str, float]] = {
    "sgd": {"W_Q": 0.01, "W_K": 0.01, "W_V": 0.01, "W_O": 0.01},
    "em": {"W_Q": 0.01, "W_K": 0.01, "W_V": 0.1, "W_O": 0.01},
}
IGNORE = -100


@dataclass(frozen=True)
class ToyShape:
    """Widths of the toy head: inputs d_x, queries/keys d_k, values d_v, C classes."""

    d_x: int = 20
    d_k: int = 10
    d_v: int = 15
    n_classes: int = 8
    init_std: float = 0.1

    def shapes(self) -> dict[str, tuple[int, int]]:
        return {"W_Q": (self.d_x, self.d_k), "W_K": (self.d_x, self.d_k), "W_V": (self.d_x, self.d_v),
                "W_O": (self.d_v, self.n_classes)}


def total_rate(schedule: dict[str, float], shape: ToyShape = ToyShape()) -> float:
    """The summed learning rate of a schedule over every weight: sum_w lr_w * size(w)."""
    return sum(schedule[w] * r * c for w, (r, c) in shape.shapes().items())


def uniform_rate(schedule: dict[str, float], shape: ToyShape = ToyShape()) -> float:
    """The one learning rate on every weight whose summed rate equals `schedule`'s."""
    return total_rate(schedule, shape) / sum(r * c for r, c in shape.shapes().values())


# Controls at the same data, seeds and initial weights (docs/em_vs_sgd.md): is the EM-like gain the
# two timescales of the values (the "M-step") or a larger step? logits = alpha X W_V W_O, so W_V and
# W_O are both on the value-to-logit path; W_Q and W_K are the routing. On an equal budget: plain SGD
# at EM-like's summed learning rate (`sgd-emtotal`), and plain SGD whose update has EM-like's norm at
# every step (`sgd-emnorm`, NORM_MATCHED). Beside them plain SGD at 3x and 10x.
CONTROLS: dict[str, dict[str, float]] = {
    "wo10": {"W_Q": 0.01, "W_K": 0.01, "W_V": 0.01, "W_O": 0.1},
    "wqk10": {"W_Q": 0.1, "W_K": 0.1, "W_V": 0.01, "W_O": 0.01},
    "sgd-emtotal": {w: uniform_rate(SCHEDULES["em"]) for w in ("W_Q", "W_K", "W_V", "W_O")},
    "sgd-emnorm": {w: 1.0 for w in ("W_Q", "W_K", "W_V", "W_O")},  # the direction's weights; the length is EM's
    "sgd3": {w: 0.03 for w in ("W_Q", "W_K", "W_V", "W_O")},
    "sgd10": {w: 0.1 for w in ("W_Q", "W_K", "W_V", "W_O")},
}
# schedule -> the schedule whose update norm it takes at every step (per seed)
NORM_MATCHED = {"sgd-emnorm": "em"}
SGD_SWEEP = ("sgd", "sgd3", "sgd10")  # plain SGD at x1, x3, x10: the best of them (on validation) is the fair baseline

# The two-dimensional grid of rates (issue 44, point 4): W_V's rate x the rate of W_Q, W_K and W_O,
# each a multiple of BASE_LR. A point whose W_V multiple exceeds the others' is "W_V faster" (the
# EM-like idea: the values on a faster timescale); one where they are equal is plain SGD at one rate.
# Each family is tuned on the validation split (`controls.grid_families`, `best_on_validation`) and
# the two tuned points are compared at matched fractions of the gap. The equal-rate family spans
# the same range as the W_V rates (x0.3 to x30), so neither family is tuned over a narrower range.
BASE_LR = 0.01
GRID_VALUE = (1.0, 3.0, 10.0, 30.0)  # W_V's rate / BASE_LR
GRID_OTHER = (0.3, 1.0, 3.0, 10.0)  # W_Q, W_K, W_O's rate / BASE_LR
GRID_EQUAL = (0.3, 1.0, 3.0, 10.0, 30.0)  # plain SGD's rate / BASE_LR (the equal-rate family)


def grid_rates(value: float, other: float) -> dict[str, float]:
    """The per-matrix rates of the grid point (W_V at value x BASE_LR, the rest at other x BASE_LR)."""
    return {"W_Q": other * BASE_LR, "W_K": other * BASE_LR, "W_V": value * BASE_LR, "W_O": other * BASE_LR}


def grid_name(value: float, other: float) -> str:
    """A grid point's schedule: the paper's or a control's name where the rates are the same
    (`sgd`, `em`, `sgd3`, `sgd10`), else "sgd<rate>" on the equal-rate line (e.g. "sgd30") and
    "v<value>-o<other>" off it (e.g. "v30-o0.3")."""
    rates = grid_rates(value, other)
    for name, sched in {**SCHEDULES, **CONTROLS}.items():
        if name not in NORM_MATCHED and all(math.isclose(sched[w], rates[w]) for w in WEIGHTS):
            return name
    return f"sgd{value:g}" if math.isclose(value, other) else f"v{value:g}-o{other:g}"


def grid_points() -> dict[str, tuple[float, float]]:
    """Every grid point, name -> (W_V multiple, others' multiple): the W_V x others grid and the
    equal-rate line, in that order, each name once."""
    out: dict[str, tuple[float, float]] = {}
    for v, o in [(v, o) for v in GRID_VALUE for o in GRID_OTHER] + [(r, r) for r in GRID_EQUAL]:
        out.setdefault(grid_name(v, o), (v, o))
    return out


GRID = {n: grid_rates(v, o) for n, (v, o) in grid_points().items() if n not in SCHEDULES and n not in CONTROLS}
ALL_SCHEDULES = {**SCHEDULES, **CONTROLS, **GRID}


def init_weights(seeds: list[int], shape: ToyShape = ToyShape()) -> dict[str, Tensor]:
    """Per seed, N(0, init_std^2) draws of W_Q, W_K, W_V, W_O in that order from its own
    generator; stacked to [E, rows, cols]."""
    out: dict[str, list[Tensor]] = {w: [] for w in WEIGHTS}
    for s in seeds:
        gen = torch.Generator().manual_seed(int(s))
        for w, (r, c) in shape.shapes().items():
            out[w].append(torch.randn(r, c, generator=gen) * shape.init_std)
    return {w: torch.stack(v) for w, v in out.items()}


def toy_forward(W: dict[str, Tensor], x: Tensor) -> tuple[Tensor, Tensor]:
    """x [M, B, N, d_x] -> (logits [M, B, N, C], alpha [M, B, N, N]) for M members at once."""
    M, B, N, d = x.shape
    flat = x.reshape(M, B * N, d)
    q = torch.bmm(flat, W["W_Q"]).view(M * B, N, -1)
    k = torch.bmm(flat, W["W_K"]).view(M * B, N, -1)
    v = torch.bmm(flat, W["W_V"]).view(M * B, N, -1)
    alpha = attention_weights(q, k, causal=True, scale=1 / math.sqrt(q.shape[-1]))
    g = torch.bmm(alpha, v).view(M, B * N, -1)
    logits = torch.bmm(g, W["W_O"]).view(M, B, N, -1)
    return logits, alpha.view(M, B, N, N)


def member_losses(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean cross-entropy (nats) of each member over its scored positions: [M]."""
    M = logits.shape[0]
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE,
                         reduction="none").view(M, -1)
    mask = (targets.reshape(M, -1) != IGNORE)
    return (ce * mask).sum(1) / mask.sum(1)


def attention_entropy(alpha: Tensor, targets: Tensor) -> Tensor:
    """Mean entropy (nats) of the attention rows at scored positions, per member: [M]."""
    h = -(alpha * alpha.clamp(min=1e-30).log()).sum(-1)  # [M, B, N]
    mask = targets != IGNORE
    return (h * mask).sum((1, 2)) / mask.sum((1, 2))


@dataclass
class ToyRun:
    """What `train_toy` measured. losses[j, e, i]: schedule j, seed e, after i updates (i = 0..steps)."""

    schedules: list[str]
    seeds: list[int]
    steps: int
    losses: Tensor
    record_steps: list[int]
    attn_entropy: Tensor  # [S, E, len(record_steps)]
    prototypes: Tensor  # [S, E, len(record_steps), V, d_v]: mu_s W_V (value of symbol s)
    update_norms: Tensor  # [S, E, steps] ||Delta theta|| of each update
    heatmaps: dict[str, dict[int, Tensor]] = field(default_factory=dict)  # schedule -> step -> [w, w], seed 0
    final: dict[str, Tensor] = field(default_factory=dict)  # final weights [S*E, ...]
    test_losses: Tensor | None = None  # [S, E, len(record_steps)] held-out loss (with `test` data)
    validation_losses: Tensor | None = None  # [S, E, len(record_steps)] on the validation split (`validation`)

    def split_losses(self, split: str) -> Tensor:
        """The held-out losses on `split` ("test" or "validation"); ValueError for a run trained
        without that split (`train_toy`'s argument of that name)."""
        losses = {"test": self.test_losses, "validation": self.validation_losses}.get(split)
        if losses is None:
            raise ValueError(f"split {split!r}: this run has no {split} losses (train_toy was given no {split} data)")
        return losses


def default_chunk(B: int, N: int, budget: int = 2**22) -> int:
    """Members per batched pass so one [m, B, N, N] float tensor stays near `budget` elements.

    2^22 floats (16 MB) keeps each attention-sized tensor under glibc's largest mmap threshold
    (32 MB), so the allocator reuses freed blocks instead of mapping and unmapping (and zeroing)
    fresh pages on every step: at T = 2000 (16 MB per member) one member per pass ran 5 updates of
    16 x 2 members in 46 s wall with 2 s of system time, four per pass in 76 s with 21 s.
    """
    return max(1, budget // max(1, B * N * N))


def train_toy(data: list[ChainData], seeds: list[int], *, steps: int = 1000, schedules: dict | None = None,
              shape: ToyShape = ToyShape(), means: Tensor | None = None, record_every: int = 10,
              snapshot_steps: tuple[int, ...] = (0, 10, 25, 50, 100), window: int = 48,
              chunk: int | None = None, progress: bool = False, test: list[ChainData] | None = None,
              validation: list[ChainData] | None = None, norm_targets: Tensor | None = None,
              device: str | torch.device | None = None) -> ToyRun:
    """Train every (schedule, seed) member for `steps` full-batch updates; see the module docstring.

    data[e] is seed e's data (all the same shape). `means` [V, d_x] (the symbol means, or
    [E, V, d_x] one per seed) gives the value prototypes mu_s W_V recorded every `record_every`
    steps. `test[e]` and `validation[e]` (optional) are seed e's held-out splits, scored (no
    update) at the same steps. A schedule in NORM_MATCHED takes, at update i of seed e, the step
    -norm_targets[e, i] * (w * g) / ||w * g|| (w its per-matrix weights, g the gradient). Members
    are computed `chunk` at a time (default: a memory budget); chunking changes numbers only by
    float rounding. `device` (default the CPU) is where the members train; what is recorded comes
    back to the CPU.
    """
    if len(data) != len(seeds) or not seeds:
        raise ValueError(f"data must hold one ChainData per seed ({len(seeds)} seeds, got {len(data)})")
    for name, split in (("test", test), ("validation", validation)):
        if split is not None and len(split) != len(seeds):
            raise ValueError(f"{name} must hold one ChainData per seed ({len(seeds)} seeds, got {len(split)})")
    positive_int("steps", steps)
    schedules = dict(schedules or SCHEDULES)
    names, E, S = list(schedules), len(seeds), len(schedules)
    dev = torch.device(device or "cpu")
    x = torch.stack([d.inputs for d in data]).to(dev)  # [E, B, N, d]
    y = torch.stack([d.targets for d in data]).to(dev)
    _, B, N, _ = x.shape
    w0 = {w: t.to(dev) for w, t in init_weights(seeds, shape).items()}
    # member m = j * E + e: schedule j, seed e
    member_seed = torch.arange(S * E, device=dev) % E
    lrs = {w: torch.tensor([schedules[n][w] for n in names for _ in range(E)], device=dev) for w in WEIGHTS}
    matched = torch.tensor([n in NORM_MATCHED for n in names for _ in range(E)], device=dev)
    if bool(matched.any()) and (norm_targets is None or tuple(norm_targets.shape) != (E, steps)):
        raise ValueError(f"norm-matched schedules {[n for n in names if n in NORM_MATCHED]} need norm_targets of shape "
                         f"[{E}, {steps}], got {None if norm_targets is None else tuple(norm_targets.shape)}")
    record_steps = list(range(0, steps + 1, record_every))
    if record_steps[-1] != steps:
        record_steps.append(steps)
    losses = torch.empty(S * E, steps + 1)
    norms = torch.empty(S * E, steps)
    ent = torch.empty(S * E, len(record_steps))
    splits = {k: v for k, v in (("test", test), ("validation", validation)) if v is not None}
    held = {k: torch.empty(S * E, len(record_steps)) for k in splits}
    held_xy = {k: (torch.stack([d.inputs for d in v]).to(dev), torch.stack([d.targets for d in v]).to(dev))
               for k, v in splits.items()}
    if means is not None and means.dim() == 2:
        means = means.unsqueeze(0).expand(E, *means.shape)
    if means is not None:
        means = means.to(dev)
    if norm_targets is not None:
        norm_targets = norm_targets.to(dev)
    V = means.shape[1] if means is not None else 0
    protos = torch.empty(S * E, len(record_steps), V, shape.d_v)
    heat: dict[str, dict[int, Tensor]] = {n: {} for n in names}
    final: dict[str, list[Tensor]] = {w: [] for w in WEIGHTS}
    chunk = chunk or default_chunk(B, N)
    bar = _bar(steps * math.ceil(S * E / chunk), progress)
    for lo in range(0, S * E, chunk):
        idx = torch.arange(lo, min(lo + chunk, S * E), device=dev)
        out_idx = idx.cpu()
        W = {w: w0[w][member_seed[idx]].clone().requires_grad_(True) for w in WEIGHTS}
        xc, yc = x[member_seed[idx]], y[member_seed[idx]]
        lr = {w: lrs[w][idx].view(-1, 1, 1) for w in WEIGHTS}
        match = matched[idx].view(-1, 1, 1)
        r = 0
        for i in range(steps + 1):
            logits, alpha = toy_forward(W, xc)
            loss = member_losses(logits, yc)
            losses[out_idx, i] = loss.detach().cpu()
            if r < len(record_steps) and record_steps[r] == i:
                with torch.no_grad():
                    ent[out_idx, r] = attention_entropy(alpha, yc).cpu()
                    if V and means is not None:
                        protos[out_idx, r] = torch.matmul(means[member_seed[idx]], W["W_V"]).cpu()
                    for k, (xh, yh) in held_xy.items():
                        held[k][out_idx, r] = member_losses(toy_forward(W, xh[member_seed[idx]])[0],
                                                            yh[member_seed[idx]]).cpu()
                r += 1
            if i in snapshot_steps or i == steps:
                for m in idx.tolist():
                    if m % E == 0:  # the first seed, each schedule
                        heat[names[m // E]][i] = alpha[m - lo, 0, :window, :window].detach().cpu().clone()
            if i == steps:
                break
            grads = torch.autograd.grad(loss.sum(), [W[w] for w in WEIGHTS])
            with torch.no_grad():
                step = {w: lr[w] * g for w, g in zip(WEIGHTS, grads)}
                # the weighted gradient direction, at the target's length (norm_targets checked above)
                if bool(match.any()) and norm_targets is not None:
                    length = torch.stack([s_.pow(2).sum((1, 2)) for s_ in step.values()]).sum(0).sqrt()
                    target = norm_targets[member_seed[idx], i].to(length.dtype)
                    scale = torch.where(length > 0, target / length.clamp(min=1e-30), torch.zeros_like(length))
                    step = {w: torch.where(match, v * scale.view(-1, 1, 1), v) for w, v in step.items()}
                norms[out_idx, i] = torch.stack([v.pow(2).sum((1, 2)) for v in step.values()]).sum(0).sqrt().cpu()
                for w in WEIGHTS:
                    W[w].sub_(step[w])
            bar.update(1)
        for w in WEIGHTS:
            final[w].append(W[w].detach().cpu())
    bar.close()
    return ToyRun(names, [int(s) for s in seeds], steps, losses.view(S, E, steps + 1), record_steps,
                  ent.view(S, E, -1), protos.view(S, E, len(record_steps), V, shape.d_v), norms.view(S, E, steps),
                  heat, {w: torch.cat(v) for w, v in final.items()},
                  held["test"].view(S, E, -1) if "test" in held else None,
                  held["validation"].view(S, E, -1) if "validation" in held else None)


def _bar(total: int, progress: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="emsgd", unit="step", disable=not progress, leave=False)


def concat_runs(a: ToyRun, b: ToyRun) -> ToyRun:
    """Two runs of the same seeds, steps and record steps as one, a's schedules first (the
    norm-matched schedules train in a second pass, after the schedule whose norms they take)."""
    if a.seeds != b.seeds or a.steps != b.steps or a.record_steps != b.record_steps:
        raise ValueError("runs to join must share seeds, steps and record steps")

    def cat(x: Tensor, y: Tensor) -> Tensor:
        return torch.cat([x, y])

    def cat_held(x: Tensor | None, y: Tensor | None) -> Tensor | None:  # held-out losses: both runs, or neither
        return None if x is None or y is None else torch.cat([x, y])

    def cat_members(x: Tensor, y: Tensor) -> Tensor:  # final weights are [S*E, ...], schedule-major
        return torch.cat([x, y])

    return ToyRun(a.schedules + b.schedules, a.seeds, a.steps, cat(a.losses, b.losses), a.record_steps,
                  cat(a.attn_entropy, b.attn_entropy), cat(a.prototypes, b.prototypes),
                  cat(a.update_norms, b.update_norms), {**a.heatmaps, **b.heatmaps},
                  {w: cat_members(a.final[w], b.final[w]) for w in a.final}, cat_held(a.test_losses, b.test_losses),
                  cat_held(a.validation_losses, b.validation_losses))
