"""Outside models on the command line: `run/train --model` by dotted path and by file path
(worker processes import it themselves), the capacity report, `score` from a checkpoint,
`bayesbench.evaluate_model`, and bad input: one line, exit 2, nothing stored."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import textwrap

import pytest
import torch
from rundirs import run_dirs

import bayesbench
from bayesbench.cli import main
from bayesbench.models import count_params
from bayesbench.presets import get_preset
from bayesbench.scoring.trained_elsewhere import model_spec
from bayesbench.store.database import read_rows

MODEL_SRC = textwrap.dedent('''
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self, spec, width=8):
            super().__init__()
            self.embed = nn.Embedding(spec.vocab_size, width)
            self.pos = nn.Embedding(spec.max_len, width)
            self.head = nn.Linear(width, spec.num_classes)
            self.header = nn.Linear(spec.header_dim, width) if spec.header_dim else None

        def forward(self, tokens, header=None):
            x = self.embed(tokens) + self.pos.weight[: tokens.shape[1]]
            if header is not None:
                h = self.header(header)
                x = torch.cat([x[:, : h.shape[1]] + h, x[:, h.shape[1]:]], 1)
            return self.head(x.cumsum(1))


    def build(spec):
        return Net(spec)


    def build_other(spec):
        return Net(spec, width=5)


    def wrong_shape(spec):
        class Flat(Net):
            def forward(self, tokens, header=None):
                return super().forward(tokens, header)[:, 0]
        return Flat(spec)
''')


@pytest.fixture()
def env(tmp_path, monkeypatch):
    pkg = tmp_path / "src" / "mypkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "nets.py").write_text(MODEL_SRC)
    (tmp_path / "mine.py").write_text(MODEL_SRC)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return {"db": str(tmp_path / "r.sqlite"), "runs": str(tmp_path / "runs"), "tmp": tmp_path}


def _mine(env):
    """The user's file mine.py of `env`, imported as a module (as a script beside it would)."""
    sys.path.insert(0, str(env["tmp"]))
    try:
        import mine
    finally:
        sys.path.remove(str(env["tmp"]))
    return mine


def _common(env) -> list[str]:
    return ["--steps", "3", "--eval-sequences", "64", "--db", env["db"], "--runs-dir", env["runs"], "--no-progress"]


def test_run_by_dotted_path_in_worker_processes(capsys, env):
    """Two tasks in two spawned worker processes, each importing mypkg.nets itself."""
    assert main(["run", "--model", "mypkg.nets:build", "--name", "mine", "--tasks", "bijection,hmm",
                 "--seeds", "2", "--jobs", "2", "--threads", "1", *_common(env)]) == 0
    out = capsys.readouterr().out
    transformer = count_params("transformer", model_spec("bijection"),
                               **get_preset("quick").tasks["bijection"].models["transformer"])
    assert "capacity: mine on bijection V=8" in out and f"x the preset's transformer ({transformer:,}" in out
    rows = read_rows(env["db"])
    assert {(r["task"], r["arch"], r["seed"]) for r in rows} == {(t, "mine", s) for t in ("bijection", "hmm")
                                                                  for s in (0, 1)}
    r = rows[0]
    assert r["config"]["model"]["spec"] == "mypkg.nets:build" and r["config"]["model"]["path"] == "vmap"
    assert all(0 <= x["entropy_mae_bits"] < 5 for x in rows)
    assert "| mine " in out and "2: 0,1" in out


