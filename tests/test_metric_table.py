"""The metric table is the one place a metric is written (`bayesbench.metric_table`): a metric
registered there, and nowhere else, is offered by the command line, recorded by the learning
curves (and read by --until), stored, and shown by the leaderboard."""

from __future__ import annotations

import json
import math

import pytest
import torch

from bayesbench.cli import build_parser, main
from bayesbench.metric_table import (
    METRICS,
    Metric,
    curve_metrics,
    final_metrics,
    register,
    stored_columns,
    unregister,
)
from bayesbench.tasks import get_task
from bayesbench.training.curves import CurveSet


def _squared_entropy_error(p, plogp, h_p, log_q, h_q):
    return (h_q - h_p) ** 2


@pytest.fixture
def squared():
    metric = register(Metric("entropy_mse", "mean (H(model) - H(Bayes))^2 per (sequence, position), bits^2",
                             "entropy MSE", _squared_entropy_error, final=False))
    yield metric
    unregister(metric.name)


def test_the_built_in_table_gives_the_names_every_part_used():
    assert final_metrics() == ("entropy_mae", "entropy_mae_positional", "kl")
    assert curve_metrics() == ("entropy_mae", "entropy_mae_positional", "kl", "kl:repeated", "kl:new", "nll_regret",
                               "excess_sq")  # the last two: continuous tunnels' only (issue 41)
    assert stored_columns()[:3] == ["entropy_mae_bits", "entropy_mae_ci_low", "entropy_mae_ci_high"]
    assert len(stored_columns()) == 9 and stored_columns()[3] == "kl_bits"


def test_a_metric_is_registered_once_and_described_by_its_rules():
    with pytest.raises(ValueError, match="already in the table"):
        register(METRICS["kl"])
    with pytest.raises(ValueError, match="over_sequences must be one of"):
        Metric("odd", "odd", "odd", _squared_entropy_error, over_sequences="seeds")


def test_a_registered_metric_is_offered_by_the_command_line(squared):
    parser = build_parser()
    assert parser.parse_args(["leaderboard", "--curve-metric", "entropy_mse"]).curve_metric == "entropy_mse"
    assert parser.parse_args(["plot", "--curves", "--metric", "entropy_mse"]).metric == "entropy_mse"
    assert parser.parse_args(["compare", "a", "b", "--metric", "entropy_mse"]).metric == "entropy_mse"
    train = parser.parse_args(["train", "--task", "sticky", "--until-metric", "entropy_mse"])
    assert train.until_metric == "entropy_mse"
    unregister("entropy_mse")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["leaderboard", "--curve-metric", "entropy_mse"])


def test_a_registered_metric_is_measured_by_the_curves(squared):
    task = get_task("sticky", V=4, L=6)
    s = CurveSet(task, n=8)
    log_q = torch.log_softmax(torch.randn(2, *s.p.shape, dtype=torch.float64, generator=torch.Generator()
                                          .manual_seed(0)), -1)
    rows = dict(zip(curve_metrics(), s.score_log_probs(log_q)))
    h_q = -(log_q.exp() * log_q).sum(-1) / math.log(2)
    want = torch.stack([((h - s.h_p) ** 2)[s.mask].mean() for h in h_q])
    torch.testing.assert_close(rows["entropy_mse"], want)
    torch.testing.assert_close(rows["entropy_mae"], torch.stack([(h - s.h_p).abs()[s.mask].mean() for h in h_q]))
    assert math.isfinite(s.uniform()["entropy_mse"])


def test_a_registered_metric_reaches_the_store_and_the_leaderboard(squared, tmp_path, capsys):
    db = str(tmp_path / "r.sqlite")
    # --until on the new metric: every member reaches 100 bits^2 at the first curve point and stops there
    assert main(["train", "--task", "sticky", "--arch", "mlp", "--seeds", "0,1", "--steps", "30", "--until", "100",
                 "--until-metric", "entropy_mse", "--eval-sequences", "16", "--curve-sequences", "8", "--db", db,
                 "--runs-dir", str(tmp_path / "runs"), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "--db", db, "--curve-metric", "entropy_mse", "--threshold", "100"]) == 0
    table = capsys.readouterr().out
    assert "steps to entropy MSE <= 100 bits" in table and "every seed at that measured step (2/2" in table
    assert main(["leaderboard", "--db", db, "--curve-metric", "entropy_mse", "--threshold", "100", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert {r["curve_metric"] for r in runs} == {"entropy_mse"} and {r["steps_to_threshold"] for r in runs} == {1}
    assert {r["stop_step"] for r in runs} == {1}
    assert all("entropy_mse" in r["learning_curve"]["values"] for r in runs)
