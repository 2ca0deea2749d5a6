"""Every number the tables of docs/leaderboard.md quote from a quick run equals the number its run's
summary keeps (docs/numbers/<run>.json, written from the run's store by scripts/docs_numbers.py).

The learning-curve table quoted the transformer's bijection seeds as 0.0322 0.0203 0.0293 (a run of
2026-12-01) while the tuning table and the 2026-12-03 `make run` gave 0.0227 0.0217 0.0385 for the
same rows: a number copied by hand from one run stays when the next run changes it. With the
summaries kept beside the docs, a re-run refreshed with the script either leaves the page true or
fails here, naming each number to update."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bayesbench.report.leaderboard import fmt_bits

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "leaderboard.md"
NUMBERS = ROOT / "docs" / "numbers"
TASKS = {"bijection": ("bijection V=8 L=7 repl", "values"), "sticky": ("sticky V=8 L=32", "standard"),
         "sticky chain": ("sticky V=8 L=32", "standard")}


def _board(run: str, metric: str) -> list[dict]:
    return json.loads((NUMBERS / f"quick_{run}.json").read_text())["boards"][metric]


def _table(text: str, header: str) -> list[list[str]]:
    """The body rows (cells) of the Markdown table whose header line starts with `header`."""
    lines = text.splitlines()
    start = [i for i, line in enumerate(lines) if line.startswith(header)]
    assert len(start) == 1, f"docs/leaderboard.md: {len(start)} tables start with {header!r}"
    rows = []
    for line in lines[start[0] + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def _row(board: list[dict], task: str, ev: str | None, arch: str) -> dict:
    found = [r for r in board if r["task"] == task and r["arch"] == arch and (ev is None or r["eval"] == ev)]
    assert len(found) == 1, f"{task} {ev} {arch}: {len(found)} rows in the summary"
    return found[0]


def _interval(row: dict, metric: str) -> str:
    lo, hi = row["ci_bits"]
    return f"{fmt_bits(row[f'{metric}_bits'])} [{fmt_bits(lo)}, {fmt_bits(hi)}]"


def _seeds(row: dict) -> str:
    return " ".join(fmt_bits(v) for v in row["per_seed_bits"])


def _arch(cell: str) -> tuple[str, bool]:
    return cell.replace(" (at floor)", ""), "(at floor)" in cell


def check_curve_table(text: str) -> list[str]:
    """The learning-curve table's entropy MAE columns: the 2026-12-03 run."""
    board, bad = _board("2026-12-03", "entropy_mae"), []
    for cells in _table(text, "| task | arch | entropy MAE, mean [95% CI over seeds] | per seed |"):
        task, _, ev = cells[0].partition(", ")
        arch, floor = _arch(cells[1])
        row = _row(board, task, ev or None, arch)
        want = [_interval(row, "entropy_mae"), _seeds(row), row["at_floor"]]
        if [cells[2], cells[3], floor] != want:
            bad.append(f"learning-curve table, {task} {arch}: {cells[2:4] + [floor]} != {want}")
    return bad


def check_tuned_against_fixed(text: str) -> list[str]:
    """The fixed recipe's column of Tuned against fixed: the 2026-12-03 run."""
    board, bad = _board("2026-12-03", "entropy_mae"), []
    for cells in _table(text, "| task | arch | fixed recipe | tuned rate |"):
        row = _row(board, *TASKS[cells[0]], cells[1])
        want = f"{_interval(row, 'entropy_mae')}; {_seeds(row)}" + (" (at floor)" if row["at_floor"] else "")
        if cells[2] != want:
            bad.append(f"Tuned against fixed, {cells[0]} {cells[1]}: {cells[2]!r} != {want!r}")
    return bad


