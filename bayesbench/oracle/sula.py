"""The exact posterior of SULA, the label-mapping prompts of the authors' third paper
("Geometric Scaling of Bayesian Inference in LLMs", Misra et al., arXiv 2512.23752, Sec. 3:
Semantically Unrelated Label Assignment): a prompt shows K examples "word: label" whose labels
are noisy glimpses of one latent label y of two, then asks for the label of a test word.

The generative model (two-way Bayes): y is one of two labels with prior 1/2 each; every shown
label equals y with probability alpha and is the other label with probability 1 - alpha,
independently; the words carry nothing. After shown labels l_1..l_i with n_1 of them label 1 and
n_0 label 0, the log-odds of y = 1 against y = 0 are (n_1 - n_0) log(alpha / (1 - alpha)), so

    P(y = 1 | l_1..l_i) = sigmoid((n_1 - n_0) log(alpha / (1 - alpha)))

and the next shown label's predictive is P(l_{i+1} = 1 | l_1..l_i) = alpha p + (1 - alpha)(1 - p)
with p that posterior. `sula_posterior` computes both in closed form (vectorised, float64 then
cast); `sula_posterior_reference` recomputes them by enumerating the two values of y and
multiplying the likelihoods, one plain Python float per step: an independent computation the
tunnel's checks compare with.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def check_labels(labels: Tensor) -> None:
    if labels.dim() != 2:
        raise ValueError(f"labels must be [B, K] (the shown labels, 0 or 1), got shape {tuple(labels.shape)}")
    if labels.numel() and not bool(((labels == 0) | (labels == 1)).all()):
        raise ValueError("labels must be 0 or 1 (the two labels)")


def sula_posterior(labels: Tensor, alpha: float, *, dtype: torch.dtype = torch.float64) -> tuple[Tensor, Tensor]:
    """(posterior, predictive) for shown labels [B, K] in {0, 1}: posterior [B, K + 1, 2] is
    P(y | l_1..l_i) for i = 0..K (row 0 the prior), predictive [B, K + 1, 2] the next shown
    label's P(l_{i+1} | l_1..l_i) (module doc); computed in float64, returned in `dtype`."""
    check_labels(labels)
    B, K = labels.shape
    sign = 2.0 * labels.double() - 1.0  # +1 for label 1, -1 for label 0
    diff = torch.cat([torch.zeros(B, 1, dtype=torch.float64, device=labels.device), sign.cumsum(1)], 1)
    p1 = torch.sigmoid(diff * math.log(alpha / (1.0 - alpha)))
    post = torch.stack([1.0 - p1, p1], -1)
    q1 = alpha * p1 + (1.0 - alpha) * (1.0 - p1)
    pred = torch.stack([1.0 - q1, q1], -1)
    return post.to(dtype), pred.to(dtype)


def sula_posterior_reference(labels: Tensor, alpha: float) -> tuple[Tensor, Tensor]:
    """`sula_posterior` by enumeration: for each sequence and prefix, the joint P(y) prod_j
    P(l_j | y) for y = 0 and y = 1 multiplied out in plain floats, normalised (float64)."""
    check_labels(labels)
    B, K = labels.shape
    post = torch.zeros(B, K + 1, 2, dtype=torch.float64)
    pred = torch.zeros(B, K + 1, 2, dtype=torch.float64)
    for b in range(B):
        shown = [int(v) for v in labels[b].tolist()]
        for i in range(K + 1):
            joint = [0.5, 0.5]
            for y in (0, 1):
                for lab in shown[:i]:
                    joint[y] *= alpha if lab == y else 1.0 - alpha
            z = joint[0] + joint[1]
            p = [joint[0] / z, joint[1] / z]
            post[b, i] = torch.tensor(p, dtype=torch.float64)
            # the next label: sum over y of P(y | shown) P(l | y)
            nxt = [sum(p[y] * (alpha if lab == y else 1.0 - alpha) for y in (0, 1)) for lab in (0, 1)]
            pred[b, i] = torch.tensor(nxt, dtype=torch.float64)
    return post, pred
