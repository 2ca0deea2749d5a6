"""Ctrl-C and SIGTERM on the real command (issue: never a hang, never a traceback).

`bayesbench run` with two worker processes is started in its own process group (as a shell
starts a job) and gets SIGINT in the whole group (as a terminal's Ctrl-C does) once both jobs
have written a checkpoint: the whole process tree must be gone within 10 s, with one line saying
what stopped where and how to continue, every checkpoint whole, nothing stored; running the same
command again then finishes with exactly the numbers of an uninterrupted run. The same with
`--jobs 1` (in-process training) and SIGTERM to the command's process alone, and for `sweep`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from procs import live_processes
from rundirs import run_dirs

from bayesbench.running.runlock import LOCK_NAME
from bayesbench.store.database import read_rows
from bayesbench.training.checkpoint import CHECKPOINT_KEYS, load_checkpoint

STEPS = 300  # at ~10-50 ms a step the interrupt lands mid-training, and a run stays a few seconds
EVERY = 5
STOP_WITHIN_S = 10.0


def _command(*argv: str) -> list[str]:
    return [sys.executable, "-m", "bayesbench.cli", *argv]


def _env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def _start(argv: list[str], log) -> subprocess.Popen:
    # A new session: its own process group, as a shell job; SIGINT/SIGTERM at their defaults.
    return subprocess.Popen(_command(*argv), stdout=log, stderr=subprocess.PIPE, text=True, env=_env(),
                            start_new_session=True)


def _wait_for_files(proc: subprocess.Popen, paths: list[str], timeout: float = 600.0) -> None:
    end = time.monotonic() + timeout
    while not all(os.path.exists(p) for p in paths):
        if proc.poll() is not None:
            pytest.fail(f"the command ended (exit {proc.returncode}) before writing {paths}: {proc.stderr.read()}")
        if time.monotonic() > end:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"no checkpoint after {timeout:.0f} s")
        time.sleep(0.05)


def _stop_and_time(proc: subprocess.Popen, sig: int, *, group: bool) -> float:
    """Send `sig` (to the whole group or the process), return the seconds until the group is gone."""
    sent = time.monotonic()
    (os.killpg if group else os.kill)(proc.pid, sig)
    while live_processes(group=proc.pid) and time.monotonic() - sent < 60:
        time.sleep(0.02)
    took = time.monotonic() - sent
    left = live_processes(group=proc.pid)
    if left:
        os.killpg(proc.pid, signal.SIGKILL)
    assert not left, f"processes {left} still alive {took:.1f} s after {signal.Signals(sig).name}"
    return took


def _run_ok(argv: list[str]) -> subprocess.CompletedProcess:
    done = subprocess.run(_command(*argv), capture_output=True, text=True, env=_env(), timeout=900)
    assert done.returncode == 0, done.stderr
    return done


RERUN = "(stored jobs are skipped, stopped ones resume from their checkpoints)"


def _check_stopped(proc: subprocess.Popen, sig: int, took: float, command: str) -> tuple[str, str]:
    """The command's one interrupt line (checked), and all it wrote to stderr."""
    err = proc.stderr.read()
    proc.wait(timeout=5)
    print(f"\n{signal.Signals(sig).name} to exit: {took:.2f} s ({command})")
    assert took < STOP_WITHIN_S
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    lines = [line for line in err.splitlines() if line.startswith(f"bayesbench {command}: interrupted")]
    assert len(lines) == 1, err
    assert f"interrupted by {signal.Signals(sig).name}: stopped" in lines[0]
    assert lines[0].rstrip().endswith(RERUN) and f"continue with: bayesbench {command} " in lines[0]
    return lines[0], err


def _check_checkpoint(run_dir: str, line: str) -> int:
    """The checkpoint is whole, mid-way, the step the message names; no temporary file or lock left."""
    state = load_checkpoint(os.path.join(run_dir, "checkpoint.pt"), required=CHECKPOINT_KEYS)
    assert 0 < state["step"] < STEPS
    assert f"at step {state['step']} of {STEPS}" in line
    leftovers = [f for f in os.listdir(run_dir) if f != "checkpoint.pt"]
    assert leftovers == [], leftovers
    assert not os.path.exists(os.path.join(run_dir, LOCK_NAME))
    return state["step"]


def _numbers(stdout: str) -> dict:
    return {(r["arch"], r["seed"]): (r["steps"], r["final_loss"], r["entropy_mae_bits"], r["kl_bits"])
            for r in json.loads(stdout)["runs"]}


