"""A result is keyed by the code that produced it: an outside tunnel's or model's file contents
(and the modules it imports from its own folder), the built-in parts' versions. An edited file
is a new result (trained and scored anew, its evaluation set drawn from the new code), a
reverted file finds its old rows, a checkpoint of other code says what changed, and the
leaderboard never pools or ranks together rows of different code."""

from __future__ import annotations

import json
import sqlite3
import textwrap

import pytest
import torch

from bayesbench import outside_code, versions
from bayesbench.cli import main
from bayesbench.report.leaderboard import markdown
from bayesbench.scoring.evaluate import eval_set, eval_set_id
from bayesbench.store.database import read_records, read_rows, write_rows
from bayesbench.store.schema import SCHEMA_VERSION
from bayesbench.sweep.expand import SweepJob
from bayesbench.sweep.jobs import make_jobs
from bayesbench.tasks import outside_task
from bayesbench.tasks.sticky import StickyTask

COIN = textwrap.dedent('''
    # a fresh coin per sequence; the exact posterior predictive of the next flip
    from dataclasses import dataclass

    import torch

    from bayesbench.tasks import Batch, Task

    A = {a}  # theta ~ Beta(A, 1), drawn as U ** (1 / A): P(heads) = (heads + A) / (flips + A + 1)


    @dataclass(frozen=True)
    class CoinTask(Task):
        L: int = 6
        name = "coin"

        vocab_size = property(lambda self: 2)
        num_classes = property(lambda self: 2)
        seq_len = property(lambda self: self.L)

        def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32):
            dev = generator.device if generator is not None else torch.device(device or "cpu")
            theta = torch.rand(batch_size, generator=generator, device=dev) ** (1.0 / A)
            flips = (torch.rand(batch_size, self.L + 1, generator=generator, device=dev) < theta[:, None]).long()
            heads = flips[:, :-1].cumsum(1).double()
            p1 = (heads + A) / (torch.arange(1, self.L + 1, device=dev) + A + 1)
            mask = torch.ones(batch_size, self.L, dtype=torch.bool, device=dev)
            return Batch(flips[:, :-1], mask, flips[:, 1:], torch.stack([1 - p1, p1], -1).to(dtype),
                         {{"theta": theta}})


    def build(**options):
        return CoinTask(**options)
''')

NET = textwrap.dedent('''
    from torch import nn

    from helpers import WIDTH


    class Net(nn.Module):
        def __init__(self, spec):
            super().__init__()
            self.embed = nn.Embedding(spec.vocab_size, WIDTH)
            self.rnn = nn.{cell}(WIDTH, WIDTH, batch_first=True)
            self.head = nn.Linear(WIDTH, spec.num_classes)

        def forward(self, tokens, header=None):
            return self.head(self.rnn(self.embed(tokens))[0])


    def build(spec):
        return Net(spec)
''')


def _cli(capsys, *argv) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def _coin(path, a=1):
    path.write_text(COIN.format(a=a))


def _train_coin(capsys, folder, db, runs):
    rc, out, err = _cli(capsys, "train", "--task", str(folder / "coin.py") + ":build", "--task-args", "L=6",
                        "--arch", "transformer", "--model-args", "n_layer=1", "d_model=16", "d_ffn=16",
                        "--steps", "12", "--seeds", "0", "--eval-sequences", "64", "--no-progress", "--json",
                        "--db", str(db), "--runs-dir", str(runs))
    assert rc == 0, err
    (run,) = json.loads(out)["runs"]
    return run, out + err


