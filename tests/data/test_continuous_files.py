"""A continuous tunnel's sets and predictions files (issue 41): the export holds the exact
predictive's parameters as columns; a "gaussian" or "mixture" predictions file made of them
scores 0 (named with --task: a tunnel run by name); a bad one is refused in one line naming its
rule, with nothing stored."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from bayesbench.cli import main
from bayesbench.data.predictions import write
from bayesbench.store.database import read_records


def _export(tmp_path, capsys, task: str) -> tuple[dict, dict]:
    out = tmp_path / task
    assert main(["data", "export", task, "--sequences", "16", "--out", str(out)]) == 0
    capsys.readouterr()
    (entry,) = json.load(open(out / "bayesbench.json"))["sets"][:1]
    t = pq.read_table(out / entry["file"])
    cols = {name: np.array(t.column(name).to_pylist()) for name in
            ("posterior_weights", "posterior_means", "posterior_variances", "targets", "mask")}
    return entry, cols


def test_the_export_has_the_posterior_parameters_and_an_exact_file_scores_zero(tmp_path, capsys):
    entry, cols = _export(tmp_path, capsys, "mixreg")
    assert cols["posterior_weights"].shape == (16, 16, 2) and entry["num_classes"] == 6
    np.testing.assert_allclose(cols["posterior_weights"].sum(-1), 1.0, rtol=1e-6)
    assert cols["targets"].dtype == np.float64 or cols["targets"].dtype == np.float32
    mixture = np.concatenate([cols["posterior_weights"], cols["posterior_means"], cols["posterior_variances"]], -1)
    path = write(str(tmp_path / "exact.parquet"), mixture, entry["key"], "mixture")
    db = str(tmp_path / "r.sqlite")
    assert main(["score", "--predictions", path, "--task", "mixreg", "--name", "exact", "--db", db]) == 0
    (r,) = read_records(db)
    ev = next(iter(r.evals.values()))
    for metric in ("entropy_mae", "kl", "entropy_mae_positional"):
        assert abs(getattr(ev, metric).mean) < 1e-5, metric
    assert set(ev.floors) == {"prior", "dense_prior"}


@pytest.mark.parametrize("change,rule", [
    ("variance", "a variance that is not positive at sequence 0, position 0 (rule: every variance > 0)"),
    ("negative", "a negative weight at sequence 0, position 0 (rule: mixture weights are >= 0)"),
    ("sum", "the weights at sequence 0, position 0 sum to 1.5 (rule: at every scored position the weights sum to 1"),
    ("kind", "kind 'log_probs' does not fit this set (rule: a continuous tunnel's set takes kind 'gaussian' or "
             "'mixture'"),
    ("shape", "is not [N, L, 3M] (M weights, means, variances) with N = 16, L = 16"),
])
def test_a_bad_continuous_file_is_refused_naming_its_rule(tmp_path, capsys, change, rule):
    entry, cols = _export(tmp_path, capsys, "linreg")
    w = np.stack([np.full((16, 16), 0.5), np.full((16, 16), 0.5)], -1)
    m = np.concatenate([cols["posterior_means"]] * 2, -1)
    v = np.concatenate([cols["posterior_variances"]] * 2, -1)
    kind = "mixture"
    if change == "variance":
        v[0, 0, 1] = 0.0
    elif change == "negative":
        w[0, 0] = [-0.5, 1.5]
    elif change == "sum":
        w[0, 0] = [0.5, 1.0]
    values = np.concatenate([w, m, v], -1)
    if change == "kind":
        kind, values = "log_probs", np.zeros((16, 16, 3))
    elif change == "shape":
        values = values[..., :5]
        np.save(tmp_path / "p.npy", values)
        json.dump({**entry["key"], "kind": "mixture"}, open(tmp_path / "p.json", "w"))
    path = str(tmp_path / "p.npy") if change == "shape" else write(str(tmp_path / "p.parquet"), values, entry["key"],
                                                                    kind)
    db = str(tmp_path / "bad.sqlite")
    assert main(["score", "--predictions", path, "--task", "linreg", "--name", "mine", "--db", db]) == 2
    err = capsys.readouterr().err.strip()
    assert rule in err and "\n" not in err, err
    assert read_records(db) == []


def test_write_refuses_a_continuous_shape_that_is_not_one():
    with pytest.raises(ValueError, match="must be \\[N, L, 2\\] \\(mean, variance\\) for 'gaussian'"):
        write("x.npy", np.zeros((2, 3, 3)), {"set_id": "a", "n_sequences": 2, "tunnel": "linreg", "tunnel_code": "{}"},
              "gaussian")
