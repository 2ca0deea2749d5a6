"""SULA: the label-mapping prompts of the authors' third paper ("Geometric Scaling of Bayesian
Inference in LLMs", Misra et al., arXiv 2512.23752, Sec. 3, Semantically Unrelated Label
Assignment) as a wind tunnel, with their two-way Bayes posterior (`oracle/sula.py`).

Tokens: W carrier words 0..W-1 and the two labels W (label 0) and W + 1 (label 1). A sequence is
[w_1, l_1, ..., w_K, l_K, w_q, y]: K examples "word label", each label a noisy glimpse of one
latent label y (equal to y with probability alpha, independently), the words drawn uniformly
and carrying nothing; then the test word w_q and its label, which is y itself. Position 2i (a
word) predicts the label after it. The query's prediction (position 2K) is the authors'
measurement: the posterior over y given the K shown labels. With `score="all"` (the default)
every example's position is scored too, against the next shown label's predictive (the noisy
glimpse of y given the labels before it), which gives each prompt its K + 1 predictions from
k = 0 to K shown labels; `score="query"` scores the query alone, as the authors do.

Classes are the two labels (`class_tokens`: the symbols W and W + 1), which is what
`bayesbench llm` reads as candidates. Where this departs from the authors (docs/llm.md, SULA):
the words are W symbols of the tunnel, not their sentiment words (a verbaliser renders them);
the prompt is the words joined by spaces, not "word: label, ... test:"; one prompt shows K
labels and is scored at every prefix, where the authors draw separate prompts for each k in
{0, 1, 2, 4, 8}.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..checks import int_at_least, number_in, one_of
from ..oracle.sula import sula_posterior, sula_posterior_reference
from .base import IGNORE_INDEX, Batch, Task, batch_device, check_batch_size, check_fits
from .registry import register_task

SCORE = ("all", "query")


@register_task("sula")
@dataclass(frozen=True)
class SULATask(Task):
    """K noisy examples of one latent label of two (alpha: the chance an example shows it), W
    carrier words, then a test word whose label is the latent; module doc."""

    W: int = 4
    K: int = 6
    alpha: float = 0.9
    score: str = "all"

    name = "sula"
    #: The first scored position (position 0 with score="all") sees one carrier word and no
    #: label: its predictive is (1/2, 1/2) for every sequence (tasks/check.py).
    first_scored_given = "nothing"

    def __post_init__(self) -> None:
        int_at_least("W", self.W, 1, "carrier words")
        int_at_least("K", self.K, 0, "examples shown before the test word")
        number_in("alpha", self.alpha, 0, 1, low_open=True, high_open=True,
                  what="the chance an example's label is the latent label")
        one_of("score", self.score, SCORE)
        self.check_size()

    @property
    def vocab_size(self) -> int:
        return self.W + 2

    @property
    def num_classes(self) -> int:
        return 2

    @property
    def seq_len(self) -> int:
        return 2 * (self.K + 1)

    @property
    def class_tokens(self) -> tuple[int, ...]:
        """The symbol of each class (the two labels): what a text rendering reads as candidates."""
        return (self.W, self.W + 1)

    def _targets(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        labels = batch.tokens[:, 1::2] - self.W  # [B, K + 1]: the K shown labels, then y
        return labels[:, : self.K], labels

    def _assemble(self, post: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
        """[B, K + 1, 2]: the shown labels' predictive at the examples, the posterior at the query."""
        out = pred.clone()
        out[:, self.K] = post[:, self.K]
        return out

    def brute_force_posterior(self, batch: Batch) -> torch.Tensor:
        """The posterior [B, L, 2] recomputed by enumerating y (`oracle.sula_posterior_reference`)."""
        shown, _ = self._targets(batch.to("cpu"))
        post, pred = sula_posterior_reference(shown, self.alpha)
        out = torch.zeros(batch.batch_size, self.seq_len, 2, dtype=torch.float64)
        out[:, 0::2] = self._assemble(post, pred)
        return out * batch.mask.cpu().unsqueeze(-1)

    def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32) -> Batch:
        B, K, W = check_batch_size(batch_size), self.K, self.W
        dev = batch_device(generator, device)
        check_fits(self, B, dev, dtype)
        y = torch.randint(0, 2, (B, 1), generator=generator, device=dev)
        flip = torch.rand((B, K), generator=generator, device=dev, dtype=torch.float64) >= self.alpha
        shown = torch.where(flip, 1 - y, y)  # [B, K]
        words = torch.randint(0, W, (B, K + 1), generator=generator, device=dev)
        tokens = torch.empty((B, self.seq_len), dtype=torch.long, device=dev)
        tokens[:, 0::2] = words
        tokens[:, 1::2] = W + torch.cat([shown, y], 1)
        post, pred = sula_posterior(shown, self.alpha, dtype=dtype)
        mask = torch.zeros((B, self.seq_len), dtype=torch.bool, device=dev)
        scored = torch.arange(0, self.seq_len, 2, device=dev) if self.score == "all" else torch.tensor([2 * K],
                                                                                                        device=dev)
        mask[:, scored] = True
        posterior = torch.zeros((B, self.seq_len, 2), dtype=dtype, device=dev)
        posterior[:, 0::2] = self._assemble(post, pred)
        posterior = posterior * mask.unsqueeze(-1).to(dtype)
        targets = torch.full((B, self.seq_len), IGNORE_INDEX, dtype=torch.long, device=dev)
        targets[:, 0::2] = torch.cat([shown, y], 1)
        targets = torch.where(mask, targets, torch.full_like(targets, IGNORE_INDEX))
        return Batch(tokens, mask, targets, posterior, {"y": y.squeeze(1), "shown": shown})
