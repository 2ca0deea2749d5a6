"""Score trained ensembles against the exact posterior on fixed evaluation sets.

- `eval_set(task, n)`: the task's evaluation sequences, drawn from a seed fixed per task and
  disjoint from every training-data seed, cached in memory (and on disk with `cache_dir`).
- `evaluate_members(model, batch)`: the three metrics in bits per member (entropy MAE per
  sequence and position, entropy MAE of per-position means, KL(p || q)), with 95% intervals
  over sequences and per-position curves (`metrics.score`).
- `permute_hmm_labels(task, batch, generator)`: the label-permutation check (docs/science.md,
  "HMM state tracking"; Paper I, arXiv 2512.22471, Fig. 8): relabel
  the hidden states by sigma (T'[sigma(i), sigma(j)] = T[i, j], E'[sigma(i), o] = E[i, o]) and
  recompute the exact posterior; a model that filters the HMM given in the header must score
  the same on both (paired difference with its interval).
- `evaluate(model, task, ...)`: all of it, one `record.MemberEvaluation` per member (typed
  `EvalResult`s per evaluation set, curves, the permutation check) for the run record.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from typing import cast

import torch
from torch import Tensor

from ..models import EnsembleModel
from ..models.heads import CATEGORICAL, is_continuous, read_outputs
from ..oracle import hmm_filter
from ..store.records import EvalResult, MemberEvaluation, PermutationCheck, PositionCurves
from ..tasks import Batch, Task
from ..tasks.bijection import SCORED_SETS, BijectionTask
from ..tasks.hmm import HMMTask
from ..training.checkpoint import DamagedFile, load_checkpoint, save_atomic
from ..training.curves import exact_float32
from ..training.seeds import eval_seed
from .continuous import score_continuous
from .metrics import BuiltInScores, Summary, final_cases, score, summarize

DEFAULT_SEQUENCES = 4096
#: The tunnels trained at one length K and scored at longer ones (`eval_lengths`).
LENGTH_TUNNELS = ("hmm", "kalman")
# Part of every evaluation set's identity: raise it when the way sets are drawn changes (a
# tunnel's own changes raise its `Task.version`, which the identity holds too).
EVAL_SET_VERSION = 2
_cache: dict[str, Batch] = {}


def eval_set_id(task: Task, n: int = DEFAULT_SEQUENCES, seed: int | None = None) -> str:
    """The identity of an evaluation set: a hash of the task's configuration and code (a
    built-in tunnel's version, an outside tunnel's file contents: `Task.code`), the set's size
    and seed. An edited tunnel file or a raised version names another set, never a cached one."""
    seed = eval_seed(task) if seed is None else seed
    text = json.dumps({"sets": EVAL_SET_VERSION, "task": task.config(), "code": task.code(), "n": n, "seed": seed},
                      sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def eval_set(task: Task, n: int = DEFAULT_SEQUENCES, *, seed: int | None = None,
             cache_dir: str | None = None) -> Batch:
    """The fixed evaluation batch of `task` (n sequences, CPU), cached by `eval_set_id`."""
    seed = eval_seed(task) if seed is None else seed
    key = eval_set_id(task, n, seed)
    if key in _cache:
        return _cache[key]
    path = None if cache_dir is None else os.path.join(cache_dir, f"eval-{task.name}-{key}.pt")
    batch = _read_cached(path) if path is not None and os.path.exists(path) else None
    if batch is None:
        batch = task.sample(n, torch.Generator().manual_seed(seed))
        if path is not None:
            save_atomic({f.name: getattr(batch, f.name) for f in dataclasses.fields(batch)}, path)
    _cache[key] = batch
    return batch


def _read_cached(path: str) -> Batch | None:
    """A cached evaluation set, or None (with a note naming the file) when it is damaged: it is
    derived data, redrawn from its fixed seed and rewritten."""
    try:
        return Batch(**load_checkpoint(path, what="cached evaluation set"))
    except (DamagedFile, TypeError):
        print(f"bayesbench: the cached evaluation set {path} is unreadable (damaged or from another version); "
              "redrawing it from its fixed seed and replacing the file", file=sys.stderr, flush=True)
        return None


@torch.no_grad()
def predict(model: EnsembleModel, batch: Batch, chunk: int = 512) -> Tensor:
    """Log-probabilities [E, N, L, C] (float64, CPU) of every member on the same sequences,
    computed in exact float32 (no TF32, no autocast) whatever precision the model trained in
    (a `GivenPredictions`: the ones read from its file)."""
    from .predictions import GivenPredictions

    if isinstance(model, GivenPredictions):  # a file's predictions (`bayesbench score --predictions`): read back
        return model.log_probs(batch)
    with exact_float32(), torch.autocast("cuda", enabled=False), torch.autocast("cpu", enabled=False):
        return _predict(model, batch, chunk)


def _predict(model: EnsembleModel, batch: Batch, chunk: int) -> Tensor:
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    E, out = model.ensemble, []
    head = getattr(model.shape, "head", CATEGORICAL)  # categorical: log-softmax; continuous: the predictive
    for start in range(0, batch.batch_size, chunk):
        tokens = batch.tokens[start : start + chunk].to(device)
        tokens = tokens.unsqueeze(0).expand(E, *tokens.shape)
        header = None
        if batch.header is not None:
            header = batch.header[start : start + chunk].to(device)
            header = header.unsqueeze(0).expand(E, *header.shape)
        out.append(read_outputs(model(tokens, header).double(), head).cpu())
    model.train(was_training)
    return torch.cat(out, dim=1)


@dataclasses.dataclass(frozen=True)
class MemberScore(BuiltInScores):
    """One member's errors on one evaluation set (all bits, on the task's scored positions):
    every final metric of the table (`metrics`, as `metrics.Score` has them)."""

    metrics: dict[str, Summary]
    errors: Tensor  # [N, L] |H(q) - H(p)|, for paired comparisons
    curves: PositionCurves


def evaluate_members(model: EnsembleModel, batch: Batch, task: Task | None = None) -> list[MemberScore]:
    """Every final metric of each member against batch.posterior, with curves; `task` (the
    batch's) decides which metrics apply (`metric_table.applies`; None: all those over every
    position). A diverged member (non-finite predictions) gets NaN scores; its siblings keep theirs."""
    log_q = predict(model, batch)
    p, mask = batch.posterior.double(), batch.mask
    continuous = task is not None and is_continuous(task.head)
    cases = {} if continuous else final_cases(task, batch)
    positions = mask.any(0).nonzero().flatten()
    scores = []
    for e in range(model.ensemble):
        if continuous:  # log_q holds each member's predictive density (`models.heads` layout)
            assert task is not None
            s = score_continuous(p, mask, log_q[e], batch.targets, dim=getattr(task, "error_dim", 1),
                                 task=task.name, nonfinite="nan")
        else:
            s = score(p, mask, log_q=log_q[e], nonfinite="nan", task=None if task is None else task.name,
                      cases=cases)
        def curve(c: Tensor) -> list[float]:
            return [float(x) for x in c[positions]]
        scores.append(MemberScore(
            s.metrics, s.entropy_error,
            PositionCurves(position=positions.tolist(), entropy_mae=curve(s.entropy_mae_curve), kl=curve(s.kl_curve),
                           model_entropy=curve(s.model_entropy_curve), bayes_entropy=curve(s.bayes_entropy_curve))))
    return scores


def permute_hmm_labels(task: Task, batch: Batch, generator: torch.Generator) -> Batch:
    """The same HMM sequences with hidden-state labels permuted by a random sigma per sequence.

    T'[sigma(i), sigma(j)] = T[i, j], E'[sigma(i), o] = E[i, o], init'[sigma(i)] = init[i],
    s'_t = sigma(s_t); observations unchanged; the posterior is recomputed by the oracle.
    """
    lat = batch.latents
    trans, emit, init, states, obs = lat["trans"], lat["emit"], lat["init"], lat["states"], lat["obs"]
    B, S = init.shape
    sigma = torch.rand((B, S), generator=generator).argsort(-1)  # sigma[b, i]: new label of state i
    inv = sigma.argsort(-1)  # inv[b, new label] = old label
    rows = inv.unsqueeze(-1)
    trans_p = trans.gather(1, rows.expand(B, S, S)).gather(2, inv.unsqueeze(1).expand(B, S, S))
    emit_p = emit.gather(1, rows.expand(B, S, emit.shape[2]))
    init_p = init.gather(1, inv)
    states_p = sigma.gather(1, states)
    post = hmm_filter(trans_p, emit_p, obs, init_p)  # without return_loglik: the posteriors only
    return cast(HMMTask, task).assemble(trans_p, emit_p, init_p, states_p, obs, post)


def scored_positions(task: Task) -> str:
    """Which positions a task's numbers average over, in words."""
    if task.name == "bijection":
        bijection = cast(BijectionTask, task)
        parts = []
        if bijection.supervise in ("values", "both"):
            parts.append(f"the {bijection.L} value predictions (pi(x_k) at each key x_k, k = 1..{bijection.L})")
        if bijection.supervise in ("query", "both"):
            parts.append("the final query (a retrieval: point-mass posterior)")
        return " and ".join(parts)
    if task.name == "hmm":
        return f"the K = {cast(HMMTask, task).K} observation positions (filtering posterior p(s_t | o_1..t))"
    if task.name in ("linreg", "mixreg"):
        return f"the n = {getattr(task, 'n')} x positions (predictive density of y_k given x_k and the pairs before)"
    if task.name == "kalman":
        return f"the K = {getattr(task, 'K')} predictions of y_t from y_1..y_t-1 (the Kalman filter's predictive)"
    return "every supervised position"




