"""The leaderboard never compares what is not comparable and never shows a diverged member's number
as a result: rows are ranked only within one evaluation set (task, evaluation, number of sequences),
a diverged member is named with its step, rows at the uniform floor are marked, and the summary
line shows overlapping intervals over seeds as ties."""

from __future__ import annotations

from bayesbench.report.headline import headline
from bayesbench.report.leaderboard import markdown
from bayesbench.report.rows import aggregate
from bayesbench.report.selection import select_rows
from bayesbench.store.database import write_rows


def _summary(mean: float, n: int) -> dict:
    return {"mean": mean, "ci_low": mean - 0.01, "ci_high": mean + 0.01, "n_sequences": n, "n_positions": 8 * n}


def _row(run_id: str, seed: int, mae: float, *, arch: str, n: int = 4096, status: str = "ok") -> dict:
    floor = {"uniform": {m: _summary(1.25, n) for m in ("entropy_mae", "kl", "entropy_mae_positional")}}
    ev = {"task": "bijection(V=8)", "positions": "values", "entropy_mae": _summary(mae, n), "kl": _summary(mae, n),
          "floors": floor}
    return {"run_id": run_id, "seed": seed, "member": seed, "task": "bijection", "task_label": "bijection V=8",
            "task_config": {"task": "bijection", "V": 8}, "arch": arch, "params": 100, "steps": 200, "wall_s": 1.0,
            "status": status, "entropy_mae_bits": mae, "kl_bits": mae,
            "config": {"model_args": {}, "train": {"lr": 1e-3}, "max_len": 15, "eval_lengths": [],
                       "eval_sequences": n, "seeds": [seed]},
            "metrics": {"primary": "values", "evals": {"values": ev}}}


def test_rows_scored_on_different_evaluation_sets_are_never_ranked_together(tmp_path):
    db = str(tmp_path / "r.sqlite")
    write_rows([_row("a", s, 0.50 + 0.01 * s, arch="lstm") for s in range(3)], db)
    write_rows([_row("b", s, 0.40 + 0.01 * s, arch="gru", n=512) for s in range(3)], db)  # a smaller set
    agg = aggregate(select_rows(db))
    assert {(row.arch, row.n_sequences) for row in agg} == {("lstm", 4096), ("gru", 512)}
    md = markdown(select_rows(db))
    lines = [line for line in md.splitlines() if line.startswith("| bijection")]
    assert any("values (trained), 4096 seq | lstm" in line and "| 1.0x |" in line for line in lines)
    assert any("values (trained), 512 seq | gru" in line and "| 1.0x |" in line for line in lines)  # its own best
    assert sum("*uniform (floor)*" in line for line in lines) == 2  # each set has its own floor rows
    assert len(headline(select_rows(db))) == 2  # one summary line per evaluation set


def test_a_diverged_member_is_named_with_its_step_and_never_averaged(tmp_path):
    db = str(tmp_path / "r.sqlite")
    status = "member 1 (seed 1) diverged at step 150: loss is not finite; frozen at its last parameters"
    write_rows([_row("a", 0, 0.30, arch="mlp"), _row("a", 1, 5.5e20, arch="mlp", status=status),
                _row("a", 2, 0.34, arch="mlp")], db)
    write_rows([_row("b", s, 9e9, arch="gru", status=f"member {s} (seed {s}) diverged at step {20 + s}: ...")
                for s in range(2)], db)
    md = markdown(select_rows(db))
    mlp = next(line for line in md.splitlines() if "| mlp" in line)
    assert "mlp (1 of 3 diverged, at step 150)" in mlp and "0.3000 diverged@150 0.3400" in mlp
    assert "| 0.3200 [" in mlp and "5.5" not in mlp.split("|")[9]  # the mean of the two that trained
    gru = next(line for line in md.splitlines() if "| gru" in line)
    assert "diverged (every seed)" in gru and "diverged@20 diverged@21" in gru and gru.endswith("| - |")
    assert "nan" not in md.lower().replace("n/a", "")
    line = headline(select_rows(db))[0]
    assert "mlp 0.3200 (1 of 3 diverged" in line and "gru diverged (2 of 2 diverged" in line


def test_rows_at_the_floor_are_marked_and_overlapping_intervals_are_ties(tmp_path):
    db = str(tmp_path / "r.sqlite")
    write_rows([_row("a", s, v, arch="mine") for s, v in enumerate((1.20, 1.30, 1.24))], db)  # 1.2467
    write_rows([_row("b", s, v, arch="lstm") for s, v in enumerate((1.245, 1.246, 1.244))], db)
    write_rows([_row("c", s, v, arch="transformer") for s, v in enumerate((0.10, 0.11, 0.12))], db)
    write_rows([_row("d", s, 1.2547, arch="gru") for s in range(3)], db)  # worse than the floor 1.25
    line = headline(select_rows(db))[0]
    assert "transformer 0.1100 < " in line  # apart
    assert "transformer 0.1100 < lstm 1.2450 (at floor) ~ mine 1.2467 (at floor) ~ gru 1.2547 (at floor)" in line
    assert line.count("(at floor)") == 3 and "transformer 0.1100 (at floor)" not in line
    md = markdown(select_rows(db))
    assert "| gru (at floor) |" in md and "| transformer |" in md


def test_an_interval_clipped_at_zero_reads_0_not_in_scientific_notation(tmp_path):
    """Two seeds far apart give a t-interval whose lower end is clipped at 0: the cell reads
    "[0, ...]" beside four-decimal numbers, never "[0.00e+00, ...]"; small nonzero values keep
    their exponent (they would print as 0.0000)."""
    db = str(tmp_path / "r.sqlite")
    write_rows([_row("a", 0, 0.05, arch="mamba"), _row("a", 1, 0.45, arch="mamba")], db)
    write_rows([_row("b", s, 2e-4 + 1e-6 * s, arch="gru") for s in range(2)], db)
    md = markdown(select_rows(db))
    mamba = next(line for line in md.splitlines() if "| mamba" in line)
    assert "| 0.2500 [0, " in mamba and "e+00" not in md
    gru = next(line for line in md.splitlines() if "| gru" in line)
    assert "2.00e-04 2.01e-04" in gru