def check_orderings(text: str) -> list[str]:
    """The fixed recipe's orderings (means to 3 decimals): the 2026-12-03 run."""
    board, bad = _board("2026-12-03", "entropy_mae"), []
    for cells in _table(text, "| task | fixed recipe | tuned |"):
        for arch, mean in re.findall(r"([a-z][a-z-]*) (\d\.\d{3})", cells[1]):
            want = f"{_row(board, *TASKS[cells[0]], arch)['entropy_mae_bits']:.3f}"
            if mean != want:
                bad.append(f"orderings, {cells[0]} {arch}: {mean} != {want}")
    return bad


def check_quick_preset(text: str) -> list[str]:
    """The quick preset's table ranked by positional entropy MAE: the 2026-12-01 run."""
    board, bad = _board("2026-12-01", "entropy_mae_positional"), []
    header = "| task | eval | arch | params | steps | wall (s) | seeds | **positional entropy MAE** (bits)"
    for cells in _table(text, header):
        if "(floor)" in cells[2]:
            continue
        arch, floor = _arch(cells[2])
        row = _row(board, cells[0], cells[1].replace(" (trained)", ""), arch)
        want = [str(row["steps"]), f"{len(row['seeds'])}: {','.join(map(str, row['seeds']))}",
                _interval(row, "entropy_mae_positional"), _seeds(row), fmt_bits(row["entropy_mae_bits"]),
                fmt_bits(row["kl_bits"]), row["at_floor"]]
        got = [cells[4], cells[6], cells[7], cells[8], cells[9], cells[10], floor]
        if got != want:
            bad.append(f"quick preset table, {cells[0]} {cells[1]} {arch}: {got} != {want}")
    return bad


def _untuned(name: str) -> list[dict]:
    return json.loads((NUMBERS / f"{name}.json").read_text())["boards"]["entropy_mae"]


def _layers(row: dict) -> str:
    return str(row["settings"]["model"].get("n_layer", "-"))


def untuned_cells(row: dict) -> list[str]:
    """What the 2026-12-06 tables quote of a row: params, state, entropy MAE with its interval, per
    seed, KL, and '(at floor)'."""
    return [f"{row['params']:,}", f"{row['state_floats']:,}", _interval(row, "entropy_mae"), _seeds(row),
            fmt_bits(row["kl_bits"]), str(row["at_floor"])]


def check_untuned_2026_12_06(text: str) -> list[str]:
    """The untuned tables of 2026-12-06: every architecture on the sticky chain, and the
    variable-order chain (docs/numbers/zoo_sticky_2026-12-06.json, vomc_2026-12-06.json)."""
    bad = []
    zoo = _untuned("zoo_sticky_2026-12-06")
    for cells in _table(text, "| arch (sticky chain) | params | state (floats) |"):
        arch, floor = _arch(cells[0])
        want = untuned_cells(_row(zoo, "sticky V=8 L=32", "standard", arch))
        if cells[1:6] + [str(floor)] != want:
            bad.append(f"untuned sticky table, {arch}: {cells[1:6] + [str(floor)]} != {want}")
    vomc = _untuned("vomc_2026-12-06")
    for cells in _table(text, "| arch (vomc, depth 2) | layers | params | state (floats) |"):
        arch, floor = _arch(cells[0])
        found = [r for r in vomc if r["arch"] == arch and _layers(r) == cells[1]]
        assert len(found) == 1, f"vomc {arch} layers {cells[1]}: {len(found)} rows in the summary"
        want = untuned_cells(found[0])
        if cells[2:7] + [str(floor)] != want:
            bad.append(f"untuned vomc table, {arch} {cells[1]}: {cells[2:7] + [str(floor)]} != {want}")
    return bad


