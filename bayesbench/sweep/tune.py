"""Learning-rate tuning as part of a run: every (task, architecture) at its best rate, chosen on
held-out data, re-trained on fresh seeds (`bayesbench run --tune`, a sweep file's `tune`).

Three steps, each on the sweep engine (`sweep/driver.py`: the local pool or Ray, resumable,
exactly once by the jobs' keys):

1. **Selection.** Every candidate (a learning rate of the grid, crossed with any other axes by
   name, e.g. `warmup_steps`) trains on the same budget as the reported run (the same steps and
   batch) with `selection_seeds` seeds of its own (`selection_seeds`: from SELECTION_SEED_BASE, never
   a reported seed). With `packed` (the default) the rates of one axes setting are one ensemble
   whose members differ in their rate (`TrainConfig.member_lrs`: AdamW's step is linear in the
   rate, `training/optim.py`), so the whole grid is one training step. Each candidate's learning
   curve is measured on the *selection set* (`TrainConfig.curve_set="selection"`,
   `training/curves.py` `selection_batch`): sequences drawn apart from the evaluation set and the
   curve set, so no reported number chooses anything.
2. **The rule.** A candidate's score is the mean over its selection seeds of the selection
   curve's last point (`rule="final"`), or of its area against log(step) (`rule="auc"`, for a
   `--metric auc` leaderboard), in the curve metric `metric`; a diverged seed scores +inf. The
   lowest mean wins (the lower rate on a tie).
3. **The reported run.** The chosen candidate re-trained on the preset's seeds (0..N-1: none of
   them a selection seed), stored with `config["tuning"]`: the grid, the rule, every candidate's
   selection scores, which won, and two flags: a winner at the grid's edge ("best at the edge:
   widen the grid") and an architecture at the uniform floor at every candidate ("at floor at
   every rate tried: 1e-4 .. 1e-2").

A tuned job's identity holds its search (`TuneSpec.identity`, the job's role and candidate), so
a tuned row never shares a key with an untuned one, and the leaderboard never pools or ranks
them together (`store/tuning.py` `tuned_label`). Selection rows are stored (so a rerun
skips them and `bayesbench plot --tuning` draws them) and left out of every leaderboard.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass

from ..checks import SettingError
from ..metric_table import AT_FLOOR, curve_metrics
from ..store.tuning import candidate_score, member_lr, member_setting, rates_text, stopped_early
from ..training.config import TrainConfig
from .jobs import Job
from .request import TUNE_FIELDS

#: Selection seeds start here: far from every reported seed (a preset's 0..N-1), so a lucky seed
#: never picks its own rate. Candidate i of a grid of R, selection seed j: SELECTION_SEED_BASE + j * R + i.
SELECTION_SEED_BASE = 1_000_000
RULES = ("final", "auc")
PRUNERS = ("none", "median", "halving")
#: The grid a preset's default must at least have: this many rates over this ratio (issue 31's rule).
MIN_RATES, MIN_SPAN = 5, 30.0
DEFAULT_SELECTION_SEQUENCES = 512
#: TrainConfig fields an axis may tune besides the rate; `lr` itself is the grid.
AXES = ("warmup_steps", "schedule", "min_lr_ratio", "weight_decay", "beta1", "beta2", "grad_clip", "batch_size")


@dataclass(frozen=True)
class TuneSpec:
    """One learning-rate search: the grid, the other axes, how candidates are trained and chosen.

    lrs: the rates tried (at least 2, distinct); axes: other TrainConfig fields by name, each with
    its values, crossed with the rates; selection_seeds: seeds per candidate; rule: "final" or
    "auc"; metric: the curve metric the rule reads; selection_sequences: the selection set's
    size; packed: the rates of one axes setting as one ensemble with per-member rates (False: one
    job per candidate); prune: "none" (a plain grid, the default), "median" or "halving"
    (Optuna's MedianPruner or SuccessiveHalvingPruner on the selection curves: a pruned member
    stops training, frozen, and keeps its curve up to there)."""

    lrs: tuple[float, ...]
    selection_seeds: int = 2
    rule: str = "final"
    metric: str = "entropy_mae"
    selection_sequences: int = DEFAULT_SELECTION_SEQUENCES
    axes: tuple[tuple[str, tuple], ...] = ()
    packed: bool = True
    prune: str = "none"

    FIELDS = TUNE_FIELDS

    def __post_init__(self) -> None:
        lrs = self.lrs
        if isinstance(lrs, (str, bytes)) or not hasattr(lrs, "__iter__"):
            raise SettingError(f"lrs must be a list of learning rates, got {lrs!r}", ("lrs",))
        if any(isinstance(r, (bool, str)) for r in lrs):  # float(True) is 1.0, float("1e-3") a number: neither is one
            raise SettingError(f"lrs must be numbers, got {list(lrs)!r}", ("lrs",))
        try:
            lrs = tuple(float(r) for r in lrs)
        except (TypeError, ValueError):
            raise SettingError(f"lrs must be numbers, got {list(self.lrs)!r}", ("lrs",)) from None
        if len(lrs) < 2 or len(set(lrs)) != len(lrs) or not all(math.isfinite(r) and r > 0 for r in lrs):
            raise SettingError(f"lrs must be at least 2 distinct positive learning rates, got {list(lrs)}", ("lrs",))
        object.__setattr__(self, "lrs", tuple(sorted(lrs)))
        if isinstance(self.selection_seeds, bool) or not isinstance(self.selection_seeds, int) \
                or self.selection_seeds < 1:
            raise SettingError(f"selection_seeds must be a positive integer, got {self.selection_seeds!r}",
                               ("selection_seeds",))
        if self.rule not in RULES:
            raise SettingError(f"rule must be one of {RULES}, got {self.rule!r}", ("rule",))
        if self.metric not in curve_metrics():
            raise SettingError(f"metric must be one of {curve_metrics()}, got {self.metric!r}", ("metric",))
        if isinstance(self.selection_sequences, bool) or not isinstance(self.selection_sequences, int) \
                or self.selection_sequences < 16:
            raise SettingError(f"selection_sequences must be an integer >= 16, got {self.selection_sequences!r}",
                               ("selection_sequences",))
        if not isinstance(self.packed, bool):
            raise SettingError(f"packed must be true or false, got {self.packed!r}", ("packed",))
        if self.prune not in PRUNERS:
            raise SettingError(f"prune must be one of {PRUNERS}, got {self.prune!r}", ("prune",))
        if self.prune != "none" and self.packed:
            raise SettingError(f"prune={self.prune} stops a candidate's job early, which saves its compute only when "
                               "each candidate is a job of its own: give packed=false too", ("prune", "packed"))
        axes = dict(self.axes)
        for name, values in axes.items():
            if name not in AXES:
                raise SettingError(f"axes: {name!r} is not a setting tuning can search (the rate is `lrs`); "
                                   f"axes: {', '.join(AXES)}", ("axes",))
            if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__") or not list(values):
                raise SettingError(f"axes: {name} must be a list of values, got {values!r}", ("axes",))
            for value in values:
                try:
                    TrainConfig.check_settings({name: value})
                except SettingError as err:
                    raise SettingError(f"axes: {err}", ("axes",)) from None
        object.__setattr__(self, "axes", tuple((name, tuple(axes[name])) for name in sorted(axes)))

    @classmethod
    def of(cls, settings: dict, where: str = "tune") -> TuneSpec:
        """A TuneSpec from a dict (a preset's `tune`, a sweep file's, `--tune-args`); an unknown
        field or a bad value is a ValueError naming `where` and the field."""
        unknown = sorted(set(settings) - set(cls.FIELDS))
        if unknown:
            raise ValueError(f"{where}: unknown setting(s) {unknown}; settings: {', '.join(cls.FIELDS)}")
        if "lrs" not in settings:
            raise ValueError(f"{where}: lrs (the learning rates to try) is required")
        given = dict(settings)
        if isinstance(given.get("axes"), dict):
            given["axes"] = tuple(given["axes"].items())
        try:
            return cls(**given)
        except SettingError as err:
            raise ValueError(f"{where} {err}") from None

    @classmethod
    def of_identity(cls, tuning: dict, where: str) -> TuneSpec:
        """The search a tuned job's identity records (`identity`, beside its role and choice)."""
        return cls.of({k: tuning[k] for k in cls.FIELDS if k in tuning}, where)

    def identity(self) -> dict:
        """What a tuned job's key holds of the search: every field (pruning and packing change
        which numbers come out: a pruned member stops; a packed one rounds its step differently)."""
        return {"lrs": list(self.lrs), "selection_seeds": self.selection_seeds, "rule": self.rule,
                "metric": self.metric, "selection_sequences": self.selection_sequences,
                "axes": {name: list(values) for name, values in self.axes}, "packed": self.packed,
                "prune": self.prune}

    def settings(self) -> list[dict]:
        """Every setting of the other axes (their cross product; [{}] without axes)."""
        names = [name for name, _ in self.axes]
        return [dict(zip(names, combo)) for combo in itertools.product(*(values for _, values in self.axes))]

    def candidates(self) -> list[dict]:
        """Every candidate: {"lr": rate, **axes setting}, rates inner."""
        return [{"lr": lr, **setting} for setting in self.settings() for lr in self.lrs]

    def seeds_of(self, index: int) -> list[int]:
        """The selection seeds of the rate at `index` of the grid (the same for every axes setting)."""
        R = len(self.lrs)
        return [SELECTION_SEED_BASE + j * R + index for j in range(self.selection_seeds)]

    def describe(self) -> str:
        axes = "".join(f", {name} in {list(values)}" for name, values in self.axes)
        return (f"{len(self.lrs)} rates {rates_text(self.lrs)}{axes}, {self.selection_seeds} selection seed"
                f"{'s' if self.selection_seeds != 1 else ''} each, chosen by the {self.rule} "
                f"{self.metric} on {self.selection_sequences} held-out selection sequences")

    def grid_warnings(self) -> list[str]:
        """Why this grid is narrower than issue 31's rule for a default grid (at least 5 rates over 30x)."""
        out = []
        if len(self.lrs) < MIN_RATES:
            out.append(f"{len(self.lrs)} rates (fewer than {MIN_RATES})")
        if self.lrs[-1] / self.lrs[0] < MIN_SPAN:
            out.append(f"spans {self.lrs[-1] / self.lrs[0]:.3g}x (less than {MIN_SPAN:g}x)")
        return out


