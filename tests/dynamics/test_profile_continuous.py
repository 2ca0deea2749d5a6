"""The routing-law profiler on a continuous tunnel (issue 41): linreg with the transformer, a few
steps at tiny sizes. The probes, the laws, the maps and the calibration in bits against the exact
predictive density are recorded; the predictive distributions' distances, which need classes, are
not (profiler.CONTINUOUS_NOTE), and head ablation is refused in one line."""

from __future__ import annotations

import math

import pytest

from bayesbench.dynamics import read_dynamics
from bayesbench.dynamics.profile.law import LAW_NAMES
from bayesbench.dynamics.profile.probes import PROBE_NAMES
from bayesbench.dynamics.profile.profiler import PRED_NAMES, ProfileConfig, Profiler
from bayesbench.dynamics.store import register_study
from bayesbench.scoring.evaluate import eval_set
from bayesbench.tasks import get_task
from bayesbench.training.config import TrainConfig
from bayesbench.training.trainer import Trainer

TINY = {"n_layer": 1, "n_head": 2, "d_model": 16, "d_ffn": 32}


def _trainer(task):
    return Trainer(task, "transformer", [0, 1], TrainConfig(steps=2, batch_size=4), model_cfg=TINY)


def test_the_profiler_runs_on_linreg_without_the_class_distances(tmp_path):
    task = get_task("linreg", d=2, n=4)
    trainer = _trainer(task)
    db = str(tmp_path / "store.sqlite")
    cfg = ProfileConfig(every=1, checkpoints=(0, 1, 2), late_maps=1, replicas=1, heldout_sequences=2)
    profiler = Profiler(trainer, "profile-linreg", cfg, probe_batch=eval_set(task, 3, seed=5),
                        eval_batch=eval_set(task, 8, seed=6), db=db, heldout_batch=eval_set(task, 2, seed=7))
    assert profiler.continuous
    register_study("profile-linreg", "profile", {}, path=db)
    trainer.hooks.append(profiler)
    profiler.start()
    trainer.fit(progress=False)
    profiler.finish()
    records = read_dynamics("profile-linreg", path=db)
    names = {r.name for r in records}
    assert set(PROBE_NAMES) | set(LAW_NAMES) | {"entropy_mae", "kl", "map_drift"} <= names
    assert not names & set(PRED_NAMES)
    calibration = [r.value for r in records if r.name in ("entropy_mae", "kl")]
    assert calibration and all(math.isfinite(v) and v >= 0 for v in calibration)


def test_head_ablation_is_refused_on_a_continuous_head():
    task = get_task("linreg", d=2, n=4)
    batch = eval_set(task, 2, seed=5)
    with pytest.raises(ValueError, match=r"head_ablation needs a categorical predictive .* linreg has a continuous "
                                         r"head \(gaussian\)") as err:
        Profiler(_trainer(task), "x", ProfileConfig(checkpoints=(0,), head_ablation=True), probe_batch=batch,
                 eval_batch=batch)
    assert "\n" not in str(err.value)
