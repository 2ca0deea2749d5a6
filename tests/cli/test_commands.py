"""The command package's structure: one module per command, each registering its own handler,
and a parser that is built without importing torch (so `bayesbench --help` and `leaderboard`
do not pay for the training code)."""

from __future__ import annotations

import subprocess
import sys

from bayesbench import cli


def test_every_command_module_registers_itself_with_a_handler():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert len(sub.choices) == len(cli.COMMANDS)
    for name, p in sub.choices.items():
        handler = p.get_default("handler")
        assert callable(handler), name
        assert handler.__module__.startswith("bayesbench.cli."), (name, handler.__module__)


def test_building_the_parser_imports_neither_torch_nor_the_trainer():
    code = ("import sys; from bayesbench.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('torch', 'bayesbench.training.trainer', 'bayesbench.scoring.evaluate') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _leaderboard_in_a_fresh_process(db: str, *extra: str) -> subprocess.CompletedProcess:
    """`bayesbench leaderboard --db DB EXTRA...` in a new interpreter; its last stderr line lists
    which of torch and scipy.stats it imported."""
    code = ("import sys; from bayesbench.cli import main; main(['leaderboard', '--db', *sys.argv[1:]]); "
            "print(sorted(m for m in ('torch', 'scipy.stats') if m in sys.modules), file=sys.stderr)")
    return subprocess.run([sys.executable, "-c", code, db, *extra], capture_output=True, text=True, check=True)


def test_the_leaderboard_reads_a_store_without_torch_or_scipy_stats(tmp_path):
    """`bayesbench leaderboard` pays for no training code (issue: 3-5 s before anything happened)."""
    from bayesbench.store.database import write_rows

    db = str(tmp_path / "r.sqlite")
    write_rows([{"run_id": "r1", "seed": 0, "member": 0, "task": "bijection", "task_label": "bijection V=8",
                 "task_config": {}, "arch": "mlp", "config": {}, "params": 1, "steps": 1, "status": "ok",
                 "metrics": {"primary": "standard", "evals": {}}}], db)
    assert _leaderboard_in_a_fresh_process(db).stderr.strip().splitlines()[-1] == "[]"


def test_the_leaderboard_s_steps_to_threshold_interval_needs_no_scipy_stats(tmp_path):
    """Rows with learning curves whose every seed reached the threshold get a t-interval of
    log(steps): computed with scipy.special, not scipy.stats (0.3 s of import per leaderboard)."""
    from bayesbench.cli import main

    db = str(tmp_path / "r.sqlite")
    assert main(["train", "--task", "sticky", "--arch", "mlp", "--seeds", "0,1", "--steps", "8",
                 "--eval-sequences", "64", "--curve-sequences", "32", "--no-progress", "--db", db,
                 "--runs-dir", str(tmp_path / "runs")]) == 0
    done = _leaderboard_in_a_fresh_process(db, "--threshold", "100")
    assert "every seed at that measured step (2/2" in done.stdout or "] (2/2;" in done.stdout
    assert done.stderr.strip().splitlines()[-1] == "[]"
