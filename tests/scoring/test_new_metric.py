"""A final metric is one `register(Metric(...))` (docs/layout.md, "Where each kind of change goes"):
registered in the user's own module and nowhere else, it is scored for the models and the floors,
stored in the rows (its columns and the row JSON) and shown in the JSON of `bayesbench run` and
`bayesbench.run`, and reads back from the store; registered for a test only, nothing of it is left
in the table the next test sees.

The end-to-end runs go in a fresh interpreter that imports the module first, as a user's script
does (tests/test_extending.py registers one in this process, beside an architecture and a tunnel).
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import sys
import textwrap

import pytest
import torch

from bayesbench.metric_table import METRICS, Metric, final_metrics, registered
from bayesbench.scoring.metrics import entropy_bits, entropy_bits_from_log_probs, score, summarize

NAME = "entropy_bias_test"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: the user's own module: the metric's one registration
MODULE = f"""
from bayesbench.metric_table import Metric, register


def _entropy_bias(p, plogp, h_p, log_q, h_q):
    return h_q - h_p  # signed: a model too uncertain on average scores above 0, too sure below


register(Metric("{NAME}", "mean H(model) - H(Bayes) per (sequence, position), signed", "entropy bias",
                _entropy_bias, lower=None))
"""

#: the user's script: the module first, then `bayesbench.run`, `bayesbench run --jobs 1 --json` and
#: `bayesbench leaderboard --json`, all in this one interpreter
SCRIPT = """
import contextlib, io, json, sys
import my_metric  # noqa: F401 (registers the metric)
import bayesbench
from bayesbench.cli import main

out = {}
rows = bayesbench.run(tasks=["bijection"], archs=["mlp"], steps=5, seeds=2, eval_sequences=32, db=sys.argv[1],
                      runs_dir=sys.argv[3], quiet=True)
out["api"] = [dict(r) for r in rows]
for key, argv in (("cli", ["run", "--tasks", "bijection", "--archs", "mlp", "--steps", "5", "--seeds", "2",
                           "--eval-sequences", "32", "--jobs", "1", "--json", "--no-progress", "--db", sys.argv[2],
                           "--runs-dir", sys.argv[3]]),
                  ("leaderboard", ["leaderboard", "--db", sys.argv[2], "--json"])):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    out[key] = json.loads(buf.getvalue())
print(json.dumps(out))
"""


def _entropy_bias(p, plogp, h_p, log_q, h_q):
    return h_q - h_p


def _bias_metric() -> Metric:
    return Metric(NAME, "mean H(model) - H(Bayes) per (sequence, position), signed", "entropy bias",
                  _entropy_bias, lower=None)


@pytest.fixture
def bias():
    with registered(_bias_metric()) as metric:
        yield metric
    assert NAME not in METRICS  # nothing leaks into the next test


def _check_stored(db: str) -> None:
    """The metric's columns and row JSON in every stored row (the record's order: built-ins first)."""
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    rows = con.execute("SELECT * FROM runs").fetchall()
    con.close()
    assert len(rows) == 2
    for row in rows:
        metrics = json.loads(row["metrics"])
        for ev in metrics["evals"].values():
            assert list(ev)[2:6] == ["entropy_mae", "kl", "entropy_mae_positional", NAME]
            assert math.isfinite(ev[NAME]["mean"]) and ev[NAME]["n_sequences"] == 32
            assert list(ev["floors"]["uniform"]) == ["entropy_mae", "entropy_mae_positional", "kl", NAME]
        assert row[f"{NAME}_bits"] == metrics["evals"][metrics["primary"]][NAME]["mean"]


def _check_json(runs: list[dict]) -> None:
    assert len(runs) == 2
    for r in runs:
        assert math.isfinite(r[f"{NAME}_bits"])
        for ev in r["evals"].values():
            assert math.isfinite(ev[f"{NAME}_bits"]) and len(ev[f"{NAME}_ci"]) == 2
            assert f"{NAME}_bits" in ev["floors"]["uniform"]


def test_the_metric_reaches_the_rows_and_the_json_of_run_and_bayesbench_run(tmp_path):
    (tmp_path / "my_metric.py").write_text(MODULE)
    (tmp_path / "script.py").write_text(textwrap.dedent(SCRIPT))
    api, cli = str(tmp_path / "api.sqlite"), str(tmp_path / "cli.sqlite")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), ROOT, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(tmp_path / "script.py"), api, cli, str(tmp_path / "runs")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.splitlines()[-1])
    _check_json(out["api"])
    _check_json(out["cli"]["runs"])
    _check_json(out["leaderboard"]["runs"])
    assert all(f"{NAME}_bits" in row for row in out["leaderboard"]["rows"])
    _check_stored(api)
    _check_stored(cli)


def test_the_metric_is_scored_from_its_function(bias):
    """score() averages the registered function's values as the table says (over pairs, not
    clipped: lower=None), beside the built-in metrics, for a model and for q given."""
    g = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(6, 5, 4, generator=g, dtype=torch.float64), -1)
    log_q = torch.log_softmax(torch.randn(6, 5, 4, generator=g, dtype=torch.float64), -1)
    mask = torch.rand(6, 5, generator=g) < 0.7
    s = score(p, mask, log_q=log_q)
    assert list(s.metrics) == list(final_metrics()) and final_metrics()[-1] == NAME
    want = summarize(entropy_bits_from_log_probs(log_q) - entropy_bits(p), mask)
    assert s.metrics[NAME] == want and want.ci_low < 0 < want.ci_high  # not clipped at 0
    assert score(p, mask, q=log_q.exp()).metrics[NAME].mean == pytest.approx(want.mean, abs=1e-12)


def test_without_the_registration_the_table_is_the_built_in_one():
    assert final_metrics() == ("entropy_mae", "entropy_mae_positional", "kl") and NAME not in METRICS
    with pytest.raises(ValueError, match="already in the table"), registered(_bias_metric()):
        with registered(_bias_metric()):
            pass
    assert NAME not in METRICS  # undone when the body raises too
