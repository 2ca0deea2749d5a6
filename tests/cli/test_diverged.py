"""A run whose members diverge is reported as diverged everywhere (the sweep's summary and its
done lines, the leaderboard), at the step it happened, never with a number of a diverged member
as a result (issue: 'trained', 150 steps and KL 5.5e20)."""

from __future__ import annotations

import re

from bayesbench.cli import main


def test_a_sweep_whose_members_all_diverge_says_so(tmp_path, capsys):
    sweep = tmp_path / "dv.toml"
    sweep.write_text('name = "dv"\ntasks = ["sticky"]\narchs = ["transformer"]\nseeds = [0, 1]\nsteps = 150\n'
                     "eval_sequences = 32\nlrs = [1e6]\n")
    db, runs = str(tmp_path / "r.sqlite"), str(tmp_path / "runs")
    assert main(["sweep", str(sweep), "--db", db, "--runs-dir", runs, "--no-progress"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| sticky"))
    assert re.search(r"\| (\d+) of 150 \|", row) and "trained; diverged (every member)" in row
    assert re.search(r"\| diverged@\d+ diverged@\d+ \| diverged@\d+ diverged@\d+ \|", row)
    assert main(["leaderboard", "--db", db]) == 0
    board = capsys.readouterr().out
    line = next(x for x in board.splitlines() if "| transformer" in x)
    assert "(2 of 2 diverged, at step" in line and "diverged (every seed)" in line and line.endswith("| - |")
    assert not re.search(r"\bnan\b|e\+\d\d", board, re.IGNORECASE)
