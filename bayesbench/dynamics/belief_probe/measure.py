"""The belief-geometry probe's measurement: a linear map from each layer's residual stream to the
exact belief state, fitted on some sequences and scored on others (docs/belief_probe.md).

Shai et al. 2024, "Transformers represent belief state geometry in their residual stream"
(arXiv 2405.15943): regress the belief state eta_t (the distribution of the hidden
state given x_0..x_t) on the residual stream at position t; R^2 near 1 says the belief simplex
is linearly embedded. Here, for any architecture of the package: the residual streams are read
by forward hooks (the embedding's output, each block's or layer's output, and the head's input,
which `ResidualStack.features` returns), every member of the ensemble (one per seed) probed on
its own. Held-out R^2 is measured on sequences the fit never saw; the shuffle control fits the
same regression to beliefs permuted across the training sequences at each position (what the
position and the marginal belief explain, and nothing of the sequence).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ...tasks import Batch, Task
from ..config import FieldError

RIDGE = 1e-6  # relative ridge on the normal equations: a rank-deficient stream stays solvable


def belief_targets(task: Task, batch: Batch, field: str = "run") -> tuple[Tensor, Tensor]:
    """(positions [B, L] bool, beliefs [B, L, K] float64): where the exact belief state is known
    and what it is. A tunnel that records `beliefs` among its latents (the belief-state
    processes, the mixture of HMMs) gives it at every position; the `hmm` tunnel's belief is its
    filter p(s_t | o_1..t), the posterior at its scored positions. Any other tunnel has no
    belief state: a FieldError naming `field`."""
    if "beliefs" in batch.latents:
        beliefs = batch.latents["beliefs"].double()
        return torch.ones(beliefs.shape[:2], dtype=torch.bool), beliefs
    if task.name == "hmm":
        return batch.mask.clone(), batch.posterior.double()
    raise FieldError(field, f"is trained on {task.describe()}, which has no belief state to probe (the belief-state "
                            "processes mess3, rrxor, even, golden_mean, process, the hmm_mixture and the hmm "
                            "tunnel do)")


def stream_modules(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module, bool]]:
    """(name, module, read its input) for each residual stream: `embed` (output), each of
    `blocks` or `layers` (output), and `head` (input: the final normalised stream; `W_O`'s input,
    the attention output, for the toy attention)."""
    out: list[tuple[str, torch.nn.Module, bool]] = []
    embed = getattr(model, "embed", None)
    if isinstance(embed, torch.nn.Module):
        out.append(("embed", embed, False))
    for attr in ("blocks", "layers"):
        stack = getattr(model, attr, None)
        if isinstance(stack, torch.nn.ModuleList):
            out += [(f"{attr[:-1]} {i}", m, False) for i, m in enumerate(stack)]
            break
    for attr in ("head", "W_O"):  # the read-out to logits (W_O: the one-head toy attention, no head)
        head = getattr(model, attr, None)
        if isinstance(head, torch.nn.Module):
            out.append(("final", head, True))
            break
    if not out:
        raise ValueError(f"{type(model).__name__} has no embed, blocks/layers or head module to read a residual "
                         "stream from")
    return out


def member_targets(task: Task, batches: list[Batch], field: str = "run") -> tuple[Tensor, Tensor]:
    """`belief_targets` of each member's own batch (per-seed sets, `dynamics.sets`), stacked:
    (positions [E, B, L], beliefs [E, B, L, K])."""
    both = [belief_targets(task, b, field) for b in batches]
    return torch.stack([p for p, _ in both]), torch.stack([b for _, b in both])


@torch.no_grad()
def residual_streams(model, batch: Batch | list[Batch], chunk: int = 256) -> dict[str, Tensor]:
    """{stream name: [E, B, L, d] float64 CPU} for every stream of `stream_modules`, one forward
    pass per chunk of sequences with hooks (eval mode, the model's own forward). `batch`: one
    batch every member reads, or a list of one per member (each seed's own, `dynamics.sets`)."""
    from ..sets import stack_sets

    mods = stream_modules(model)
    store: dict[str, list[Tensor]] = {name: [] for name, _, _ in mods}
    handles = []
    for name, module, read_input in mods:
        if read_input:
            handles.append(module.register_forward_pre_hook(
                lambda _m, args, name=name: store[name].append(args[0].detach().double().cpu())))
        else:
            handles.append(module.register_forward_hook(
                lambda _m, _a, out, name=name: store[name].append(
                    (out[0] if isinstance(out, tuple) else out).detach().double().cpu())))
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    try:
        E = model.ensemble
        sets = stack_sets([batch] * E if isinstance(batch, Batch) else list(batch))
        for start in range(0, sets.tokens.shape[1], chunk):
            tokens = sets.tokens[:, start : start + chunk].to(device)
            header = None if sets.header is None else sets.header[:, start : start + chunk].to(device)
            model(tokens, header)
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    return {name: torch.cat(parts, dim=1) for name, parts in store.items()}


def fit_linear(x: Tensor, y: Tensor, ridge: float = RIDGE) -> Tensor:
    """Least-squares weights [d + 1, K] of y ~ [x, 1] (float64), with a ridge of `ridge` times the
    mean diagonal of x'x so that a stream with dead directions stays solvable."""
    a = torch.cat([x, torch.ones_like(x[:, :1])], 1)
    gram = a.T @ a
    lam = ridge * float(gram.diagonal().mean()) if gram.numel() else 0.0
    return torch.linalg.solve(gram + lam * torch.eye(a.shape[1], dtype=a.dtype), a.T @ y)


def predict_linear(w: Tensor, x: Tensor) -> Tensor:
    return torch.cat([x, torch.ones_like(x[:, :1])], 1) @ w


def r_squared(y: Tensor, pred: Tensor) -> float:
    """1 - SSE / SST over every coordinate of the belief (SST about the held-out mean)."""
    sst = float(((y - y.mean(0)) ** 2).sum())
    return 1.0 - float(((y - pred) ** 2).sum()) / sst if sst > 0 else float("nan")


def split_sequences(n: int, test_fraction: float, seed: int) -> tuple[Tensor, Tensor]:
    """(train, test) sequence indices: a seeded permutation, the last `test_fraction` held out."""
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    n_test = max(1, min(n - 2, round(n * test_fraction)))
    return perm[n_test:], perm[:n_test]


def shuffled_across_sequences(beliefs: Tensor, seed: int) -> Tensor:
    """beliefs [B, L, K] with the sequences permuted independently at each position (the shuffle
    control: each position keeps its own marginal, no sequence keeps its own belief)."""
    g = torch.Generator().manual_seed(seed)
    B, L, _ = beliefs.shape
    perm = torch.stack([torch.randperm(B, generator=g) for _ in range(L)], 1)  # [B, L]
    return beliefs.gather(0, perm.unsqueeze(-1).expand_as(beliefs))


@dataclass
class ProbeResult:
    """R^2 per stream and member, held out, for the real beliefs and the shuffle control, and the
    held-out beliefs with the best stream's predictions (for the figure)."""

    streams: list[str]
    seeds: list[int]
    r2: dict[str, list[float]]
    r2_shuffled: dict[str, list[float]]
    test_beliefs: Tensor  # [N, K] exact beliefs at the held-out positions
    test_predictions: dict[str, Tensor]  # stream -> [E, N, K] probe outputs there


def probe(streams: dict[str, Tensor], positions: Tensor, beliefs: Tensor, seeds: list[int], *,
          test_fraction: float = 0.25, seed: int = 0) -> ProbeResult:
    """Fit and score the probe of every stream and member (see the module doc). positions [B, L]
    and beliefs [B, L, K] are every member's, or [E, B, L] and [E, B, L, K] each member's own
    (per-seed sets, `member_targets`); the figure's held-out beliefs are then member 0's."""
    own = beliefs.dim() == 4
    B = beliefs.shape[1 if own else 0]
    train, test = split_sequences(B, test_fraction, seed)

    def targets(pos: Tensor, bel: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        shuffled = bel.clone()
        shuffled[train] = shuffled_across_sequences(bel[train], seed + 1)
        return bel[train][pos[train]], shuffled[train][pos[train]], bel[test][pos[test]]

    E = next(iter(streams.values())).shape[0] if streams else 0
    per_member = ([targets(positions[e], beliefs[e]) for e in range(E)] if own
                  else [targets(positions, beliefs)] * E)
    r2: dict[str, list[float]] = {}
    r2_shuf: dict[str, list[float]] = {}
    preds: dict[str, Tensor] = {}
    for name, acts in streams.items():
        r2[name], r2_shuf[name], member_preds = [], [], []
        for e in range(acts.shape[0]):
            pos = positions[e] if own else positions
            y_train, y_shuf, y_test = per_member[e]
            x_train, x_test = acts[e][train][pos[train]], acts[e][test][pos[test]]
            mean, sd = x_train.mean(0), x_train.std(0).clamp(min=1e-8)  # standardised: the ridge is scale-free
            x_train, x_test = (x_train - mean) / sd, (x_test - mean) / sd
            pred = predict_linear(fit_linear(x_train, y_train), x_test)
            r2[name].append(r_squared(y_test, pred))
            r2_shuf[name].append(r_squared(y_test, predict_linear(fit_linear(x_train, y_shuf), x_test)))
            member_preds.append(pred)
        preds[name] = torch.stack(member_preds)
    y_first = per_member[0][2] if per_member else beliefs.new_zeros(0, beliefs.shape[-1])
    return ProbeResult(list(streams), list(seeds), r2, r2_shuf, y_first, preds)