def test_sigint_with_two_workers_stops_everything_and_resume_matches(tmp_path):
    common = ["run", "--preset", "quick", "--tasks", "bijection", "--archs", "transformer", "mlp", "--seeds", "1",
              "--steps", str(STEPS), "--checkpoint-every", str(EVERY), "--eval-sequences", "64", "--jobs", "2",
              "--threads", "1", "--no-progress", "--json"]
    db, runs = str(tmp_path / "a.sqlite"), str(tmp_path / "runs")
    argv = [*common, "--db", db, "--runs-dir", runs]
    dirs = run_dirs(argv)
    with open(tmp_path / "stdout", "w") as log:
        proc = _start(argv, log)
        _wait_for_files(proc, [os.path.join(d, "checkpoint.pt") for d in dirs])
        took = _stop_and_time(proc, signal.SIGINT, group=True)
        line, _ = _check_stopped(proc, signal.SIGINT, took, "run")
    assert f"continue with: bayesbench {' '.join(argv)} {RERUN}" in line
    steps = {arch: _check_checkpoint(d, line) for arch, d in zip(("transformer", "mlp"), dirs)}
    assert read_rows(db) == []  # nothing half-done stored

    resumed = _run_ok(argv)  # the same command continues
    for arch, step in steps.items():
        assert f"resuming bijection V=8 L=7 repl / {arch} lr 0.0005 seeds [0] from its checkpoint at step {step}" \
            in resumed.stderr
    plain = _run_ok([*common, "--db", str(tmp_path / "b.sqlite"), "--runs-dir", str(tmp_path / "runs-b")])
    assert _numbers(resumed.stdout) == _numbers(plain.stdout)
    assert {arch for arch, _ in _numbers(plain.stdout)} == {"transformer", "mlp"}


def test_sigterm_with_one_job_in_process_checkpoints_and_resumes(tmp_path):
    argv = ["run", "--preset", "quick", "--tasks", "bijection", "--archs", "mlp", "--seeds", "1", "--steps", str(STEPS),
            "--checkpoint-every", str(EVERY), "--eval-sequences", "64", "--jobs", "1", "--no-progress",
            "--db", str(tmp_path / "a.sqlite"), "--runs-dir", str(tmp_path / "runs")]
    (run_dir,) = run_dirs(argv)
    with open(tmp_path / "stdout", "w") as log:
        proc = _start(argv, log)
        _wait_for_files(proc, [os.path.join(run_dir, "checkpoint.pt")])
        took = _stop_and_time(proc, signal.SIGTERM, group=False)  # the command's process alone
        line, _ = _check_stopped(proc, signal.SIGTERM, took, "run")
    step = _check_checkpoint(run_dir, line)
    assert read_rows(str(tmp_path / "a.sqlite")) == []
    resumed = _run_ok(argv)
    assert f"resuming bijection V=8 L=7 repl / mlp lr 0.0005 seeds [0] from its checkpoint at step {step}" \
        in resumed.stdout
    assert len(read_rows(str(tmp_path / "a.sqlite"))) == 1


def test_sigint_to_a_sweep_on_the_local_pool_stops_everything_and_a_rerun_resumes(tmp_path, write_sweep):
    """`bayesbench sweep` (two jobs, two local worker processes) gets Ctrl-C once both jobs have
    a checkpoint: gone within 10 s, exit 130, no traceback, one line per stopped job with its
    checkpoint (whole, at the step named) and the summary line; nothing stored. Running the same
    command again resumes both from those steps and stores the numbers of an uninterrupted sweep."""
    from bayesbench.sweep import expand, load_sweep

    path = write_sweep(tmp_path, "stop", STEPS, seeds=(0,))
    jobs = expand(load_sweep(path))
    db, runs = str(tmp_path / "a.sqlite"), str(tmp_path / "runs")
    argv = ["sweep", path, "--db", db, "--runs-dir", runs, "--jobs", "2", "--no-progress", "--json"]
    with open(tmp_path / "stdout", "w") as log:
        proc = _start(argv, log)
        _wait_for_files(proc, [os.path.join(sj.run_dir(runs), "checkpoint.pt") for sj in jobs])
        took = _stop_and_time(proc, signal.SIGINT, group=True)
        line, err = _check_stopped(proc, signal.SIGINT, took, "sweep")
    assert f"continue with: bayesbench sweep {path} --db" in line
    steps = {}
    for sj in jobs:
        step = _check_checkpoint(sj.run_dir(runs), line)
        assert f"{sj.label} at step {step} of {STEPS}" in line
        ckpt = os.path.join(sj.run_dir(runs), "checkpoint.pt")
        assert f"stopped {sj.label} at step {step} of {STEPS}: checkpoint {ckpt}, a rerun resumes from it" in err
        steps[sj.key] = step
    assert read_rows(db) == []  # nothing half-done stored

    resumed = _run_ok(argv)
    for sj in jobs:
        assert f"resuming {sj.label} from its checkpoint at step {steps[sj.key]}" in resumed.stderr
    plain = _run_ok(["sweep", path, "--db", str(tmp_path / "b.sqlite"), "--runs-dir", str(tmp_path / "runs-b"),
                     "--jobs", "2", "--no-progress", "--json"])
    assert _numbers(resumed.stdout) == _numbers(plain.stdout)
    assert {arch for arch, _ in _numbers(plain.stdout)} == {"transformer", "mlp"}