def check_hmm_2026_12_07(text: str) -> list[str]:
    """Every architecture on the quick HMM at its fixed recipe (docs/numbers/zoo_hmm_2026-12-07.json):
    the trained length K = 20 as the untuned tables quote a row, and the entropy MAE at K = 50."""
    bad = []
    hmm = _untuned("zoo_hmm_2026-12-07")
    rows = _table(text, "| arch (hmm, K = 20) | params | state (floats) |")
    assert len(rows) == len({r["arch"] for r in hmm}), "the HMM table leaves out a row of its summary"
    for cells in rows:
        arch, floor = _arch(cells[0])
        want = untuned_cells(_row(hmm, "hmm S=5 K=20 rows", "K=20", arch))
        want.append(_interval(_row(hmm, "hmm S=5 K=20 rows", "K=50", arch), "entropy_mae"))
        want[2], want[-1] = _clipped(want[2]), _clipped(want[-1])
        got = cells[1:6] + [str(floor), cells[6]]
        if got != want:
            bad.append(f"HMM table, {arch}: {got} != {want}")
    return bad + [f"HMM state question: {line!r} is not in the page" for line in hmm_state_lines(hmm)
                  if line not in text]


def _clipped(interval: str) -> str:
    """An interval of a non-negative metric as the leaderboard prints it: its lower end clipped at 0."""
    return re.sub(r"\[-[^,]*,", "[0,", interval)


def hmm_state_lines(rows: list[dict]) -> list[str]:
    """Spearman's rho of the state (counted at the trained length) against the entropy MAE at
    K = 20, over the architectures whose state is fixed and not empty and over all of them. Which
    state grows is read from the zoo summary's sticky chain (counted from each checkpoint at L = 32
    and 31; the HMM's sequences are 30 positions long)."""
    grows = {a for a, row in json.loads(ZOO.read_text())["tasks"]["sticky"]["archs"].items() if row["state_grows"]}
    archs = {r["arch"]: {"state_floats": r["state_floats"], "state_grows": r["arch"] in grows,
                         "entropy_mae_mean": r["entropy_mae_bits"]}
             for r in rows if r["task"] == "hmm S=5 K=20 rows" and r["eval"] == "K=20"}
    question = _load_script("zoo_answer").state_question(archs)  # the zoo's own rule and statistics
    return [f"- state against entropy MAE at K = 20, {what} ({len(s['archs'])}): Spearman rho "
            f"{s['spearman']:+.2f}, permutation p {s['p']:.2g}"
            for what, s in (("fixed-state architectures that carry a state", question["recurrent"]),
                            ("every architecture", question["every"]))]


CONTINUOUS = ROOT / "docs" / "data" / "continuous_quick_2026-12-07.json"


def _load_script(name: str):
    """scripts/<name>.py as a module (the docs summaries' scripts: their `render`, their helpers)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _continuous_script():
    return _load_script("continuous_answer")


def _rendered_lines_missing(what: str, script, summary: Path, text: str) -> list[str]:
    """The lines of the tables `script` renders from `summary` that `text` lacks (each must be
    there, line for line)."""
    rendered = script.render(json.loads(summary.read_text()))
    lines = text.splitlines()
    return [f"{what} tables: docs/leaderboard.md lacks the line {line!r}"
            for line in rendered.splitlines() if line and line not in lines]


def check_continuous(text: str) -> list[str]:
    """The continuous tunnels' tables (issue 41): each is what scripts/continuous_answer.py renders
    from the run's summary (docs/data/continuous_quick_2026-12-07.json), line for line."""
    return _rendered_lines_missing("continuous", _continuous_script(), CONTINUOUS, text)


DISCRETE = ROOT / "docs" / "data" / "discrete_quick_2026-12-07.json"


def _discrete_script():
    return _load_script("discrete_answer")


def check_discrete(text: str) -> list[str]:
    """The discrete tunnels' tables (issue 42): each is what scripts/discrete_answer.py renders
    from the run's summary (docs/data/discrete_quick_2026-12-07.json), line for line."""
    return _rendered_lines_missing("discrete", _discrete_script(), DISCRETE, text)


ZOO = ROOT / "docs" / "data" / "zoo_quick_2026-12-07.json"


def check_zoo(text: str) -> list[str]:
    """Every architecture tuned (issue 43): the tables scripts/zoo_answer.py renders from the run's
    summary (docs/data/zoo_quick_2026-12-07.json), line for line."""
    return _rendered_lines_missing("zoo", _load_script("zoo_answer"), ZOO, text)