def test_an_edited_tunnel_is_trained_and_scored_anew_and_the_reverted_file_finds_its_rows(tmp_path, capsys):
    folder, db, runs = tmp_path, tmp_path / "r.sqlite", tmp_path / "runs"
    _coin(folder / "coin.py")  # theta ~ U(0, 1): Laplace's rule, symmetric
    first, _ = _train_coin(capsys, folder, db, runs)
    _coin(folder / "coin.py", a=2)  # theta ~ Beta(2, 1): (h + 2) / (t + 3)
    edited, log = _train_coin(capsys, folder, db, runs)
    assert "0 already stored (skipped), 1 to run" in log
    assert edited["run_id"] != first["run_id"]  # a new key: a new run directory and a new row
    assert "resum" not in log  # the old file's checkpoint is not picked up
    # the floors come from the new tunnel's own evaluation set: the old symmetric prior has equal
    # uniform and marginal floors at the first position, the Beta(2, 1) prior does not
    floors = lambda run: run["evals"]["standard"]["floors"]  # noqa: E731
    assert floors(first)["marginal"]["entropy_mae_bits"] != floors(edited)["marginal"]["entropy_mae_bits"]
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    _coin(fresh / "coin.py", a=2)
    alone, _ = _train_coin(capsys, fresh, fresh / "r.sqlite", fresh / "runs")  # the same file, from nothing
    assert floors(alone) == floors(edited)
    assert alone["entropy_mae_bits"] == pytest.approx(edited["entropy_mae_bits"], abs=1e-12)
    _coin(folder / "coin.py")  # reverted: its rows are found again
    again, log = _train_coin(capsys, folder, db, runs)
    assert "1 already stored (skipped)" in log and again["run_id"] == first["run_id"]
    assert again["entropy_mae_bits"] == first["entropy_mae_bits"]
    rows = read_rows(str(db))
    contents = [r["config"]["code"]["task"]["contents"] for r in rows]
    assert len(rows) == 2 and len(set(contents)) == 2  # each row says which file made it
    run_file = json.loads(next(runs.rglob("run.json")).read_text())
    assert run_file["code"]["task"]["contents"] in {r["config"]["code"]["task"]["contents"] for r in rows}


def test_an_edited_model_file_retrains_and_its_old_checkpoint_is_named_changed_not_damaged(tmp_path, capsys):
    (tmp_path / "helpers.py").write_text("WIDTH = 8\n")
    (tmp_path / "mine.py").write_text(NET.format(cell="GRU"))
    spec = str(tmp_path / "mine.py") + ":build"
    common = ["--task", "sticky", "--model", spec, "--steps", "6", "--seeds", "0", "--eval-sequences", "64",
              "--task-args", "L=8", "--no-progress", "--json", "--runs-dir", str(tmp_path / "runs")]
    rc, out, err = _cli(capsys, "train", *common, "--db", str(tmp_path / "a.sqlite"))
    assert rc == 0, err
    gru = json.loads(out)["runs"][0]
    (tmp_path / "helpers.py").write_text("WIDTH = 12\n")  # a module it imports from its own folder
    (tmp_path / "mine.py").write_text(NET.format(cell="LSTM"))
    rc, out, err = _cli(capsys, "train", *common, "--db", str(tmp_path / "a.sqlite"))
    assert rc == 0, err
    lstm = json.loads(out)["runs"][0]
    assert lstm["run_id"] != gru["run_id"] and lstm["params"] != gru["params"] and "0 already stored" in err
    rc, out, err = _cli(capsys, "train", *common, "--db", str(tmp_path / "b.sqlite"))  # a new store, same runs
    assert rc == 0 and "damaged" not in err and json.loads(out)["runs"][0]["params"] == lstm["params"]
    old_dir = next(p for p in (tmp_path / "runs").rglob("checkpoint.pt") if gru["run_id"] in str(p)).parent
    rc, out, err = _cli(capsys, "eval", str(old_dir), "--db", str(tmp_path / "c.sqlite"), "--trust-code")
    assert rc == 2 and "the model file changed" in err and "damaged" not in err
    assert "since it was written" in err and not (tmp_path / "c.sqlite").exists() or not read_rows(
        str(tmp_path / "c.sqlite"))


def test_contents_cover_the_file_and_what_it_imports_from_its_folder_only(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "layers.py").write_text("from . import sizes\n")
    (tmp_path / "pkg" / "sizes.py").write_text("W = 3\n")
    (tmp_path / "helpers.py").write_text("X = 1\n")
    (tmp_path / "unrelated.py").write_text("Y = 1\n")
    (tmp_path / "mine.py").write_text("import os\nimport helpers\nfrom pkg.layers import sizes\n\ndef build(s):\n"
                                      "    return None\n")
    spec = outside_code.normalise(str(tmp_path / "mine.py") + ":build", "model", "forms")
    code = outside_code.contents(spec, "model", "forms")
    assert code["files"] == ["helpers.py", "mine.py", "pkg/__init__.py", "pkg/layers.py", "pkg/sizes.py"]
    (tmp_path / "unrelated.py").write_text("Y = 2\n")
    assert outside_code.contents(spec, "model", "forms") == code  # not imported: not part of it
    (tmp_path / "pkg" / "sizes.py").write_text("W = 4\n")  # imported two levels down, relatively
    assert outside_code.contents(spec, "model", "forms")["contents"] != code["contents"]