# ---------------------------------------------------------------- jobs

def spec_for(job: Job, given: dict | None = None, where: str = "{tune_args}") -> TuneSpec:
    """The search of `job`: its task's default in the preset (`TaskSetup.tune`) with `given` over
    it; a task without a default needs `lrs` given. `where` names the settings in its errors
    (the engine's `{tune_args}` placeholder, `request.FieldError`, or a sweep file's `tune`)."""
    default = dict(job.setup.tune or {})
    given = dict(given or {})
    if not default and "lrs" not in given:
        raise ValueError(f"{where.rstrip(':')}: {job.setup.label} has no default learning-rate grid in preset "
                         f"{job.preset!r}; give one: {where.rstrip(':') + ' ' if where.startswith('{') else ''}"
                         "lrs=[1e-4,3e-4,1e-3,3e-3,1e-2]")
    spec = TuneSpec.of({**default, **given}, where)
    check_reported_seeds(job, spec, where)
    _check_metric(job, spec, where)
    return spec


def check_reported_seeds(job: Job, spec: TuneSpec, where: str = "{tune_args}") -> None:
    """The reported seeds of `job` share none with its search's selection seeds (checked when the
    search is made, before anything trains): a lucky seed must not pick its own rate."""
    overlap = set(job.seeds) & {s for i in range(len(spec.lrs)) for s in spec.seeds_of(i)}
    if overlap:
        raise ValueError(f"{where.rstrip(':')}: seeds {sorted(overlap)} of {job.setup.label} / {job.arch} are "
                         f"selection seeds of its search (from {SELECTION_SEED_BASE:,}): the reported run must be "
                         "trained on seeds the selection does not use; give seeds below it")


