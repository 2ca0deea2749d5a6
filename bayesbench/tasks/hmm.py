"""HMM state tracking (docs/science.md, "HMM state tracking"; Paper I, arXiv 2512.22471, Sec. 3.2):
filter a fresh random HMM given in the sequence's header.

Each sequence draws T (S x S) and E (S x V) with Dirichlet(concentration) rows, a hidden path
s_1..s_K and observations o_1..o_K. At o_t's position the model predicts p(s_t | o_1..t, T, E),
computed exactly by the forward algorithm (`bayesbench.oracle.hmm_filter`).

Header encodings:
- "rows" (Paper I's 10-token header): positions 0..2S-1 carry the rows of T then of E as
  continuous vectors (`Batch.header`, zero-padded to max(S, V)); their token ids V..V+2S-1 name
  the row slot. Then o_1..o_K. Length 2S + K.
- "tokens" (the authors' code): [TRANS] S*S probability tokens [EMIT] S*V probability tokens
  [SEP], then [OBS] o_t pairs; 53 + 2K tokens for S = V = 5. Probability tokens are hundredths
  0.05..1.00 (96 tokens). Rows are drawn, clipped at 0.05, renormalised and rounded to hundredths
  that sum to exactly 1 with every entry >= 0.05; the ground truth uses these rounded matrices.
  Two rounding rules (`rounding`):
  - "authors" (their code's rule, `round_rows_authors`): round each entry to the nearest
    hundredth, raise entries below 0.05 to 0.05, then repair the row sum one hundredth at a
    time: a shortfall goes to the smallest entries first, an excess comes off the largest
    entries first (skipping entries at 0.05), cycling through that order; ties in the order
    go to the lower index.
  - "largest-remainder" (`discretise_rows`): floor, then hand the missing hundredths to the
    largest remainders, then move units from the largest entry to any entry below 0.05.
  They give a different row for about 29% of Dirichlet(1) rows (by one hundredth in two entries).

`rows_rounded=True` draws the rows of a "rows" header the same way (clipped at 0.05, rounded by
`rounding`): the authors' prior, hence the same posteriors and floors as the tokens header, on
30-position sequences instead of 93 (the quick preset's HMM, docs/reproducing.md). The "rows"
default keeps the unclipped Dirichlet rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..checks import SettingError, boolean, int_at_least, one_of, positive_int, positive_number
from ..oracle import hmm_filter
from ._random import categorical, dirichlet
from .base import IGNORE_INDEX, Batch, Task, batch_device, check_batch_size, check_fits
from .registry import register_task

N_PROB_TOKENS = 96  # hundredths 5..100
MIN_HUNDREDTHS = 5


def discretise_rows(p: Tensor) -> Tensor:
    """Round probability rows to integer hundredths >= 5 summing to exactly 100 (long tensor)."""
    n = p.shape[-1]
    if n * MIN_HUNDREDTHS > 100:
        raise ValueError(f"rows of length {n} cannot all be >= 0.05")
    q = p.double().clamp(min=MIN_HUNDREDTHS / 100.0)
    x = 100.0 * q / q.sum(-1, keepdim=True)
    h = x.floor()
    short = (100 - h.sum(-1, keepdim=True)).long()  # 0..n-1 units still to hand out
    rank = (x - h).argsort(-1, descending=True).argsort(-1)  # rank of each remainder
    h = (h + (rank < short).double()).long()
    while bool((h < MIN_HUNDREDTHS).any()):  # at most a few rounds: move one unit per row
        low = h < MIN_HUNDREDTHS
        needy = low.any(-1, keepdim=True)
        give_to = torch.where(low, h, torch.full_like(h, 10**6)).argmin(-1, keepdim=True)
        take_from = h.argmax(-1, keepdim=True)
        h = h.scatter_add(-1, give_to, needy.long()).scatter_add(-1, take_from, -needy.long())
    return h


def round_rows_authors(p: Tensor) -> Tensor:
    """The authors' rounding of probability rows to integer hundredths >= 5 summing to exactly 100.

    p: [..., n] rows (any non-negative weights: they are clipped at 0.05 and renormalised first,
    as the authors' prior does). Returns a long tensor. Rule (see the module docstring): nearest
    hundredth (ties to even), raise to 5, then repair the sum by +-1 steps cycling through the
    entries in increasing order (shortfall) or decreasing order (excess), skipping an entry that
    is at 100 (shortfall) or at 5 (excess); the order is fixed before the repair starts and ties
    go to the lower index (a stable sort).
    """
    n = p.shape[-1]
    if n * MIN_HUNDREDTHS > 100:
        raise ValueError(f"rows of length {n} cannot all be >= 0.05")
    q = p.double().clamp(min=MIN_HUNDREDTHS / 100.0)
    q = q / q.sum(-1, keepdim=True)
    cents = torch.round(q * 100.0).long().clamp(min=MIN_HUNDREDTHS)
    diff = 100 - cents.sum(-1)
    up = torch.argsort(cents, dim=-1, stable=True)  # smallest first
    down = torch.argsort(-cents, dim=-1, stable=True)  # largest first
    i = 0
    while bool((diff != 0).any()):
        j = torch.where(diff > 0, up[..., i % n], down[..., i % n]).unsqueeze(-1)
        cj = cents.gather(-1, j).squeeze(-1)
        step = torch.where((diff > 0) & (cj < 100), 1, torch.where((diff < 0) & (cj > MIN_HUNDREDTHS), -1, 0))
        cents = cents.scatter_add(-1, j, step.unsqueeze(-1))
        diff = diff - step
        i += 1
    return cents


ROUNDING = {"authors": round_rows_authors, "largest-remainder": discretise_rows}


def stationary(trans: Tensor) -> Tensor:
    """Stationary distribution pi = pi T of each row-stochastic [B, S, S] matrix."""
    B, S, _ = trans.shape
    t64 = trans.double()
    a = t64.transpose(1, 2) - torch.eye(S, dtype=torch.float64, device=trans.device)
    a[:, -1, :] = 1.0  # replace one equation by sum(pi) = 1
    rhs = torch.zeros((B, S, 1), dtype=torch.float64, device=trans.device)
    rhs[:, -1] = 1.0
    pi = torch.linalg.solve(a, rhs).squeeze(-1).clamp(min=0)
    return (pi / pi.sum(-1, keepdim=True)).to(trans.dtype)


@register_task("hmm")
@dataclass(frozen=True)
class HMMTask(Task):
    """Filter a fresh HMM with S states and V symbols over K observations."""

    S: int = 5
    V: int = 5
    K: int = 20
    concentration: float = 1.0
    init: str = "uniform"
    encoding: str = "rows"
    target: str = "state"
    rounding: str = "largest-remainder"  # "tokens" encoding: how rows are rounded to hundredths
    rows_rounded: bool = False  # "rows" encoding: clip and round the rows as the tokens header does

    name = "hmm"

    def __post_init__(self) -> None:
        int_at_least("S", self.S, 2, "one state leaves nothing to infer")
        for f in ("V", "K"):
            positive_int(f, getattr(self, f))
        positive_number("concentration", self.concentration, "the Dirichlet prior of the rows")
        one_of("init", self.init, ("uniform", "stationary"))  # the header must determine it
        one_of("encoding", self.encoding, ("rows", "tokens"))
        if self.encoding == "tokens" and max(self.S, self.V) * MIN_HUNDREDTHS > 100:
            raise SettingError(f"encoding='tokens' needs S, V <= 20 (entries >= 0.05), got S={self.S}, V={self.V}",
                               ("encoding", "S", "V"))
        one_of("rounding", self.rounding, tuple(ROUNDING))
        boolean("rows_rounded", self.rows_rounded)
        if self.rows_rounded and self.encoding != "rows":
            raise SettingError("rows_rounded applies to encoding='rows' (the tokens header is always clipped and "
                               "rounded)", ("rows_rounded", "encoding"))
        if self.rows_rounded and max(self.S, self.V) * MIN_HUNDREDTHS > 100:
            raise SettingError(f"rows_rounded needs S, V <= 20 (entries >= 0.05), got S={self.S}, V={self.V}",
                               ("rows_rounded", "S", "V"))
        one_of("target", self.target, ("state", "posterior"))  # hard or soft targets
        self.check_size()

    def sequence_bytes(self, dtype: torch.dtype = torch.float32) -> int:
        """Posterior (and soft targets) [L, S], T [S, S] and E [S, V] in float64 while sampling, header."""
        item = torch.empty((), dtype=dtype).element_size()
        soft = self.seq_len * self.S * item if self.target == "posterior" else 0
        header = 2 * self.S * self.header_dim * item
        return super().sequence_bytes(dtype) + soft + header + (self.S * self.S + self.S * self.V) * 8

    # token ids of the "tokens" encoding
    @property
    def _prob0(self) -> int:
        return self.V

    @property
    def _specials(self) -> dict[str, int]:
        base = self.V + N_PROB_TOKENS
        return {"TRANS": base, "EMIT": base + 1, "SEP": base + 2, "OBS": base + 3}

    @property
    def vocab_size(self) -> int:
        return self.V + 2 * self.S if self.encoding == "rows" else self.V + N_PROB_TOKENS + 4

    @property
    def num_classes(self) -> int:
        return self.S

    @property
    def prefix_len(self) -> int:
        """Number of header positions before o_1 (2S for rows, 3 + S^2 + SV for tokens)."""
        return 2 * self.S if self.encoding == "rows" else 3 + self.S * self.S + self.S * self.V

    @property
    def header_len(self) -> int:
        return 2 * self.S if self.encoding == "rows" else 0

    @property
    def header_dim(self) -> int:
        return max(self.S, self.V) if self.encoding == "rows" else 0

    @property
    def seq_len(self) -> int:
        return self.prefix_len + (self.K if self.encoding == "rows" else 2 * self.K)

    def obs_positions(self, device=None) -> Tensor:
        """Indices of o_1..o_K in the sequence (where the posterior is predicted)."""
        step = 1 if self.encoding == "rows" else 2
        offset = self.prefix_len + (0 if self.encoding == "rows" else 1)
        return torch.arange(self.K, device=device) * step + offset

    def sample_hmms(self, batch_size: int, generator=None, *, device=None,
                    dtype=torch.float32) -> tuple[Tensor, Tensor, Tensor]:
        """Draw (trans, emit, init) for `batch_size` HMMs as the encoding sees them."""
        B, S, V = check_batch_size(batch_size), self.S, self.V
        dev = batch_device(generator, device)
        check_fits(self, B, dev, dtype)
        trans = dirichlet(self.concentration, (B, S, S), generator, dev, torch.float64)
        emit = dirichlet(self.concentration, (B, S, V), generator, dev, torch.float64)
        if self.encoding == "tokens" or self.rows_rounded:
            rounding = ROUNDING[self.rounding]
            trans = rounding(trans).double() / 100.0
            emit = rounding(emit).double() / 100.0
        trans, emit = trans.to(dtype), emit.to(dtype)
        if self.init == "uniform":
            init = torch.full((B, S), 1.0 / S, dtype=dtype, device=dev)
        else:
            init = stationary(trans)
        return trans, emit, init

    def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32) -> Batch:
        trans, emit, init = self.sample_hmms(batch_size, generator, device=device, dtype=dtype)
        B, K, dev = trans.shape[0], self.K, trans.device
        states = torch.empty((B, K), dtype=torch.long, device=dev)
        obs = torch.empty((B, K), dtype=torch.long, device=dev)
        t64, e64 = trans.double(), emit.double()  # the matrices as the header gives them, in float64
        rows = torch.arange(B, device=dev)
        s = categorical(init.double(), generator)
        for t in range(K):  # loop over time, vectorised over the batch
            if t > 0:
                s = categorical(t64[rows, s], generator)
            states[:, t] = s
            obs[:, t] = categorical(e64[rows, s], generator)
        post_obs = hmm_filter(trans, emit, obs, init, check=False)  # [B, K, S]; drawn from these HMMs
        return self.assemble(trans, emit, init, states, obs, post_obs)

    def assemble(self, trans: Tensor, emit: Tensor, init: Tensor, states: Tensor, obs: Tensor,
                 post_obs: Tensor) -> Batch:
        """Build the batch (tokens, header, targets) from given HMMs, paths and posteriors."""
        B, S, V, dev, dtype = trans.shape[0], self.S, self.V, trans.device, trans.dtype
        L, pos = self.seq_len, self.obs_positions(dev)
        tokens = torch.empty((B, L), dtype=torch.long, device=dev)
        header = None
        if self.encoding == "rows":
            D = self.header_dim
            header = torch.zeros((B, 2 * S, D), dtype=dtype, device=dev)
            header[:, :S, :S] = trans
            header[:, S:, :V] = emit
            tokens[:, : 2 * S] = V + torch.arange(2 * S, device=dev)
        else:
            sp = self._specials

            def to_tok(m: Tensor) -> Tensor:
                return (m * 100.0).round().long() - MIN_HUNDREDTHS + self._prob0

            tokens[:, 0] = sp["TRANS"]
            tokens[:, 1 : 1 + S * S] = to_tok(trans.double()).reshape(B, S * S)
            tokens[:, 1 + S * S] = sp["EMIT"]
            tokens[:, 2 + S * S : 2 + S * S + S * V] = to_tok(emit.double()).reshape(B, S * V)
            tokens[:, 2 + S * S + S * V] = sp["SEP"]
            tokens[:, pos - 1] = sp["OBS"]
        tokens[:, pos] = obs
        mask = torch.zeros((B, L), dtype=torch.bool, device=dev)
        mask[:, pos] = True
        posterior = torch.zeros((B, L, S), dtype=dtype, device=dev)
        posterior[:, pos] = post_obs
        if self.target == "state":
            targets = torch.full((B, L), IGNORE_INDEX, dtype=torch.long, device=dev)
            targets[:, pos] = states
        else:
            targets = posterior.clone()
        latents = {"trans": trans, "emit": emit, "init": init, "states": states, "obs": obs}
        return Batch(tokens, mask, targets, posterior, latents, header)
