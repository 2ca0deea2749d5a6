"""The learning curves on the command line: `train --until`, the leaderboard's curve columns and
`--metric auc`, `plot --curves` and `compare`, with tiny step counts."""

from __future__ import annotations

import csv
import io
import json

import pytest

from bayesbench.cli import main
from bayesbench.presets import get_preset


def _run(capsys, *argv) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def _train(store, *extra) -> dict:
    import contextlib

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["train", *store["common"], *extra]) == 0
    return json.loads(out.getvalue())


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Two stored runs of the quick bijection, made here so that every test stands alone: the MLP
    (3 seeds, to its budget) and the transformer stopped by --until."""
    tmp = tmp_path_factory.mktemp("curves")
    db, runs = str(tmp / "r.sqlite"), str(tmp / "runs")
    common = ["--task", "bijection", "--preset", "quick", "--steps", "60", "--eval-sequences", "64",
              "--curve-sequences", "64", "--db", db, "--runs-dir", runs, "--no-progress", "--json"]
    s = {"db": db, "tmp": tmp, "common": common}
    s["plain"] = _train(s, "--arch", "mlp", "--seeds", "0,1,2")
    # 1.3 bits is above the quick bijection's uniform floor (1.25): every member meets it at step 1
    s["until"] = _train(s, "--arch", "transformer", "--seeds", "0,1", "--until", "1.3")
    s["mlp"], s["transformer"] = s["plain"]["runs"][0]["run_id"], s["until"]["runs"][0]["run_id"]
    return s


def test_train_until_records_why_each_member_stopped(store):
    for r in store["plain"]["runs"]:
        assert r["stop_step"] == 60 and r["stop_reason"] == "budget"
        assert r["learning_curve"]["step"][-1] == 60 and r["learning_curve"]["eval"] == "values"
        assert r["learning_curve"]["n_sequences"] == 64 and len(r["learning_curve"]["values"]["kl"]) == 14
    for r in store["until"]["runs"]:
        assert r["stop_step"] == 1 and r["stop_reason"].startswith("threshold: entropy_mae ")
        assert r["steps"] == 1 and r["learning_curve"]["step"] == [1]


def test_until_and_curve_options_are_checked(capsys, store):
    for argv, words in ((["--until", "soon"], "--until: must be a threshold in bits"),
                        (["--until", "-1"], "--until: must be a threshold in bits")):
        with pytest.raises(SystemExit) as stop:
            main(["train", *store["common"], "--arch", "mlp", *argv])
        assert stop.value.code == 2 and words in capsys.readouterr().err
    for argv, words in ((["--until-metric", "kl"], "--until-metric names the metric --until reads"),
                        (["--until", "0.1", "--no-curves"], "cannot be combined with --no-curves")):
        assert main(["train", *store["common"], "--arch", "mlp", *argv]) == 2
        assert words in capsys.readouterr().err


def test_leaderboard_reads_the_curves(capsys, store):
    md = _run(capsys, "leaderboard", "--db", store["db"])
    header = md.splitlines()[0]
    assert "steps to entropy MAE <= 0.1 bits [95% CI] (seeds reached) | still improving |" in header
    rows = {line.split("|")[3].strip().split(" (")[0]: line for line in md.splitlines()
            if line.startswith("| bijection") and "(trained)" in line}  # arch, without its marks ("(at floor)")
    assert "not reached (0/3 by 60)" in rows["mlp"]
    # with 1.3 bits both transformer seeds reached it at their first measured step
    md = _run(capsys, "leaderboard", "--db", store["db"], "--threshold", "1.3")
    line = next(x for x in md.splitlines() if "| transformer" in x and "(trained)" in x)
    batch = get_preset("quick").tasks["bijection"].train["batch_size"]  # sequences per member at step 1
    assert f"| 1, every seed at that measured step (2/2; {batch} seq) | - |" in line  # one point: cannot tell
    assert "learning curves (bijection V=8 L=7 repl values: 64 sequences" in md
    auc = _run(capsys, "leaderboard", "--db", store["db"], "--metric", "auc")
    assert "**AUC of entropy MAE over log step** (bits)" in auc.splitlines()[0]
    assert "area under the learning curve of entropy MAE against log(step)" in auc
    table = list(csv.DictReader(io.StringIO(_run(capsys, "leaderboard", "--db", store["db"], "--format", "csv"))))
    primary = [r for r in table if r["eval"] == "values"]
    assert {r["stop_reason"] for r in primary} >= {"budget"} and all(r["curve_metric"] == "entropy_mae"
                                                                     for r in primary)
    assert all(r["steps_to_threshold"] == "" for r in table if r["eval"] == "values+query")


def test_plot_curves_writes_one_png_per_task(capsys, store):
    out = _run(capsys, "plot", "--curves", "--metric", "kl", "--db", store["db"], "--out", str(store["tmp"] / "p"))
    (path,) = out.split()
    assert path.endswith("_curves_kl.png") and (store["tmp"] / "p").joinpath(path.split("/")[-1]).stat().st_size > 0


def test_compare_two_runs(capsys, store):
    out = _run(capsys, "compare", store["mlp"], store["transformer"], "--db", store["db"],
               "--plot", str(store["tmp"] / "cmp.png"))
    assert f"A = {store['mlp']}: bijection V=8 L=7 repl / mlp, 3 seeds [0, 1, 2]" in out
    assert "| step | A: entropy_mae (bits), mean [95% CI over seeds] |" in out
    assert "Welch's t-test over seeds (3 vs 2) at the one step both cover (1)" in out
    assert (store["tmp"] / "cmp.png").stat().st_size > 0
    data = json.loads(_run(capsys, "compare", store["mlp"][:6], store["transformer"], "--db", store["db"], "--json"))
    assert data["run_a"] == store["mlp"] and [s["step"] for s in data["steps"]] == [1]
    assert main(["compare", "nosuchrun", store["mlp"], "--db", store["db"]]) == 2
    assert "no stored run 'nosuchrun'" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["--json", "csv"])
def test_leaderboard_metric_auc_reaches_json_and_csv(capsys, store, fmt):
    """Probe case 24: --metric auc with --json or --format csv printed the same records as without
    it, the AUC asked for nowhere."""
    from bayesbench.stats import log_auc
    from bayesbench.store.database import read_records

    # the MLP alone: the transformer stopped at step 1, so with it no step range is common to all
    argv = ["leaderboard", "--db", store["db"], "--metric", "auc", "--arch", "mlp"]
    if fmt == "csv":
        rows = [r for r in csv.DictReader(io.StringIO(_run(capsys, *argv, "--format", "csv"))) if r["auc_bits"]]
        got = {(r["run_id"], int(r["seed"])): (float(r["auc_bits"]), [int(r["auc_from_step"]), int(r["auc_to_step"])])
               for r in rows}
    else:
        data = json.loads(_run(capsys, *argv, "--json"))
        assert data["metric"].startswith("auc: AUC of entropy_mae over log step")
        got = {(r["run_id"], r["seed"]): (r["auc_bits"], r["auc_steps"]) for r in data["runs"]}
    records = {(r.run_id, r.seed): r for r in read_records(store["db"]) if r.arch == "mlp"}
    assert set(got) == set(records) and len(records) == 3  # every member, each once (on its curve's evaluation)
    for key, (value, (lo, hi)) in got.items():
        c = records[key].learning_curve
        assert value == pytest.approx(log_auc(c.step, c.metric("entropy_mae"), lo, hi))
    md = _run(capsys, *argv)
    values = [v for v, _ in got.values()]
    assert all(0 < v < 2 for v in values) and len({tuple(span) for _, span in got.values()}) == 1  # one range
    line = next(x for x in md.splitlines() if "| mlp" in x and "(trained)" in x)
    assert f"| {sum(values) / len(values):.4f} [" in line  # the table's ranked mean is the mean of these


def test_compare_refuses_a_run_against_itself_and_a_plot_folder_and_prints_the_file_written(capsys, store, tmp_path):
    """Probe cases 99, 106, 108: a run compared with itself got a full table of p = 1; --plot DIR/
    wrote the hidden file DIR/.png; --plot NAME wrote NAME.png and printed NAME."""
    assert main(["compare", store["mlp"], store["mlp"][:6], "--db", store["db"]]) == 2
    assert f"RUN_A and RUN_B are the same run ({store['mlp']})" in capsys.readouterr().err
    assert main(["compare", store["mlp"], store["transformer"], "--db", store["db"], "--plot", f"{tmp_path}/"]) == 2
    assert "--plot " + str(tmp_path) + "/ is a folder; give a file name" in capsys.readouterr().err
    assert not (tmp_path / ".png").exists()
    out = _run(capsys, "compare", store["mlp"], store["transformer"], "--db", store["db"], "--plot",
               str(tmp_path / "cmp"))
    assert out.splitlines()[-1] == str(tmp_path / "cmp.png") and (tmp_path / "cmp.png").stat().st_size > 0


def test_plot_curves_reads_the_newest_run_that_has_curves(capsys, tmp_path):
    """Probe case 126: a newer run trained with --no-curves hid every older run of its task and
    arch from `plot --curves`, and the task's figure was left out without a word."""
    db = str(tmp_path / "r.sqlite")
    base = ["train", "--task", "sticky", "--arch", "mlp", "--seeds", "0", "--steps", "4", "--eval-sequences", "16",
            "--curve-sequences", "16", "--db", db, "--runs-dir", str(tmp_path / "runs"), "--no-progress"]
    assert main(base) == 0
    assert main([*base, "--no-curves", "--train-args", "lr=1e-3"]) == 0
    capsys.readouterr()
    out = _run(capsys, "plot", "--curves", "--db", db, "--out", str(tmp_path / "p"))
    assert [p.split("/")[-1] for p in out.split()] == ["sticky_V=8_L=32_curves_entropy_mae.png"]


