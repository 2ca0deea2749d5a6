"""The run record: what one trained ensemble member (one run, one seed) is and how it scored.

`RunRecord` is the one shape a result has everywhere: scoring builds it (`scoring/rows.py`), the store
writes it as one SQLite row and reads it back, and the leaderboard and the plots read its typed
fields (`record.evals["K=30"].entropy_mae.mean`, not nested dict paths).

Scores are per evaluation set: `evals[name]` is an `EvalResult` (for the HMM the names are
"K=20", "K=30", ...; for the bijection "values" and "values+query"; otherwise "standard"), and
`primary` names the one that is the training task itself (the headline numbers). Each holds the
final metrics (docs/science.md#metrics) and the floors (uniform and context-ignoring predictors
scored on the same sequences, `bayesbench.scoring.floors`). An `EvalResult`'s metrics are its
`scores`, {name: `Summary`} (mean with a 95% interval over sequences, all in bits) of every final
metric of the metric table (`bayesbench.metric_table`, in `record_metrics` order): a metric
registered there is scored, stored, read back and shown with no edit here, and records stored
before it existed read back with None for it.

A member's `LearningCurve` is its metrics on a fixed set of sequences after each measured training
step (`bayesbench.training.curves`); the store keeps it in its own table, one row per (run, seed,
step, metric), so a metric added to the curves is one more `metric` value there.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass, field

from ..metric_table import record_metrics


def json_safe(value):
    """A JSON-ready value with every non-finite float (NaN, inf: a diverged member's numbers) as
    None, in nested dicts, lists and tuples too: JSON cannot hold them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


FINAL_LOSS_MEANING = "mean training cross-entropy (nats) over the last 100 steps"


@dataclass(frozen=True)
class Summary:
    """Mean of a per-position metric over the scored positions, with a 95% interval."""

    mean: float
    ci_low: float
    ci_high: float
    n_sequences: int
    n_positions: int

    @property
    def half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2.0

    def __str__(self) -> str:
        return f"{self.mean:.4g} ± {self.half_width:.2g} (95% CI, {self.n_sequences} seq)"


def _nan(x: float | None) -> float:
    """A number the store wrote as null (not finite: a diverged member's) as NaN again."""
    return math.nan if x is None else x


def _summary_from_json(d: dict | None) -> Summary | None:
    """A Summary back from JSON, where the store wrote non-finite numbers (a diverged member) as null."""
    if d is None:
        return None
    return Summary(_nan(d["mean"]), _nan(d["ci_low"]), _nan(d["ci_high"]), d["n_sequences"], d["n_positions"])


@dataclass(frozen=True)
class EvalResult:
    """One member's scores on one evaluation set (bits, over the task's scored positions).

    `scores` holds every final metric of the metric table in `record_metrics` order, None where
    the set has none (a metric that does not apply to the task, a record stored before the metric
    existed); a score of a name the table lacks is an error. `ev.entropy_mae`, `ev.kl`, ... (any
    final metric's name) read it."""

    task: str  # the evaluated task, described (e.g. "hmm(S=5, V=5, K=30, ...)")
    positions: str  # which positions the numbers average over, in words
    scores: dict[str, Summary | None]  # {final metric: Summary}: mean, 95% interval over sequences
    # {"uniform" | "marginal": {metric name: Summary}}: the floors on the same sequences
    floors: dict[str, dict[str, Summary]] | None = None
    # the evaluation set's identity (`scoring.evaluate.eval_set_id`: tunnel configuration and code,
    # size, seed); None in rows stored before it was kept
    set_id: str | None = None

    def __post_init__(self) -> None:
        order = record_metrics()
        unknown = [name for name in self.scores if name not in order]
        if unknown:
            raise ValueError(f"scores must be final metrics of the metric table {order}, got {unknown} (rule: a "
                             "metric is registered in bayesbench.metric_table before it is scored)")
        object.__setattr__(self, "scores", {name: self.scores.get(name) for name in order})

    def __getattr__(self, name: str) -> Summary | None:
        """A final metric's Summary by its name (None: not scored on this set)."""
        scores = self.__dict__.get("scores")  # absent while the object is being unpickled or copied
        if scores is not None and name in scores:
            return scores[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _required(self, name: str) -> Summary:
        summary = self.scores.get(name)
        if summary is None:
            raise ValueError(f"this evaluation has no {name} score (every stored evaluation has one)")
        return summary

    @property
    def entropy_mae(self) -> Summary:
        """mean over (sequence, position) of |H(model) - H(Bayes)|"""
        return self._required("entropy_mae")

    @property
    def kl(self) -> Summary:
        """mean KL(Bayes || model)"""
        return self._required("kl")

    @property
    def entropy_mae_positional(self) -> Summary | None:
        """mean over positions of |mean H(model) - mean H(Bayes)| (None: stored before it existed)"""
        return self.scores.get("entropy_mae_positional")

    @classmethod
    def metric_names(cls) -> tuple[str, ...]:
        """The metrics a result holds, in its order (`metric_table.record_metrics`)."""
        return record_metrics()

    def metrics(self) -> dict[str, Summary]:
        """{metric name: Summary} of the metrics this result has (absent ones left out)."""
        return {name: s for name, s in self.scores.items() if s is not None}

    def to_json(self) -> dict:
        """The stored JSON: task, positions, one key per metric (its Summary, or None), floors, set_id."""
        def summary(s: Summary | None) -> dict | None:
            return None if s is None else dataclasses.asdict(s)

        return {"task": self.task, "positions": self.positions,
                **{name: summary(s) for name, s in self.scores.items()},
                "floors": None if self.floors is None else {
                    name: {m: summary(s) for m, s in scores.items()} for name, scores in self.floors.items()},
                "set_id": self.set_id}

    @classmethod
    def from_json(cls, d: dict) -> EvalResult:
        """`to_json` read back; a metric the table lacks is left out, one it has but `d` lacks is None."""
        floors = None if d.get("floors") is None else {  # a floor's Summary is never null (NaN numbers are)
            name: {m: typing.cast(Summary, _summary_from_json(v)) for m, v in scores.items()}
            for name, scores in d["floors"].items()}
        return cls(task=d["task"], positions=d["positions"],
                   scores={name: _summary_from_json(d.get(name)) for name in record_metrics()},
                   floors=floors, set_id=d.get("set_id"))


@dataclass(frozen=True)
class PositionCurves:
    """Per scored position (mean over the evaluation sequences), for the plots; bits."""

    position: list[int]  # the scored positions' indices in the sequence
    entropy_mae: list[float]  # |H(model) - H(Bayes)|
    kl: list[float]  # KL(Bayes || model)
    model_entropy: list[float]
    bayes_entropy: list[float]

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> PositionCurves:
        values: dict[str, typing.Any] = {
            f.name: [math.nan if v is None else v for v in d[f.name]] if f.name != "position" else d[f.name]
            for f in dataclasses.fields(cls)}
        return cls(**values)


@dataclass(frozen=True)
class PermutationCheck:
    """The HMM label-permutation check on the primary evaluation: the same sequences with the
    hidden states relabelled (posterior recomputed) must score the same entropy MAE."""

    eval: str  # the evaluation it was run on (the primary one)
    entropy_mae: float
    entropy_mae_permuted: float
    difference: Summary  # paired per-position difference (plain - permuted), with its interval

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict | None) -> PermutationCheck | None:
        if d is None:
            return None
        difference = _summary_from_json(d["difference"])
        if difference is None:
            raise ValueError("a stored permutation check has no difference (null): the row is damaged")
        return cls(d["eval"], _nan(d["entropy_mae"]), _nan(d["entropy_mae_permuted"]), difference)


@dataclass(frozen=True)
class LearningCurve:
    """One member's learning curve: its metrics (bits) on the run's fixed curve set after each
    measured step (docs/training.md#learning-curves). Lists run over the points, in step order."""

    eval: str | None  # the evaluation it measures, by name (the run's primary)
    task: str  # the evaluated task, described
    n_sequences: int  # size of the curve set
    step: list[int]
    sequences: list[int]  # training sequences this member had seen at that step (step x batch)
    tokens: list[int]  # training tokens it had seen (sequences x sequence length)
    wall_s: list[float]  # the run's wall time at that point
    values: dict[str, list[float]]  # metric name -> one value per point (NaN: not finite)
    uniform: dict[str, float] = field(default_factory=dict)  # the uniform predictor on the same sequences
    cadence: str | None = None  # how the steps were chosen, in words

    def metric(self, name: str) -> list[float]:
        """The values of metric `name` (KeyError naming the metrics there are)."""
        if name not in self.values:
            raise KeyError(f"learning curve has no metric {name!r}; it has {sorted(self.values)}")
        return self.values[name]

    def meta(self) -> dict:
        """Everything but the points (stored with the run's configuration)."""
        return {"eval": self.eval, "task": self.task, "n_sequences": self.n_sequences, "uniform": self.uniform,
                "cadence": self.cadence}


def trained_part(curve: LearningCurve, metric: str, stop_step: int | None = None) -> tuple[list[int], list[float]]:
    """(steps, values) of a curve up to the step its member stopped training at (the points after
    a stop, of a frozen model, say nothing about learning)."""
    values = curve.metric(metric)
    keep = [i for i, s in enumerate(curve.step) if stop_step is None or s <= stop_step]
    return [curve.step[i] for i in keep], [values[i] for i in keep]


@dataclass(frozen=True)
class MemberEvaluation:
    """Everything `evaluate.evaluate` measures for one ensemble member."""

    primary: str  # name of the evaluation on the training task itself
    evals: dict[str, EvalResult]  # every evaluation set, primary first
    curves: dict[str, PositionCurves]  # per evaluation name
    permutation: PermutationCheck | None = None  # HMM only


@dataclass(frozen=True)
class RunRecord:
    """One (run, seed): identity, training facts and scores of one ensemble member.

    A run trains several seeds at once (an ensemble: independent models stacked on one leading
    dimension, nothing averaged); each seed is its own record. `config` holds the resolved model
    config (`model`), the arguments it was built from (`model_args`), the training config, the
    run's seeds, the position-table length, the evaluation lengths and size, and the checkpoint.
    """

    run_id: str
    seed: int
    member: int  # the seed's index in its run's ensemble
    group_id: str | None  # the `bayesbench run` invocation it belongs to
    preset: str | None
    task: str  # task name, e.g. "hmm"
    task_label: str  # the preset's label, e.g. "hmm S=5 K=20 soft": the leaderboard's task column
    task_config: dict  # Task.config(), the inverse of tasks.task_from_config
    arch: str
    config: dict
    params: int  # parameters of one member
    steps: int  # training steps done
    wall_s: float | None  # training wall time of the whole ensemble
    steps_per_s: float | None
    sequences_per_s: float | None  # training sequences per second over all members
    status: str  # "ok", or how the member diverged
    final_loss: float | None  # FINAL_LOSS_MEANING
    evaluation: MemberEvaluation
    param_breakdown: dict[str, int] = field(default_factory=dict)  # parameters per top-level submodule
    loss_curve: list[list[float]] = field(default_factory=list)  # [step, mean training CE] pairs, subsampled
    environment: dict = field(default_factory=dict)  # versions, device, backends (results.environment)
    created_at: str | None = None  # when the run's rows were first written (UTC, ISO 8601)
    learning_curve: LearningCurve | None = None  # None: not measured (curves off, or stored before they existed)
    stop_step: int | None = None  # the step the member stopped training at (None: stored before this was kept)
    # why: "budget" (every step given), "diverged", or the `until` criterion's sentence, which
    # starts with its kind: "threshold: ..." or "plateau: ..."
    stop_reason: str | None = None

    @property
    def primary(self) -> str:
        return self.evaluation.primary

    @property
    def code(self) -> dict:
        """The code that produced this row (config["code"]: `bayesbench.versions`)."""
        return (self.config or {}).get("code") or {}

    @property
    def evals(self) -> dict[str, EvalResult]:
        return self.evaluation.evals

    @property
    def curves(self) -> dict[str, PositionCurves]:
        return self.evaluation.curves

    @property
    def permutation(self) -> PermutationCheck | None:
        return self.evaluation.permutation

    @property
    def headline(self) -> EvalResult:
        """The primary evaluation's scores (the leaderboard's headline numbers)."""
        return self.evals[self.primary]

    @property
    def entropy_mae_bits(self) -> float:
        """Headline entropy MAE (bits) on the primary evaluation."""
        return self.headline.entropy_mae.mean

    @property
    def kl_bits(self) -> float:
        """Headline KL(Bayes || model) (bits) on the primary evaluation."""
        return self.headline.kl.mean

    @property
    def diverged(self) -> bool:
        """Whether this member diverged (its scores are those of its last finite parameters: never a result)."""
        return self.status != "ok"

    @property
    def diverged_at(self) -> int | None:
        """The step it diverged at (from its status, "... diverged at step N: ..."), if it did."""
        if not self.diverged:
            return None
        import re

        found = re.search(r"diverged at step (\d+)", self.status)
        return int(found.group(1)) if found else self.stop_step

    def shown(self, value: float, fmt: str = "{:.4f}") -> str:
        """One of its numbers as a table shows it: `value` formatted, or where it diverged (a
        diverged member's numbers are not results)."""
        if self.diverged:
            return f"diverged@{self.diverged_at}" if self.diverged_at is not None else "diverged"
        return fmt.format(value)

    @property
    def stop_kind(self) -> str | None:
        """"budget", "diverged", "threshold" or "plateau" (None: not recorded)."""
        return None if self.stop_reason is None else self.stop_reason.split(":")[0]

    @property
    def entropy_mae_positional_bits(self) -> float:
        """Headline positional entropy MAE (bits) on the primary evaluation (NaN if not measured)."""
        s = self.headline.entropy_mae_positional
        return math.nan if s is None else s.mean
