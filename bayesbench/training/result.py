"""What a training run produced (`TrainResult`): the trained ensemble, its losses, curves and
identity, as `Trainer.fit` returns it and `checkpoint.load_result` rebuilds it from a file."""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor

from ..models import EnsembleModel
from ..tasks import Task, task_from_config
from .curves import EnsembleCurve


@dataclass
class TrainResult:
    """What a training run produced. losses: [steps_done, E] training CE per member (nats).
    curve: the learning curves (None when off); stopped: member -> (step, kind, sentence) for the
    members an `until` criterion stopped."""

    run_id: str
    model: EnsembleModel
    seeds: list[int]
    steps: int
    losses: Tensor
    wall_s: float
    diverged: dict[int, str] = field(default_factory=dict)
    checkpoint: str | None = None
    identity: dict = field(default_factory=dict)  # the run's identity and seeds (`bayesbench.identity`)
    meta: dict = field(default_factory=dict)  # caller's notes kept in the checkpoint (preset, label, ...)
    curve: EnsembleCurve | None = None
    stopped: dict[int, tuple[int, str, str]] = field(default_factory=dict)
    died_at: dict[int, int] = field(default_factory=dict)  # member -> the step it diverged on
    code: dict = field(default_factory=dict)  # the code that trained it (`checkpoint.run_code`; bayesbench.versions)

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.wall_s if self.wall_s > 0 else float("nan")

    def final_loss(self, window: int = 100) -> list[float]:
        """Per member: mean training cross-entropy (nats) over the last `window` steps it trained
        (up to its stop step for a member an `until` criterion stopped)."""
        out = []
        for e in range(self.losses.shape[1]):
            end = self.stopped[e][0] if e in self.stopped else self.losses.shape[0]
            out.append(float(self.losses[max(0, end - window):end, e].mean()))
        return out

    def stop(self, e: int) -> tuple[int, str]:
        """(step, kind) where member e stopped training: "threshold" or "plateau" (its `until`
        criterion), "diverged" (the guard froze it; the step it diverged on), or "budget" (it
        trained every step it was given, or the run was cut short before)."""
        if e in self.stopped:
            return self.stopped[e][0], self.stopped[e][1]
        if e in self.diverged:
            return self.died_at.get(e, self.steps), "diverged"
        return self.steps, "budget"


def died_steps(died_at: Tensor, diverged: dict) -> dict[int, int]:
    """member -> the step it diverged on, for the members the host knows diverged."""
    return {e: int(died_at[e]) for e in diverged}


def task_of(result: TrainResult) -> Task:
    """The training task a result was trained on (from its identity)."""
    return task_from_config(result.identity["task"])
