"""Checks of a wind tunnel before anything trains on it: `check_task(task)`.

Run on every outside task (tasks/outside.py) and usable on any task (`bayesbench tasks --check`):

- sizes: vocab_size, num_classes (>= 2) and seq_len are positive integers;
- the batch: `sample(B, generator)` returns a `Batch` whose tokens are long [B, L] in
  [0, vocab_size), mask bool [B, L] with a supervised position, targets hard (long, IGNORE_INDEX
  off the mask, a class on it) or soft ([B, L, C], distributions on the mask), posterior
  [B, L, C] finite, non-negative and a distribution at every supervised position, header [B, H, D]
  exactly when the task has one, every tensor on the generator's device;
- determinism: the same seed gives the same batch tensor for tensor, another seed another one,
  and the sequences of one batch are not all the same (a fresh latent per sequence);
- the posterior against the sampler: with hard targets, a target drawn by the sampler is on
  average exactly as surprising as the posterior's entropy says, E[-log2 p(y)] = E[H(p)]; the
  mean difference over sequences must be within 6 standard errors (or 1e-6 bits) of 0; and for
  each class k, the frequency of y = k matches the mean posterior probability of k (the same
  test). A posterior of another process, or targets from another distribution, fail these; a
  posterior that is calibrated but vaguer than the exact one (the uniform, say) passes them:
  only an enumeration can tell, so a task that can should offer one:
- against brute force, where the task offers it: a method `brute_force_posterior(batch)` (an
  enumeration, for small instances) must agree with `batch.posterior` to 1e-6 (float64) / 1e-4.

Each failure is a ValueError naming the task and the rule; success returns the lines checked.
"""

from __future__ import annotations

import math

import torch

from .base import IGNORE_INDEX, Batch, Task

SEQUENCES = 512
Z_LIMIT = 6.0


def _fail(task: Task, rule: str) -> None:
    raise ValueError(f"task {task.describe()}: {rule}")


def _distribution_rows(task: Task, name: str, x: torch.Tensor, mask: torch.Tensor) -> None:
    rows = x[mask]
    if not bool(torch.isfinite(rows).all()):
        _fail(task, f"{name} must be finite at the supervised positions (found NaN or inf)")
    if bool((rows < 0).any()):
        _fail(task, f"{name} must be non-negative (found {float(rows.min()):.3g})")
    atol = 1e-6 if rows.dtype == torch.float64 else 1e-4
    sums = rows.double().sum(-1)
    if bool(((sums - 1).abs() > atol).any()):
        bad = float(sums[(sums - 1).abs() > atol][0])
        _fail(task, f"{name} must be a distribution over the {x.shape[-1]} classes at every supervised position "
                    f"(a row sums to {bad:.8g}; allowed: within {atol:g} of 1)")