def _check_metric(job: Job, spec: TuneSpec, where: str) -> None:
    """Refuse, before any training, a selection metric the job's selection set has no positions
    for (a task it does not apply to, a case the task does not have: `kl:repeated` on the sticky
    chain): every candidate would score NaN, read as diverged, and the "choice" be no choice."""
    from ..metric_table import METRICS
    from ..training.curves import CurveSet, curve_task

    metric = METRICS[spec.metric]
    if metric.tasks is None and metric.case is None:
        return
    task = curve_task(job.task, job.setup.eval_scored)
    if metric.tasks is not None and task.name not in metric.tasks:
        kept = [m for m, entry in METRICS.items() if entry.tasks is None or task.name in entry.tasks]
    else:  # a case: whether the selection set the trainer will draw has any of its positions
        kept = list(CurveSet(task, spec.selection_sequences, split="selection",
                             eval_sequences=job.setup.eval_sequences).uniform())
    if spec.metric not in kept:
        why = (f"it applies to {', '.join(metric.tasks)} only" if metric.tasks is not None and task.name not in
               metric.tasks else f"its selection set has no {metric.case!r} positions")
        raise ValueError(f"{where.rstrip(':')} metric={spec.metric}: {job.setup.label} cannot be scored by it "
                       f"({why}) (rule: the selection metric is one the task has; its metrics: {', '.join(kept)})")