def test_train_by_file_beside_the_built_ins_then_score(capsys, env):
    assert main(["train", "--task", "bijection", "--arch", "mlp", "--seeds", "0", *_common(env)]) == 0
    capsys.readouterr()
    assert main(["train", "--model", "./mine.py:build", "--task", "bijection", "--seeds", "0,1", *_common(env)]) == 0
    out = capsys.readouterr().out
    assert "capacity: mine on bijection V=8" in out and "| mine " in out
    assert main(["leaderboard", "--db", env["db"]]) == 0
    board = capsys.readouterr().out
    assert "| mine " in board and "| mlp " in board
    (run_dir,) = run_dirs(["train", "--model", "./mine.py:build", "--task", "bijection", "--seeds", "0,1",
                           *_common(env)])
    ckpt = os.path.join(run_dir, "checkpoint.pt")
    capsys.readouterr()  # the capacity line run_dirs' expansion printed
    assert os.path.exists(ckpt)
    trained = {r["seed"]: r for r in read_rows(env["db"], where="arch = 'mine'")}
    # scoring the run's own checkpoint again re-scores that run: its rows are replaced, not pooled as more seeds
    for _ in range(2):
        assert main(["score", "--model", "./mine.py:build", "--checkpoint", ckpt, "--eval-sequences", "64",
                     "--db", env["db"], "--json"]) == 0
        rescored = json.loads(capsys.readouterr().out)["runs"]
        again = read_rows(env["db"], where="arch = 'mine'")
        assert sorted(r["seed"] for r in again) == [0, 1]
        assert {r["run_id"] for r in again} == {trained[0]["run_id"]}
        assert all(r["steps"] == 3 and r["wall_s"] == trained[r["seed"]]["wall_s"] for r in rescored)
    assert main(["leaderboard", "--db", env["db"], "--arch", "mine"]) == 0
    assert "| 2: 0,1 |" in capsys.readouterr().out
    # under another name: stored once under that name, every member, steps and wall time kept
    for _ in range(2):
        assert main(["score", "--model", "./mine.py:build", "--checkpoint", ckpt, "--name", "mine-again",
                     "--eval-sequences", "64", "--db", env["db"], "--json"]) == 0
        scored = json.loads(capsys.readouterr().out)["runs"]
    assert [r["seed"] for r in scored] == [0, 1] and all(r["steps"] == 3 for r in scored)
    assert len(read_rows(env["db"], where="arch = 'mine-again'")) == 2
    for r in scored:
        assert r["arch"] == "mine-again" and r["wall_s"] == trained[r["seed"]]["wall_s"]
        assert r["entropy_mae_bits"] == pytest.approx(trained[r["seed"]]["entropy_mae_bits"], rel=1e-9)


def test_score_a_plain_state_dict_and_evaluate_model(capsys, env):
    mine = _mine(env)
    from bayesbench.models import TaskShape

    torch.manual_seed(5)
    net = mine.build(bayesbench.model_spec("bijection"))  # the quick preset's bijection, as --task scores it
    torch.save(net.state_dict(), env["tmp"] / "mine.pt")
    for _ in range(2):  # scoring the same file again replaces its row
        assert main(["score", "--model", "./mine.py:build", "--checkpoint", "mine.pt", "--task", "bijection",
                     "--eval-sequences", "64", "--db", env["db"]]) == 0
        assert "| mine " in capsys.readouterr().out
        stored = read_rows(env["db"])
        assert len(stored) == 1 and stored[0]["steps"] == 0 and stored[0]["config"]["train"] is None
    # the Python API on the same module: the same numbers, returned (and stored under its name)
    records = bayesbench.evaluate_model(net, "bijection", name="mine-py", db=env["db"], eval_sequences=64)
    assert len(records) == 1 and records[0].entropy_mae_bits == pytest.approx(stored[0]["entropy_mae_bits"])
    curve = records[0].curves[records[0].primary]
    assert len(curve.position) == len(curve.entropy_mae) == len(curve.kl) == len(curve.model_entropy) > 0
    assert records[0].kl_bits > 0 and records[0].headline.kl.ci_low <= records[0].kl_bits
    assert len(read_rows(env["db"])) == 2
    for bad in (0, -1, 2.5):  # before: 0 silently meant the preset's 4096
        with pytest.raises(ValueError, match="eval_sequences must be a positive integer"):
            bayesbench.evaluate_model(net, "bijection", name="mine-py", db=env["db"], eval_sequences=bad)
    hmm = bayesbench.evaluate_model(mine.build(model_spec("hmm")), "hmm", name="mine-hmm", db=env["db"],
                                    eval_sequences=32)
    assert set(hmm[0].evals) == {"K=20", "K=30", "K=50"} and hmm[0].permutation is not None
    from bayesbench.tasks import task_from_config

    trained_length = TaskShape.from_task(task_from_config(get_preset("quick").tasks["hmm"].task))
    short = mine.build(trained_length)  # positions for K = 20 only, not K = 50
    longest = model_spec("hmm").max_len
    with pytest.raises(ValueError, match=rf"forward failed on a random trial batch of tokens \[B=2, L={longest}\]"):
        bayesbench.evaluate_model(short, "hmm", name="short", db=env["db"], eval_sequences=32)
    assert len(read_rows(env["db"])) == 3