def check_batch(task: Task, batch: Batch, n: int, device: torch.device) -> None:
    """The shapes, types, ranges and normalisation of one sampled batch (see the module doc)."""
    if not isinstance(batch, Batch):
        _fail(task, f"sample() must return a bayesbench.tasks.Batch, got {type(batch).__name__}")
    L, C, V = task.seq_len, task.num_classes, task.vocab_size
    for name, x in (("tokens", batch.tokens), ("mask", batch.mask), ("targets", batch.targets),
                    ("posterior", batch.posterior)):
        if not isinstance(x, torch.Tensor):
            _fail(task, f"Batch.{name} must be a tensor, got {type(x).__name__}")
        if x.device != device:
            _fail(task, f"Batch.{name} must be on the generator's device {device}, got {x.device}")
    if tuple(batch.tokens.shape) != (n, L) or batch.tokens.dtype != torch.long:
        _fail(task, f"tokens must be long [B={n}, L={L}], got {batch.tokens.dtype} {list(batch.tokens.shape)}")
    if bool(((batch.tokens < 0) | (batch.tokens >= V)).any()):
        _fail(task, f"tokens must lie in [0, vocab_size={V}); found "
                    f"{int(batch.tokens.min())}..{int(batch.tokens.max())}")
    if tuple(batch.mask.shape) != (n, L) or batch.mask.dtype != torch.bool:
        _fail(task, f"mask must be bool [B={n}, L={L}], got {batch.mask.dtype} {list(batch.mask.shape)}")
    if not bool(batch.mask.any(1).all()):
        _fail(task, "every sequence needs at least one supervised position (mask True)")
    if tuple(batch.posterior.shape) != (n, L, C) or not batch.posterior.dtype.is_floating_point:
        _fail(task, f"posterior must be float [B={n}, L={L}, C={C}], got {batch.posterior.dtype} "
                    f"{list(batch.posterior.shape)}")
    _distribution_rows(task, "posterior", batch.posterior, batch.mask)
    t = batch.targets
    if t.dim() == 2:
        if tuple(t.shape) != (n, L) or t.dtype != torch.long:
            _fail(task, f"hard targets must be long [B={n}, L={L}], got {t.dtype} {list(t.shape)}")
        if bool((t[~batch.mask] != IGNORE_INDEX).any()):
            _fail(task, f"targets must be IGNORE_INDEX ({IGNORE_INDEX}) where the mask is False")
        on = t[batch.mask]
        if bool(((on < 0) | (on >= C)).any()):
            _fail(task, f"targets must be classes in [0, num_classes={C}) where the mask is True")
    elif t.dim() == 3:
        if tuple(t.shape) != (n, L, C) or not t.dtype.is_floating_point:
            _fail(task, f"soft targets must be float [B={n}, L={L}, C={C}], got {t.dtype} {list(t.shape)}")
        _distribution_rows(task, "soft targets", t, batch.mask)
    else:
        _fail(task, f"targets must be [B, L] (hard) or [B, L, C] (soft), got {list(t.shape)}")
    H, D = task.header_len, task.header_dim
    if H > 0:
        if batch.header is None or tuple(batch.header.shape) != (n, H, D):
            got = None if batch.header is None else list(batch.header.shape)
            _fail(task, f"header must be [B={n}, H={H}, D={D}] (header_len, header_dim), got {got}")
    elif batch.header is not None:
        _fail(task, "Batch.header is given but header_len is 0")


def _same(a: Batch, b: Batch) -> bool:
    pairs = [(a.tokens, b.tokens), (a.mask, b.mask), (a.targets, b.targets), (a.posterior, b.posterior)]
    if (a.header is None) != (b.header is None):
        return False
    if a.header is not None and b.header is not None:  # both or neither, by the test above
        pairs.append((a.header, b.header))
    return all(x.shape == y.shape and bool(torch.equal(x, y)) for x, y in pairs)


def surprise_gap(batch: Batch) -> tuple[float, float]:
    """(mean over sequences of mean_t [-log2 p(y_t) - H(p_t)], its standard error) for hard targets."""
    p = batch.posterior.double()
    mask = batch.mask
    y = batch.targets.clamp(min=0)
    p_y = p.gather(-1, y.unsqueeze(-1)).squeeze(-1)
    h = -torch.special.xlogy(p, p).sum(-1)
    gap = torch.where(mask, -torch.log(p_y) - h, torch.zeros_like(h)) / math.log(2)
    per_seq = gap.sum(1) / mask.sum(1).clamp(min=1)
    n = per_seq.numel()
    return float(per_seq.mean()), float(per_seq.std(unbiased=True) / math.sqrt(n)) if n > 1 else math.inf


def worst_calibrated_class(batch: Batch) -> tuple[int, float, float]:
    """(class, mean over sequences of mean_t [1{y_t = k} - p_t(k)], its standard error) for the
    class whose gap is largest in standard errors (hard targets)."""
    p = batch.posterior.double()
    mask = batch.mask
    onehot = torch.nn.functional.one_hot(batch.targets.clamp(min=0), p.shape[-1]).double()
    d = torch.where(mask.unsqueeze(-1), onehot - p, torch.zeros_like(p)).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
    n = d.shape[0]
    mean, se = d.mean(0), d.std(0, unbiased=True) / math.sqrt(n) if n > 1 else torch.full_like(d[0], math.inf)
    z = mean.abs() / se.clamp(min=1e-300)
    k = int(torch.argmax(torch.where(mean.abs() > 1e-6, z, torch.zeros_like(z))))
    return k, float(mean[k]), float(se[k])


