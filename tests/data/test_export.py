"""`bayesbench data export` (bayesbench/data/export.py, sets.py, card.py): the sets written are the
sets scoring draws (same sequences, same posteriors, same ids), in both formats, with a card
that names every column."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from bayesbench.cli import main
from bayesbench.data.export import export, read_manifest
from bayesbench.scoring.evaluate import eval_set, eval_set_id
from bayesbench.tasks import get_task, outside_task
from bayesbench.training.curves import curve_batch
from bayesbench.training.seeds import data_seed, eval_seed

TUNNEL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "outside_tunnel.py")
QUICK_BIJECTION = get_task("bijection", V=8, variant="code", L=7)


def _column(table, name, shape):
    return table.column(name).combine_chunks().flatten().flatten().to_numpy().reshape(shape) if len(shape) == 3 else \
        table.column(name).combine_chunks().flatten().to_numpy(zero_copy_only=False).reshape(shape)


def test_the_bijection_eval_split_is_the_scored_sets_with_their_ids(tmp_path):
    out = str(tmp_path / "bij")
    manifest = export("bijection", out=out, sequences=48)
    assert [s["name"] for s in manifest["sets"]] == ["values", "values+query"]
    assert sorted(os.listdir(out)) == ["README.md", "bayesbench.json", "values.parquet", "values_query.parquet"]
    assert read_manifest(out)["sets"] == manifest["sets"]
    for entry, supervise in zip(manifest["sets"], ("values", "both")):
        task = get_task("bijection", V=8, variant="code", L=7, supervise=supervise)
        batch = eval_set(task, 48)
        assert entry["set_id"] == eval_set_id(task, 48) and entry["seed"] == eval_seed(task)
        assert entry["key"] == {"set_id": entry["set_id"], "n_sequences": 48, "tunnel": "bijection",
                                "tunnel_code": '{"version": 1}'}
        t = pq.read_table(os.path.join(out, entry["file"]))
        assert json.loads(t.schema.metadata[b"bayesbench"])["set_id"] == entry["set_id"]
        assert t.column("sequence").to_pylist() == list(range(48))
        np.testing.assert_array_equal(_column(t, "tokens", (48, 15)), batch.tokens.numpy())
        np.testing.assert_array_equal(_column(t, "mask", (48, 15)), batch.mask.numpy())
        post = _column(t, "posterior", (48, 15, 8))
        assert post.dtype == np.float32
        np.testing.assert_array_equal(post, batch.posterior.numpy())  # bit for bit
        np.testing.assert_array_equal(_column(t, "latent_perm", (48, 8)), batch.latents["perm"].numpy())
        np.testing.assert_array_equal(_column(t, "targets", (48, 15)), batch.targets.numpy())
    assert manifest["sets"][0]["scored_per_sequence"] == [7] and manifest["sets"][1]["scored_per_sequence"] == [8]


def test_the_card_names_every_column_and_the_sets(tmp_path):
    out = str(tmp_path / "hmm")
    manifest = export("hmm", out=out, sequences=16, evals=["K=30"])
    card = open(os.path.join(out, "README.md")).read()
    (entry,) = manifest["sets"]
    t = pq.read_table(os.path.join(out, entry["file"]))
    for name in t.column_names:
        assert f"| `{name}` |" in card, name
    assert "the hidden path s_1..s_K" in card and entry["set_id"] in card and "soft targets" in card
    assert "targets" not in t.column_names  # the quick HMM trains on soft targets: the posterior itself
    assert entry["header"] == [10, 5] and entry["seq_len"] == 40 and entry["name"] == "K=30"
    assert card.startswith("---\n") and '  - split: "K_30"\n    path: "K_30.parquet"' in card


def test_the_hf_format_loads_with_datasets_and_holds_the_same_numbers(tmp_path):
    datasets = pytest.importorskip("datasets")
    out = str(tmp_path / "sticky")
    manifest = export("sticky", out=out, sequences=20, fmt="hf")
    (entry,) = manifest["sets"]
    loaded = datasets.load_from_disk(out)
    assert list(loaded) == ["standard"] and loaded["standard"].num_rows == 20
    rows = loaded["standard"].with_format("torch")[:]
    batch = eval_set(get_task("sticky", V=8, L=32), 20)
    assert torch.equal(rows["tokens"], batch.tokens) and torch.equal(rows["posterior"], batch.posterior)
    assert torch.equal(rows["latent_rho"], batch.latents["rho"])
    assert entry["set_id"] in loaded["standard"].info.description


def test_curve_and_train_splits_are_the_curve_set_and_a_training_seed_stream(tmp_path):
    curve = export("bijection", out=str(tmp_path / "c"), split="curve", sequences=12)
    (c,) = curve["sets"]
    values = get_task("bijection", V=8, variant="code", L=7, supervise="values")
    t = pq.read_table(str(tmp_path / "c" / "curve.parquet"))
    np.testing.assert_array_equal(_column(t, "tokens", (12, 15)), curve_batch(values, 12).tokens.numpy())
    assert c["seed"] == eval_seed(values, "curve")
    assert c["set_id"] == c["key"]["set_id"] == eval_set_id(values, 12, eval_seed(values, "curve"))
    train = export("bijection", out=str(tmp_path / "t"), split="train", sequences=10, seed=3)
    (s,) = train["sets"]
    assert s["seed"] == data_seed(3) < 2**61 <= c["seed"]  # the training domain, apart from every evaluation seed
    drawn = QUICK_BIJECTION.sample(10, torch.Generator().manual_seed(data_seed(3)))
    t = pq.read_table(str(tmp_path / "t" / "train.parquet"))
    np.testing.assert_array_equal(_column(t, "tokens", (10, 15)), drawn.tokens.numpy())
    assert s["task_config"]["supervise"] == "both"  # the training task: values and the query supervised


def test_an_outside_tunnel_is_exported_with_its_file_contents_as_its_version(tmp_path):
    out = str(tmp_path / "coin")
    manifest = export(f"{TUNNEL}:build", task_args={"L": 6}, out=out, sequences=8)
    (entry,) = manifest["sets"]
    task = outside_task(f"{TUNNEL}:build", {"L": 6})
    assert entry["set_id"] == eval_set_id(task, 8) and "contents" in json.loads(entry["key"]["tunnel_code"])
    assert entry["tunnel_code"] == task.code() and entry["key"]["tunnel"] == "coin"


def test_the_command_prints_the_sets_and_refuses_what_it_cannot_do(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["data", "export", "sticky", "--sequences", "8"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("wrote data/sticky-eval (parquet, ") and "standard: 8 sequences of 32 tokens" in text
    assert main(["data", "export", "sticky", "--sequences", "9"]) == 0  # an earlier export is replaced
    assert read_manifest("data/sticky-eval")["sets"][0]["n_sequences"] == 9
    capsys.readouterr()
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "mine.txt").write_text("x")
    for argv, message in (
            (["sticky", "--out", "busy"], "--out busy is not empty (it holds mine.txt) and holds no bayesbench export"),
            (["sticky", "--split", "train"], "--split train needs --sequences N"),
            (["bijection", "--eval", "query"], "--eval query: bijection V=8 L=7 repl has the evaluation sets values, "
                                               "values+query"),
            (["sticky", "--split", "curve", "--eval", "standard"], "--eval names evaluation sets: it goes with --split "
                                                                   "eval"),
            (["nope"], "task 'nope' is not in preset 'quick'"),
            (["sticky", "--seed", "2"], "--seed picks a training-data stream: it goes with --split train"),
            (["sticky", "--task-args", "V=1"], "--task-args for task 'sticky'")):
        assert main(["data", "export", *argv]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, (argv, err)
    assert (tmp_path / "busy" / "mine.txt").exists()


def test_an_empty_out_a_repeated_eval_and_a_seed_beyond_int64_are_refused(tmp_path, capsys, monkeypatch):
    """`--out ""` (an unset shell variable) wrote to the default folder, replacing the export there;
    `--eval values --eval values` wrote the set twice into the manifest; `--seed 2**64` (no model
    has it) drew the stream of another seed, silently."""
    monkeypatch.chdir(tmp_path)
    for argv, message in ((["sticky", "--sequences", "4", "--out", ""], "--out must name a folder, got an empty path"),
                          (["bijection", "--sequences", "4", "--eval", "values", "--eval", "values"],
                           "--eval values is given twice"),
                          (["sticky", "--split", "train", "--sequences", "4", "--seed", str(2**64)],
                           f"--seed must be an integer in [0, {2**63 - 1}]"),
                          (["sticky", "--split", "train", "--sequences", "4", "--seed", "-1"],
                           "--seed must be an integer in [0, ")):
        assert main(["data", "export", *argv]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, (argv, err)
    assert not (tmp_path / "data").exists()
    assert main(["data", "export", "sticky", "--split", "train", "--sequences", "4", "--seed", str(2**63 - 1)]) == 0


def test_an_unwritable_out_is_refused_naming_it(tmp_path, capsys, monkeypatch):
    """A read-only place for --out was an OSError naming the temporary folder (exit 1)."""
    makedirs = os.makedirs

    def read_only(path, *args, **kwargs):
        if ".tmp" in os.path.basename(str(path)):
            raise OSError(30, "Read-only file system")
        return makedirs(path, *args, **kwargs)

    monkeypatch.setattr(os, "makedirs", read_only)
    out = tmp_path / "sets"
    assert main(["data", "export", "sticky", "--sequences", "4", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"--out {out}: nothing can be written in {tmp_path} (Read-only file system)" in err and "\n" not in err


def _folder(path, text):
    path.mkdir()
    (path / "what.txt").write_text(text)


def test_a_signal_between_the_two_renames_puts_the_earlier_folder_back(tmp_path, monkeypatch):
    """Ctrl-C after the earlier export was moved aside and before the new one took its place left
    no folder at --out (the earlier one under out.old<pid>)."""
    from bayesbench.running import outfolder as module

    out, tmp = tmp_path / "out", tmp_path / "out.tmp1"
    _folder(out, "earlier")
    _folder(tmp, "new")
    replace = os.replace

    def interrupted(src, dst):
        if str(src) == str(tmp):
            raise KeyboardInterrupt
        return replace(src, dst)

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        module.replace_folder(str(tmp), str(out))
    assert (out / "what.txt").read_text() == "earlier"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "out.tmp1"]


def test_a_folder_another_writer_put_at_out_meanwhile_is_replaced_not_an_error(tmp_path, monkeypatch):
    """Two exports to one --out: the second writer's folder arriving between the first one's renames
    made its last rename fail (directory not empty), losing its export with an OSError."""
    from bayesbench.running import outfolder as module

    out, tmp = tmp_path / "out", tmp_path / "out.tmp1"
    _folder(out, "earlier")
    _folder(tmp, "mine")
    replace, raced = os.replace, []

    def racing(src, dst):
        if str(src) == str(tmp) and not raced:
            raced.append(True)
            _folder(out, "the other writer's")  # lands after ours moved the earlier one aside
        return replace(src, dst)

    monkeypatch.setattr(os, "replace", racing)
    module.replace_folder(str(tmp), str(out))
    assert raced and (out / "what.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


# ---------------------------------------------------------------- only bayesbench's own files are deleted


def _fails(capsys, argv, code=2) -> str:
    assert main(["data", "export", *argv]) == code, argv
    err = capsys.readouterr().err.strip()
    assert "\n" not in err, err
    return err


def test_a_user_file_in_an_earlier_export_is_kept_and_the_export_refused_naming_it(tmp_path, capsys):
    """probe issue 39: re-exporting into an earlier export's folder deleted the user's files there."""
    out = tmp_path / "bij"
    assert main(["data", "export", "sticky", "--sequences", "4", "--out", str(out)]) == 0
    assert set(read_manifest(str(out))["files"]) == {"README.md", "standard.parquet"}
    (out / "my_predictions.parquet").write_text("mine")
    err = _fails(capsys, ["sticky", "--sequences", "5", "--out", str(out)])
    assert f"--out {out} holds my_predictions.parquet, which bayesbench did not write" in err
    assert (out / "my_predictions.parquet").read_text() == "mine"
    assert read_manifest(str(out))["sets"][0]["n_sequences"] == 4
    os.remove(out / "my_predictions.parquet")
    assert main(["data", "export", "sticky", "--sequences", "5", "--out", str(out)]) == 0  # only its own: replaced
    assert sorted(os.listdir(tmp_path)) == ["bij"]


def test_a_folder_with_a_foreign_bayesbench_json_keeps_its_contents(tmp_path, capsys):
    """Any folder holding a file named bayesbench.json counted as an export and lost its other files."""
    out = tmp_path / "project"
    out.mkdir()
    (out / "bayesbench.json").write_text('{"db": "mine"}')
    (out / "notes.md").write_text("mine")
    err = _fails(capsys, ["sticky", "--sequences", "4", "--out", str(out)])
    assert f"--out {out}: its bayesbench.json is not one bayesbench wrote" in err
    assert sorted(os.listdir(out)) == ["bayesbench.json", "notes.md"]


def test_out_dot_is_one_line(tmp_path, capsys, monkeypatch):
    """`--out .` was a raw errno (exit 1)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.txt").write_text("x")
    err = _fails(capsys, ["sticky", "--sequences", "4", "--out", "."])
    assert "--out . is the current folder or holds it" in err
    assert os.listdir(tmp_path) == ["mine.txt"]
    assert not [p for p in os.listdir(tmp_path.parent) if p.startswith(tmp_path.name + ".")]  # no tmp beside it