CHECKS = (check_curve_table, check_tuned_against_fixed, check_orderings, check_quick_preset,
          check_untuned_2026_12_06, check_hmm_2026_12_07, check_continuous, check_discrete, check_zoo)


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_every_quoted_number_is_its_runs(check):
    bad = check(DOC.read_text())
    assert not bad, "docs/leaderboard.md quotes numbers its run's summary (docs/numbers/) does not hold:\n" + \
        "\n".join(bad)


def test_a_changed_number_is_caught():
    """The check is not vacuous: the learning-curve table as it stood (the 2026-12-01 transformer seeds)
    fails, and so does any quoted number edited by one digit."""
    text = DOC.read_text()
    stale = text.replace("| 0.0277 [0.0042, 0.0511] | 0.0227 0.0217 0.0385 |",
                         "| 0.0273 [0.0118, 0.0427] | 0.0322 0.0203 0.0293 |")
    assert stale != text and any("transformer" in line for line in check_curve_table(stale))
    assert check_quick_preset(text.replace("| 0.0244 [0.0072, 0.0417] |", "| 0.0245 [0.0072, 0.0417] |"))
    assert check_orderings(text.replace("mamba 0.083 ~ gru 0.088", "mamba 0.084 ~ gru 0.088"))
    mamba = "| mamba | 70,320 | 2,992 | 0.0831"
    assert check_untuned_2026_12_06(text.replace(mamba, mamba[:-1] + "2"))
    hmm = "| deltanet | 105,527 | 5,248 | 0.0320 "
    assert hmm in text and check_hmm_2026_12_07(text.replace(hmm, hmm[:-2] + "1 "))


def test_the_script_writes_the_summary_the_check_reads(tmp_path):
    """scripts/docs_numbers.py writes, from a store, the boards the checks read (keys included)."""
    import subprocess
    import sys

    from bayesbench.cli import main

    db = str(tmp_path / "s.sqlite")
    assert main(["run", "--tasks", "bijection", "--archs", "mlp", "--seeds", "2", "--steps", "5", "--eval-sequences",
                 "32", "--curve-sequences", "16", "--db", db, "--runs-dir", str(tmp_path / "runs"),
                 "--no-progress"]) == 0
    out = tmp_path / "quick.json"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "docs_numbers.py"), "--db", db, "--measured",
                           "2026-12-06", "--out", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["measured"] == "2026-12-06" and set(doc["boards"]) == {"entropy_mae", "entropy_mae_positional"}
    row = _row(doc["boards"]["entropy_mae"], "bijection V=8 L=7 repl", "values", "mlp")
    assert len(row["per_seed_bits"]) == 2 == len(row["seeds"]) and row["metric"] == "entropy_mae"
    for key in ("ci_bits", "at_floor", "kl_bits", "entropy_mae_positional_bits", "steps"):
        assert key in row
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "docs_numbers.py"), "--db",
                          str(tmp_path / "none.sqlite"), "--measured", "x", "--out", str(tmp_path / "n.json")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr


