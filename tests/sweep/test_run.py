"""Running sweeps, on the local process pool and on Ray (tests marked `ray`, which start a local
2-CPU Ray once for the module; deselect with -m 'not ray').

Checked on both: the stored numbers are those of `bayesbench train` / the local pool (training
is deterministic per seed on CPU), a rerun skips what is stored, a worker killed mid-job is
retried and resumes from its checkpoint, and a driver killed with -9 leaves a sweep that a rerun
finishes without losing, duplicating or re-training anything.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from procs import any_alive

from bayesbench.cli import main
from bayesbench.store.database import read_rows
from bayesbench.sweep import LocalExecutor, expand, load_sweep, run_sweep
from bayesbench.sweep.events import Started, Stepped, line
from bayesbench.training.checkpoint import CHECKPOINT_NAME

NUMBERS = ("entropy_mae_bits", "kl_bits", "final_loss", "entropy_mae_ci_low", "entropy_mae_ci_high", "params",
           "steps", "loss_curve", "curves")


def _numbers(db) -> dict:
    return {(r["run_id"], r["seed"]): {k: r[k] for k in NUMBERS} for r in read_rows(str(db))}


def _count_rows(db) -> tuple[int, int]:
    """(rows, distinct (run_id, seed) keys) in the store; (0, 0) before it has a table."""
    if not os.path.exists(db):
        return 0, 0
    conn = sqlite3.connect(str(db))
    try:
        total = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
        distinct = conn.execute("SELECT count(*) FROM (SELECT DISTINCT run_id, seed FROM runs)").fetchone()[0]
    except sqlite3.OperationalError:  # the driver has not created the table yet
        return 0, 0
    finally:
        conn.close()
    return total, distinct


def _pool_workers(pid: int) -> list[int]:
    """The local pool's worker processes among `pid`'s children (Linux /proc)."""
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            for child in f.read().split():
                try:
                    with open(f"/proc/{child}/cmdline", "rb") as c:
                        if b"spawn_main" in c.read():
                            out.append(int(child))
                except FileNotFoundError:
                    pass
    return out


def _wait_then_kill(driver, db, jobs, runs) -> list[int]:
    """SIGKILL the driver once a job is stored and another has written a checkpoint; returns
    the driver's local pool worker processes as they were just before."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and driver.poll() is None:
        stored = _count_rows(db)[0]
        ckpts = [sj for sj in jobs if os.path.exists(os.path.join(sj.run_dir(str(runs)), CHECKPOINT_NAME))]
        if stored >= 1 and len(ckpts) > stored:
            break
        time.sleep(0.05)
    assert driver.poll() is None, "the sweep finished before it could be interrupted"
    workers = _pool_workers(driver.pid)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    return workers


def _kill_once(target):
    """(on_event, killed): an event watcher that SIGKILLs the worker process running `target`
    once it has passed step 10 (a checkpoint), and the list of steps it killed at."""
    pids, killed = {}, []

    def kill_once(event):
        if isinstance(event, Started):
            pids[event.key] = event.pid
        if isinstance(event, Stepped) and event.key == target.key and event.step >= 10 and not killed:
            os.kill(pids[target.key], signal.SIGKILL)
            killed.append(event.step)

    return kill_once, killed


@pytest.fixture(scope="module")
def reference(tmp_path_factory, write_sweep):
    """The tiny sweep (conftest's `write_sweep`: two archs x two seeds, one seed per job: four
    jobs of 60 steps, a checkpoint every 10) run once on the local pool, uninterrupted:
    (sweep file, store, rows)."""
    tmp = tmp_path_factory.mktemp("reference")
    path = write_sweep(tmp, "tiny", 60)
    db = tmp / "r.sqlite"
    assert main(["sweep", path, "--db", str(db), "--runs-dir", str(tmp / "runs"), "--no-progress", "--jobs", "2"]) == 0
    return path, db, _numbers(db)


