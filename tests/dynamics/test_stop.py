"""Studies stopped by Ctrl-C or SIGTERM leave nothing half-stored (dynamics/cut_short.py): one line
says what stopped and that the partial study was removed, the exit code is 130 / 143, and the
store holds no row of it. Also when the command was started with SIGINT ignored (a script's
background job), and `plot --dynamics` refuses a study that did not finish."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from bayesbench.cli import main
from bayesbench.dynamics.store import register_study


def _env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def _rows(db: str, table: str) -> int:
    if not os.path.exists(db):
        return 0
    con = sqlite3.connect(db)
    try:
        has = con.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone()
        return con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] if has else 0
    finally:
        con.close()


def _stop_a_running_study(tmp_path, argv: list[str], sig: int, *, ignore_sigint: bool = False) -> tuple[int, str]:
    db = str(tmp_path / "r.sqlite")
    pre = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore_sigint else None
    proc = subprocess.Popen([sys.executable, "-m", "bayesbench.cli", *argv, "--db", db, "--no-progress"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env(), cwd=tmp_path,
                            preexec_fn=pre)
    end = time.monotonic() + 300
    while _rows(db, "studies") == 0:  # the study is registered: its work has begun
        if proc.poll() is not None or time.monotonic() > end:
            proc.kill()
            pytest.fail(f"the study did not start: {proc.stderr.read()}")
        time.sleep(0.05)
    time.sleep(1.0)
    proc.send_signal(sig)
    err = proc.communicate(timeout=120)[1]
    assert _rows(db, "studies") == 0 and _rows(db, "dynamics") == 0, err
    return proc.returncode, err


@pytest.mark.parametrize("sig,code,ignore", [(signal.SIGTERM, 143, False), (signal.SIGINT, 130, True)])
def test_a_stopped_profile_is_removed_and_says_so(tmp_path, sig, code, ignore):
    rc, err = _stop_a_running_study(tmp_path, ["profile", "--preset", "quick", "--steps", "100000", "--seeds", "0,1",
                                               "--every", "5", "--eval-sequences", "64", "--runs-dir",
                                               str(tmp_path / "runs")], sig, ignore_sigint=ignore)
    lines = [line for line in err.splitlines() if line.startswith("bayesbench profile:")]
    assert rc == code and len(lines) == 1, err
    assert f"interrupted by {signal.Signals(sig).name}: stopped profile study profile-" in lines[0]
    assert "was removed from the store" in lines[0] and "checkpoints kept" not in lines[0]


def test_a_stopped_emsgd_study_is_removed_and_says_so(tmp_path):
    rc, err = _stop_a_running_study(tmp_path, ["emsgd", "--seeds", "2", "--length", "200", "--steps", "100000",
                                               "--threads", "1"], signal.SIGTERM)
    assert rc == 143 and "interrupted by SIGTERM: stopped emsgd study emsgd-paper-" in err
    assert "was removed from the store" in err
    # probe case 141: it said "before its training started" of a study stopped while it trained
    assert " while it ran;" in err and "before its training started" not in err


def test_plot_dynamics_draws_only_a_finished_study(tmp_path, capsys):
    db = str(tmp_path / "r.sqlite")
    register_study("profile-broken", "profile", {}, status="failed: RuntimeError: boom", path=db)
    assert main(["plot", "--dynamics", "profile-broken", "--db", db, "--out", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert "the study did not finish (status: failed: RuntimeError: boom)" in err