def test_the_continuous_script_recomputes_the_store_from_the_checkpoints(tmp_path):
    """scripts/continuous_answer.py reloads every reported run of a continuous store from its
    checkpoint, recomputes the stored KL (it stops if they differ) and writes the summary, the
    figures and the tables the docs quote: kalman's lengths and mixreg's single-Gaussian bound included.
    A recurrent model, so that the run counts a state at the trained K of a model sized for the
    longest (the dense-header state count failed there: tests/models/test_state.py)."""
    import subprocess
    import sys

    from bayesbench.cli import main

    db, runs = str(tmp_path / "c.sqlite"), str(tmp_path / "runs")
    assert main(["run", "--tasks", "linreg", "mixreg", "kalman", "--archs", "lstm", "--seeds", "2", "--steps", "3",
                 "--eval-sequences", "24", "--curve-sequences", "8", "--db", db, "--runs-dir", runs,
                 "--no-progress"]) == 0
    out = tmp_path / "c.json"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "continuous_answer.py"), "--db", db, "--runs-dir",
                           runs, "--measured", "2026-12-07", "--out", str(out), "--figures", str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert set(doc["tasks"]) == {"linreg", "mixreg", "kalman"}
    assert list(doc["tasks"]["kalman"]["evals"]) == ["K=20", "K=30", "K=50"]
    linreg = doc["tasks"]["linreg"]["evals"]["standard"]
    assert set(linreg["floors"]) == {"prior", "least_squares", "ridge"} and linreg["archs"]["lstm"]["seeds"] == [0, 1]
    a = linreg["archs"]["lstm"]
    for e in range(2):  # a Gaussian head's KL is its mean part plus its variance part
        parts = a["per_seed"]["kl_mean_part"][e] + a["per_seed"]["kl_variance_part"][e]
        assert abs(a["per_seed"]["kl"][e] - parts) <= 1e-7 * a["per_seed"]["kl"][e]  # 8 significant digits kept
    mixreg = doc["tasks"]["mixreg"]["evals"]["standard"]
    assert mixreg["unimodal_bound"]["mean"] > 0 and 0 <= mixreg["archs"]["lstm"]["mean"]["below_unimodal"] <= 1
    for task in ("linreg", "mixreg", "kalman"):
        assert (tmp_path / f"continuous_{task}.png").stat().st_size > 0
    tables = _continuous_script().render(doc)
    assert "| lstm | " in tables and "KL at K=50" in tables and "best single Gaussian" in tables
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "continuous_answer.py"), "--db", db],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--runs-dir" in bad.stderr


def test_the_continuous_answers_quote_the_summary():
    """Every four-decimal number (or x.xxe-yy) of docs/science.md's "What the continuous tunnels
    measured" is one the tables rendered from the run's summary hold."""
    text = (ROOT / "docs" / "science.md").read_text()
    start = text.index("### What the continuous tunnels measured")
    section = text[start:text.index("\n## ", start)]
    rendered = _continuous_script().render(json.loads(CONTINUOUS.read_text()))
    quoted = re.findall(r"\d\.\d{4}\b|\d\.\d{2}e-\d{2}", section)
    assert len(quoted) > 20
    missing = sorted({q for q in quoted if q not in rendered})
    assert not missing, f"docs/science.md quotes numbers the continuous summary's tables do not hold: {missing}"


