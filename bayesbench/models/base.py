"""What every ensemble model shares: the task's shapes, per-member init, counting, splitting.

Models take tokens [E, B, L] (each member its own batch) and, for tasks with continuous
headers, header [E, B, H, D]; they return logits [E, B, L, C] over the task's C classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..checks import positive_int
from .heads import CATEGORICAL
from .layers import EnsembleEmbedding, EnsembleLayerNorm, EnsembleLinear

M = TypeVar("M", bound=nn.Module)


def modules_as(modules: nn.ModuleList, kind: type[M]) -> list[M]:
    """The items of `modules`, each checked to be a `kind`: nn.ModuleList types its items as plain
    nn.Module, so a model that sets its own blocks' attributes (a backend, a probe, a scan) reads
    them through this rather than through an unchecked cast."""
    out = []
    for i, module in enumerate(modules):
        if not isinstance(module, kind):
            raise TypeError(f"module {i} must be a {kind.__name__}, got {type(module).__name__}")
        out.append(module)
    return out


class TaskLike(Protocol):
    """What a model reads from a task: its sizes. Every `bayesbench.tasks.Task` is one; the
    models package needs nothing else of the tasks (and does not import them)."""

    @property
    def vocab_size(self) -> int: ...

    @property
    def num_classes(self) -> int: ...

    @property
    def seq_len(self) -> int: ...

    @property
    def header_len(self) -> int: ...

    @property
    def header_dim(self) -> int: ...


@dataclass(frozen=True)
class TaskShape:
    """The sizes a model needs from a task.

    max_len sizes the learned position embeddings: it must cover the longest sequence the model
    will ever see, which for length-generalisation evaluation (HMM trained at K = 20, scored at
    K = 50) is longer than the training sequences. Positions never seen in training keep their
    initial values (shrunk by weight decay): that is the honest length-generalisation setup.

    head: how the model's C = num_classes outputs per position are read (`models.heads`):
    "categorical" logits, or a continuous "gaussian" (C = 2) or "mixture:M" (C = 3M) predictive.
    dense_header: the task feeds a real vector at EVERY position (the continuous tunnels'
    read-in of x_k, y_k or an observation), so the header is as long as the tokens, whatever
    their length; header_len is then max_len.
    """

    vocab_size: int
    num_classes: int
    max_len: int
    header_len: int = 0
    header_dim: int = 0
    head: str = CATEGORICAL
    dense_header: bool = False

    @classmethod
    def of(cls, task_or_shape: TaskLike | TaskShape, max_len: int | None = None) -> TaskShape:
        """The shape of a task (`from_task`), or a TaskShape as it is (then without `max_len`)."""
        if isinstance(task_or_shape, TaskShape):
            if max_len is not None and max_len != task_or_shape.max_len:
                raise ValueError("max_len must not be given with a TaskShape (it already has one)")
            return task_or_shape
        return cls.from_task(task_or_shape, max_len)

    @classmethod
    def from_task(cls, task: TaskLike, max_len: int | None = None) -> TaskShape:
        L = task.seq_len if max_len is None else max_len
        if L < task.seq_len:
            raise ValueError(f"max_len must be >= the task's seq_len {task.seq_len}, got {max_len}")
        head = getattr(task, "head", CATEGORICAL)  # outside tunnels written before heads: categorical
        dense = bool(getattr(task, "header_every_position", False))
        if dense:
            return cls(task.vocab_size, task.num_classes, L, L, task.header_dim, head, True)
        return cls(task.vocab_size, task.num_classes, L, task.header_len, task.header_dim, head)


class InputEmbedding(nn.Module):
    """Token + absolute position embedding, plus projected header vectors at positions 0..H-1.

    For the HMM `rows` encoding the header rows (T then E, zero-padded to D) go through an
    ensemble linear map (no bias: the slot id's token embedding already plays that role) and
    are added to the embedding of the slot token at the same position. The continuous tunnels
    use the same read-in at every position (`TaskShape.dense_header`: x_k, y_k or an
    observation as a real vector, the token naming its slot), so every architecture that embeds
    its input here reads real vectors with no code of its own.
    """

    def __init__(self, ensemble: int, shape: TaskShape, dim: int, init_std: float = 0.02,
                 learned_positions: bool = True) -> None:
        super().__init__()
        self.shape = shape
        self.tok = EnsembleEmbedding(ensemble, shape.vocab_size, dim, init_std)
        # None when the model encodes positions elsewhere (the transformer's rotary attention)
        self.pos = EnsembleEmbedding(ensemble, shape.max_len, dim, init_std) if learned_positions else None
        self.header = (EnsembleLinear(ensemble, shape.header_dim, dim, bias=False, init_std=init_std)
                       if shape.header_dim > 0 else None)

    def forward(self, tokens: Tensor, header: Tensor | None = None) -> Tensor:
        L = tokens.shape[2]
        x = self.tok(tokens)
        if self.pos is not None:
            x = x + self.pos.weight[:, :L].unsqueeze(1)  # positions 0..L-1 of every member
        if self.header is not None:
            if header is None:
                raise ValueError("header must be given: this model was built for a task with a continuous header")
            h = self.header(header.to(x.dtype))  # [E, B, H, dim]
            x = x + F.pad(h, (0, 0, 0, L - h.shape[2]))
        return x


def check_token_values(tokens: Tensor, vocab_size: int, name: str = "tokens") -> None:
    """Every token id in [0, vocab_size): one host read (min and max together)."""
    if tokens.numel() == 0:
        return
    lo, hi = (int(v) for v in torch.stack(torch.aminmax(tokens)).tolist())
    if lo < 0 or hi >= vocab_size:
        raise ValueError(f"{name} must lie in [0, {vocab_size - 1}] (the task's vocabulary); "
                         f"found values in [{lo}, {hi}]")


def other_float_dtypes(module) -> list[str]:
    """The floating dtypes other than float32 among `module`'s parameters, sorted (none: []). Every
    key stands for float32 parameters; a model built or cast otherwise (outside code that called
    torch.set_default_dtype, a .double()) is refused when built and at scoring."""
    params = module.parameters() if hasattr(module, "parameters") else ()  # none: predictions given in a file
    return sorted({str(p.dtype) for p in params if p.is_floating_point() and p.dtype != torch.float32})


class EnsembleModel(nn.Module):
    """Base class: E members in one module; subclasses define `forward(tokens, header)`.

    `validate_token_values` (default True) checks every forward's token ids against the
    vocabulary, which costs one host read; the trainer turns it off because its data streams
    check each sampled chunk once, where the data is made.
    """

    validate_token_values: bool = True

    def __init__(self, shape: TaskShape, ensemble: int) -> None:
        super().__init__()
        positive_int("ensemble", ensemble, "number of members")
        self.shape = shape
        self.ensemble = ensemble
        self.seeds: list[int] = []

    def init_members(self, seeds: list[int]) -> None:
        """Initialise member e from seed s_e, exactly as a one-member model with that seed.

        Modules are visited in registration order and each draws from its member's own
        generator, so member e's numbers do not depend on E or on the other seeds.
        """
        seeds = [int(s) for s in seeds]
        if len(seeds) != self.ensemble:
            raise ValueError(f"seeds must have one entry per member ({self.ensemble}), got {len(seeds)}")
        for e, seed in enumerate(seeds):
            generator = torch.Generator().manual_seed(seed)
            for module in self.modules():
                reset = getattr(module, "reset_member", None)
                if reset is not None:
                    reset(e, generator)
        self.seeds = seeds

    def num_params(self) -> int:
        """Trainable parameters of ONE member (every tensor counted once, nothing tied)."""
        return sum(p.numel() for p in self.parameters()) // self.ensemble

    def param_breakdown(self) -> dict[str, int]:
        """Parameters of one member per top-level submodule (e.g. embed, blocks, ln_f, head)."""
        return {name: sum(p.numel() for p in child.parameters()) // self.ensemble
                for name, child in self.named_children()}

    def member_state(self, e: int) -> dict[str, Tensor]:
        """Member e's parameters as the state dict of a one-member model (split checkpoints)."""
        if not 0 <= e < self.ensemble:
            raise ValueError(f"member must be in 0..{self.ensemble - 1}, got {e}")
        return {k: v[e : e + 1].clone() for k, v in self.state_dict().items()}

    def check_inputs(self, tokens: Tensor, header: Tensor | None) -> None:
        if tokens.dim() != 3 or tokens.shape[0] != self.ensemble:
            raise ValueError(f"tokens must have shape [E={self.ensemble}, B, L], got {list(tokens.shape)}")
        if tokens.shape[2] > self.shape.max_len:
            raise ValueError(f"tokens: sequence length {tokens.shape[2]} exceeds the model's max_len "
                             f"{self.shape.max_len} (size position embeddings for the longest eval length)")
        if self.validate_token_values and not torch.compiler.is_compiling():
            check_token_values(tokens, self.shape.vocab_size, "tokens")
        if header is None:
            return
        if self.shape.header_dim == 0:
            raise ValueError("header was given, but this model was built for a task without a continuous header")
        H, D = self.shape.header_len, self.shape.header_dim
        if self.shape.dense_header:
            H = tokens.shape[2]  # a real vector at every position, whatever the length
        if header.dim() != 4 or header.shape[:2] != tokens.shape[:2] or tuple(header.shape[2:]) != (H, D):
            raise ValueError(f"header must have shape [E, B, H={H}, D={D}] matching tokens {list(tokens.shape)}, "
                             f"got {list(header.shape)}")
        if H > tokens.shape[2]:
            raise ValueError(f"header: its {H} positions do not fit in a sequence of {tokens.shape[2]} tokens")

    def forward(self, tokens: Tensor, header: Tensor | None = None) -> Tensor:  # pragma: no cover
        raise NotImplementedError


class ResidualStack(EnsembleModel):
    """embed -> residual blocks -> final LayerNorm -> linear head: the skeleton shared by the
    transformer, linear attention and Mamba (subclasses build the blocks).

    Modules are registered in the order embed, blocks, ln_f, head, which fixes the order of the
    per-member initialisation draws.
    """

    def __init__(self, shape: TaskShape, ensemble: int, d_model: int, blocks: Sequence[nn.Module], *,
                 head_bias: bool = True, embed_dropout: float = 0.0, learned_positions: bool = True) -> None:
        super().__init__(shape, ensemble)
        self.embed = InputEmbedding(ensemble, shape, d_model, learned_positions=learned_positions)
        self.blocks = nn.ModuleList(blocks)
        self.ln_f = EnsembleLayerNorm(ensemble, d_model)
        self.head = EnsembleLinear(ensemble, d_model, shape.num_classes, bias=head_bias)
        self.embed_dropout = embed_dropout

    def forward(self, tokens: Tensor, header: Tensor | None = None) -> Tensor:
        return self.head(self.features(tokens, header))

    def features(self, tokens: Tensor, header: Tensor | None = None) -> Tensor:
        """The final hidden states [E, B, L, d] (after ln_f), which the head maps to logits."""
        self.check_inputs(tokens, header)
        x = F.dropout(self.embed(tokens, header), self.embed_dropout, self.training)
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x)
