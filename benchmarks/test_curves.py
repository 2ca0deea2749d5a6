"""What the learning curves cost: a quick-preset run with its default curves against the same run
without them, in the same process.

Goal (docs/training.md, "Learning curves"): at the default cadence (log-spaced, 8 points per
decade, 256 sequences) the curves cost at most 10% of the run's time without them. Measured on
the quick preset's bijection transformer (2000 steps: the headline run) and sticky-chain
transformer (800 steps: the shortest budget, so the largest share of curve points), three seeds
as one ensemble, one thread. The two runs are interleaved: each trains a tenth of its steps in
turn (the one that goes first alternating), so the noise of a shared machine hits both alike.
Two numbers: the points' own time (each curve point timed inside the run with curves) over the
time of the steps beside them, asserted <= 10%: it is the CPU these runs are sized for; and the
whole runs' difference, which also holds any slowing of the steps by the points (a colder cache)
but on this VM spreads over +-4% between identical runs: reported, and asserted only within the
goal plus that noise. Both runs must also end with the same losses bit for bit (the curves
observe). A point's forward pass takes the curve set 64 sequences
at a time on a CPU (`training/curves.py` `CURVE_CHUNK`): in one pass of 256 a point cost about 4
training steps of the sticky chain, and its 23 points +11.8% of the run.
"""

from __future__ import annotations

import time

import pytest
import torch

from bayesbench.sweep.jobs import make_jobs
from bayesbench.training.trainer import Trainer

SEGMENTS = 10
# Two 800-step runs of the sticky chain, interleaved by tenths on the 2-core VM, differed by 4.7% to
# 12.6% in five consecutive measurements (BENCHMARKS.md): the whole-run difference is reported and
# held only to the goal plus this much; the goal itself is asserted on the points' own time.
NOISE = 0.06


def _trainer(job, curves: bool) -> Trainer:
    import dataclasses

    cfg = dataclasses.replace(job.train, curves=curves)
    return Trainer(job.task, job.arch, list(job.seeds), cfg, model_cfg=job.model, max_len=job.max_len,
                   meta=job.meta(None))


@pytest.mark.parametrize("task", ["bijection", "sticky"])
def test_curve_cost_at_the_default_cadence(benchmark, task):
    torch.set_num_threads(1)
    job = make_jobs("quick", tasks=[task], archs=["transformer"])[0]
    on, off = _trainer(job, True), _trainer(job, False)
    times = {"on": 0.0, "off": 0.0, "points": 0.0}
    point = on.curve_point

    def timed_point():  # the points' own time inside the run with curves
        t0 = time.perf_counter()
        point()
        times["points"] += time.perf_counter() - t0

    on.curve_point = timed_point
    steps = job.train.steps
    for i in range(1, SEGMENTS + 1):
        stop = steps * i // SEGMENTS
        for name, trainer in (("on", on), ("off", off)) if i % 2 else (("off", off), ("on", on)):
            t0 = time.perf_counter()
            trainer.fit(progress=False, stop_at=stop)
            times[name] += time.perf_counter() - t0
    assert torch.equal(torch.stack(on.losses), torch.stack(off.losses))
    points = len(on.curve.steps)
    extra = times["on"] / times["off"] - 1.0  # the whole runs' difference: points and any slower steps
    own = times["points"] / (times["on"] - times["points"])  # the points' time over the steps' beside them
    on.curve_point = point
    benchmark.pedantic(lambda: on.curve_point(), rounds=3, iterations=1)
    benchmark.extra_info.update({"task": job.setup.label, "steps": steps, "members": len(job.seeds),
                                 "curve_points": points, "curve_sequences": on.cfg.curve_sequences,
                                 "run_s_without_curves": times["off"], "run_s_with_curves": times["on"],
                                 "curve_cost_fraction": extra, "points_s": times["points"],
                                 "points_fraction": own, "goal": "<= 0.10"})
    print(f"\n{job.setup.label} transformer, {steps} steps, E={len(job.seeds)}: {times['off']:.1f} s without "
          f"curves, {times['on']:.1f} s with {points} points of {on.cfg.curve_sequences} sequences: "
          f"+{extra:.1%}; the points themselves {times['points']:.1f} s, +{own:.1%} of the steps beside them "
          f"(goal <= 10%)")
    assert own <= 0.10, f"goal: default curves cost at most 10% of the run, got {own:.1%}"
    assert extra <= 0.10 + NOISE, f"the runs with and without curves differ by {extra:.1%}, beyond the points' " \
                                  f"{own:.1%} and this machine's noise ({NOISE:.0%})"