def test_the_discrete_script_summarises_the_store_and_probes_the_runs(tmp_path):
    """scripts/discrete_answer.py reads every reported run of the discrete tunnels from a store,
    adds the in-context n-gram references, probes the runs of a tunnel with a belief state from
    their recorded checkpoints, answers the depth question on vomc (a `--model-args` run is its
    own entry) and writes the summary, the figures and the tables the docs quote."""
    import subprocess
    import sys

    from bayesbench.cli import main

    db, runs = str(tmp_path / "d.sqlite"), str(tmp_path / "runs")
    common = ["--seeds", "2", "--steps", "3", "--eval-sequences", "24", "--curve-sequences", "8", "--db", db,
              "--runs-dir", runs, "--no-progress"]
    assert main(["run", "--tasks", "vomc", "mess3", "--archs", "transformer", "lstm", *common]) == 0
    assert main(["run", "--tasks", "vomc", "--archs", "transformer", "--model-args", "n_layer=1", *common]) == 0
    long_db = str(tmp_path / "long.sqlite")  # the longer recurrence runs, in a store of their own
    assert main(["run", "--tasks", "recurrence", "--archs", "mamba", "--seeds", "2", "--steps", "4",
                 "--eval-sequences", "24", "--curve-sequences", "8", "--db", long_db, "--runs-dir", runs,
                 "--no-progress"]) == 0
    zoo_db = str(tmp_path / "zoo.sqlite")  # other architectures, untuned, on a tunnel with a belief state
    assert main(["run", "--tasks", "mess3", "--archs", "gru", *common[:8], "--db", zoo_db, "--runs-dir", runs,
                 "--no-progress"]) == 0
    out = tmp_path / "d.json"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "discrete_answer.py"), "--db", db, "--measured",
                           "2026-12-07", "--out", str(out), "--figures", str(tmp_path), "--probe-sequences", "16",
                           "--long-db", long_db, "--zoo-db", zoo_db], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert set(doc["tasks"]) == {"vomc", "mess3"}
    vomc = doc["tasks"]["vomc"]
    assert set(vomc["archs"]) == {"transformer", "lstm", "transformer n_layer=1"}
    assert set(vomc["references"]) == {"order-0 counts", "order-1 counts", "order-2 counts", "order-3 counts",
                                       "CTW, depth 1"}
    assert set(vomc["floors"]) == {"uniform", "marginal"} and vomc["archs"]["lstm"]["seeds"] == [0, 1]
    d = doc["depth_question"]["minus_two_layer"]["transformer n_layer=1"]
    assert d["ci"][0] <= d["mean"] <= d["ci"][1]
    probe = doc["tasks"]["mess3"]["archs"]["lstm"]["probe"]
    assert len(probe["streams"]["embed"]["r2"]) == 2 and probe["best_stream"] in probe["streams"]
    assert doc["tasks"]["mess3"]["probe_vs_kl"]["all"]["members"] == 4
    zoo = doc["zoo"]["mess3"]
    assert set(zoo["archs"]) == {"gru"} and zoo["probe_vs_kl_every"]["all"]["members"] == 6
    assert (tmp_path / "discrete_belief_mess3_zoo.png").stat().st_size > 0
    long = doc["recurrence_long"]["mamba"]
    assert long["steps"] == 4 and long["seeds"] == [0, 1] and long["curve"]["step"][-1] == 4
    assert long["kl_ci"][0] <= long["kl_mean"] <= long["kl_ci"][1]
    for name in ("discrete_curves.png", "discrete_belief_mess3.png"):
        assert (tmp_path / name).stat().st_size > 0
    tables = _discrete_script().render(doc)
    assert "| transformer n_layer=1 | " in tables and "belief probe" in tables and "order-2 counts" in tables
    assert "belief probe of the other architectures" in tables and "| gru | " in tables
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "discrete_answer.py"), "--db", db],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--measured" in bad.stderr


def test_the_discrete_references_score_the_bayes_predictive_at_zero():
    """The n-gram reference is scored as the store scores a model: on an order-2 chain whose rows
    are Dirichlet(1/2) (the reference's own prior), the order-2 counts are the Bayes predictive, so
    their KL is 0 at every position (to the float32 posterior's precision), and the order-1 counts'
    is not; on a depth-2 context tree no reference is Bayes, CTW at depth 1 included."""
    import torch

    from bayesbench.tasks import task_from_config

    script = _discrete_script()
    task = task_from_config({"task": "markov-k", "V": 3, "order": 2, "L": 12, "alpha": 0.5})
    refs = script.references(task, task.sample(64, torch.Generator().manual_seed(0)))
    assert refs["order-2 counts"]["kl"] < 1e-6 and max(refs["order-2 counts"]["curve"]) < 1e-6  # a float32 posterior
    assert refs["order-1 counts"]["kl"] > 1e-3 and len(refs["order-1 counts"]["curve"]) == 10
    vomc = task_from_config({"task": "vomc", "V": 2, "depth": 2, "L": 12})
    refs = script.references(vomc, vomc.sample(64, torch.Generator().manual_seed(0)))
    assert set(refs) > {"CTW, depth 1"} and all(r["kl"] > 1e-4 for r in refs.values())