def test_a_file_edited_within_one_process_is_imported_anew(tmp_path):
    (tmp_path / "f.py").write_text("def build():\n    return 1\n")
    spec = outside_code.normalise(str(tmp_path / "f.py") + ":build", "model", "forms")
    assert outside_code.load(spec, "model", "forms")() == 1
    assert outside_code.load(spec, "model", "forms")() == 1
    (tmp_path / "f.py").write_text("def build():\n    return 2  # edited\n")
    assert outside_code.load(spec, "model", "forms")() == 2  # the code that runs is the code that is hashed


def test_an_evaluation_set_is_keyed_by_the_tunnels_code(tmp_path, monkeypatch):
    task = StickyTask(V=4, L=6)
    before = eval_set_id(task, 32)
    assert eval_set_id(task, 32) == before and eval_set_id(task, 33) != before
    monkeypatch.setattr(StickyTask, "version", 2)
    assert eval_set_id(task, 32) != before
    _coin(tmp_path / "coin.py")
    coin = outside_task(str(tmp_path / "coin.py") + ":build", {"L": 6})
    first = eval_set(coin, 32, cache_dir=str(tmp_path / "cache"))
    _coin(tmp_path / "coin.py", a=2)
    edited = outside_task(str(tmp_path / "coin.py") + ":build", {"L": 6})
    assert edited.describe() == coin.describe() and eval_set_id(edited, 32) != eval_set_id(coin, 32)
    again = eval_set(edited, 32, cache_dir=str(tmp_path / "cache"))
    assert not torch.equal(first.posterior, again.posterior)  # never the old file's cached set


# `bayesbench run --preset quick`'s keys: the ones this code gives, and the ones stores of schema
# version 4 hold for the same jobs (computed by that code, d57b8f5), which the store's migration
# finds and moves to these.
QUICK_KEYS = {("bijection", "transformer"): ("6836635052178b1f", "ec0b3a8c58ff5f78"),
              ("sticky", "lstm"): ("51cc839eb3683b0a", "4c9ce2f4d9dc8d99"),
              ("hmm", "lstm"): ("18e904e5d52f5dfa", "7eb7417e078f7008")}


def _stored_row(job, run_id: str) -> dict:
    """A row of `job` (seed 0) as a store of schema version 4 holds it: no identity; the training
    as the trainer's record gave it (no torch.compile, no read-back interval)."""
    row = _row(run_id, job.arch, job.code, task_config=job.task.config())
    row.update(group_id="run-quick", task=job.task.name, task_label=job.setup.label,
               environment={"device": "cpu", "threads": 1})
    row["config"] = {"model_args": job.model, "train": job.train.identity(), "seeds": list(job.seeds),
                     "max_len": job.max_len, "eval_lengths": list(job.setup.eval_lengths),
                     "eval_scored": list(job.setup.eval_scored), "eval_sequences": job.setup.eval_sequences,
                     "code": job.code}
    return row


def test_the_quick_keys_and_the_migration_of_the_keys_stored_before(tmp_path, monkeypatch):
    jobs = {(j.task_key, j.arch): j for j in make_jobs("quick", place=lambda d: "cpu")}
    for pair, (key, _) in QUICK_KEYS.items():
        assert SweepJob.of(jobs[pair], group_id="g").key == key
    db = str(tmp_path / "old.sqlite")
    write_rows([_stored_row(jobs[pair], stored) for pair, (_, stored) in QUICK_KEYS.items()], db)
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET config = json_remove(config, '$.identity', '$.identity_key')")
    con.execute("PRAGMA user_version = 4")
    con.commit()
    con.close()
    write_rows([], db)  # opening it for writing migrates it
    assert {r["run_id"] for r in read_rows(db)} == {key for key, _ in QUICK_KEYS.values()}
    monkeypatch.setattr(StickyTask, "version", 2)  # a raised version is another result
    job = make_jobs("quick", tasks=["sticky"], archs=["lstm"], place=lambda d: "cpu")[0]
    assert job.code["task"] == {"version": 2}
    assert SweepJob.of(job, group_id="g").key != QUICK_KEYS[("sticky", "lstm")][0]