def test_sweep_stores_what_train_stores_and_a_rerun_trains_nothing(reference, tmp_path, capsys):
    path, db, numbers = reference
    jobs = expand(load_sweep(path))
    assert set(numbers) == {(sj.key, sj.job.seeds[0]) for sj in jobs} and len(numbers) == 4
    assert _count_rows(db) == (4, 4)
    # `bayesbench train` of the same configuration stores the same numbers (run_id aside)
    tdb = tmp_path / "t.sqlite"
    # one torch thread, as the sweep's jobs run: at the quick bijection's batch of 64 the matmuls
    # of 2 threads sum in another order, which moves the last digits of the scores
    assert main(["train", "--task", "bijection", "--arch", "mlp", "--seeds", "1", "--steps", "60", "--eval-sequences",
                 "64", "--threads", "1", "--db", str(tdb), "--runs-dir", str(tmp_path / "runs"), "--no-progress",
                 "--json"]) == 0
    (solo,) = _numbers(tdb).values()
    mlp1 = next(sj.key for sj in jobs if sj.job.arch == "mlp" and sj.job.seeds == (1,))
    assert solo == numbers[(mlp1, 1)]
    capsys.readouterr()
    ids = {(r["run_id"], r["seed"]): r["id"] for r in read_rows(str(db))}
    # a rerun finds everything stored
    assert main(["sweep", path, "--db", str(db), "--runs-dir", str(tmp_path / "unused"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "4 jobs: 4 already stored (skipped), 0 to run" in out and out.count("skipped (stored)") == 4
    assert {(r["run_id"], r["seed"]): r["id"] for r in read_rows(str(db))} == ids
    assert not (tmp_path / "unused").exists()


def test_a_killed_pool_worker_is_retried_and_resumes_from_its_checkpoint(reference, tmp_path):
    path, _, numbers = reference
    jobs = expand(load_sweep(path))
    target = next(sj for sj in jobs if sj.job.arch == "transformer")
    kill_once, killed = _kill_once(target)
    db = tmp_path / "r.sqlite"
    out = run_sweep(jobs, LocalExecutor(2, 1, max_retries=2), db=str(db), runs_dir=str(tmp_path / "runs"),
                    progress=False, sink=lambda event: None, on_event=kill_once)
    assert killed and not out.failed and sorted(out.trained) == sorted(sj.key for sj in jobs)
    assert out.retried == {target.key: 1}  # only the killed job, once (the other worker went on)
    assert out.resumed[target.key] >= 10  # from a checkpoint, not from step 0
    assert _numbers(db) == numbers and _count_rows(db) == (4, 4)


def test_a_job_that_raises_fails_alone_and_is_not_retried(reference, tmp_path, capsys):
    path, _, _ = reference
    jobs = [sj for sj in expand(load_sweep(path)) if sj.job.arch == "mlp"]  # two cheap jobs
    bad = jobs[0]
    os.makedirs(bad.run_dir(str(tmp_path / "runs")))
    with open(os.path.join(bad.run_dir(str(tmp_path / "runs")), CHECKPOINT_NAME), "w") as f:
        f.write("not a checkpoint")
    db = tmp_path / "r.sqlite"
    lines = []
    out = run_sweep(jobs, LocalExecutor(2, 1, max_retries=2), db=str(db), runs_dir=str(tmp_path / "runs"),
                    progress=True, sink=lambda event: lines.append(line(event) or ""))  # with the bar on (to stderr)
    assert list(out.failed) == [bad.key] and bad.key not in out.retried
    assert f"FAILED: {bad.label}: DamagedFile" in "\n".join(lines)
    assert f"done: {jobs[1].label}" in "\n".join(lines)
    assert "done=1" in capsys.readouterr().err  # the bar's jobs done / running / failed
    assert out.trained == [jobs[1].key] and _count_rows(db) == (1, 1)
    assert out.failed[bad.key].startswith("DamagedFile")  # the job's own error (a damaged checkpoint, named)


def test_driver_killed_then_rerun_loses_and_duplicates_nothing(reference, tmp_path):
    path, _, numbers = reference
    jobs = expand(load_sweep(path))
    db, runs = tmp_path / "r.sqlite", tmp_path / "runs"
    cmd = [sys.executable, "-m", "bayesbench.cli", "sweep", path, "--db", str(db), "--runs-dir", str(runs),
           "--no-progress", "--jobs", "1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    driver = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    workers = _wait_then_kill(driver, db, jobs, runs)
    # the pool worker dies with its driver (parent-death signal): no orphan trains on
    deadline = time.monotonic() + 30
    while any_alive(workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert workers and not any_alive(workers)
    done_rows = {(r["run_id"], r["seed"]): r for r in read_rows(str(db))}
    done_keys = {k for k, _ in done_rows}
    mtimes = {sj.key: os.path.getmtime(os.path.join(sj.run_dir(str(runs)), CHECKPOINT_NAME)) for sj in jobs
              if sj.key in done_keys}
    partial = {sj.key for sj in jobs if sj.key not in done_keys
               and os.path.exists(os.path.join(sj.run_dir(str(runs)), CHECKPOINT_NAME))}
    assert 1 <= len(done_keys) < 4 and partial
    out = run_sweep(jobs, LocalExecutor(2, 1), db=str(db), runs_dir=str(runs), progress=False, sink=lambda event: None)
    assert sorted(out.skipped) == sorted(done_keys)
    assert sorted(out.trained) == sorted(sj.key for sj in jobs if sj.key not in done_keys) and not out.failed
    assert partial <= set(out.resumed) and all(step >= 10 for step in out.resumed.values())
    # finished jobs were not re-trained: rows and checkpoints untouched
    after = {(r["run_id"], r["seed"]): r for r in read_rows(str(db))}
    for k, row in done_rows.items():
        assert after[k]["id"] == row["id"] and after[k]["wall_s"] == row["wall_s"]
    for key, mtime in mtimes.items():
        sj = next(s for s in jobs if s.key == key)
        assert os.path.getmtime(os.path.join(sj.run_dir(str(runs)), CHECKPOINT_NAME)) == mtime
    # nothing lost, nothing twice, and the numbers of an uninterrupted sweep
    assert _count_rows(db) == (4, 4) and _numbers(db) == numbers


def test_an_outside_model_beside_a_builtin_on_the_local_pool(tmp_path, monkeypatch, write_sweep, capsys):
    """A sweep of mlp and './mine.py:build' (a file beside the sweep file), started from another
    folder: both stored with real scores, the outside model's numbers those of `bayesbench train
    --model` (so the workers imported and trained that model); a rerun trains nothing."""
    folder = tmp_path / "sweeps"
    folder.mkdir()
    shutil.copy(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "outside_net.py"),
                folder / "mine.py")
    path = write_sweep(folder, "outside", 30, archs=("mlp", "./mine.py:build"))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    db, runs = tmp_path / "r.sqlite", tmp_path / "runs"
    argv = ["sweep", path, "--db", str(db), "--runs-dir", str(runs), "--no-progress", "--jobs", "2", "--trust-code"]
    assert main(argv) == 0
    assert "outside model mine (" in capsys.readouterr().out
    rows = read_rows(str(db))
    assert sorted((r["arch"], r["seed"]) for r in rows) == [("mine", 0), ("mine", 1), ("mlp", 0), ("mlp", 1)]
    for r in rows:
        assert 0 < r["entropy_mae_bits"] < 10 and 0 < r["kl_bits"] < 10 and r["steps"] == 30, r
    jobs = expand(load_sweep(path))
    assert {(r["run_id"], r["seed"]) for r in rows} == {(sj.key, sj.job.seeds[0]) for sj in jobs}
    for sj in jobs:  # checkpoints under the leaderboard name, not the model's path
        assert os.path.isdir(sj.run_dir(str(runs))) and os.path.basename(sj.run_dir(str(runs))).startswith(
            f"bijection-{sj.arch}-lr")
    # `bayesbench train --model` of the same file and seed stores the same numbers
    tdb = tmp_path / "t.sqlite"
    monkeypatch.chdir(folder)
    assert main(["train", "--model", "./mine.py:build", "--task", "bijection", "--seeds", "1", "--steps", "30",
                 "--eval-sequences", "64", "--db", str(tdb), "--runs-dir", str(tmp_path / "runs-t"), "--no-progress",
                 "--json"]) == 0
    (solo,) = _numbers(tdb).values()
    mine1 = next(sj.key for sj in jobs if sj.arch == "mine" and sj.job.seeds == (1,))
    assert solo == _numbers(db)[(mine1, 1)]
    # a rerun, from yet another folder, finds both stored: nothing trained, nothing written
    capsys.readouterr()
    ids = {(r["run_id"], r["seed"]): r["id"] for r in rows}
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "4 jobs: 4 already stored (skipped), 0 to run" in out and out.count("skipped (stored)") == 4
    assert {(r["run_id"], r["seed"]): r["id"] for r in read_rows(str(db))} == ids and _count_rows(db) == (4, 4)


# ---------------------------------------------------------------- Ray

@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray with 2 CPUs for this module; yields its address (other drivers join it)."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


def _ray_executor(max_retries: int = 2):
    from bayesbench.sweep.ray_executor import RayExecutor
    from bayesbench.sweep.sweep_file import Resources

    return RayExecutor("auto", Resources(cpus=1), max_retries=max_retries)


@pytest.mark.ray
def test_ray_worker_killed_mid_job_is_retried_and_numbers_match_the_local_pool(reference, ray_cluster, tmp_path):
    path, _, numbers = reference
    jobs = expand(load_sweep(path))
    target = next(sj for sj in jobs if sj.job.arch == "transformer")
    kill_once, killed = _kill_once(target)  # the Ray worker process running the job
    db = tmp_path / "r.sqlite"
    out = run_sweep(jobs, _ray_executor(), db=str(db), runs_dir=str(tmp_path / "runs"), progress=False,
                    sink=lambda event: None, on_event=kill_once)
    assert killed and not out.failed and sorted(out.trained) == sorted(sj.key for sj in jobs)
    assert out.retried == {target.key: 1}  # only the killed job, once
    assert out.resumed[target.key] >= 10  # from its checkpoint, not from step 0
    # identical stored numbers to the local pool, each (job, seed) stored once
    assert _numbers(db) == numbers and _count_rows(db) == (4, 4)


@pytest.mark.ray
def test_run_on_ray_stores_what_the_local_run_stores(ray_cluster, tmp_path, capsys):
    """`bayesbench run --ray ADDRESS` is the same engine on another executor: the same keys and
    numbers as `run` on this machine, and a rerun (local) finds every job stored."""
    argv = ["run", "--tasks", "bijection", "--archs", "mlp", "transformer", "--seeds", "1", "--steps", "20",
            "--eval-sequences", "64", "--no-progress", "--json"]
    local, ray_db = tmp_path / "local.sqlite", tmp_path / "ray.sqlite"
    assert main([*argv, "--db", str(local), "--runs-dir", str(tmp_path / "runs-local")]) == 0
    assert main([*argv, "--db", str(ray_db), "--runs-dir", str(tmp_path / "runs-ray"), "--ray", ray_cluster]) == 0
    assert "Ray cluster" in capsys.readouterr().err
    assert _numbers(ray_db) == _numbers(local) and len(_numbers(local)) == 2
    assert main([*argv, "--db", str(ray_db), "--runs-dir", str(tmp_path / "runs-ray")]) == 0
    assert "2 jobs: 2 already stored (skipped), 0 to run" in capsys.readouterr().err


@pytest.mark.ray
def test_ray_driver_killed_then_rerun_loses_and_duplicates_nothing(reference, ray_cluster, tmp_path):
    path, _, numbers = reference
    jobs = expand(load_sweep(path))
    db, runs = tmp_path / "r.sqlite", tmp_path / "runs"
    cmd = [sys.executable, "-m", "bayesbench.cli", "sweep", path, "--ray", ray_cluster, "--db", str(db),
           "--runs-dir", str(runs), "--no-progress"]
    driver = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
    _wait_then_kill(driver, db, jobs, runs)
    time.sleep(2.0)  # Ray ends the tasks of a driver that died
    done_rows = {(r["run_id"], r["seed"]): r for r in read_rows(str(db))}
    done_keys = {k for k, _ in done_rows}
    partial = {sj.key for sj in jobs if sj.key not in done_keys
               and os.path.exists(os.path.join(sj.run_dir(str(runs)), CHECKPOINT_NAME))}
    assert 1 <= len(done_keys) < 4 and partial
    out = run_sweep(jobs, _ray_executor(), db=str(db), runs_dir=str(runs), progress=False, sink=lambda event: None)
    assert sorted(out.skipped) == sorted(done_keys) and not out.failed
    assert sorted(out.trained) == sorted(sj.key for sj in jobs if sj.key not in done_keys)
    assert partial <= set(out.resumed) and all(step >= 10 for step in out.resumed.values())
    after = {(r["run_id"], r["seed"]): r for r in read_rows(str(db))}
    for k, row in done_rows.items():  # finished jobs were not re-trained
        assert after[k]["id"] == row["id"] and after[k]["wall_s"] == row["wall_s"]
    assert _count_rows(db) == (4, 4) and _numbers(db) == numbers


def test_a_sweep_worker_holds_its_run_directory_lock(reference, tmp_path):
    """Two processes on one job's run directory would overwrite each other's checkpoint: the
    worker body takes the directory's lock (`Job.open_trainer`), so a job whose directory another
    live process holds fails, naming that process, and trains nothing."""
    from bayesbench.running.runlock import RunDirLocked
    from bayesbench.sweep.one_job import train_and_score

    path, _, _ = reference
    sj = next(sj for sj in expand(load_sweep(path)) if sj.job.arch == "mlp")
    runs = str(tmp_path / "runs")
    hold = "import sys, time\nfrom bayesbench.running.runlock import run_lock\nwith run_lock(sys.argv[1]):\n" \
           "    print('held', flush=True)\n    time.sleep(120)\n"
    holder = subprocess.Popen([sys.executable, "-c", hold, sj.run_dir(runs)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunDirLocked, match=f"in use by process {holder.pid}"):
            train_and_score(sj, runs, 1)
    finally:
        holder.kill()
        holder.wait()
    assert not os.path.exists(os.path.join(sj.run_dir(runs), CHECKPOINT_NAME))


def test_run_driver_killed_leaves_no_orphan_and_the_same_command_finishes(tmp_path):
    """Issue 24, point 1: `kill -9` of `bayesbench run --jobs 2` left its two workers training under
    PID 1, and the rerun was refused ("in use by process N") while they stored rows on their own."""
    from rundirs import run_dirs

    db, runs = tmp_path / "r.sqlite", tmp_path / "runs"
    argv = ["run", "--tasks", "bijection", "--archs", "transformer", "mlp", "--seeds", "1", "--steps", "400",
            "--jobs", "2", "--eval-sequences", "32", "--checkpoint-every", "10", "--db", str(db), "--runs-dir",
            str(runs), "--no-progress"]
    dirs = run_dirs(argv)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    driver = subprocess.Popen([sys.executable, "-m", "bayesbench.cli", *argv], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 600
    while not all(os.path.exists(os.path.join(d, CHECKPOINT_NAME)) for d in dirs):
        assert driver.poll() is None and time.monotonic() < deadline, "the run ended before it could be killed"
        time.sleep(0.05)
    workers = _pool_workers(driver.pid)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    deadline = time.monotonic() + 30
    while any_alive(workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(workers) == 2 and not any_alive(workers)
    assert _count_rows(db)[0] == 0  # nothing stored behind the driver's back
    done = subprocess.run([sys.executable, "-m", "bayesbench.cli", *argv], capture_output=True, text=True, env=env,
                          timeout=900)
    assert done.returncode == 0, done.stderr
    assert "resuming" in done.stdout and _count_rows(db) == (2, 2)