def check_task(task: Task, *, sequences: int = SEQUENCES, seed: int = 0) -> list[str]:
    """Check `task` as the module docstring says; returns one line per check passed."""
    for name in ("vocab_size", "num_classes", "seq_len"):
        value = getattr(task, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < (2 if name == "num_classes" else 1):
            _fail(task, f"{name} must be an integer >= {2 if name == 'num_classes' else 1}, got {value!r}")
    lines = [f"sizes: vocab_size {task.vocab_size}, num_classes {task.num_classes}, seq_len {task.seq_len}"
             + (f", header {task.header_len} x {task.header_dim}" if task.header_len else "")]
    try:
        batch = task.sample(sequences, torch.Generator().manual_seed(seed))
        again = task.sample(sequences, torch.Generator().manual_seed(seed))
        other = task.sample(sequences, torch.Generator().manual_seed(seed + 1))
    except ValueError:
        raise
    except Exception as err:  # the user's sampler failing is the user's error
        raise ValueError(f"task {task.describe()}: sample() raised {type(err).__name__}: {err}") from err
    check_batch(task, batch, sequences, torch.device("cpu"))
    lines.append(f"batch of {sequences}: shapes, types, token and class ranges; posterior"
                 + (" and soft targets" if batch.soft_targets else "")
                 + " are distributions at every supervised position")
    if not _same(batch, again):
        _fail(task, "sample() is not deterministic: the same generator seed gave different batches (draw every "
                    "random number from the `generator` argument)")
    if bool(torch.equal(batch.tokens, other.tokens)):
        _fail(task, "sample() ignores the generator: two seeds gave the same tokens")
    if bool((batch.tokens == batch.tokens[:1]).all()):
        _fail(task, f"every sequence of a batch of {sequences} is the same: a wind tunnel needs a fresh latent per "
                    "sequence")
    lines.append("deterministic under a seed; another seed, other sequences; sequences differ within a batch")
    if not batch.soft_targets:
        gap, se = surprise_gap(batch)
        if abs(gap) > max(Z_LIMIT * se, 1e-6):  # (a uniform posterior makes every draw equally surprising)
            _fail(task, f"the posterior disagrees with the sampler: targets drawn by sample() are on average "
                        f"{gap:+.4f} bits {'more' if gap > 0 else 'less'} surprising than the posterior's entropy "
                        f"(z = {gap / se:.1f}; an exact posterior gives 0 within noise)")
        lines.append(f"posterior vs sampler: E[-log2 p(y)] - E[H(p)] = {gap:+.4f} bits (standard error {se:.4f})")
        k, diff, se_k = worst_calibrated_class(batch)
        if abs(diff) > max(Z_LIMIT * se_k, 1e-6):
            _fail(task, f"the posterior disagrees with the sampler: class {k} is drawn as the target with frequency "
                        f"{diff:+.4f} away from its mean posterior probability (z = {diff / se_k:.1f})")
        lines.append(f"class frequencies of the targets = mean posterior probabilities (largest gap {diff:+.4f}, "
                     f"class {k})")
    brute = getattr(task, "brute_force_posterior", None)
    if callable(brute):
        small = batch.slice(0, min(64, sequences))
        ref = brute(small)
        atol = 1e-6 if small.posterior.dtype == torch.float64 else 1e-4
        max_err = (ref.double() - small.posterior.double())[small.mask].abs().max().item()
        if not max_err <= atol:
            _fail(task, f"the posterior disagrees with brute_force_posterior by {max_err:.3g} (allowed {atol:g})")
        lines.append(f"posterior = brute-force enumeration on {small.batch_size} sequences (max error {max_err:.1e})")
    return lines