def test_score_of_weights_that_are_not_finite_names_the_weights(capsys, env):
    mine = _mine(env)
    net = mine.build(bayesbench.model_spec("bijection"))
    torch.save({k: torch.full_like(v, float("nan")) for k, v in net.state_dict().items()}, env["tmp"] / "nan.pt")
    _fails(capsys, env, ["score", "--model", "./mine.py:build", "--checkpoint", "nan.pt", "--task", "bijection",
                         "--db", env["db"]],
           "contain NaN or inf on a random trial batch (the given modules' own weights)")


def _fails(capsys, env, argv, match):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert match in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert not os.path.exists(env["db"]) or not sqlite3.connect(env["db"]).execute(
        "SELECT name FROM sqlite_master WHERE name = 'runs'").fetchone() or not read_rows(env["db"])


def test_bad_input_is_one_line_and_stores_nothing(capsys, env):
    common = _common(env)
    _fails(capsys, env, ["run", "--model", "mypkg.nope:build", "--tasks", "bijection", *common],
           "cannot import module 'mypkg.nope'")
    _fails(capsys, env, ["run", "--model", "mypkg.nets:nothing", "--tasks", "bijection", *common],
           "has no attribute 'nothing'")
    _fails(capsys, env, ["run", "--model", "./missing.py:build", "--tasks", "bijection", *common], "no such file")
    _fails(capsys, env, ["run", "--model", "mypkg.nets", "--tasks", "bijection", *common],
           "must be 'package.module:factory'")
    _fails(capsys, env, ["train", "--model", "./mine.py:wrong_shape", "--task", "bijection", *common],
           f"expected [B=2, L={bayesbench.model_spec('bijection').max_len}, C=8]")
    _fails(capsys, env, ["train", "--model", "./mine.py:build", "--name", "gru", "--task", "bijection", *common],
           "is a built-in architecture")
    _fails(capsys, env, ["train", "--model", "./mine.py:build", "--arch", "gru", "--task", "bijection", *common],
           "exactly one of --arch")
    _fails(capsys, env, ["run", "--model", "./mine.py:build", "--archs", "gru", *common], "not both")
    _fails(capsys, env, ["run", "--model", "hf:bert", "--tasks", "bijection", *common], "unknown Hugging Face")
    # a checkpoint of another architecture (width 5 instead of 8), and a file that is no checkpoint

    mine = _mine(env)
    torch.save(mine.build_other(bayesbench.model_spec("bijection")).state_dict(), "other.pt")
    score = ["score", "--model", "./mine.py:build", "--task", "bijection", "--db", env["db"]]
    _fails(capsys, env, [*score, "--checkpoint", "other.pt"], "holds another architecture")
    (env["tmp"] / "junk.pt").write_text("not a checkpoint")
    # issue 29, section 3: torch's advice that weights_only=False "will likely succeed" was passed on
    _fails(capsys, env, [*score, "--checkpoint", "junk.pt"], "--checkpoint junk.pt is not a checkpoint or a state dict "
           "(16 bytes: not a file torch.save wrote)")
    torch.save(mine.build(bayesbench.model_spec("bijection")), "whole.pt")  # the module, not its state dict
    _fails(capsys, env, [*score, "--checkpoint", "whole.pt"], "--checkpoint whole.pt is not a checkpoint or a state "
           "dict (pickled Python objects, not only tensors: mine.Net; save module.state_dict() rather than the module)")
    (env["tmp"] / "empty.pt").write_bytes(b"")
    _fails(capsys, env, [*score, "--checkpoint", "empty.pt"], "--checkpoint empty.pt is not a checkpoint or a state "
           "dict (the file is empty)")
    err = capsys.readouterr().err
    assert "weights_only" not in err and "likely succeed" not in err
    _fails(capsys, env, ["score", "--model", "./mine.py:build", "--checkpoint", "other.pt", "--db", env["db"]],
           "--task is needed")
    # NaN weights: the trial forward refuses them
    bad = mine.build(bayesbench.model_spec("bijection")).state_dict()
    bad["head.bias"].fill_(float("nan"))
    torch.save(bad, "nan.pt")
    _fails(capsys, env, [*score, "--checkpoint", "nan.pt"], "NaN or inf")