def test_a_killed_exports_temporary_folder_is_removed_by_the_next_export(tmp_path, capsys):
    """kill -9 during an export left out.tmp<pid>/ that nothing removed."""
    import subprocess
    import sys

    from bayesbench.running.outfolder import STAMP

    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)
    stale = tmp_path / f"sets.tmp{dead}"
    stale.mkdir()
    (stale / STAMP).write_text("")
    (stale / "standard.parquet").write_text("partial")
    assert main(["data", "export", "sticky", "--sequences", "4", "--out", str(tmp_path / "sets")]) == 0
    assert sorted(os.listdir(tmp_path)) == ["sets"]


def test_parquet_and_hf_exports_to_their_default_folders_both_stay(tmp_path, capsys, monkeypatch):
    """Both formats defaulted to data/<task>-<split>: the second export replaced the first."""
    pytest.importorskip("datasets")
    monkeypatch.chdir(tmp_path)
    assert main(["data", "export", "sticky", "--sequences", "4"]) == 0
    assert main(["data", "export", "sticky", "--sequences", "4", "--format", "hf"]) == 0
    text = capsys.readouterr().out
    assert "wrote data/sticky-eval-hf (hf, " in text
    assert read_manifest("data/sticky-eval")["format"] == "parquet"
    assert read_manifest("data/sticky-eval-hf")["format"] == "hf"