def evaluation_tasks(task: Task, lengths: tuple[int, ...] = (), scored: tuple[str, ...] = ()) -> dict[str, Task]:
    """{name: task} to score: the primary evaluation first.

    `lengths` (HMM): the trained K first, then the length-generalisation variants ("K=30").
    `scored` (bijection): which positions each evaluation scores, by name: "values" (the value
    positions, where the papers' bijection numbers are measured), "values+query" (also the final
    retrieval query, which the authors' training script supervises) or "query".
    """
    if lengths and scored:
        raise ValueError("give eval lengths (hmm) or scored position sets (bijection), not both")
    if scored:
        if task.name != "bijection":
            raise ValueError(f"scored position sets apply to the bijection task only, got task {task.name!r}")
        unknown = [s for s in scored if s not in SCORED_SETS]
        if unknown:
            raise ValueError(f"scored sets must be among {tuple(SCORED_SETS)}, got {unknown}")
        return {name: dataclasses.replace(cast(BijectionTask, task), supervise=SCORED_SETS[name]) for name in scored}
    if not lengths:
        return {"standard": task.scoring_task()}
    if task.name not in LENGTH_TUNNELS:
        raise ValueError(f"eval lengths apply to the {' and '.join(LENGTH_TUNNELS)} tasks only, got task {task.name!r}")
    K = getattr(task, "K")
    return {f"K={K}": task, **{f"K={k}": dataclasses.replace(task, K=int(k)) for k in lengths}}