def test_evaluate_model_refuses_an_ensemble_without_the_seed_dimension(env):
    """An ensemble-native model must return [E, B, L, C]; one that drops the seed dimension (or
    gives NaN) is refused before anything is stored."""
    from bayesbench.models import get_model
    from bayesbench.tasks import get_task

    task = get_task("bijection", V=8)
    model = get_model("mlp", task, seeds=[0, 1], depth=1, width=8)

    class NoSeedDim(type(model)):
        def forward(self, tokens, header=None):
            return super().forward(tokens, header).mean(0)

    model.__class__ = NoSeedDim
    with pytest.raises(ValueError, match=r"one slice per member: the seed dimension first"):
        bayesbench.evaluate_model(model, "bijection", name="noseed", db=env["db"], eval_sequences=32)
    model.__class__ = NoSeedDim.__mro__[1]
    with torch.no_grad():
        model.head.bias[1].fill_(float("nan"))
    with pytest.raises(ValueError, match=r"member\(s\) \[1\] contain NaN"):
        bayesbench.evaluate_model(model, "bijection", name="nan", db=env["db"], eval_sequences=32)
    assert not os.path.exists(env["db"]) or read_rows(env["db"]) == []


GRU_SRC = textwrap.dedent('''
    from torch import nn


    class Mine(nn.Module):  # the README's model: torch.nn.GRU cannot be vmapped
        def __init__(self, spec, width=8):
            super().__init__()
            self.embed = nn.Embedding(spec.vocab_size, width)
            self.rnn = nn.GRU(width, width, batch_first=True)
            self.head = nn.Linear(width, spec.num_classes)

        def forward(self, tokens):
            return self.head(self.rnn(self.embed(tokens))[0])


    build = Mine
''')


def test_a_factory_that_fails_on_model_args_names_the_flag_and_the_factory(capsys, env):
    """Issue 29, section 3: `--model ./mine.py:build --model-args width=0` printed torch's "input_size
    must be greater than zero", naming neither the flag nor the factory."""
    (env["tmp"] / "mygru.py").write_text(GRU_SRC)
    _fails(capsys, env, ["train", "--model", "./mygru.py:build", "--model-args", "width=0", "--task", "bijection",
                         *_common(env)],
           f"--model-args width=0: {env['tmp'] / 'mygru.py'}:build: the factory raised ValueError: input_size must be "
           "greater than zero")
    _fails(capsys, env, ["train", "--model", "./mygru.py:build", "--model-args", "depth=2", "--task", "bijection",
                         *_common(env)], "--model-args depth=2: bad configuration for model")


def test_the_loop_note_counts_the_members_that_train(capsys, env):
    """Issue 29, section 3: one seed was reported as "runs its 2 members in a loop" (the trial forward's
    two members, not the job's)."""
    (env["tmp"] / "mygru.py").write_text(GRU_SRC)
    assert main(["train", "--model", "./mygru.py:build", "--task", "sticky", "--seeds", "0", *_common(env)]) == 0
    out, err = capsys.readouterr()
    assert "2 members" not in out + err and "in a loop" not in err, err
    assert "forward: one forward call for its 1 member (vmap over members fails:" in out, out
    (env["tmp"] / "mygru3.py").write_text(GRU_SRC)  # another file: the note is said once per model and process
    assert main(["train", "--model", "./mygru3.py:build", "--task", "sticky", "--seeds", "0,1,2", *_common(env)]) == 0
    out, err = capsys.readouterr()
    assert "runs its 3 members in a loop" in err and "2 members" not in out + err, err
    assert "forward: a loop over its 3 members, one call each (vmap failed:" in out, out
