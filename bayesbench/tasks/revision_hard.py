"""Belief revision from soft evidence (docs/science.md#belief-revision): the authors' "hard"
task (public code `vishalmisra/bayesian-wind-tunnel`, src/data/belief_revision_hard.py; no
script of that repository uses it and no paper of the series reports on it).

N candidates are introduced in a fixed order, a pronoun refers to one of them (Z ~ Uniform), and
K evidence symbols follow, each e_j ~ E[Z, :] independently given Z, then a query and the answer:

    INTRO 0 FILLER*m ... INTRO N-1 FILLER*m PRONOUN EVIDENCE e_1 ... EVIDENCE e_K QUERY Z

E is one N x N emission matrix for the whole task (not per sequence), built as the authors do:
rows D_z ~ Dirichlet(alpha) drawn by numpy's `default_rng(emission_seed)`, plus `boost` on the
diagonal, renormalised: E = (D + boost I) / (1 + boost). At the authors' setting (N=16,
alpha=0.3, boost=2, seed 42) it is their matrix, number for number.

Tokens: candidate ids 0..N-1 (the classes), then INTRO, FILLER, PRONOUN, EVIDENCE, QUERY. The
scored positions and their exact predictives (`oracle.revision.evidence_predictive`):

- each EVIDENCE marker (supervise="all"): the next evidence symbol, sum_z P(z | e_<j) E[z, :];
- QUERY (both): the answer Z, P(Z = z | e_1..e_K) proportional to prod_j E[z, e_j]: the authors'
  only target (supervise="query"), there a soft target; here the sampled Z is the hard target and
  the belief the posterior it is scored against.

The authors put m_filler=4 fillers after each introduction; the default 0 keeps the tests fast
(fillers change no posterior).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch import Tensor

from ..checks import int_at_least, number_in, one_of, positive_number
from ..oracle.revision import evidence_predictive
from ._random import categorical
from .base import IGNORE_INDEX, Batch, Task, batch_device, check_batch_size, check_fits
from .registry import register_task

SUPERVISE = ("all", "query")
SPECIALS = ("INTRO", "FILLER", "PRONOUN", "EVIDENCE", "QUERY")


@functools.lru_cache(maxsize=16)
def _emission(N: int, alpha: float, boost: float, seed: int) -> tuple[tuple[float, ...], ...]:
    import numpy as np

    rows = np.random.default_rng(seed).dirichlet(np.ones(N) * alpha, size=N) + boost * np.eye(N)
    rows = rows / rows.sum(axis=1, keepdims=True)
    return tuple(tuple(float(v) for v in r) for r in rows)


def emission_matrix(N: int, alpha: float, boost: float, seed: int) -> Tensor:
    """The task's fixed emission matrix [N, N] float64 (module docstring)."""
    return torch.tensor(_emission(N, alpha, boost, seed), dtype=torch.float64)


