"""Ray's overhead per job against the local process pool, on the same small sweep.

Sweep: bijection V=8, transformer and MLP (quick sizes), seeds 0 and 1 one per job (4 jobs),
20 steps x batch 32, evaluation on 64 sequences, 1 CPU (torch thread) per job, 2 jobs at a time
on both executors (2 local processes / a local Ray with 2 CPUs). Each round runs the whole sweep
into a fresh store and runs directory, so every job trains. The Ray start-up (`ray.init`) is
measured once, outside the rounds, and reported on its own.

Report-only (no goal is asserted): extra_info of the Ray benchmark holds ray_over_local (the
ratio of median sweep wall times), overhead_per_job_s ((Ray - local) / jobs) and ray_start_s;
each benchmark's first_sweep_s is its first round (Ray reuses its worker processes in later
rounds, the local pool spawns new ones for every sweep).

Run: pytest benchmarks/test_sweep_overhead.py (needs the [ray] extra for the Ray half)
"""

from __future__ import annotations

import logging
import statistics
import time

import pytest

from bayesbench.sweep import LocalExecutor, expand, load_sweep, run_sweep

ROUNDS = 3
_WALL: dict[str, list[float]] = {}


@pytest.fixture(scope="module")
def jobs(tmp_path_factory, write_sweep):
    return expand(load_sweep(write_sweep(tmp_path_factory.mktemp("sweep"), "overhead", 20)))


def _rounds(benchmark, name, jobs, make_executor, tmp_path) -> None:
    counter = iter(range(1000))

    def once():
        n = next(counter)
        start = time.perf_counter()
        out = run_sweep(jobs, make_executor(), db=str(tmp_path / f"round{n}" / "r.sqlite"),  # its own evaluation cache
                        runs_dir=str(tmp_path / f"round{n}" / "runs"), progress=False, say=lambda m: None)
        _WALL.setdefault(name, []).append(time.perf_counter() - start)
        assert sorted(out.trained) == sorted(sj.key for sj in jobs)

    benchmark.pedantic(once, rounds=ROUNDS, iterations=1, warmup_rounds=0)
    benchmark.extra_info["jobs"] = len(jobs)
    benchmark.extra_info["median_sweep_s"] = round(statistics.median(_WALL[name]), 2)
    benchmark.extra_info["first_sweep_s"] = round(_WALL[name][0], 2)  # Ray: its workers start cold here


def test_local_pool_sweep(benchmark, jobs, tmp_path):
    _rounds(benchmark, "local", jobs, lambda: LocalExecutor(2, 1), tmp_path)


def test_ray_sweep(benchmark, jobs, tmp_path):
    ray = pytest.importorskip("ray")
    from bayesbench.sweep.ray_executor import RayExecutor
    from bayesbench.sweep.sweep_file import Resources

    start = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    ray_start = time.perf_counter() - start
    try:
        _rounds(benchmark, "ray", jobs, lambda: RayExecutor("auto", Resources(cpus=1)), tmp_path)
    finally:
        ray.shutdown()
    benchmark.extra_info["ray_start_s"] = round(ray_start, 2)
    if "local" in _WALL:
        local, mine = statistics.median(_WALL["local"]), statistics.median(_WALL["ray"])
        benchmark.extra_info["ray_over_local"] = round(mine / local, 3)
        benchmark.extra_info["overhead_per_job_s"] = round((mine - local) / len(jobs), 2)