@pytest.mark.parametrize("argv,words", [
    (["--curves", "--dynamics", "s1"], "--dynamics draws one study; it cannot be combined with --curves"),
    (["--dynamics", "s1", "--task", "sticky"], "--dynamics draws one study; it cannot be combined with --task"),
    (["--metric", "kl"], "--metric goes with --curves"),
    (["--threshold", "0.2", "--metric", "kl"], "--metric and --threshold go with --curves"),
])
def test_plot_refuses_options_it_would_ignore(capsys, tmp_path, argv, words):
    """Probe cases 128, 129: --curves beside --dynamics, and --metric without --curves, were ignored."""
    assert main(["plot", *argv, "--db", str(tmp_path / "r.sqlite"), "--out", str(tmp_path / "p")]) == 2
    assert words in capsys.readouterr().err and not (tmp_path / "p").exists()


def test_plot_curves_of_a_metric_the_task_does_not_measure_says_so(capsys, tmp_path):
    """Issue 29, section 4: `plot --curves --metric kl:new` on sticky runs said "no stored runs with
    learning curves to plot" although they have curves: the metric does not exist for that task."""
    db = str(tmp_path / "r.sqlite")
    base = ["--arch", "mlp", "--seeds", "0", "--steps", "4", "--eval-sequences", "16", "--curve-sequences", "16",
            "--db", db, "--runs-dir", str(tmp_path / "runs"), "--no-progress"]
    assert main(["train", "--task", "sticky", *base]) == 0
    capsys.readouterr()
    plot = ["plot", "--curves", "--db", db, "--out", str(tmp_path / "p")]
    for metric in ("kl:new", "kl:repeated"):
        assert main([*plot, "--metric", metric]) == 2
        out, err = capsys.readouterr()
        assert err.startswith(f"bayesbench plot: --metric {metric} is not measured by the learning curves of sticky "
                              "V=8 L=32 (they measure entropy_mae, entropy_mae_positional, kl); ") and \
            "the bijection's" in err and len(err.strip().splitlines()) == 1 and "no stored runs" not in out, err
    # beside a bijection run: its figure is drawn, and the task left out is said on stderr
    assert main(["train", "--task", "bijection", *base]) == 0
    capsys.readouterr()
    assert main([*plot, "--metric", "kl:new"]) == 0
    out, err = capsys.readouterr()
    assert [p.split("/")[-1] for p in out.split()] == ["bijection_V=8_L=7_repl_curves_kl_new.png"], (out, err)
    assert "sticky V=8 L=32 left out: its learning curves do not measure kl:new" in err, err