@register_task("revision_hard")
@dataclass(frozen=True)
class RevisionHardTask(Task):
    """N candidates, K evidence symbols from a fixed Dirichlet(alpha) + boost emission matrix."""

    n_candidates: int = 16
    n_evidence: int = 5
    m_filler: int = 0
    alpha: float = 0.3
    boost: float = 2.0
    emission_seed: int = 42
    supervise: str = "all"

    name = "revision_hard"

    def __post_init__(self) -> None:
        int_at_least("n_candidates", self.n_candidates, 2, "candidate referents")
        int_at_least("n_evidence", self.n_evidence, 1, "evidence symbols")
        int_at_least("m_filler", self.m_filler, 0, "fillers after each introduction")
        positive_number("alpha", self.alpha, "the Dirichlet concentration of the emission rows")
        number_in("boost", self.boost, 0.0, what="added to the emission matrix's diagonal")
        int_at_least("emission_seed", self.emission_seed, 0, "numpy seed of the emission matrix")
        one_of("supervise", self.supervise, SUPERVISE)
        self.check_size()

    @property
    def emission(self) -> Tensor:
        return emission_matrix(self.n_candidates, float(self.alpha), float(self.boost), self.emission_seed)

    @property
    def special(self) -> dict[str, int]:
        return {s: self.n_candidates + i for i, s in enumerate(SPECIALS)}

    @property
    def vocab_size(self) -> int:
        return self.n_candidates + len(SPECIALS)

    @property
    def num_classes(self) -> int:
        return self.n_candidates

    @property
    def evidence_start(self) -> int:
        """Position of the first EVIDENCE marker."""
        return self.n_candidates * (2 + self.m_filler) + 1

    @property
    def seq_len(self) -> int:
        return self.evidence_start + 2 * self.n_evidence + 2

    def sequence_bytes(self, dtype: torch.dtype = torch.float32) -> int:
        """Posterior [T, N], the oracle's float64 beliefs [K + 1, N] and the emission matrix."""
        N, K = self.n_candidates, self.n_evidence
        return super().sequence_bytes(dtype) + ((K + 1) * N * 2 + N * N) * 8

    def layout(self, evidence: Tensor, z: Tensor) -> Tensor:
        """The token sequences [B, T] of evidence [B, K] and referents z [B]."""
        B, K = evidence.shape
        N, sp = self.n_candidates, self.special
        step = 2 + self.m_filler
        tokens = torch.full((B, self.seq_len), sp["FILLER"], dtype=torch.long, device=evidence.device)
        cand = torch.arange(N, device=evidence.device)
        tokens[:, cand * step] = sp["INTRO"]
        tokens[:, cand * step + 1] = cand
        start = self.evidence_start
        tokens[:, start - 1] = sp["PRONOUN"]
        tokens[:, start:start + 2 * K:2] = sp["EVIDENCE"]
        tokens[:, start + 1:start + 2 * K:2] = evidence
        tokens[:, start + 2 * K] = sp["QUERY"]
        tokens[:, start + 2 * K + 1] = z
        return tokens

    def scored_positions(self) -> Tensor:
        """The EVIDENCE markers (supervise="all") and the QUERY."""
        start, K = self.evidence_start, self.n_evidence
        pos = torch.arange(start, start + 2 * K + 1, 2)
        return pos if self.supervise == "all" else pos[-1:]

    def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32) -> Batch:
        B, N, K = check_batch_size(batch_size), self.n_candidates, self.n_evidence
        dev = batch_device(generator, device)
        check_fits(self, B, dev, dtype)
        emission = self.emission.to(dev)
        z = torch.randint(0, N, (B,), generator=generator, device=dev)
        evidence = categorical(emission[z].unsqueeze(1).expand(B, K, N).contiguous(), generator)
        tokens = self.layout(evidence, z)
        pred = evidence_predictive(evidence, emission, dtype=dtype)  # [B, K + 1, N]
        pos = self.scored_positions().to(dev)
        rows = torch.arange(K + 1, device=dev)[-pos.numel():]
        T = self.seq_len
        mask = torch.zeros((B, T), dtype=torch.bool, device=dev)
        mask[:, pos] = True
        targets = torch.full((B, T), IGNORE_INDEX, dtype=torch.long, device=dev)
        targets[:, pos] = tokens[:, pos + 1]
        posterior = torch.zeros((B, T, N), dtype=dtype, device=dev)
        posterior[:, pos] = pred[:, rows]
        return Batch(tokens, mask, targets, posterior, {"referent": z, "evidence": evidence})

    def brute_force_posterior(self, batch: Batch) -> Tensor:
        """The posterior [B, T, N] as the sum over the latent z written out, in float64 products:
        P(next = v | prefix) = sum_z (1/N) prod_{i<j} E[z, e_i] E[z, v] / sum_z (1/N) prod_{i<j} E[z, e_i]
        at each EVIDENCE marker, and (1/N) prod_i E[v, e_i] / sum_z (...) at the QUERY; read from
        the tokens alone."""
        E = self.emission
        N, K, start = self.n_candidates, self.n_evidence, self.evidence_start
        tokens = batch.tokens.cpu()
        B, T = tokens.shape
        out = torch.zeros((B, T, N), dtype=torch.float64)
        for i in range(B):
            joint = torch.full((N,), 1.0 / N, dtype=torch.float64)  # P(z, e_1..e_j)
            for j in range(K + 1):
                at = start + 2 * j
                if j < K:
                    nxt = joint.unsqueeze(1) * E  # [z, v]: P(z, e_<j, e_j = v)
                    out[i, at] = nxt.sum(0) / joint.sum()
                    joint = joint * E[:, int(tokens[i, at + 1])]
                else:
                    out[i, at] = joint / joint.sum()
        return (out * batch.mask.cpu().unsqueeze(-1)).to(batch.tokens.device)
