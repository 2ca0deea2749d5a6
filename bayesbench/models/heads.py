"""Predictive heads: how the C outputs a model gives at a position are read as a distribution.

A task declares its head (`Task.head`, carried by `TaskShape.head`); every architecture maps its
final hidden states onto `TaskShape.num_classes` raw outputs with its own linear layer, so the
head is not a layer of each model but a reading of those outputs, defined once here. That is
what gives built-in architectures, outside models (`--model ./file.py:build`) and `hf:` models
the same continuous head with no code of theirs (issue 41: "in one place, not per model").

- "categorical": C logits over the task's classes (every discrete tunnel; unchanged).
- "gaussian": C = 2 outputs (mean, log-variance): y ~ N(mean, exp(log-variance)).
- "mixture:M": C = 3M outputs (M logits of the component weights, M means, M log-variances):
  y ~ sum_j softmax(logits)_j N(mean_j, exp(log-variance_j)) (a mixture density network,
  Bishop 1994, "Mixture Density Networks").

A continuous predictive travels through scoring in one layout, `[..., 3M]`: the M weights, the M
means, then the M variances (a Gaussian is M = 1 with weight 1). The exact posteriors of the
continuous tunnels (`Batch.posterior`) use the same layout with their own number of components.
The log-variance is clamped to [LOG_VAR_MIN, LOG_VAR_MAX] before exp so that an untrained head
never gives a zero or infinite variance.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

CATEGORICAL = "categorical"
GAUSSIAN = "gaussian"
MIXTURE = "mixture"
LOG_VAR_MIN, LOG_VAR_MAX = -18.0, 18.0
LOG_2PI = math.log(2.0 * math.pi)


def parse_head(head: str) -> tuple[str, int]:
    """('categorical' | 'gaussian' | 'mixture', M) of a head's name; a name of no head is a
    one-line ValueError naming the forms."""
    if head in (CATEGORICAL, GAUSSIAN):
        return head, 1
    if isinstance(head, str) and head.startswith(MIXTURE + ":"):
        m = head.split(":", 1)[1]
        if m.isdigit() and int(m) >= 1:
            return MIXTURE, int(m)
    raise ValueError(f"head must be 'categorical', 'gaussian' or 'mixture:M' with M >= 1 components, got {head!r}")


def is_continuous(head: str) -> bool:
    """Whether the head predicts a real number (gaussian or mixture), not a class."""
    return parse_head(head)[0] != CATEGORICAL


def head_outputs(head: str, num_classes: int = 0) -> int:
    """The number C of raw outputs a model gives per position for `head` (categorical: the classes)."""
    kind, m = parse_head(head)
    return num_classes if kind == CATEGORICAL else 2 if kind == GAUSSIAN else 3 * m


def head_of_outputs(c: int) -> str:
    """The continuous head whose raw outputs number c: 2 -> gaussian, 3M -> mixture:M (a loss
    given float targets reads its head from its outputs' width, `training.numerics`)."""
    if c == 2:
        return GAUSSIAN
    if c >= 3 and c % 3 == 0:
        return f"{MIXTURE}:{c // 3}"
    raise ValueError(f"a continuous head has 2 outputs (gaussian) or 3M (a mixture of M); got {c}")


def _split(raw: Tensor, head: str) -> tuple[Tensor, Tensor, Tensor]:
    """(log-weights, means, log-variances) [..., M] of raw outputs [..., C]."""
    kind, m = parse_head(head)
    if kind == CATEGORICAL:
        raise ValueError("a categorical head has no continuous predictive")
    if raw.shape[-1] != head_outputs(head):
        raise ValueError(f"a {head} head has {head_outputs(head)} outputs per position, got {raw.shape[-1]}")
    if kind == GAUSSIAN:
        mean, log_var = raw[..., :1], raw[..., 1:2]
        return torch.zeros_like(mean), mean, log_var.clamp(LOG_VAR_MIN, LOG_VAR_MAX)
    logits, mean, log_var = raw[..., :m], raw[..., m:2 * m], raw[..., 2 * m:]
    return torch.log_softmax(logits, -1), mean, log_var.clamp(LOG_VAR_MIN, LOG_VAR_MAX)


def predictive(raw: Tensor, head: str) -> Tensor:
    """The predictive of raw outputs [..., C] in the scoring layout [..., 3M] (weights, means,
    variances), in the raw outputs' dtype."""
    log_w, mean, log_var = _split(raw, head)
    return torch.cat([log_w.exp(), mean, log_var.exp()], -1)


def nll_nats(raw: Tensor, y: Tensor, head: str) -> Tensor:
    """-log q(y) in nats for raw outputs [..., C] and targets y [...]: the training loss of a
    continuous head (its mean over supervised positions estimates KL(Bayes || model) plus the
    Bayes predictive's entropy, so minimising it fits the whole predictive, not only its mean)."""
    log_w, mean, log_var = _split(raw, head)
    log_pdf = -0.5 * (LOG_2PI + log_var + (y.unsqueeze(-1) - mean) ** 2 * torch.exp(-log_var))
    return -torch.logsumexp(log_w + log_pdf, -1)


def split_layout(params: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(weights, means, variances) [..., M] of a predictive in the scoring layout [..., 3M]."""
    c = params.shape[-1]
    if c % 3:
        raise ValueError(f"a continuous predictive has 3M entries per position (weights, means, variances), got {c}")
    m = c // 3
    return params[..., :m], params[..., m:2 * m], params[..., 2 * m:]


def gaussian_layout(mean: Tensor, var: Tensor) -> Tensor:
    """N(mean, var) [...] in the scoring layout [..., 3] (weight 1)."""
    return torch.stack([torch.ones_like(mean), mean, var], -1)


def mixture_layout(weights: Tensor, means: Tensor, variances: Tensor) -> Tensor:
    """sum_j weights_j N(means_j, variances_j) ([..., J] each) in the scoring layout [..., 3J]."""
    return torch.cat([weights, means, variances], -1)


def read_outputs(raw: Tensor, head: str) -> Tensor:
    """What scoring reads of raw outputs [..., C]: log-probabilities (categorical, log-softmax)
    or the continuous predictive in the scoring layout [..., 3M]."""
    if parse_head(head)[0] == CATEGORICAL:
        return torch.log_softmax(raw, -1)
    return predictive(raw, head)
