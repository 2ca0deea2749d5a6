"""User mistakes and damaged inputs on the command line: one line naming the file or argument,
a non-zero exit, no traceback, no training started, the damaged file left byte for byte as it
was (issue: never a hang, never a traceback, never a silently wrong number)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from rundirs import run_dirs

from bayesbench.cli import main
from bayesbench.running.runlock import LOCK_NAME, RunDirLocked, run_lock
from bayesbench.store.database import StoreError, read_rows, write_rows
from bayesbench.training.checkpoint import DamagedFile, load_checkpoint

TINY = ["--preset", "quick", "--steps", "2", "--eval-sequences", "16", "--no-progress"]


def _train(tmp_path, *extra, db=None, arch="mlp", seeds="0") -> list[str]:
    return ["train", "--task", "bijection", "--arch", arch, "--seeds", seeds, *TINY,
            "--db", db or str(tmp_path / "r.sqlite"), "--runs-dir", str(tmp_path / "runs"), *extra]


def _fails(capsys, argv: list[str], code: int = 2) -> str:
    """main(argv) exits `code` with exactly one line on stderr (returned), no traceback."""
    assert main(argv) == code
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"bayesbench {argv[0]}: ")
    return lines[0]


def _row(run_id: str = "r1", task: str = "bijection", label: str = "bijection V=8", arch: str = "mlp") -> dict:
    return {"run_id": run_id, "seed": 0, "member": 0, "task": task, "task_label": label, "task_config": {},
            "arch": arch, "config": {}, "params": 1, "steps": 1, "status": "ok",
            "metrics": {"primary": "standard", "evals": {}}}


def _snapshot(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


# ---------------------------------------------------------------- the store, before any training

def test_db_that_is_a_directory_fails_before_training(capsys, tmp_path):
    line = _fails(capsys, _train(tmp_path, db=str(tmp_path)))
    assert f"results store {tmp_path} is a directory" in line
    assert not (tmp_path / "runs").exists()  # nothing was trained


def test_db_that_is_not_sqlite_fails_before_training_and_is_left_alone(capsys, tmp_path):
    text = tmp_path / "notes.sqlite"
    text.write_text("my notes, not a database\n" * 50)
    before = _snapshot(text)
    line = _fails(capsys, _train(tmp_path, db=str(text)))
    assert f"results store {text} is not an SQLite database" in line
    assert _snapshot(text) == before and not (tmp_path / "runs").exists()
    line = _fails(capsys, ["leaderboard", "--db", str(text)])
    assert "is not an SQLite database" in line and _snapshot(text) == before


def test_db_in_a_place_that_cannot_be_written_fails_before_training(capsys, tmp_path):
    # /proc refuses new files even to root, so this holds in any CI container.
    line = _fails(capsys, _train(tmp_path, db="/proc/self/bayesbench.sqlite"))
    assert "results store /proc/self/bayesbench.sqlite cannot be opened or created" in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_db_in_a_read_only_folder_fails_before_training(capsys, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        line = _fails(capsys, _train(tmp_path, db=str(ro / "r.sqlite")))
        assert "cannot be opened or created" in line and not (tmp_path / "runs").exists()
    finally:
        ro.chmod(0o755)


def test_evaluation_cache_that_cannot_be_created_fails_before_training(capsys, tmp_path):
    (tmp_path / "cache").write_text("a file where the cache folder would go")
    line = _fails(capsys, _train(tmp_path))
    assert f"the evaluation cache {tmp_path / 'cache'} beside results store" in line
    assert not (tmp_path / "runs").exists()


def test_store_of_another_program_fails_before_training_and_is_left_alone(capsys, tmp_path):
    import sqlite3

    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, name TEXT)")
    before = _snapshot(other)
    line = _fails(capsys, _train(tmp_path, db=str(other)))
    assert f"results store {other} has a 'runs' table without the columns" in line
    assert _snapshot(other) == before and not (tmp_path / "runs").exists()


def test_sqlite_file_of_another_program_is_refused_by_every_command_and_left_alone(capsys, tmp_path):
    import sqlite3

    other = tmp_path / "app.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO users (name) VALUES ('ada')")
    before = _snapshot(other)
    for argv in (_train(tmp_path, db=str(other)), ["leaderboard", "--db", str(other)]):
        line = _fails(capsys, argv)
        assert f"results store {other} is another program's SQLite database (its tables: users)" in line
        assert _snapshot(other) == before
    assert not (tmp_path / "runs").exists()


def test_a_store_on_a_read_only_file_system_can_be_read(capsys, tmp_path):
    from mounts import remount_read_only, tmpfs

    with tmpfs(tmp_path / "ro", "4m") as folder:
        db = os.path.join(folder, "r.sqlite")
        write_rows([_row("r1")], db)
        remount_read_only(folder)
        assert [r["run_id"] for r in read_rows(db)] == ["r1"]
        assert main(["leaderboard", "--db", db, "--format", "csv"]) == 0  # before: "cannot be written"
        assert main(["plot", "--db", db, "--out", str(tmp_path / "plots")]) == 0
        capsys.readouterr()


def test_a_full_disk_is_named_with_its_path_and_nothing_already_written_is_lost(capsys, tmp_path):
    from mounts import tmpfs

    from bayesbench.running.disk import DiskFull
    from bayesbench.training.checkpoint import save_atomic

    with tmpfs(tmp_path / "full", "64k") as folder:
        ckpt = os.path.join(folder, "c.pt")
        save_atomic({"x": torch.zeros(10)}, ckpt)
        before = _snapshot(ckpt)
        with pytest.raises(DiskFull, match=f"no space left on device: {ckpt}"):
            save_atomic({"x": torch.randn(100_000)}, ckpt)  # torch.save's own error: an internal assertion
        assert _snapshot(ckpt) == before and os.listdir(folder) == ["c.pt"]
        with tmpfs(tmp_path / "full-store", "256k") as store:
            db = os.path.join(store, "r.sqlite")
            write_rows([_row("r1")], db)
            big = dict(_row("r2"), task_config={"pad": "x" * 400_000})
            with pytest.raises(DiskFull, match=f"no space left on device: {db}"):  # not "cannot rollback"
                write_rows([big], db)
            assert [r["run_id"] for r in read_rows(db)] == ["r1"]
        # the command line: one line naming the path, exit 1 (the system refusing, docs/cli.md)
        line = _fails(capsys, _train(tmp_path, db=str(tmp_path / "ok.sqlite")) + ["--runs-dir", folder], code=1)
        assert "no space left on device: " + folder in line


def test_a_store_on_a_disk_too_full_for_its_files_is_a_full_disk_not_an_io_error(capsys, tmp_path):
    """A store created on a full disk was 'cannot be used (OperationalError: disk I/O error)', exit 2."""
    from mounts import tmpfs

    with tmpfs(tmp_path / "full", "16k") as folder:
        db = os.path.join(folder, "r.sqlite")
        line = _fails(capsys, _train(tmp_path, db=db), code=1)
        assert f"no space left on device: {db} (nothing already written was lost" in line
        assert "disk I/O error" not in line and not (tmp_path / "runs").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="the case of a machine without a GPU")
def test_eval_on_a_device_that_is_not_here_says_so_not_damaged(capsys, tmp_path, trained):
    line = _fails(capsys, ["eval", str(trained.parent), "--device", "cuda", "--db", str(tmp_path / "r.sqlite")])
    assert "--device cuda: no CUDA device is available here" in line and "damaged" not in line


def test_conflicting_or_misplaced_output_options_are_refused(capsys, tmp_path):
    db = str(tmp_path / "r.sqlite")
    write_rows([_row("r1")], db)
    line = _fails(capsys, ["leaderboard", "--db", db, "--format", "csv", "--json"])  # before: JSON, silently
    assert "--json is --format json: give one of --json and --format csv" in line
    afile = tmp_path / "a-file"
    afile.write_text("x")
    line = _fails(capsys, ["plot", "--db", db, "--out", str(afile)])
    assert f"--out {afile} is a file; give a folder" in line


def test_malformed_store_is_named_by_leaderboard_and_left_alone(capsys, tmp_path):
    db = tmp_path / "r.sqlite"
    write_rows([_row(f"r{i}") for i in range(50)], str(db))
    with open(db, "r+b") as f:  # keep the header page, overwrite every other page
        size = os.path.getsize(db)
        for offset in range(4096, size, 4096):
            f.seek(offset)
            f.write(b"\xa5" * 4096)
    before = _snapshot(db)
    line = _fails(capsys, ["leaderboard", "--db", str(db)])
    assert f"results store {db} is damaged" in line and "malformed" in line
    assert _snapshot(db) == before


# ---------------------------------------------------------------- damaged checkpoints

@pytest.fixture()
def trained(tmp_path, capsys):
    assert main(_train(tmp_path)) == 0
    capsys.readouterr()
    return Path(run_dirs(_train(tmp_path))[0]) / "checkpoint.pt"


@pytest.mark.parametrize("damage", ["truncated", "empty", "text"])
def test_damaged_checkpoint_is_named_by_a_rerun_and_eval_and_left_alone(capsys, tmp_path, trained, damage):
    """A job whose checkpoint is damaged (its rows not stored: another --db) fails naming the file;
    so does `eval`; the file is left as it was."""
    data = _snapshot(trained)
    trained.write_bytes({"truncated": data[: len(data) // 2], "empty": b"", "text": b"hello\n"}[damage])
    before = _snapshot(trained)
    for argv in (_train(tmp_path, db=str(tmp_path / "other.sqlite")),
                 ["eval", str(trained.parent), "--db", str(tmp_path / "r.sqlite")]):
        line = _fails(capsys, argv)
        assert f"checkpoint {trained} is damaged" in line and "left as it is" in line
        assert ("the file is empty" if damage == "empty" else "truncated or not a PyTorch checkpoint") in line
        assert {"truncated": "an incomplete or damaged zip archive", "empty": "empty",
                "text": "not a file torch.save wrote"}[damage] in line and "weights_only" not in line, line
        assert _snapshot(trained) == before


def test_checkpoint_from_something_else_is_named(tmp_path):
    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(3)}, other)
    with pytest.raises(DamagedFile, match=r"lacks identity, run_id, step"):
        load_checkpoint(str(other), required=("identity", "run_id", "step"))


def test_damaged_cached_evaluation_set_is_redrawn_with_a_note(capsys, tmp_path, monkeypatch):
    from bayesbench.scoring import evaluate

    monkeypatch.setattr(evaluate, "_cache", {})  # an in-memory copy would hide the file
    assert main(_train(tmp_path)) == 0
    trained = Path(run_dirs(_train(tmp_path))[0]) / "checkpoint.pt"
    caches = sorted((tmp_path / "cache").glob("eval-*.pt"))  # one per evaluation of the task
    assert caches
    good = {c: _snapshot(c) for c in caches}
    for c in caches:
        c.write_bytes(good[c][:100])
    monkeypatch.setattr(evaluate, "_cache", {})
    assert main(["eval", str(trained.parent), "--db", str(tmp_path / "r.sqlite")]) == 0
    err = capsys.readouterr().err
    for c in caches:
        assert f"the cached evaluation set {c} is unreadable" in err
        assert _snapshot(c) == good[c]  # redrawn from its seed: the same set


def test_leftover_temporary_checkpoint_is_removed_and_a_finished_checkpoint_is_resumed(capsys, tmp_path, trained):
    """The job again with its rows not in the store (another --db): its run directory's leftover
    temporary file goes, its finished checkpoint is resumed (nothing trained), its rows stored."""
    leftover = trained.parent / "checkpoint.pt.tmp99999999"
    leftover.write_bytes(b"half a checkpoint")
    assert main(_train(tmp_path, db=str(tmp_path / "other.sqlite"))) == 0
    out = capsys.readouterr().out
    assert "1 job: 0 already stored (skipped), 1 to run (1 resume from checkpoints)" in out
    assert "resuming bijection V=8 L=7 repl / mlp lr 0.0005 seeds [0] from its checkpoint at step 2" in out
    assert not leftover.exists()
    assert read_rows(str(tmp_path / "other.sqlite"), where="run_id = ?", params=(trained.parent.name[-16:],))
    assert main(_train(tmp_path)) == 0  # and in the first store it is stored already: nothing runs
    assert "1 job: 1 already stored (skipped), 0 to run" in capsys.readouterr().out


# ---------------------------------------------------------------- other mistakes

def test_triton_without_gpu_is_one_line_before_training(capsys, tmp_path, monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("this machine can run the triton backend")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    line = _fails(capsys, _train(tmp_path, "--attention", "triton", arch="transformer"))
    assert "--attention triton needs" in line and "use --attention sdpa or eager" in line
    assert not (tmp_path / "runs").exists()


def test_a_task_or_arch_named_twice_is_refused_before_training(capsys, tmp_path):
    """`run --archs mlp mlp` would be one job twice (one key, one run directory): refused, as a
    sweep file naming an arch twice is."""
    runs = ["--db", str(tmp_path / "r.sqlite"), "--runs-dir", str(tmp_path / "runs"), *TINY]
    line = _fails(capsys, ["run", "--tasks", "bijection", "--archs", "mlp", "mlp", *runs])
    assert "--archs names 'mlp' twice" in line
    line = _fails(capsys, ["run", "--tasks", "bijection,bijection", "--archs", "mlp", *runs])
    assert "--tasks names 'bijection' twice" in line
    assert not (tmp_path / "runs").exists()


def test_negative_seeds_are_refused(capsys, tmp_path):
    with pytest.raises(SystemExit) as info:
        main(_train(tmp_path, seeds="-1"))
    assert info.value.code == 2
    assert "argument --seeds: must list distinct non-negative integers, got '-1'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", "--seeds", "-1"])
    assert not (tmp_path / "runs").exists()
    from bayesbench.tasks import get_task
    from bayesbench.training.config import TrainConfig
    from bayesbench.training.trainer import Trainer

    with pytest.raises(ValueError, match=r"seeds must be integers in \[0, 2\^63 - 1\]"):
        Trainer(get_task("bijection", V=4), "mlp", [-1], TrainConfig(steps=1))


def test_leaderboard_and_plot_name_an_unknown_task(capsys, tmp_path):
    db = str(tmp_path / "r.sqlite")
    write_rows([_row("r1"), _row("r2", "hmm", "hmm S=5 K=20 soft", "transformer")], db)
    line = _fails(capsys, ["leaderboard", "--db", db, "--task", "nonsense"])
    assert "no stored results match --task 'nonsense'" in line
    assert "stored tasks: bijection (bijection V=8), hmm (hmm S=5 K=20 soft)" in line
    assert "stored archs: mlp, transformer" in line
    line = _fails(capsys, ["leaderboard", "--db", db, "--arch", "lstm"])
    assert "--arch 'lstm'" in line
    line = _fails(capsys, ["plot", "--db", db, "--task", "nonsense", "--out", str(tmp_path / "plots")])
    assert "no stored results match --task 'nonsense'" in line
    (tmp_path / "empty.sqlite").touch()  # a store with nothing in it (a missing one is "no store at")
    line = _fails(capsys, ["leaderboard", "--db", str(tmp_path / "empty.sqlite"), "--task", "hmm"])
    assert "no results in the store" in line


def test_debug_flag_and_environment_show_the_traceback(capsys, tmp_path, monkeypatch):
    with pytest.raises(StoreError):
        main(["--debug", "leaderboard", "--db", str(tmp_path)])
    with pytest.raises(StoreError):
        main(["leaderboard", "--debug", "--db", str(tmp_path)])
    monkeypatch.setenv("BAYESBENCH_DEBUG", "1")
    with pytest.raises(StoreError):
        main(["leaderboard", "--db", str(tmp_path)])
    monkeypatch.setenv("BAYESBENCH_DEBUG", "0")
    assert main(["leaderboard", "--db", str(tmp_path)]) == 2


def test_runs_dir_that_is_a_file_is_one_line(capsys, tmp_path):
    (tmp_path / "runs").write_text("not a folder")
    line = _fails(capsys, _train(tmp_path))  # before: "[Errno 20] Not a directory: '.../runs/quick'"
    assert f"--runs-dir {tmp_path / 'runs'} is a file; give a folder" in line
    line = _fails(capsys, ["plot", "--db", str(tmp_path / "r.sqlite"), "--out", str(tmp_path / "runs" / "plots")])
    assert f"--out {tmp_path / 'runs' / 'plots'} lies under the file {tmp_path / 'runs'}" in line


def test_a_closed_pipe_is_not_a_traceback():
    proc = subprocess.Popen([sys.executable, "-m", "bayesbench.cli", "models", "--preset", "quick"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first line, as with `| head -0`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 128 + signal.SIGPIPE
    assert err == "", err


# ---------------------------------------------------------------- the run-directory lock

_HOLD = """
import sys, time
from bayesbench.running.runlock import run_lock
with run_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(120)
"""


def test_a_run_directory_in_use_is_refused_and_a_stale_lock_taken_over(capsys, tmp_path):
    run_dir = Path(run_dirs(_train(tmp_path))[0])
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(run_dir)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        line = _fails(capsys, _train(tmp_path))
        assert f"run directory {run_dir} is in use by process {holder.pid}" in line
        assert not (run_dir / "checkpoint.pt").exists()
    finally:
        holder.kill()  # SIGKILL: the lock file stays behind, naming a dead process
        holder.wait()
    assert (run_dir / LOCK_NAME).exists()
    assert main(_train(tmp_path)) == 0
    err = capsys.readouterr().err
    assert f"taking over the stale lock of run directory {run_dir}" in err and f"process {holder.pid}" in err
    assert not (run_dir / LOCK_NAME).exists() and (run_dir / "checkpoint.pt").exists()


def test_run_lock_is_reentrant_in_one_process_and_exclusive_across_processes(tmp_path):
    with run_lock(str(tmp_path)), run_lock(str(tmp_path)):  # the runner and train both lock a job's directory
        assert (tmp_path / LOCK_NAME).exists()
        code = ("import sys\nfrom bayesbench.running.runlock import run_lock, RunDirLocked\n"
                "try:\n    run_lock(sys.argv[1]).__enter__()\nexcept RunDirLocked as e:\n    print(e)\n")
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True).stdout
        assert f"in use by process {os.getpid()}" in out
    assert not (tmp_path / LOCK_NAME).exists()
    assert issubclass(RunDirLocked, ValueError)


# ---------------------------------------------------------------- never a silently wrong number

def _posterior_and_mask(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(7, 5, 3, generator=g), -1)
    mask = torch.rand(7, 5, generator=g) > 0.3
    p = torch.where(mask.unsqueeze(-1), p, torch.zeros(()))  # zeros off the scored positions, as tasks give
    return p, mask, g


def test_score_refuses_a_predictive_that_is_not_a_distribution():
    from bayesbench.scoring.metrics import score

    p, mask, g = _posterior_and_mask()
    with pytest.raises(ValueError, match=r"q \(the model's predictive\) at the scored positions .* summing to 1"):
        score(p, mask, q=torch.rand(p.shape, generator=g) * 5)  # the example
    negative = p.clone()
    negative[mask] = negative[mask] * torch.tensor([1.5, -0.5, 1.0])
    with pytest.raises(ValueError, match="must be non-negative"):
        score(p, mask, q=negative)
    nan = p.clone()
    nan[mask.nonzero()[0].tolist()] = float("nan")
    with pytest.raises(ValueError, match="must be finite at every scored position"):
        score(p, mask, q=nan)
    diverged = score(p, mask, q=nan, nonfinite="nan")  # a diverged member: NaN, not an error
    assert diverged.entropy_mae.mean != diverged.entropy_mae.mean
    with pytest.raises(ValueError, match="log_q .* must hold log-probabilities"):
        score(p, mask, log_q=torch.log(torch.rand(p.shape, generator=g, dtype=torch.float64) * 5))
    # q = p is perfect even though p is all zeros off the scored positions (those are not checked)
    exact = score(p, mask, q=p)
    assert exact.entropy_mae.mean == 0.0 and abs(exact.kl.mean) < 1e-12
    logits = torch.randn(p.shape, generator=g, dtype=torch.float64)
    a = score(p, mask, logits=logits)
    b = score(p, mask, log_q=torch.log_softmax(logits, -1))
    c = score(p, mask, q=torch.softmax(logits.float(), -1))  # float32 rows within the oracle's tolerance
    assert a.kl.mean == pytest.approx(b.kl.mean, abs=1e-12) == pytest.approx(c.kl.mean, abs=1e-5)
    assert a.kl.mean >= 0


def test_tasks_too_large_to_serve_are_refused_with_the_size_they_need(monkeypatch):
    from bayesbench.tasks import base, get_task

    with pytest.raises(ValueError, match=r"bijection\(V=1000000.* too large to sample: one sequence needs at least "
                                         r"7\.3 TiB"):
        get_task("bijection", V=10**6)  # the example: it failed in sample, allocating terabytes
    with pytest.raises(ValueError, match="markov.*3.0 GiB"):
        get_task("markov", V=20000)
    with pytest.raises(ValueError, match="hmm.*too large"):
        get_task("hmm", K=10**8)
    task = get_task("bijection", V=8)
    assert task.sequence_bytes() == task.seq_len * task.num_classes * 4 + 2 * task.seq_len * 8
    monkeypatch.setattr(base, "available_bytes", lambda device: 100 * 2**20)  # a device with 100 MiB free
    need = 10**6 * task.sequence_bytes()
    with pytest.raises(ValueError, match=rf"sampling 1000000 sequences of bijection.* needs at least "
                                         rf"{base.format_bytes(need)} on cpu, which has 100.0 MiB free"):
        task.sample(10**6)  # refused before anything is allocated
    assert task.sample(64).tokens.shape == (64, task.seq_len)  # small batches are not even checked


def test_seed_values_past_int64_are_refused_naming_the_flag(capsys, tmp_path):
    with pytest.raises(SystemExit):
        main(_train(tmp_path, seeds=str(2**63)))
    assert "argument --seeds: seeds must be at most 2^63 - 1 (an int64), got 9223372036854775808" in \
        capsys.readouterr().err
    from bayesbench.tasks import get_task
    from bayesbench.training.config import TrainConfig
    from bayesbench.training.trainer import Trainer

    with pytest.raises(ValueError, match=r"seeds must be integers in \[0, 2\^63 - 1\]"):
        Trainer(get_task("bijection", V=4), "mlp", [2**64], TrainConfig(steps=1))


def test_oversized_jobs_and_study_options_are_refused_up_front(capsys, tmp_path):
    line = _fails(capsys, ["run", "--seeds", "1000000", "--tasks", "sticky", "--archs", "mlp", "--db",
                           str(tmp_path / "r.sqlite"), "--runs-dir", str(tmp_path / "runs")])
    assert "an ensemble of 1,000,000 members" in line and "use fewer seeds (--seeds)" in line  # before: 14.8 MB printed
    assert "at most " in line and " members fit" in line
    line = _fails(capsys, ["emsgd", "--seeds", "2", "--length", "100000000", "--db", str(tmp_path / "r.sqlite")])
    assert "--length 100,000,000: one sequence's" in line and "fits" in line  # before: silent for 90 s
    for argv in (["--chunk", "0"], ["--chunk", "-3"], ["--threads", "0"]):
        with pytest.raises(SystemExit):
            main(["emsgd", "--seeds", "2", *argv])
        assert f"argument {argv[0]}: must be a positive integer" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_a_model_too_large_for_the_device_blames_the_model_not_the_seeds(capsys, tmp_path):
    """Issue 29, section 3: one member of d_model=100000 (80 billion parameters) was refused with
    "use fewer seeds" for a single seed: the model size is the cause, and --model-args its flag."""
    line = _fails(capsys, _train(tmp_path, "--model-args", "d_model=100000", arch="transformer"))
    assert "one member of 80,057,100,264 parameters needs at least 1.2 TiB" in line, line
    assert "the model (--model-args d_model=100000) is too large for this device; make it smaller" in line, line
    assert "fewer seeds" not in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("option", ["--curve-sequences", "--eval-sequences"])
def test_a_set_too_large_to_sample_is_refused_naming_its_flag_before_a_run_directory(capsys, tmp_path, option):
    """Probe case 11: the refusal came from inside the job (printed as a FAILED line and again as
    the error, naming no flag) and left an empty run directory behind."""
    assert main(_train(tmp_path, option, "100000000")) == 2
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and f"of 100,000,000 sequences, {option[2:].replace('-', '_')} ({option})" in lines[0], err
    assert "FAILED" not in out and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("exit_call,said", [("sys.exit(3)", "3"), ("sys.exit('bye')", "'bye'"), ("exit()", "None")])
def test_an_outside_file_that_exits_while_importing_is_named(capsys, tmp_path, monkeypatch, exit_call, said):
    """issue 39: a model file calling sys.exit(3) at import ended the command with exit code 3 and no word."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text(f"import sys\n{exit_call}\n")
    for argv, kind in ((["run", "--model", "./m.py:build", "--tasks", "bijection", *TINY], "model"),
                       (["train", "--task", "./m.py:build", "--arch", "mlp", *TINY], "task")):
        line = _fails(capsys, [*argv, "--db", "r.sqlite", "--runs-dir", "runs"])
        assert f"{kind} '{tmp_path / 'm.py'}:build': importing {tmp_path / 'm.py'} failed: it exited with {said} " \
               "(sys.exit)" in line, line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("argv", [["leaderboard"], ["plot"], ["plot", "--tuning"], ["plot", "--curves"],
                                  ["plot", "--dynamics", "s1"], ["site"], ["export"], ["compare", "a", "b"]])