def selection_jobs(job: Job, spec: TuneSpec) -> list[Job]:
    """The selection jobs of `job` (an untuned, resolved job): packed, one per axes setting with a
    member per (rate, selection seed); else one per candidate. Their curves are measured on the
    selection set; their identity holds the search and the role "selection"."""
    out = []
    base = {"role": "selection", **spec.identity()}
    if spec.prune != "none":  # the candidates of this search share one Optuna study
        from ..identity import identity_key

        base["study"] = identity_key({"job": job.identity, "seeds": list(job.seeds), "search": spec.identity()})
    for setting in spec.settings():
        train = dataclasses.replace(job.train, **setting, curves=True, curve_set="selection",
                                    curve_sequences=spec.selection_sequences, until=None)
        if spec.packed:
            members = [(i, seed) for i in range(len(spec.lrs)) for seed in spec.seeds_of(i)]
            rates = tuple(spec.lrs[i] for i, _ in members)
            cfg = dataclasses.replace(train, lr=max(spec.lrs), member_lrs=rates)
            out.append(dataclasses.replace(job, train=cfg, seeds=tuple(seed for _, seed in members),
                                           tuning={**base, "setting": setting}))
        else:
            for i, lr in enumerate(spec.lrs):
                cfg = dataclasses.replace(train, lr=lr)
                out.append(dataclasses.replace(job, train=cfg, seeds=tuple(spec.seeds_of(i)),
                                               tuning={**base, "setting": setting, "lr": lr}))
    return out


def final_job(job: Job, spec: TuneSpec, outcome: dict) -> Job:
    """`job` at the chosen candidate (`choose`'s outcome) on its own seeds, keyed by the search
    and the choice; its rows carry the outcome (`config["tuning"]`)."""
    chosen = outcome["chosen"]
    setting = {k: v for k, v in chosen.items() if k != "lr"}
    train = dataclasses.replace(job.train, lr=chosen["lr"], **setting)
    check_reported_seeds(job, spec)
    return dataclasses.replace(job, train=train, tuning={"role": "final", **spec.identity(), "chosen": chosen},
                               tuning_note={k: v for k, v in outcome.items() if k != "chosen"})


# ---------------------------------------------------------------- the rule

def choose(records: list, spec: TuneSpec) -> dict:
    """The outcome of a search from its stored selection rows: every candidate's scores over its
    selection seeds (mean, min, max), the chosen one (the lowest mean; the lower rate on a tie),
    whether it sits at the grid's edge (its rate the lowest or the highest tried) and whether every
    candidate stayed at the uniform floor of the selection set (within AT_FLOOR of it, or above)."""
    scores: dict[tuple, list[float]] = {}
    pruned: set[tuple] = set()
    uniform: float | None = None
    for r in records:
        key = (member_lr(r), tuple(sorted(member_setting(r).items())))
        scores.setdefault(key, []).append(candidate_score(r, spec.rule, spec.metric))
        if stopped_early(r):
            pruned.add(key)
        if r.learning_curve is not None:
            uniform = r.learning_curve.uniform.get(spec.metric, uniform)
    wanted = {(c["lr"], tuple(sorted((k, v) for k, v in c.items() if k != "lr"))) for c in spec.candidates()}
    missing = wanted - set(scores)
    if missing:
        raise ValueError(f"the selection rows lack {len(missing)} candidate(s), e.g. lr {sorted(missing)[0][0]:g}: "
                         "their jobs have not finished; run the same command again")
    table = []
    for (lr, setting), values in sorted(scores.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if (lr, setting) not in wanted:
            continue
        finite = [v for v in values if math.isfinite(v)]
        mean = sum(values) / len(values) if len(finite) == len(values) else math.inf
        table.append({"lr": lr, **dict(setting), "mean": mean, "values": values, "pruned": (lr, setting) in pruned,
                      "min": min(finite) if finite else math.inf, "max": max(finite) if finite else math.inf})
    best = min(table, key=lambda c: (c["mean"], c["lr"]))
    chosen = {"lr": best["lr"], **{k: v for k, v in best.items() if k in dict(spec.axes)}}
    edge = math.isfinite(best["mean"]) and best["lr"] in (spec.lrs[0], spec.lrs[-1])
    floor = uniform is not None and uniform > 0 and all(
        not math.isfinite(c["mean"]) or c["mean"] >= uniform * (1 - AT_FLOOR) for c in table)
    flops = [((r.config or {}).get("flops") or {}).get("total") for r in records]
    return {"chosen": chosen, "candidates": [_json_candidate(c) for c in table], "uniform": uniform,
            # the search's own training compute: every selection member's (None where a row has no count)
            "selection_flops": sum(flops) if flops and all(f is not None for f in flops) else None,
            "edge": "low" if edge and best["lr"] == spec.lrs[0] else "high" if edge else None,
            "at_floor": bool(floor), "rule": spec.rule, "metric": spec.metric,
            "selection_seeds": spec.selection_seeds}


def _json_candidate(c: dict) -> dict:
    """A candidate's entry as stored (JSON has no infinity: a diverged or pruned score is None)."""
    def safe(x):
        return x if isinstance(x, (int, float)) and math.isfinite(x) else None
    return {**{k: v for k, v in c.items() if k not in ("mean", "values", "min", "max", "pruned")},
            **({"pruned": True} if c["pruned"] else {}), "mean": safe(c["mean"]),
            "min": safe(c["min"]), "max": safe(c["max"]), "values": [safe(v) for v in c["values"]]}

