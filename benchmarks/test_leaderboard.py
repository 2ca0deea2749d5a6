"""The architecture leaderboard as a benchmark (`pytest benchmarks/test_leaderboard.py`).

Scale: `paper` (the papers' settings, docs/reproducing.md; several seeds per ensemble) when a CUDA device is
present, else `quick` (the CPU preset of `bayesbench run --preset quick`). Override with
BAYESBENCH_LEADERBOARD=quick|paper|off and BAYESBENCH_LEADERBOARD_STEPS=N (cap on training
steps, to fit a time budget; the table then says the steps used). The leaderboard is written
as Markdown and JSON next to the pytest-benchmark output: the folder of --benchmark-json if
given, else .benchmarks/, as leaderboard-<scale>.md / .json (plus the SQLite store).

Expected wall time: quick on 2 CPU cores about 10 minutes (docs/leaderboard.md); paper on one
GPU is hours at 100k steps per run (not yet measured: cap it with BAYESBENCH_LEADERBOARD_STEPS).
Goal, asserted at the preset's own step counts: the science the leaderboard exists to show.
- paper: on the bijection the transformer beats the position-wise MLP by at least 5x on every
  seed (entropy MAE; Paper I Table 1: 0.007 against 1.85 bits);
- quick (the papers' settings scaled down, docs/leaderboard.md): on the HMM at K = 20 the
  transformer's KL(Bayes || model) is at least 3x below the matched LSTM's on every seed (Paper I
  Table 1's ordering; three fresh-clone runs measured transformer seeds between 0.042 and 0.067
  against LSTM seeds of 0.330: 4.9x to 7.9x; the first two predate the per-step seeding of
  dropout's RNG, docs/training.md); and on the bijection the transformer's positional entropy
  MAE at the value positions is below 0.1 bits on every seed (the quick recipe of
  docs/reproducing.md, "The quick bijection's recipe": 0.016-0.029 in its sweep).
With a step cap (BAYESBENCH_LEADERBOARD_STEPS) the run is REPORT-ONLY for the science: a few
hundred steps prove the plumbing and time the pipeline, not the science, so the goal is not
asserted; extra_info says `science_goal: "not asserted (steps capped at N)"` and a warning says so
in pytest's summary. What is asserted either way: one row per seed of every job, and the two
architectures the goal compares ranked on its task.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import pytest
import torch

SCALES = ("quick", "paper", "off")


def _scale() -> str:
    scale = os.environ.get("BAYESBENCH_LEADERBOARD") or ("paper" if torch.cuda.is_available() else "quick")
    if scale not in SCALES:
        raise ValueError(f"BAYESBENCH_LEADERBOARD must be one of {SCALES}, got {scale!r}")
    return scale


def _out_dir(config) -> Path:
    target = config.getoption("benchmark_json", None)
    path = Path(getattr(target, "name", target)).parent if target else Path(".benchmarks")
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_leaderboard(benchmark, request, tmp_path):
    scale = _scale()
    if scale == "off":
        pytest.skip("BAYESBENCH_LEADERBOARD=off")
    from bayesbench.report.leaderboard import json_runs, markdown
    from bayesbench.report.selection import select_rows
    from bayesbench.sweep import SweepJob, run_sweep
    from bayesbench.sweep.jobs import make_jobs
    from bayesbench.sweep.local import local_executor

    steps = os.environ.get("BAYESBENCH_LEADERBOARD_STEPS")
    jobs = [SweepJob.of(job, group_id=f"bench-{scale}")
            for job in make_jobs(scale, steps=int(steps) if steps else None)]
    out = _out_dir(request.config)
    db = str(tmp_path / "store" / f"leaderboard-{scale}.sqlite")  # fresh: every job trains (a stored one is skipped)
    executor = local_executor(jobs, workers=None, threads=1, in_process=True)  # as `bayesbench run`: 1 thread a job

    def run():
        run_sweep(jobs, executor, db=db, runs_dir=str(tmp_path / "runs"), progress=False, say=lambda m: None)

    benchmark.pedantic(run, rounds=1, iterations=1)
    shutil.copy(db, out / f"leaderboard-{scale}.sqlite")
    records = select_rows(db, run_ids=[sj.key for sj in jobs])
    (out / f"leaderboard-{scale}.md").write_text(markdown(records) + "\n")
    (out / f"leaderboard-{scale}.json").write_text(json.dumps(json_runs(records), indent=2) + "\n")
    benchmark.extra_info.update({"scale": scale, "jobs": len(jobs), "rows": len(records),
                                 "leaderboard": str(out / f"leaderboard-{scale}.md")})

    task, rival, metric, factor = (("bijection", "mlp", "entropy_mae_bits", 5) if scale == "paper"
                                   else ("hmm", "lstm", "kl_bits", 3))
    rows = [r for r in records if r.task == task]
    transformer = [getattr(r, metric) for r in rows if r.arch == "transformer"]
    other = [getattr(r, metric) for r in rows if r.arch == rival]
    goal = f"transformer {metric[:-5]} <= {rival} / {factor} on every {task} seed"
    assert transformer and other, f"the leaderboard must rank the transformer and the {rival} on the {task}"
    assert len(records) == sum(len(sj.job.seeds) for sj in jobs)
    if steps:
        benchmark.extra_info["science_goal"] = f"not asserted (steps capped at {steps}): report-only"
        warnings.warn(f"leaderboard benchmark: steps capped at {steps}, so the science goal ({goal}) is not "
                      "asserted: report-only", UserWarning)
        return
    benchmark.extra_info["science_goal"] = f"asserted: {goal}"
    assert max(transformer) * factor <= min(other), f"{goal}: transformer {transformer} vs {rival} {other}"
    if scale == "quick":
        bijection = [r.evals["values"].entropy_mae_positional.mean for r in records
                     if r.task == "bijection" and r.arch == "transformer"]
        assert bijection and max(bijection) < 0.1, \
            f"the quick bijection transformer's positional entropy MAE (values) must be below 0.1 bits on every " \
            f"seed, got {bijection}"
        benchmark.extra_info["science_goal"] += "; quick bijection transformer below 0.1 bits on every seed"