def test_every_reader_says_no_store_at_a_db_that_is_not_there_as_the_api_does(capsys, tmp_path, monkeypatch, argv):
    """issue 39: `plot --tuning --db typo` and `leaderboard --db typo.sqlite` said "nothing stored" (exit 0 for the
    leaderboard), where bayesbench.leaderboard said "no store there"."""
    import bayesbench

    monkeypatch.chdir(tmp_path)
    typo = str(tmp_path / "typo.sqlite")
    line = _fails(capsys, [*argv, "--db", typo])
    assert line.endswith(f": no store at {typo} (--db; a typo? `bayesbench run --db {typo}` makes a store there)")
    monkeypatch.setenv("BAYESBENCH_DB", typo)
    assert f": no store at {typo} ($BAYESBENCH_DB; a typo?" in _fails(capsys, argv)
    with pytest.raises(ValueError, match=f"no store at {typo} "):
        bayesbench.leaderboard(db=typo)
    assert os.listdir(tmp_path) == []  # nothing made


def test_outside_code_calling_sys_exit_while_the_command_runs_is_named(capsys, tmp_path, monkeypatch):
    """issue 39 (the same class): a model factory calling sys.exit(5) ended `run` with exit code 5 and no word."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text("import sys\n\ndef build(*args, **kwargs):\n    sys.exit(5)\n")
    line = _fails(capsys, ["run", "--model", "./m.py:build", "--tasks", "bijection", *TINY, "--db", "r.sqlite",
                           "--runs-dir", "runs"])
    assert line == ("bayesbench run: stopped: code it ran called sys.exit(5) (your --model, --task or sweep file's "
                    "code?); rerun with --debug for where")
    with pytest.raises(SystemExit):
        main(["run", "--model", "./m.py:build", "--tasks", "bijection", *TINY, "--db", "r.sqlite", "--debug"])