def max_eval_len(task: Task, lengths: tuple[int, ...] = (), scored: tuple[str, ...] = ()) -> int:
    """Position embeddings must cover this length (the longest evaluation sequence)."""
    return max(t.seq_len for t in evaluation_tasks(task, lengths, scored).values())


def evaluate(model: EnsembleModel, task: Task, *, lengths: tuple[int, ...] = (), scored: tuple[str, ...] = (),
             n_sequences: int = DEFAULT_SEQUENCES, permutation_check: bool | None = None,
             cache_dir: str | None = None) -> list[MemberEvaluation]:
    """Score every member; returns one MemberEvaluation per member.

    The primary evaluation is the first of `evaluation_tasks` (for the HMM: K as trained). Each
    evaluation holds the three metrics and the floors (uniform and context-ignoring marginal
    predictors, `bayesbench.scoring.floors`) on the same sequences. With `permutation_check` (default:
    on for the HMM) the primary set is also scored with permuted labels.
    """
    from .floors import MARGINAL_SEQUENCES, floor_scores

    tasks = evaluation_tasks(task, lengths, scored)
    primary = next(iter(tasks))
    from .predictions import GivenPredictions

    if permutation_check is None:  # a predictions file holds none for the relabelled sequences
        permutation_check = task.name == "hmm" and not isinstance(model, GivenPredictions)
    if permutation_check and task.name != "hmm":
        raise ValueError(f"permutation_check applies to the hmm task only (it relabels hidden states), "
                         f"got task {task.name!r}")
    evals: list[dict[str, EvalResult]] = [{} for _ in range(model.ensemble)]
    curves: list[dict[str, PositionCurves]] = [{} for _ in range(model.ensemble)]
    for name, t in tasks.items():
        batch = eval_set(t, n_sequences, cache_dir=cache_dir)
        scores = evaluate_members(model, batch, t)
        reference = batch if is_continuous(t.head) else eval_set(  # a continuous tunnel's floors need none
            t, MARGINAL_SEQUENCES, seed=eval_seed(t, "marginal"), cache_dir=cache_dir)
        floors = floor_scores(batch, reference, task=t)
        if name == primary:
            plain, plain_batch = scores, batch
        for e, s in enumerate(scores):
            evals[e][name] = EvalResult(task=t.describe(), positions=scored_positions(t), scores=dict(s.metrics),
                                        floors=floors, set_id=eval_set_id(t, n_sequences))
            curves[e][name] = s.curves
    checks: list[PermutationCheck | None] = [None] * model.ensemble
    if permutation_check:
        seed = eval_seed(task, "permute")
        perm = evaluate_members(model, permute_hmm_labels(task, plain_batch, torch.Generator().manual_seed(seed)), task)
        for e in range(model.ensemble):
            diff = summarize(plain[e].errors - perm[e].errors, plain_batch.mask, nonfinite="nan")
            checks[e] = PermutationCheck(eval=primary, entropy_mae=plain[e].entropy_mae.mean,
                                         entropy_mae_permuted=perm[e].entropy_mae.mean, difference=diff)
    return [MemberEvaluation(primary, evals[e], curves[e], checks[e]) for e in range(model.ensemble)]
