"""The recurrent state size on the leaderboard (issue 43; models/state.py): a trained row stores
the floats its layers' recurrent references carry at the scored length (config["state"]), the
Markdown table shows them beside params with a note, `--json` gives them beside params and FLOPs;
rows stored before the count keep their output byte for byte (tests/report/test_leaderboard_golden.py)."""

from __future__ import annotations

import json

from bayesbench.cli import main
from bayesbench.models import get_model
from bayesbench.models.state import state_floats
from bayesbench.store.database import read_records
from bayesbench.tasks import task_from_config


def test_trained_rows_carry_their_state_and_the_leaderboard_shows_it(tiny_store, capsys):
    records = read_records(tiny_store["db"])
    by_arch = {r.arch: r for r in records}
    assert by_arch["mlp"].config["state"]["floats"] == 0  # position-wise: nothing carried
    lstm = by_arch["lstm"]
    task = task_from_config(lstm.task_config)
    model = get_model("lstm", task, seeds=[0], **lstm.config["model_args"])
    assert lstm.config["state"] == {"floats": state_floats(model, task.seq_len), "length": task.seq_len,
                                    "counted": lstm.config["state"]["counted"]}
    cfg = lstm.config["model"]
    assert lstm.config["state"]["floats"] == cfg["n_layer"] * 2 * cfg["d_model"]  # h and c of every layer

    assert main(["leaderboard", "--db", tiny_store["db"]]) == 0
    table = capsys.readouterr().out
    header = next(line for line in table.splitlines() if line.startswith("| task"))
    assert "| params | state (floats) | steps |" in header
    row = next(line for line in table.splitlines() if "| lstm" in line)
    cells = [c.strip() for c in row.split("|")]
    assert cells[header.split("|").index(" state (floats) ")] == f"{lstm.config['state']['floats']:,}"
    assert "- state = the floats one member holds" in table

    assert main(["leaderboard", "--db", tiny_store["db"], "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {r["arch"]: r for r in doc["rows"]}
    assert rows["lstm"]["state_floats"] == lstm.config["state"]["floats"] and rows["mlp"]["state_floats"] == 0
    assert list(rows["lstm"]).index("state_floats") == list(rows["lstm"]).index("params") + 1


def test_plot_state_draws_the_gap_against_the_state_per_task(tiny_store, tmp_path, capsys):
    out = tmp_path / "plots"
    assert main(["plot", "--state", "--db", tiny_store["db"], "--out", str(out)]) == 0
    paths = capsys.readouterr().out.split()
    assert len(paths) == 1 and paths[0].endswith("_state.png") and (out / paths[0].rsplit("/", 1)[1]).stat().st_size
    from bayesbench.report.rows import aggregate
    from bayesbench.report.state_plot import state_rows

    groups, lacking = state_rows(aggregate(read_records(tiny_store["db"])))
    (rows,) = groups.values()
    assert sorted(r.arch for r in rows) == ["lstm", "mlp"] and not lacking
    assert main(["plot", "--state", "--metric", "kl", "--db", tiny_store["db"], "--out", str(out)]) == 0


def test_plot_state_refuses_what_does_not_go_with_it(tiny_store, tmp_path, capsys):
    for extra, said in ((["--curves"], "cannot be combined with --curves"),
                        (["--threshold", "0.2"], "--threshold goes with --curves"),
                        (["--metric", "kl:new"], "must be a final metric")):
        assert main(["plot", "--state", *extra, "--db", tiny_store["db"], "--out", str(tmp_path)]) != 0
        assert said in capsys.readouterr().err
