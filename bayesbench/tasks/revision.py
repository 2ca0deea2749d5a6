"""Belief revision with delayed disambiguation (docs/science.md#belief-revision): the authors'
"Version A" task (public code `vishalmisra/bayesian-wind-tunnel`, src/data/belief_revision.py;
no script of that repository uses it and no paper of the series reports on it).

N candidate entities with fresh ids (drawn without replacement from n_ids) are introduced, a
pronoun refers to one of them (Z ~ Uniform), and only after k_filler fillers a cue names it:

    INTRO id_0 FILLER*m ... INTRO id_{N-1} FILLER*m PRONOUN FILLER*k CUE id_Z QUERY id_Z

Tokens: ids 0..n_ids-1 (the classes), then INTRO, FILLER, PRONOUN, CUE, QUERY. The scored
positions and their exact predictives (`oracle.revision.antecedent_predictive`):

- each INTRO (supervise="ids"): the next id is uniform over the n_ids - i ids not introduced yet;
- CUE (supervise="ids"): the cued id, 1/N on each introduced id: the belief before revision;
- QUERY (both): a point mass on the cued id: the belief after revision. This is the authors'
  only target (supervise="query").

The authors' setting is n_ids=100, m_filler=8, k_filler=8 (N=2); the defaults are smaller so
that the generic tests stay fast. The order of the fixed tokens carries no information and is not
scored.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ..checks import SettingError, int_at_least, one_of
from ..oracle.revision import antecedent_predictive
from ._random import permutations
from .base import IGNORE_INDEX, Batch, Task, batch_device, check_batch_size, check_fits
from .registry import register_task

SUPERVISE = ("ids", "query")
SPECIALS = ("INTRO", "FILLER", "PRONOUN", "CUE", "QUERY")
#: The brute-force enumeration is refused above this many latents (ordered ids times Z).
MAX_ENUMERATION = 200_000


@register_task("revision")
@dataclass(frozen=True)
class RevisionTask(Task):
    """N candidates with ids from n_ids, m_filler fillers after each, k_filler before the cue."""

    n_candidates: int = 2
    n_ids: int = 16
    m_filler: int = 4
    k_filler: int = 4
    supervise: str = "ids"

    name = "revision"

    def __post_init__(self) -> None:
        int_at_least("n_candidates", self.n_candidates, 2, "candidate antecedents")
        int_at_least("n_ids", self.n_ids, 2, "entity ids to draw from")
        int_at_least("m_filler", self.m_filler, 0, "fillers after each introduction")
        int_at_least("k_filler", self.k_filler, 0, "fillers between the pronoun and the cue")
        one_of("supervise", self.supervise, SUPERVISE)
        if self.n_ids < self.n_candidates:
            raise SettingError(f"n_ids must be >= n_candidates (distinct ids), got n_ids={self.n_ids}, "
                               f"n_candidates={self.n_candidates}", ("n_ids", "n_candidates"))
        self.check_size()

    @property
    def special(self) -> dict[str, int]:
        return {s: self.n_ids + i for i, s in enumerate(SPECIALS)}

    @property
    def vocab_size(self) -> int:
        return self.n_ids + len(SPECIALS)

    @property
    def num_classes(self) -> int:
        return self.n_ids

    @property
    def seq_len(self) -> int:
        return self.n_candidates * (2 + self.m_filler) + 1 + self.k_filler + 4

    def positions(self) -> dict[str, Tensor]:
        """Where each scored prediction is made: 'intro' [N] (the INTRO tokens), 'cue', 'query'."""
        step = 2 + self.m_filler
        cue = self.n_candidates * step + 1 + self.k_filler
        return {"intro": torch.arange(self.n_candidates) * step, "cue": torch.tensor([cue]),
                "query": torch.tensor([cue + 2])}

    def layout(self, ids: Tensor, z: Tensor) -> Tensor:
        """The token sequences [B, T] of ids [B, N] and antecedents z [B]."""
        B, N = ids.shape
        sp = self.special
        step = 2 + self.m_filler
        tokens = torch.full((B, self.seq_len), sp["FILLER"], dtype=torch.long, device=ids.device)
        intro = torch.arange(N, device=ids.device) * step
        tokens[:, intro] = sp["INTRO"]
        tokens[:, intro + 1] = ids
        cue = N * step + 1 + self.k_filler
        cued = ids.gather(1, z.unsqueeze(1)).squeeze(1)
        tokens[:, N * step] = sp["PRONOUN"]
        tokens[:, cue] = sp["CUE"]
        tokens[:, cue + 1] = cued
        tokens[:, cue + 2] = sp["QUERY"]
        tokens[:, cue + 3] = cued
        return tokens

    def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32) -> Batch:
        B, N = check_batch_size(batch_size), self.n_candidates
        dev = batch_device(generator, device)
        check_fits(self, B, dev, dtype)
        ids = permutations(B, self.n_ids, generator, dev)[:, :N]  # N distinct ids, without replacement
        z = torch.randint(0, N, (B,), generator=generator, device=dev)
        tokens = self.layout(ids, z)
        cued = ids.gather(1, z.unsqueeze(1)).squeeze(1)
        pred = antecedent_predictive(ids, cued, self.n_ids, dtype=dtype)  # [B, N + 2, n]
        where = self.positions()
        pos = torch.cat([where["intro"], where["cue"], where["query"]]).to(dev)
        rows = torch.arange(N + 2, device=dev)
        if self.supervise == "query":
            pos, rows = pos[-1:], rows[-1:]
        T = self.seq_len
        mask = torch.zeros((B, T), dtype=torch.bool, device=dev)
        mask[:, pos] = True
        targets = torch.full((B, T), IGNORE_INDEX, dtype=torch.long, device=dev)
        targets[:, pos] = tokens[:, pos + 1]
        posterior = torch.zeros((B, T, self.n_ids), dtype=dtype, device=dev)
        posterior[:, pos] = pred[:, rows]
        return Batch(tokens, mask, targets, posterior, {"ids": ids, "antecedent": z})

    def brute_force_posterior(self, batch: Batch) -> Tensor:
        """The posterior [B, T, n_ids] by enumeration: every latent (ordered ids, Z), equally
        likely, writes one whole sequence; the predictive at t is the distribution of token t+1
        over the latents whose sequence agrees with tokens 0..t (refused above MAX_ENUMERATION)."""
        N, n = self.n_candidates, self.n_ids
        count = math.perm(n, N) * N
        if count > MAX_ENUMERATION:
            raise ValueError(f"{self.describe()}: brute force would enumerate {count} latents (above "
                             f"{MAX_ENUMERATION}); use fewer n_ids or n_candidates")
        tuples = torch.tensor(list(itertools.permutations(range(n), N)), dtype=torch.long).view(-1, N)
        ids = tuples.repeat_interleave(N, 0)
        z = torch.arange(N).repeat(tuples.shape[0])
        every = self.layout(ids, z)  # [M, T]: the sequence each latent writes
        tokens = batch.tokens.cpu()
        B, T = tokens.shape
        out = torch.zeros((B, T, n), dtype=torch.float64)
        for i in range(B):
            agree = (every == tokens[i]).long().cumprod(1).double()  # [M, T]: prefix 0..t agrees
            mass = torch.zeros((T - 1, self.vocab_size), dtype=torch.float64)  # [t, v]: latents agreeing, next v
            mass.scatter_add_(1, every[:, 1:].t(), agree[:, :-1].t())
            mass = mass[:, :n]
            out[i, :-1] = mass / mass.sum(-1, keepdim=True).clamp(min=1e-300)
        return (out * batch.mask.cpu().unsqueeze(-1)).to(batch.tokens.device)
