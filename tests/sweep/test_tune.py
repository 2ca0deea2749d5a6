"""Learning-rate tuning (`bayesbench run --tune`, `bayesbench/sweep/tune.py`): it picks what a
brute-force loop over the same grid picks, re-trains on other seeds, never selects on a reported
sequence, flags an edge winner and a floor at every rate, and never pools or ranks tuned rows with
untuned ones. One tiny tuned run (a 1-layer GRU on the sticky chain, 12 steps) is shared by the
module's tests."""

from __future__ import annotations

import dataclasses
import math
import types

import pytest

from bayesbench.cli import main
from bayesbench.presets import PRESETS
from bayesbench.report.headline import headline
from bayesbench.report.leaderboard import markdown
from bayesbench.report.selection import select_rows
from bayesbench.store.tuning import tuning_marks
from bayesbench.sweep.jobs import make_jobs
from bayesbench.sweep.tune import SELECTION_SEED_BASE, TuneSpec, choose, selection_jobs, spec_for
from bayesbench.training.curves import CurveSet
from bayesbench.training.run import train

RATES = (1e-4, 1e-3, 1e-2)
MODEL = ["--model-args", "n_layer=1", "d_model=16"]
COMMON = ["run", "--preset", "quick", "--tasks", "sticky", "--archs", "gru", "--steps", "12", "--eval-sequences",
          "64", "--seeds", "2", "--jobs", "1", "--no-progress", *MODEL]