def test_a_full_disk_names_the_folder_and_keeps_the_earlier_export(tmp_path, capsys, monkeypatch):
    """A full disk was the raw '[Errno 28] No space left on device' without the path."""
    import errno

    out = tmp_path / "sets"
    assert main(["data", "export", "sticky", "--sequences", "4", "--out", str(out)]) == 0
    before = sorted(os.listdir(out))

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pq, "write_table", full)
    err = _fails(capsys, ["sticky", "--sequences", "5", "--out", str(out)], code=1)
    assert err.startswith(f"bayesbench data export: no space left on device: {out} (nothing already written")
    assert sorted(os.listdir(out)) == before and sorted(os.listdir(tmp_path)) == ["sets"]


def test_a_hostile_task_option_stays_inside_the_cards_strings(tmp_path):
    """issue 39: a --task-args value with newlines was pasted into the card's YAML front matter (a
    'pretty_name: pwned' key of its own, a '---' ending it) and its markdown."""
    import yaml

    (tmp_path / "noted.py").write_text(
        "import sys\nfrom dataclasses import dataclass\n"
        f"sys.path.insert(0, {os.path.dirname(TUNNEL)!r})\n"
        "from outside_tunnel import CoinTask\n\n"
        "@dataclass(frozen=True)\nclass Noted(CoinTask):\n    note: str = ''\n    name = 'noted'\n\n"
        "def build(**options):\n    return Noted(**options)\n")
    note = 'x`y\npretty_name: pwned\n---\n<script>alert(1)</script> "q"'
    out = tmp_path / "out"
    export(f"{tmp_path / 'noted.py'}:build", task_args={"L": 4, "note": note}, out=str(out), sequences=4)
    card = (out / "README.md").read_text()
    _, front, body = card.split("---\n", 2)
    meta = yaml.safe_load(front)
    assert set(meta) == {"pretty_name", "tags", "configs"} and note in meta["pretty_name"]
    assert meta["configs"][0]["data_files"] == [{"split": "standard", "path": "standard.parquet"}]
    assert "\npretty_name" not in body and "\n---\n" not in body
    heading = next(line for line in body.splitlines() if line.startswith("# "))
    assert "&lt;script&gt;" in heading and "<script>" not in heading  # in code spans it is text, not HTML
    made = next(line for line in body.splitlines() if line.startswith("Made by "))
    assert made.startswith("Made by `` bayesbench data export") and "x`y" in made