def test_a_row_scored_from_given_weights_says_so_in_the_settings_column(tmp_path):
    """`bayesbench score` rows (no training config) beside a trained row of the same arch: the
    settings cell says they were scored from given weights, instead of every training setting as
    '-' against the trained row's values; trained rows compare only among themselves."""
    db = str(tmp_path / "r.sqlite")
    write_rows([_row("t", s, 0.3, arch="mine") for s in range(2)], db)
    scored = _row("score-1", 0, 1.2, arch="mine")
    scored["config"] = {**scored["config"], "train": None}
    scored["steps"] = 0
    write_rows([scored], db)
    lines = [x for x in markdown(select_rows(db)).splitlines() if "| mine" in x]
    assert len(lines) == 2
    assert "| mine | - | 0.1k | 200 |" in lines[0]
    assert "| mine | scored from given weights (not trained here) | 0.1k | - | - |" in lines[1]  # steps, wall
    assert "lr=" not in "\n".join(lines)


def test_a_parameter_count_not_given_is_a_dash_and_differing_counts_are_all_shown(tmp_path):
    """A predictions row scored without --params (0: not given) showed '0.0k' parameters (the site
    showed '-'); seeds of one row scored with different --params showed the first seed's count."""
    from bayesbench.report.site import _row as site_row

    db = str(tmp_path / "r.sqlite")
    rows = [_row("p", s, 0.3, arch="mine") for s in range(3)]
    for r, params in zip(rows, (0, 0, 1000)):
        r["params"] = params
    write_rows([{**_row("q", 0, 0.4, arch="theirs"), "params": 0}, *rows], db)
    lines = {line.split(" | ")[2]: line for line in markdown(select_rows(db)).splitlines()
             if line.startswith("| bijection") and "floor" not in line}
    assert lines["theirs"].split(" | ")[3] == "-"
    assert lines["mine"].split(" | ")[3] == "- / 1.0k"
    agg = {row.arch: row for row in aggregate(select_rows(db))}
    assert '<td class="num" data-value="0">- / 1.0k</td>' in site_row(agg["mine"], 0.3, None)
    assert '<td class="num" data-value="0">-</td>' in site_row(agg["theirs"], 0.4, None)


def test_the_trained_mark_is_explained_in_the_notes(tmp_path):
    """'(trained)' after an evaluation's name in the eval column was never explained below the table."""
    from bayesbench.report.notes import TRAINED_NOTE

    db = str(tmp_path / "r.sqlite")
    write_rows([_row("a", s, 0.50, arch="lstm") for s in range(2)], db)
    md = markdown(select_rows(db))
    assert "values (trained)" in md and f"\n- {TRAINED_NOTE}\n" in md


def _scored(run_id: str, seed: int, mae: float, *, arch: str, steps: int = 0) -> dict:
    """A row of `bayesbench score` (weights or predictions given, no training here): no training
    configuration, steps as the user stated them (0: not stated), a wall time never measured (0.0)."""
    row = _row(run_id, seed, mae, arch=arch)
    return {**row, "steps": steps, "wall_s": 0.0, "config": {**row["config"], "train": None}}


def test_a_scored_row_shows_no_steps_or_wall_time_it_never_measured(tmp_path):
    """Rows scored from predictions showed 'steps 0' and 'wall 0' as if measured."""
    db = str(tmp_path / "r.sqlite")
    write_rows([_scored("predictions-aaaa", 0, 0.4, arch="mine"), _row("t", 0, 0.5, arch="lstm"),
                _scored("predictions-bbbb", 0, 0.3, arch="theirs", steps=3000)], db)  # its steps stated
    cells = {line.split(" | ")[2]: [c.strip() for c in line.split(" | ")[4:6]]
             for line in markdown(select_rows(db)).splitlines()
             if line.startswith("| bijection V=8 | values (trained)")}
    assert cells == {"lstm": ["200", "1"], "mine": ["-", "-"], "theirs": ["3000", "-"]}, cells


def test_a_scored_rows_wall_time_is_null_in_every_machine_format(tmp_path):
    """The CSV, the JSON and the export gave a scored row's wall time as 0.0, a measured-looking 0."""
    import csv
    import io
    import json

    from bayesbench.report.export import pooled_rows, seed_rows
    from bayesbench.report.leaderboard import board_rows, json_runs, to_csv

    db = str(tmp_path / "r.sqlite")
    write_rows([_scored("predictions-aaaa", 0, 0.4, arch="mine"), _row("t", 0, 0.5, arch="lstm")], db)
    records = select_rows(db)
    walls = {r["arch"]: r["wall_s"] for r in csv.DictReader(io.StringIO(to_csv(records)))}
    assert walls == {"mine": "", "lstm": "1.0"}, walls
    assert {r["arch"]: r["wall_s"] for r in json_runs(records)["runs"]} == {"mine": None, "lstm": 1.0}
    assert {r["arch"]: r["wall_s"] for r in json.loads(json.dumps(board_rows(records)))} == {"mine": None, "lstm": 1.0}
    assert {r["arch"]: r["wall_s"] for r in seed_rows(records)} == {"mine": None, "lstm": 1.0}
    assert {r["arch"]: r["steps"] for r in pooled_rows(records)} == {"mine": 0, "lstm": 200}  # 0: not stated