TUNE = ["--tune", "--tune-args", "lrs=[0.0001,0.001,0.01]", "selection_seeds=2", "selection_sequences=32"]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A tuned run and an untuned run of the same (task, arch) in one store."""
    root = tmp_path_factory.mktemp("tune")
    db, runs = str(root / "t.sqlite"), str(root / "runs")
    assert main([*COMMON, *TUNE, "--db", db, "--runs-dir", runs]) == 0
    assert main([*COMMON, "--db", db, "--runs-dir", runs]) == 0
    return {"db": db, "runs": runs}


def _job():
    (job,) = make_jobs("quick", tasks=["sticky"], archs=["gru"], steps=12, eval_sequences=64, seeds=[0, 1],
                       model_args={"n_layer": 1, "d_model": 16})
    return job


def test_tuning_picks_what_a_brute_force_loop_picks(tuned):
    """Solo runs at each rate on the selection seeds, scored on the selection set after the last
    step: the same scores (to the ensemble = solo tolerance) and the same winner, and the reported
    row is that rate on seeds 0, 1, none of them a selection seed."""
    job = _job()
    spec = TuneSpec(lrs=RATES, selection_seeds=2, selection_sequences=32)
    curve = CurveSet(job.task, 32, split="selection", eval_sequences=64)
    brute = {}
    for i, lr in enumerate(RATES):
        cfg = dataclasses.replace(job.train, lr=lr, curves=False)
        scores = []
        for seed in spec.seeds_of(i):
            result = train(job.task, "gru", [seed], cfg, model_cfg=job.model, max_len=job.max_len, progress=False)
            scores.append(float(curve.score(result.model)[0, 0]))  # entropy MAE, the first curve metric
        brute[lr] = sum(scores) / len(scores)
    rows = [r for r in select_rows(tuned["db"], task="sticky") if r.config.get("tuning")]
    tuning = rows[0].config["tuning"]
    stored = {c["lr"]: c["mean"] for c in tuning["candidates"]}
    for lr in RATES:
        assert stored[lr] == pytest.approx(brute[lr], rel=1e-4)
    assert tuning["chosen"]["lr"] == min(brute, key=brute.get)
    assert {r.seed for r in rows} == {0, 1}
    assert all(r.config["train"]["lr"] == tuning["chosen"]["lr"] for r in rows)
    selection = select_rows(tuned["db"], task="sticky", selection=True)
    assert sorted(r.seed for r in selection) == sorted(s for i in range(3) for s in spec.seeds_of(i))
    assert min(r.seed for r in selection) >= SELECTION_SEED_BASE
    assert all(r.config["flops"]["per_step"] > 0 for r in rows + selection)


def test_rerun_is_exactly_once(tuned, capsys):
    """Running the tuned command again trains nothing: every selection and final job is stored."""
    assert main([*COMMON, *TUNE, "--db", tuned["db"], "--runs-dir", tuned["runs"]]) == 0
    out = capsys.readouterr().out
    assert out.count("1 job: 1 already stored (skipped), 0 to run") == 2


def test_tuned_and_untuned_rows_are_never_pooled_or_ranked_together(tuned):
    records = select_rows(tuned["db"], task="sticky")
    assert len({r.run_id for r in records}) == 2  # the tuned and the untuned run; selection rows left out
    table = markdown(records)
    rows = [line for line in table.splitlines() if line.startswith("| sticky") and "| gru" in line]
    assert len(rows) == 2
    tuned_row = next(line for line in rows if "(tuned)" in line)
    untuned_row = next(line for line in rows if "(tuned)" not in line)
    assert "chosen of 3 rates 1e-4 .. 1e-2" in tuned_row
    assert tuned_row.rstrip().endswith("1.0x |") and untuned_row.rstrip().endswith("1.0x |")  # each its own best
    lines = headline(records)
    assert sum("sticky V=8 L=32 (tuned)" in line for line in lines) == 1
    assert not any("gru" in line and line.count("gru") > 1 for line in lines)


def _record(lr: float, value: float, *, uniform: float = 1.0, member: int = 0, status: str = "ok"):
    curve = types.SimpleNamespace(step=[1, 10], values={"entropy_mae": [uniform, value]},
                                  uniform={"entropy_mae": uniform}, metric=lambda name, v=value: [uniform, v])
    return types.SimpleNamespace(config={"train": {"lr": lr}, "tuning": {"role": "selection", "setting": {}}},
                                 member=member, learning_curve=curve, status=status, stop_step=None, steps=10)


def test_a_winner_at_the_edge_is_flagged():
    spec = TuneSpec(lrs=(1e-4, 1e-3, 1e-2), selection_seeds=1)
    high = choose([_record(1e-4, 0.5), _record(1e-3, 0.3), _record(1e-2, 0.1)], spec)
    assert high["chosen"] == {"lr": 1e-2} and high["edge"] == "high" and not high["at_floor"]
    assert "best at the edge (the highest rate): widen the grid" in tuning_marks({**spec.identity(), **high})
    inside = choose([_record(1e-4, 0.5), _record(1e-3, 0.1), _record(1e-2, 0.3)], spec)
    assert inside["edge"] is None and not any("edge" in m for m in tuning_marks({**spec.identity(), **inside}))
    low = choose([_record(1e-4, 0.1), _record(1e-3, 0.3), _record(1e-2, float("nan"), status="diverged@5")], spec)
    assert low["edge"] == "low" and low["candidates"][2]["mean"] is None  # a diverged candidate is never chosen


def test_a_row_at_floor_at_every_rate_says_so():
    spec = TuneSpec(lrs=(1e-4, 3e-3), selection_seeds=2)
    records = [_record(1e-4, 1.249, uniform=1.25), _record(1e-4, 1.25, uniform=1.25),
               _record(3e-3, 1.2495, uniform=1.25), _record(3e-3, 1.26, uniform=1.25)]
    outcome = choose(records, spec)
    assert outcome["at_floor"]
    marks = tuning_marks({**spec.identity(), **outcome})
    assert "at floor at every rate tried: 1e-4 .. 3e-3" in marks
    assert not any("edge" in m for m in marks)  # the floor says more than the edge
    off = choose(records[:3] + [_record(3e-3, 0.9, uniform=1.25)], spec)
    assert not off["at_floor"]


def test_choose_refuses_a_search_with_candidates_missing():
    spec = TuneSpec(lrs=(1e-4, 1e-3), selection_seeds=1)
    with pytest.raises(ValueError, match="lack 1 candidate"):
        choose([_record(1e-4, 0.5)], spec)


def test_packed_selection_is_one_job_per_setting_and_unpacked_one_per_rate():
    job = _job()
    spec = TuneSpec(lrs=RATES, selection_seeds=2, axes={"warmup_steps": [0, 2]}.items())
    packed = selection_jobs(job, spec)
    assert len(packed) == 2 and all(j.train.member_lrs == (1e-4, 1e-4, 1e-3, 1e-3, 1e-2, 1e-2) for j in packed)
    assert {j.train.warmup_steps for j in packed} == {0, 2}
    assert all(j.train.curve_set == "selection" for j in packed)
    loose = selection_jobs(job, dataclasses.replace(spec, packed=False))
    assert len(loose) == 6 and all(j.train.member_lrs is None and len(j.seeds) == 2 for j in loose)
    keys = {j.identity["tuning"]["role"] for j in packed + loose}
    assert keys == {"selection"}
    assert "tuning" not in job.identity  # an untuned job's identity (and key) has no tuning field


@pytest.mark.parametrize("given,match", [
    ({"lrs": [1e-3]}, "at least 2 distinct"),
    ({"lrs": [1e-3, -1]}, "at least 2 distinct"),
    ({"lrs": "fast"}, "list of learning rates"),
    ({"lrs": [1e-3, 1e-2], "rule": "best"}, "rule must be one of"),
    ({"lrs": [1e-3, 1e-2], "selection_seeds": 0}, "selection_seeds"),
    ({"lrs": [1e-3, 1e-2], "axes": {"lr": [1]}}, "is not a setting tuning can search"),
    ({"lrs": [1e-3, 1e-2], "axes": {"warmup_steps": [-1]}}, "warmup_steps"),
    ({"lrs": [1e-3, 1e-2], "speed": 1}, "unknown setting"),
    ({"lrs": [1e-3, 1e-2], "prune": "sometimes"}, "prune must be one of"),
])
def test_bad_searches_are_refused_naming_the_setting(given, match):
    with pytest.raises(ValueError, match=match) as err:
        TuneSpec.of(given, "--tune-args")
    assert str(err.value).startswith("--tune-args")


def test_bad_tune_args_on_the_command_line_are_one_line(tmp_path, capsys):
    assert main([*COMMON, "--tune-args", "lrs=[0.001]", "--db", str(tmp_path / "x.sqlite")]) == 2
    err = capsys.readouterr().err
    assert "--tune-args" in err and "Traceback" not in err


def test_every_preset_task_has_a_default_grid_of_5_rates_over_30x():
    for preset in PRESETS.values():
        for key, setup in preset.tasks.items():
            spec = TuneSpec.of(setup.tune, f"{preset.name} {key}")
            assert len(spec.lrs) >= 5 and spec.lrs[-1] / spec.lrs[0] >= 30, (preset.name, key)
            assert spec.grid_warnings() == []
            # the task's fixed recipe lies inside its grid
            assert spec.lrs[0] < setup.train["lr"] < spec.lrs[-1], (preset.name, key)


def test_a_task_without_a_default_grid_needs_one():
    job = dataclasses.replace(_job(), setup=dataclasses.replace(_job().setup, tune=None))
    with pytest.raises(ValueError, match="has no default learning-rate grid"):
        spec_for(job, {})
    assert spec_for(job, {"lrs": [1e-3, 1e-2]}).lrs == (1e-3, 1e-2)


def test_paper_preset_tunes_at_tiny_size_on_the_cpu(tmp_path):
    """`--preset paper --tune` through the same machinery (its own grid, one packed ensemble per
    architecture), shrunk to a 1-layer model and 3 steps so that it runs here."""
    db = str(tmp_path / "p.sqlite")
    assert main(["run", "--preset", "paper", "--tune", "--tasks", "bijection", "--archs", "transformer", "--device",
                 "cpu", "--steps", "3", "--eval-sequences", "32", "--seeds", "1", "--jobs", "1", "--no-progress",
                 "--model-args", "size=null", "n_layer=1", "n_head=1", "d_model=8", "d_ffn=16",
                 "--tune-args", "selection_seeds=1", "selection_sequences=16", "--db", db,
                 "--runs-dir", str(tmp_path / "runs")]) == 0
    (row,) = select_rows(db)
    tuning = row.config["tuning"]
    assert tuning["lrs"] == list(PRESETS["paper"].tasks["bijection"].tune["lrs"])
    selection = select_rows(db, selection=True)
    assert len({r.run_id for r in selection}) == 1  # the whole grid as one ensemble: one job
    assert sorted(r.config["train"]["member_lrs"][r.member] for r in selection) == tuning["lrs"]
    assert math.isfinite(row.headline.entropy_mae.mean)


SWEEP = """
name = "tiny-tune"
tasks = ["sticky"]
archs = ["gru"]
steps = 8
seeds = [0]
eval_sequences = 64
[sizes.tiny]
gru = {n_layer = 1, d_model = 16}
[tune]
lrs = [0.001, 0.01]
selection_seeds = 1
selection_sequences = 32
"""


def test_a_sweep_file_with_tune_runs_the_search_on_the_sweep_engine(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(SWEEP)
    db = str(tmp_path / "s.sqlite")
    assert main(["sweep", str(path), "--db", db, "--runs-dir", str(tmp_path / "runs"), "--jobs", "1",
                 "--no-progress"]) == 0
    (row,) = select_rows(db)
    assert row.config["tuning"]["lrs"] == [0.001, 0.01] and row.group_id == "sweep-tiny-tune"
    assert row.config["model_args"]["d_model"] == 16  # the sweep's size
    assert len(select_rows(db, selection=True)) == 2


def test_a_sweep_cannot_both_fix_and_tune_the_rate(tmp_path, capsys):
    path = tmp_path / "both.toml"
    path.write_text(SWEEP.replace('archs = ["gru"]', 'archs = ["gru"]\nlrs = [0.001]'))
    assert main(["sweep", str(path), "--db", str(tmp_path / "s.sqlite")]) == 2
    assert "sets its own lr" in capsys.readouterr().err
    path.write_text(SWEEP.replace("selection_seeds = 1", "selection_seeds = 0"))
    assert main(["sweep", str(path), "--db", str(tmp_path / "s.sqlite")]) == 2
    assert "tune: selection_seeds must be a positive integer" in capsys.readouterr().err


def test_plot_tuning_draws_each_search(tuned, tmp_path, capsys):
    assert main(["plot", "--tuning", "--db", tuned["db"], "--out", str(tmp_path)]) == 0
    (path,) = capsys.readouterr().out.split()
    assert path.endswith("sticky_V_8_L_32_tuning.png") and (tmp_path / path.split("/")[-1]).stat().st_size > 10_000
    assert main(["plot", "--tuning", "--curves", "--db", tuned["db"]]) == 2
    assert main(["plot", "--tuning", "--db", str(tmp_path / "empty.sqlite"), "--out", str(tmp_path)]) == 2


def test_pruning_stops_hopeless_candidates_through_optuna(tmp_path):
    """prune=median (Optuna's MedianPruner, candidates as jobs of their own): the rates 1 and 3,
    run after two that train, are stopped at their first curve point, stored with their curve up
    to there, and never chosen."""
    db, runs = str(tmp_path / "p.sqlite"), str(tmp_path / "runs")
    assert main([*COMMON, "--tune", "--tune-args", "lrs=[0.01,0.03,1.0,3.0]", "selection_seeds=1",
                 "selection_sequences=32", "prune=median", "packed=false", "--db", db, "--runs-dir", runs]) == 0
    selection = {r.config["train"]["lr"]: r for r in select_rows(db, selection=True)}
    for lr in (1.0, 3.0):
        assert selection[lr].stop_step < 12 and "pruned" in selection[lr].stop_reason
    for lr in (0.01, 0.03):
        assert selection[lr].stop_step == 12
    (final, *_) = [r for r in select_rows(db) if r.config.get("tuning")]
    assert final.config["tuning"]["chosen"]["lr"] in (0.01, 0.03)
    assert [c.get("pruned", False) for c in final.config["tuning"]["candidates"]] == [False, False, True, True]
    assert len(list((tmp_path / "runs" / "tune").glob("*.journal"))) == 1  # one study for the search
    with pytest.raises(ValueError, match="give packed=false too"):
        TuneSpec.of({"lrs": [1e-3, 1e-2], "prune": "median"})


def test_a_sweep_whose_seeds_are_selection_seeds_is_refused_before_any_training(tmp_path, capsys, monkeypatch):
    """issue 39: a reported seed among the search's selection seeds was refused only once the whole search
    had trained."""
    from bayesbench.sweep import engine

    def would_run(*_args, **_kwargs):
        raise AssertionError("training started")

    monkeypatch.setattr(engine, "drive", would_run)
    path = tmp_path / "s.toml"
    path.write_text(f'tasks = ["bijection"]\narchs = ["mlp"]\nseeds = [0, {SELECTION_SEED_BASE}]\nsteps = 5\n'
                    "[tune]\nlrs = [1e-3, 3e-3]\nselection_seeds = 1\n")
    assert main(["sweep", str(path), "--db", str(tmp_path / "r.sqlite"), "--runs-dir", str(tmp_path / "runs"),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"bayesbench sweep: sweep file {path}: tune: seeds [{SELECTION_SEED_BASE}] of bijection V=8 L=7 "
                   "repl / mlp are selection seeds of its search (from 1,000,000): the reported run must be trained "
                   "on seeds the selection does not use; give seeds below it"), err


def test_a_selection_metric_or_case_the_task_lacks_is_refused_before_training(tmp_path, capsys):
    """`metric=kl:repeated` on the sticky chain (no such case there) scored every candidate NaN,
    "chose" the lowest rate and stored a tuned row: refused before any job, naming the metric and
    the task's metrics; so is a case the task's options leave out (a bijection whose keys never
    repeat). The bijection as the preset has it keeps kl:repeated."""
    db = str(tmp_path / "x.sqlite")
    assert main([*COMMON, *TUNE, "metric=kl:repeated", "--db", db, "--runs-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip()
    assert ("--tune-args metric=kl:repeated: sticky V=8 L=32 cannot be scored by it (it applies to bijection only) "
            "(rule: the selection metric is one the task has; its metrics: entropy_mae, entropy_mae_positional, kl)"
            in err and "\n" not in err)
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("checkpoint.pt"))
    (bij,) = make_jobs("quick", tasks=["bijection"], archs=["mlp"], steps=2, seeds=[0])
    assert spec_for(bij, {"metric": "kl:repeated", "selection_sequences": 16}).metric == "kl:repeated"
    (perm,) = make_jobs("quick", tasks=["bijection"], archs=["mlp"], steps=2, seeds=[0],
                        task_args={"keys": "permutation"})
    with pytest.raises(ValueError, match="metric=kl:repeated: .* cannot be scored by it \\(its selection set has no "
                                         "'repeated' positions\\)"):
        spec_for(perm, {"metric": "kl:repeated", "selection_sequences": 16})


@pytest.mark.parametrize("extra,says", [
    (["--train-args", "lr=1e-3"], "--train-args lr=...: --tune chooses the learning rate, a fixed one would be "
                                  "dropped (rule: a tuned run trains at the rate its search picks"),
    (["--tune-args", "lrs=[true,1e-3]"], "--tune-args lrs must be numbers, got [True, 0.001]"),
    (["--tune-args", 'lrs=["1e-3",1e-2]'], "--tune-args lrs must be numbers, got ['1e-3', 0.01]"),
])
def test_a_setting_tuning_would_drop_or_misread_is_refused_naming_it(tmp_path, capsys, extra, says):
    assert main([*COMMON, "--tune", *extra, "--db", str(tmp_path / "x.sqlite"),
                 "--runs-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and "\n" not in err, err