def _summary(mae):
    return {"mean": mae, "ci_low": mae - 0.1, "ci_high": mae + 0.1, "n_sequences": 64, "n_positions": 384}


def _row(run_id, arch, code=None, mae=0.5, task_config=None, spec=None):
    metrics = {"primary": "standard", "evals": {"standard": {
        "task": "coin", "positions": "all", "entropy_mae": _summary(mae), "kl": _summary(mae)}}}
    config = {"seeds": [0], "model": {"spec": spec} if spec else {}, **({"code": code} if code else {})}
    return {"run_id": run_id, "seed": 0, "member": 0, "task": "coin", "task_label": "coin L=6",
            "task_config": task_config or {"task": "outside", "spec": "/x/coin.py:build", "options": {}},
            "arch": arch, "config": config, "params": 10, "steps": 5, "status": "ok", "entropy_mae_bits": mae,
            "metrics": metrics, "environment": {"threads": 1}}


def test_an_old_store_migrates_its_rows_keyed_by_path_and_never_pools_them(tmp_path):
    db = str(tmp_path / "old.sqlite")
    write_rows([_row("old", "mine", spec="/x/mine.py:build")], db)  # no code: as a store of before
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET config = json_remove(config, '$.code')")
    con.execute("PRAGMA user_version = 3")
    con.commit()
    con.close()
    new_code = {"task": {"contents": "aaaaaaaaaaaaaaaa", "files": ["coin.py"]},
                "model": {"contents": "bbbbbbbbbbbbbbbb", "files": ["mine.py"]}, "training": {"version": 1}}
    write_rows([_row("new", "mine", new_code, mae=0.25, spec="/x/mine.py:build")], db)  # opening migrates
    rows = {r["run_id"]: r for r in read_rows(db)}
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert rows["old"]["entropy_mae_bits"] == 0.5  # its numbers stay
    assert rows["old"]["config"]["code"]["model"] == {"contents": versions.UNKNOWN}
    table = markdown(read_records(db))
    lines = [line for line in table.splitlines() if "| mine" in line]
    assert len(lines) == 2  # never pooled ...
    assert any("contents unknown" in line or "unknown" in line for line in lines)  # ... and the difference shown
    assert "tunnel contents" in table or "task" in table


def test_rows_of_another_metric_version_are_ranked_apart(tmp_path):
    db = str(tmp_path / "r.sqlite")
    base = {"task": {"version": 1}, "model": {"version": 1}, "training": {"version": 1}}
    tc = {"task": "sticky", "V": 8}
    write_rows([_row("a", "lstm", {**base, "metrics": {"entropy_mae": 1, "kl": 1}}, 0.5, tc),
                _row("b", "gru", {**base, "metrics": {"entropy_mae": 2, "kl": 1}}, 0.25, tc)], db)
    table = markdown(read_records(db))
    rows = [line for line in table.splitlines() if "| lstm" in line or "| gru" in line]
    assert all("| 1.0x |" in line for line in rows)  # each the best of its own block: not ranked together
    assert any("metric definitions" in line for line in rows)


def test_rows_that_differ_only_by_their_model_file_are_two_rows_and_say_so(tmp_path):
    db = str(tmp_path / "r.sqlite")
    tc = {"task": "sticky", "V": 8}
    code = lambda h: {"task": {"version": 1}, "model": {"contents": h, "files": ["mine.py"]}}  # noqa: E731
    write_rows([_row("a", "mine", code("aaaaaaaaaaaaaaaa"), 0.5, tc, spec="/x/mine.py:build"),
                _row("b", "mine", code("bbbbbbbbbbbbbbbb"), 0.25, tc, spec="/x/mine.py:build")], db)
    rows = [line for line in markdown(read_records(db)).splitlines() if "| mine" in line]
    assert len(rows) == 2
    assert any("model_code=contents aaaaaaaaaaaaaaaa" in line for line in rows)
    assert any("model_code=contents bbbbbbbbbbbbbbbb" in line for line in rows)