def test_the_discrete_answers_quote_the_summary():
    """Every four-decimal number of docs/science.md's "What the discrete tunnels measured" is one
    the tables rendered from the run's summary hold."""
    text = (ROOT / "docs" / "science.md").read_text()
    start = text.index("## What the discrete tunnels measured")
    end = text.find("\n## ", start)
    section = text[start:end if end > 0 else len(text)]
    rendered = _discrete_script().render(json.loads(DISCRETE.read_text()))
    quoted = re.findall(r"\d\.\d{4}\b", section)
    assert len(quoted) > 10
    missing = sorted({q for q in quoted if q not in rendered})
    assert not missing, f"docs/science.md quotes numbers the discrete summary's tables do not hold: {missing}"


def test_the_zoo_script_summarises_tuned_rows_with_their_state(tmp_path):
    """scripts/zoo_answer.py reads a store's tuned rows (the search, the reported seeds, the state
    counted again from each checkpoint, one position earlier too), pairs them with a fixed-recipe
    summary seed by seed (a row that kept the fixed rate must reproduce it; another gets its change),
    and writes the summary, both figures per task and the tables."""
    import subprocess
    import sys

    from bayesbench.cli import main

    db, runs = str(tmp_path / "z.sqlite"), str(tmp_path / "runs")
    common = ["--tasks", "sticky", "--steps", "4", "--seeds", "2", "--eval-sequences", "16", "--curve-sequences",
              "8", "--runs-dir", runs, "--no-progress"]
    assert main(["run", *common, "--archs", "gru", "transformer", "mlp", "--db", db, "--tune", "--tune-args",
                 "lrs=[1e-3,2e-3]", "selection_seeds=1", "selection_sequences=16"]) == 0
    out = tmp_path / "z.json"
    script = ROOT / "scripts" / "zoo_answer.py"
    proc = subprocess.run([sys.executable, str(script), "--db", db, "--measured", "2026-12-07", "--out", str(out),
                           "--figures", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    sticky = doc["tasks"]["sticky"]
    assert set(sticky["archs"]) == {"gru", "transformer", "mlp"}
    gru, tr, mlp = (sticky["archs"][a] for a in ("gru", "transformer", "mlp"))
    assert gru["state_floats"] > 0 and gru["state_grows"] is False and gru["lr"] in (1e-3, 2e-3)
    assert tr["state_grows"] is True and mlp["state_floats"] == 0 and mlp["state_grows"] is False
    assert [r for r, _ in gru["selection"]] == [1e-3, 2e-3] and gru["seeds"] == [0, 1]
    assert gru["entropy_mae_ci"][0] <= gru["entropy_mae_mean"] <= gru["entropy_mae_ci"][1]
    assert [o[0] for o in sticky["ordering"]] == sorted(sticky["archs"], key=lambda a: sticky["archs"][a]
                                                        ["entropy_mae_mean"])
    assert sticky["state_question"]["recurrent"]["archs"] == ["gru"]  # one: no rho
    assert sticky["state_question"]["every"]["archs"] == ["gru", "mlp", "transformer"]
    for name in ("zoo_state_sticky.png", "zoo_tuning_sticky.png"):
        assert (tmp_path / name).stat().st_size > 0
    # the fixed recipe: the GRU at its chosen rate (the same row again), the transformer at the other
    fixed_db = str(tmp_path / "f.sqlite")
    other = 2e-3 if tr["lr"] == 1e-3 else 1e-3
    for arch, lr in (("gru", gru["lr"]), ("transformer", other)):
        assert main(["run", *common, "--archs", arch, "--db", fixed_db, "--train-args", f"lr={lr}"]) == 0
    fixed = tmp_path / "fixed.json"
    assert subprocess.run([sys.executable, str(ROOT / "scripts" / "docs_numbers.py"), "--db", fixed_db,
                           "--measured", "x", "--out", str(fixed)], capture_output=True).returncode == 0
    proc = subprocess.run([sys.executable, str(script), "--db", db, "--measured", "2026-12-07", "--out", str(out),
                           "--fixed", str(fixed)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    archs = json.loads(out.read_text())["tasks"]["sticky"]["archs"]
    assert archs["gru"]["fixed"]["same_rate"] is True and "change" not in archs["gru"]["fixed"]
    f = archs["transformer"]["fixed"]
    assert f["same_rate"] is False and f["holm_family"] == 1 and f["change_ci"][0] <= f["change"] <= f["change_ci"][1]
    assert "fixed" not in archs["mlp"]
    tables = _load_script("zoo_answer").render(json.loads(out.read_text()))
    assert "| gru | " in tables and "no change: the same rate" in tables and "Ordering: " in tables
    # --keep: a second store holds one more architecture; the first summary's rows are kept, the
    # ordering and the state lines computed over all four, the figures drawn from the summary
    db2 = str(tmp_path / "z2.sqlite")
    assert main(["run", *common, "--archs", "lstm", "--db", db2, "--tune", "--tune-args", "lrs=[1e-3,2e-3]",
                 "selection_seeds=1", "selection_sequences=16"]) == 0
    merged, figs = tmp_path / "merged.json", tmp_path / "figs"
    proc = subprocess.run([sys.executable, str(script), "--db", db2, "--measured", "2026-12-08", "--out", str(merged),
                           "--keep", str(out), "--fixed", str(fixed), "--figures", str(figs)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    doc2 = json.loads(merged.read_text())
    assert doc2["kept"] == {"sticky": ["gru", "mlp", "transformer"]}
    archs2 = doc2["tasks"]["sticky"]["archs"]
    assert archs2["lstm"]["measured"] == "2026-12-08" and archs2["gru"]["measured"] == "2026-12-07"
    for arch in ("gru", "mlp", "transformer"):  # as written; the pairing with --fixed made again
        assert {k: v for k, v in archs2[arch].items() if k != "fixed"} == {k: v for k, v in archs[arch].items()
                                                                            if k != "fixed"}
        assert ("fixed" in archs2[arch]) == ("fixed" in archs[arch])
    assert archs2["transformer"]["fixed"]["change"] == pytest.approx(archs["transformer"]["fixed"]["change"], abs=1e-6)
    assert len(doc2["tasks"]["sticky"]["ordering"]) == 4
    assert doc2["tasks"]["sticky"]["state_question"]["recurrent"]["archs"] == ["gru", "lstm"]
    for name in ("zoo_state_sticky.png", "zoo_tuning_sticky.png"):
        assert (figs / name).stat().st_size > 0
    other_recipe = subprocess.run([sys.executable, str(script), "--db", db2, "--measured", "x", "--out",
                                   str(tmp_path / "o.json"), "--keep", str(out), "--command", "another"],
                                  capture_output=True, text=True)
    assert other_recipe.returncode != 0 and "different recipes" in other_recipe.stderr
    bad = subprocess.run([sys.executable, str(script), "--db", db], capture_output=True, text=True)
    assert bad.returncode == 2 and "--measured" in bad.stderr
    bad = subprocess.run([sys.executable, str(script), "--db", str(tmp_path / "none"), "--measured", "x", "--out",
                          str(out)], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no such file" in bad.stderr


def test_the_zoo_answers_quote_the_summary():
    """Every four-decimal number of docs/leaderboard.md's "Every architecture, tuned" is one the
    tables rendered from the run's summary hold, or (for the seven architectures' earlier bijection
    search) one of the "Tuned against fixed" table it points to."""
    text = DOC.read_text()
    start = text.index("## Every architecture, tuned (2026-12-07)")
    end = text.find("\n## ", start)
    section = text[start:end if end > 0 else len(text)]
    earlier = text[text.index("### Tuned against fixed"):text.index("### The LSTM's answer")]
    rendered = _load_script("zoo_answer").render(json.loads(ZOO.read_text()))
    quoted = re.findall(r"\d\.\d{4}\b", section)
    assert len(quoted) > 50
    missing = sorted({q for q in quoted if q not in rendered and q not in earlier})
    assert not missing, f"docs/leaderboard.md quotes numbers the zoo summary's tables do not hold: {missing}"
