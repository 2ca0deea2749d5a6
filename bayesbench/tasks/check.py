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
  test, its standard error the posterior's own: sum_t p_t(k) (1 - p_t(k)) per sequence, the
  variance of the draws if the posterior is exact). A posterior of another process, or targets
  from another distribution, fail these; a posterior that is calibrated but vaguer than the
  exact one (the uniform, say) passes them: only an enumeration can tell, so a task that can
  should offer one:
- against brute force, where the task offers it: a method `brute_force_posterior(batch)` (an
  enumeration, for small instances) must agree with `batch.posterior` to 1e-6 (float64) / 1e-4.

A tunnel with a continuous head (Task.head "gaussian" or "mixture:M", issue 41) is checked by
`check_continuous_task` (tasks/check_continuous.py) instead, and `check_validity` takes its own
continuous form (below).

Each failure is a ValueError naming the task and the rule; success returns the lines checked.
"""

from __future__ import annotations

import math
from typing import NoReturn

import torch

from ..models.heads import is_continuous
from .base import IGNORE_INDEX, Batch, Task
from .check_continuous import check_continuous_batch, check_continuous_task

SEQUENCES = 512
Z_LIMIT = 6.0


def _fail(task: Task, rule: str) -> NoReturn:
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
    """(class, mean over sequences of mean_t [1{y_t = k} - p_t(k)], its standard error under the
    posterior's own predicted probabilities) for the class whose gap is largest in standard
    errors (hard targets)."""
    p = batch.posterior.double()
    mask = batch.mask
    onehot = torch.nn.functional.one_hot(batch.targets.clamp(min=0), p.shape[-1]).double()
    d = torch.where(mask.unsqueeze(-1), onehot - p, torch.zeros_like(p)).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
    # The standard error under the null (the posterior is exact): given the past, 1{y_t = k} - p_t(k)
    # has mean 0 and variance p_t(k) (1 - p_t(k)), and such martingale differences are uncorrelated
    # across t, so Var(d_i) = E[sum_t p_t(k) (1 - p_t(k))] / m_i^2 for a sequence with m_i scored
    # positions. The sample's own spread underestimates it for a rare class (a skewed sample rarely
    # shows the draw of a rare class: revision at n_ids = 100 failed at z = -6.8 with it).
    n = d.shape[0]
    m = mask.sum(1, keepdim=True).clamp(min=1).double()
    var = torch.where(mask.unsqueeze(-1), p * (1 - p), torch.zeros_like(p)).sum(1) / m**2
    mean, se = d.mean(0), var.sum(0).sqrt() / n
    z = mean.abs() / se.clamp(min=1e-300)
    k = int(torch.argmax(torch.where(mean.abs() > 1e-6, z, torch.zeros_like(z))))
    return k, float(mean[k]), float(se[k])


def _continuous(task: Task) -> bool:
    """Whether `task`'s head predicts a real y (models.heads); a head of no known form is refused."""
    try:
        return is_continuous(task.head)
    except ValueError as err:
        _fail(task, str(err))


def check_task(task: Task, *, sequences: int = SEQUENCES, seed: int = 0) -> list[str]:
    """Check `task` as the module docstring says; returns one line per check passed. A tunnel with a
    continuous head (gaussian or mixture: `Task.head`) is checked by
    `tasks.check_continuous.check_continuous_task` instead."""
    if _continuous(task):
        return check_continuous_task(task, sequences=sequences, seed=seed)
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


# --- The validity check of a tunnel: the latent is not known at the first scored position ---------
#
# `check_validity(task)` (docs/tasks.md, "The validity check"; issue 42) verifies on a sampled
# batch the two properties that make a tunnel a test of in-context inference:
#
# (a) at each sequence's first scored position t0, the posterior is the prior predictive given
#     what the sequence shows up to t0, and nothing more: the latent is not recoverable from one
#     position. What a tunnel shows there is its own definition, so the rule takes one of three
#     forms, `first_scored_given` (a tunnel's attribute; the built-ins that predate it are in
#     `FIRST_SCORED_GIVEN` below):
#     - "nothing": t0 sees no evidence about the latent (markov, markov-k, vomc at depth >= 1:
#       only the uniform initial context; the bijection: a key before any pair). The posterior at
#       t0 must be the same for every sequence (within 1e-6 in float64, 1e-4 in float32), and equal
#       the frequency of the target at t0 over all sampled sequences (within Z_LIMIT binomial
#       standard errors per class): the marginal over many sampled sequences.
#     - "tokens" (the default): t0 conditions on the tokens shown at positions 0..t0 (the state
#       a chain is in: sticky's x_0; or one position's evidence: a coin's first flip, the urn's
#       first draw). The posterior at t0 must be a function of those tokens (the same for every
#       sequence that shows the same ones) and equal, for each such prefix, the frequency of the
#       target among the sampled sequences that show it (the prior predictive given the prefix,
#       by Monte Carlo). A sampler that leaks the latent into the tokens while the posterior
#       ignores the leak fails this (the targets follow the leak); a posterior that reads the
#       latent itself fails the first part. Only prefixes seen by at least MIN_GROUP sequences
#       are tested for frequency, and at least half the sequences must fall in such prefixes, or
#       the task is refused (its first scored position sees too much to group by; give it
#       `first_scored_prior`).
#     - "prior": the task gives `first_scored_prior(batch)` -> [B, C], the prior predictive at t0
#       from what is shown there (a header with continuous entries cannot be grouped by). The
#       posterior at t0 must equal it. The built-in HMM's is written here (`_hmm_first_prior`):
#       its header shows T, E and the initial distribution, and t0 is o_1's position, which
#       predicts s_1 from o_1: p(s_1 | o_1) proportional to init(s_1) E(s_1, o_1), one Bayes step
#       from the shown prior and nothing from later observations.
# (b) the posterior changes with the context: its mean total-variation distance from the same
#     sequence's posterior at t0, over the later scored positions, is at least MIN_CHANGE, and
#     at some later position two sequences that showed the same prefix through t0 (for "prior":
#     any two sequences) have different posteriors. A tunnel whose latent is fully shown at t0
#     (an observable hidden state) has nothing left to infer and fails this.
#
# A task whose first scored position is also its last (one scored position per sequence, as the
# bijection with supervise="query") fails (b): there is no later position. A task with a
# categorical head whose posterior is not a categorical [B, L, C] distribution is refused.
#
# A continuous tunnel (a gaussian or mixture head: linreg, mixreg, kalman, a user's own) takes
# the same two rules in its own form (`_check_validity_continuous`), against its prior predictive
# `floor_predictives(batch)["prior"]` (the predictive that ignores the context, at each scored
# position, given what that position itself shows):
# (a) at each sequence's first scored position t0, the posterior is that prior predictive:
#     KL(posterior || prior) <= CONTINUOUS_ATOL_BITS for every sequence (closed form for
#     Gaussians, the scoring's quadrature for mixtures, scoring/continuous.py). For linreg and
#     mixreg t0 shows x_1 and no pair: N(0, tau^2 |x_1|^2 + sigma^2), or the mixture over the
#     prior's components with the prior's weights. For kalman t0 (position m, where C is shown)
#     predicts y_1 given the header (A's rows and C at positions 0..m) and the settings (Q = q^2 I,
#     R = r^2, s_1 ~ N(0, p0^2 I)), before any observation: the filter's prior predictive
#     N(0, C P_1 C' + R) with P_1 = p0^2 I, i.e. N(0, p0^2 |C|^2 + r^2). Later positions' "prior"
#     there is N(0, C P_t C' + R), P_{t+1} = A P_t A' + Q: the header is shown, the observations not.
# (b) the posterior changes with the context: the mean of KL(posterior_t || prior_t) over the
#     later scored positions is at least MIN_CHANGE bits (the prior ignores the context, so a
#     posterior that never leaves it has learnt nothing from the pairs or observations).

FIRST_SCORED_GIVEN = {"bijection": "nothing", "markov": "nothing", "sticky": "tokens", "hmm": "prior"}
RULES = ("nothing", "tokens", "prior")
VALIDITY_SEQUENCES = 2048
MIN_GROUP = 16
MIN_CHANGE = 1e-3
CONTINUOUS_ATOL_BITS = 1e-6


def _hmm_first_prior(batch: Batch) -> torch.Tensor:
    """p(s_1 | o_1) proportional to init(s_1) E(s_1, o_1), from the HMM's shown matrices (latents)."""
    init, emit, obs = (batch.latents[k].double() if k != "obs" else batch.latents[k] for k in ("init", "emit", "obs"))
    joint = init * emit.gather(2, obs[:, :1].long().view(-1, 1, 1).expand(-1, emit.shape[1], 1)).squeeze(2)
    return joint / joint.sum(-1, keepdim=True)


BUILTIN_FIRST_PRIORS = {"hmm": _hmm_first_prior}


def first_scored_rule(task: Task) -> str:
    """The form of rule (a) for `task`: its own `first_scored_given`, else the built-in table's, else "tokens"."""
    rule = getattr(task, "first_scored_given", None)
    if rule is None:
        rule = FIRST_SCORED_GIVEN.get(task.name, "tokens")
    if rule not in RULES:
        _fail(task, f"first_scored_given must be one of {RULES}, got {rule!r}")
    return str(rule)


def _first_scored(batch: Batch) -> torch.Tensor:
    """[B] long: each sequence's first scored position."""
    return batch.mask.long().argmax(1)


def _prefix_groups(batch: Batch, t0: torch.Tensor) -> torch.Tensor:
    """[B] long: one id per distinct (t0, tokens 0..t0) (the header when the task has one, too)."""
    B, L = batch.tokens.shape
    upto = torch.arange(L).unsqueeze(0) <= t0.unsqueeze(1)
    shown = torch.where(upto, batch.tokens, torch.full_like(batch.tokens, -1))
    key = torch.cat([t0.unsqueeze(1), shown], 1).double()
    if batch.header is not None:
        key = torch.cat([key, batch.header.double().reshape(B, -1)], 1)
    return torch.unique(key, dim=0, return_inverse=True)[1]


def _constant_within(task: Task, p0: torch.Tensor, groups: torch.Tensor, what: str) -> None:
    atol = 1e-6 if p0.dtype == torch.float64 else 1e-4
    n = int(groups.max()) + 1
    lo = torch.full((n, p0.shape[1]), math.inf, dtype=torch.float64).scatter_reduce(
        0, groups.unsqueeze(1).expand_as(p0), p0.double(), "amin")
    hi = torch.full((n, p0.shape[1]), -math.inf, dtype=torch.float64).scatter_reduce(
        0, groups.unsqueeze(1).expand_as(p0), p0.double(), "amax")
    spread = float((hi - lo).max())
    if spread > atol:
        _fail(task, f"the posterior at the first scored position differs by {spread:.3g} between sequences that "
                    f"show {what}: it must be the prior predictive given only that (the latent is not known from "
                    "one position; tasks/check.py, check_validity)")


def _frequencies_match(task: Task, p0: torch.Tensor, y0: torch.Tensor, groups: torch.Tensor) -> tuple[float, int]:
    """Per group of at least MIN_GROUP sequences, the frequency of each target class against the
    (constant) posterior there; returns (largest |z|, sequences tested)."""
    n_groups = int(groups.max()) + 1
    C = p0.shape[1]
    size = torch.bincount(groups, minlength=n_groups).double()
    hits = torch.zeros((n_groups, C), dtype=torch.float64).index_put_(
        (groups, y0), torch.ones_like(y0, dtype=torch.float64), accumulate=True)
    mean_p = torch.zeros((n_groups, C), dtype=torch.float64).index_add_(0, groups, p0.double())
    mean_p = mean_p / size.clamp(min=1)[:, None]
    big = size >= MIN_GROUP
    tested = int(size[big].sum())
    freq = hits / size.clamp(min=1)[:, None]
    sd = torch.sqrt(mean_p * (1 - mean_p) / size.clamp(min=1)[:, None])
    gap = (freq - mean_p).abs()
    z = torch.where(sd > 0, gap / sd.clamp(min=1e-300), torch.where(gap > 1e-9, math.inf, 0.0))
    z = torch.where(big[:, None], z, torch.zeros_like(z))
    worst = float(z.max()) if z.numel() else 0.0
    if worst > Z_LIMIT:
        g, k = divmod(int(torch.argmax(z)), C)
        _fail(task, f"at the first scored position the target is class {k} with frequency {float(freq[g, k]):.4f} "
                    f"among {int(size[g])} sequences showing the same prefix, but the posterior there says "
                    f"{float(mean_p[g, k]):.4f} (z = {worst:.1f}): the tokens tell more about the target than the "
                    "posterior admits (a latent leaked into the sequence?)")
    return worst, tested


def is_categorical(batch: object) -> bool:
    """Whether `batch` is a Batch whose posterior is a float [B, L, C] distribution (non-negative,
    rows summing to 1) at every supervised position: what check_validity can check."""
    if not isinstance(batch, Batch) or not isinstance(batch.posterior, torch.Tensor):
        return False
    post, mask = batch.posterior, batch.mask
    if post.dim() != 3 or not post.dtype.is_floating_point or not isinstance(mask, torch.Tensor) \
            or tuple(mask.shape) != tuple(post.shape[:2]) or mask.dtype != torch.bool:
        return False
    rows = post[mask].double()
    atol = 1e-6 if post.dtype == torch.float64 else 1e-4
    return bool(torch.isfinite(rows).all() and (rows >= 0).all() and ((rows.sum(-1) - 1).abs() <= atol).all())


def check_validity(task: Task, *, sequences: int = VALIDITY_SEQUENCES, seed: int = 0) -> list[str]:
    """Check rules (a) and (b) above on `sequences` sampled sequences; returns one line per rule
    passed, raises ValueError naming the task and the rule otherwise."""
    try:
        batch = task.sample(sequences, torch.Generator().manual_seed(seed), dtype=torch.float64)
    except ValueError:
        raise
    except Exception as err:  # the user's sampler failing is the user's error
        raise ValueError(f"task {task.describe()}: sample() raised {type(err).__name__}: {err}") from err
    if _continuous(task):
        return _check_validity_continuous(task, batch)
    if not is_categorical(batch):
        post = batch.posterior if isinstance(batch, Batch) else None
        shape = type(post).__name__ if not isinstance(post, torch.Tensor) else list(post.shape)
        raise ValueError(f"task {task.describe()}: check_validity applies to tunnels with a categorical posterior "
                         f"[B, L, C] (a distribution over C classes at every scored position); this one's is {shape} "
                         "and not such a distribution, so it cannot be checked here")
    check_batch(task, batch, sequences, torch.device("cpu"))
    rule = first_scored_rule(task)
    B = batch.batch_size
    t0 = _first_scored(batch)
    rows = torch.arange(B)
    p0 = batch.posterior[rows, t0].double()
    hard = not batch.soft_targets
    y0 = batch.targets[rows, t0] if hard else None
    lines = []
    if rule == "prior":
        prior_fn = getattr(task, "first_scored_prior", None) or BUILTIN_FIRST_PRIORS.get(task.name)
        if prior_fn is None or not callable(prior_fn):
            _fail(task, "first_scored_given is 'prior' but the task has no first_scored_prior(batch)")
        want = prior_fn(batch).double()
        diff = float((want - p0).abs().max())
        if not diff <= 1e-6:
            _fail(task, f"the posterior at the first scored position differs by {diff:.3g} from the prior predictive "
                        "given what is shown there (first_scored_prior): the latent must not be known from one "
                        "position")
        lines.append(f"(a) first scored position: posterior = the prior predictive given what is shown there "
                     f"(max difference {diff:.1e})")
        groups = torch.zeros(B, dtype=torch.long)
    else:
        groups = torch.zeros(B, dtype=torch.long) if rule == "nothing" else _prefix_groups(batch, t0)
        what = "nothing (every sequence)" if rule == "nothing" else "the same tokens up to it"
        _constant_within(task, p0, groups, what)
        n_groups = int(groups.max()) + 1
        if y0 is not None:
            worst, tested = _frequencies_match(task, p0, y0, groups)
            if 2 * tested < B:
                _fail(task, f"its first scored position shows {n_groups} distinct prefixes in {B} sequences, too many "
                            f"to estimate the prior predictive given each (fewer than {MIN_GROUP} sequences each): "
                            "give the task first_scored_prior(batch) and first_scored_given = 'prior'")
            freq = f"; = the target's frequency there (largest |z| {worst:.1f}, {tested} sequences)"
        else:
            freq = " (soft targets: the frequency of the targets is not tested)"
        lines.append(f"(a) first scored position ({rule!r} shown): posterior the same for every sequence showing "
                     f"{what} ({n_groups} group{'s' if n_groups > 1 else ''}){freq}")
    later = batch.mask.clone()
    later[rows, t0] = False
    if not bool(later.any()):
        _fail(task, "has one scored position per sequence: the validity check needs a later one to see the posterior "
                    "change with the context")
    tv = 0.5 * (batch.posterior.double() - p0.unsqueeze(1)).abs().sum(-1)
    moved = float(tv[later].mean())
    if not moved >= MIN_CHANGE:
        _fail(task, f"the posterior does not change with the context: its mean total-variation distance from the "
                    f"first scored position's is {moved:.2g} (at least {MIN_CHANGE:g} needed; is the latent known "
                    "from the start?)")
    spread = 0.0
    for g in torch.unique(groups).tolist():  # a later position where sequences of one group disagree
        members = (groups == g).nonzero().squeeze(1)
        if members.numel() < 2:
            continue
        sub_mask, sub = later[members], batch.posterior[members].double()
        both = sub_mask.all(0)
        if not bool(both.any()):
            continue
        spread = max(spread, float((sub[:, both].amax(0) - sub[:, both].amin(0)).max()))
    if not spread > 1e-6:
        _fail(task, "the posterior at every later scored position is the same for all sequences that showed the same "
                    "prefix at the first: it does not depend on the context")
    lines.append(f"(b) the posterior changes with the context (mean total variation from the first scored position "
                 f"{moved:.3f}; sequences of one first-position group differ later by up to {spread:.3f})")
    return lines


def _check_validity_continuous(task: Task, batch: Batch) -> list[str]:
    """Rules (a) and (b) for a continuous tunnel (see the block above check_validity)."""
    from ..oracle.gaussian_bits import ContinuousValues

    if not isinstance(batch, Batch):
        _fail(task, f"sample() must return a bayesbench.tasks.Batch, got {type(batch).__name__}")
    B = batch.batch_size
    check_continuous_batch(task, batch, B, torch.device("cpu"))
    floors = getattr(task, "floor_predictives", None)
    refs = floors(batch) if callable(floors) else {}
    if "prior" not in refs:
        _fail(task, "the validity check of a continuous tunnel compares its posterior with its prior predictive: give "
                    "the task floor_predictives(batch) with a 'prior' entry")
    prior = refs["prior"].double()
    if tuple(prior.shape[:2]) != tuple(batch.mask.shape):
        _fail(task, f"floor_predictives(batch)['prior'] must be [B, L, 3K] with [B, L] = {list(batch.mask.shape)}, "
                    f"got {list(prior.shape)}")
    kl = ContinuousValues.of(batch.posterior.double(), prior, batch.targets.double(), batch.mask,
                             int(getattr(task, "error_dim", 1))).kl
    rows = torch.arange(B)
    t0 = _first_scored(batch)
    first = kl[rows, t0]
    worst = float(first.abs().max())
    if not worst <= CONTINUOUS_ATOL_BITS:
        _fail(task, f"the posterior at the first scored position differs from the prior predictive "
                    f"(floor_predictives 'prior') by KL = {worst:.3g} bits (allowed {CONTINUOUS_ATOL_BITS:g}): the "
                    "latent must not be known from one position (tasks/check.py, check_validity)")
    lines = [f"(a) first scored position: posterior = the prior predictive given what is shown there "
             f"(max KL {worst:.1e} bits)"]
    later = batch.mask.clone()
    later[rows, t0] = False
    if not bool(later.any()):
        _fail(task, "has one scored position per sequence: the validity check needs a later one to see the posterior "
                    "change with the context")
    moved = float(kl[later].mean())
    if not moved >= MIN_CHANGE:
        _fail(task, f"the posterior does not change with the context: its mean KL from the prior predictive over the "
                    f"later scored positions is {moved:.2g} bits (at least {MIN_CHANGE:g} needed)")
    lines.append(f"(b) the posterior changes with the context (mean KL from the prior predictive at the later scored "
                 f"positions {moved:.3f} bits)")
    return lines
