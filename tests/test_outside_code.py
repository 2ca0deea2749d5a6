"""Outside code (bayesbench/outside_code.py) may not change what other jobs of the process compute:
torch's process-wide settings are put back after its import and its factory (`guarded`); and a
module it loads by `importlib.import_module` from its own folder is part of its content key."""

from __future__ import annotations

import random
import textwrap

import pytest
import torch

import bayesbench
from bayesbench import outside_code
from bayesbench.cli import main
from bayesbench.store.database import read_rows

# Changes every process-wide setting a job depends on, at import and again in its factory.
MEDDLER = textwrap.dedent('''
    import random

    import torch
    from torch import nn


    def meddle(dtype=True):
        if dtype:
            torch.set_default_dtype(torch.float64)
        torch.set_num_threads(3)
        torch.manual_seed(1234)
        random.seed(99)
        torch.set_grad_enabled(False)
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.set_float32_matmul_precision("medium")


    meddle()


    class Net(nn.Module):
        def __init__(self, spec):
            super().__init__()
            self.embed = nn.Embedding(spec.vocab_size, 8)
            self.head = nn.Linear(8, spec.num_classes)

        def forward(self, tokens):
            return self.head(self.embed(tokens).cumsum(1))


    def build(spec):
        meddle(dtype=False)  # a float64 model built here is refused at scoring: its key says float32
        return Net(spec)


    def build64(spec):
        torch.set_default_dtype(torch.float64)
        return Net(spec)
''')


def _state() -> tuple:
    return (torch.get_default_dtype(), torch.get_num_threads(), torch.is_grad_enabled(),
            torch.are_deterministic_algorithms_enabled(), torch.get_float32_matmul_precision(),
            torch.get_rng_state().clone(), random.getstate())


def _same_state(a: tuple, b: tuple) -> bool:
    return a[:5] == b[:5] and torch.equal(a[5], b[5]) and a[6] == b[6]


@pytest.fixture
def meddler(tmp_path, monkeypatch):
    (tmp_path / "m.py").write_text(MEDDLER)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _common(db: str, runs: str) -> list[str]:
    return ["--tasks", "sticky", "--steps", "5", "--eval-sequences", "64", "--seeds", "1", "--jobs", "1",
            "--db", db, "--runs-dir", runs, "--no-progress"]


def _mlp(db: str) -> float:
    (row,) = [r for r in read_rows(db) if r["arch"] == "mlp"]
    return row["entropy_mae_bits"]


def test_outside_code_that_changes_global_state_leaves_built_in_rows_unchanged(meddler, capsys):
    """`run --archs mlp ./m.py:build --jobs 1`, m.py setting float64 (threads, seed, grad mode,
    deterministic flags) at import and in build: the mlp's row is the one it has alone."""
    before = _state()
    assert main(["run", "--archs", "mlp", *_common("alone.sqlite", "runs-alone")]) == 0
    alone = _mlp("alone.sqlite")
    assert main(["run", "--archs", "mlp", "./m.py:build", *_common("both.sqlite", "runs-both")]) == 0
    capsys.readouterr()
    assert _mlp("both.sqlite") == alone
    (mine,) = [r for r in read_rows("both.sqlite") if r["arch"] != "mlp"]
    assert mine["entropy_mae_bits"] >= 0  # the outside model itself trained (in float32, as its key says)
    assert _same_state(_state(), before)
    assert main(["run", "--model", "./m.py:build64", *_common("both.sqlite", "runs-both")]) == 2
    assert "m.py:build64: the factory built torch.float64 parameters (rule: a model's parameters are float32" in \
        capsys.readouterr().err
    assert len(read_rows("both.sqlite")) == 2  # nothing stored of it


def test_the_same_through_bayesbench_run_in_one_process(meddler):
    before = _state()
    alone = bayesbench.run(tasks="sticky", archs="mlp", steps=5, seeds=1, eval_sequences=64, jobs=1,
                           db="alone.sqlite", runs_dir="runs-alone", quiet=True)
    both = bayesbench.run(tasks="sticky", archs=["mlp", "./m.py:build"], steps=5, seeds=1, eval_sequences=64, jobs=1,
                          db="both.sqlite", runs_dir="runs-both", quiet=True)
    mlp = [r for r in both if r["arch"] == "mlp"]
    assert [r["entropy_mae_bits"] for r in mlp] == [r["entropy_mae_bits"] for r in alone]
    assert _same_state(_state(), before)


def test_guarded_puts_back_what_outside_code_changed_even_when_it_fails():
    before = _state()
    with pytest.raises(RuntimeError), outside_code.guarded():
        torch.set_default_dtype(torch.float64)
        torch.manual_seed(5)
        torch.set_grad_enabled(False)
        raise RuntimeError("the outside code failed")
    assert _same_state(_state(), before)


def test_scoring_refuses_parameters_other_than_the_key_says(tmp_path):
    net = torch.nn.Sequential(torch.nn.Embedding(64, 8), torch.nn.Linear(8, 8))  # sticky V=8
    with pytest.raises(ValueError, match=r"the factory built torch.float64 parameters \(rule: a model's parameters"):
        bayesbench.evaluate_model(net.double(), "sticky", eval_sequences=64, db=str(tmp_path / "r.sqlite"))
    from bayesbench.scoring.rows import check_as_keyed

    with pytest.raises(ValueError, match=r"its parameters are torch.float64, but its key says float32 \(rule"):
        check_as_keyed(net.double(), {"arch": "net", "device_type": "cpu"})
    with pytest.raises(ValueError, match="its parameters are on cpu, but its key says cuda"):
        check_as_keyed(net.float(), {"arch": "net", "device_type": "cuda"})
    check_as_keyed(net, {"arch": "net", "device_type": "cpu"})  # as keyed: scored


def test_a_helper_loaded_with_import_module_is_in_the_content_key(tmp_path):
    """A helper the file loads by `importlib.import_module` (no import statement names it) is part
    of its contents: editing it is another model, and the edited helper is the one that runs."""
    (tmp_path / "helper_for_key.py").write_text("WIDTH = 3\n")
    (tmp_path / "dyn.py").write_text("import importlib\n\nhelper = importlib.import_module('helper_for_key')\n\n\n"
                                     "def build():\n    return helper.WIDTH\n")
    spec = outside_code.normalise(str(tmp_path / "dyn.py") + ":build", "model", "forms")
    code = outside_code.contents(spec, "model", "forms")
    assert code["files"] == ["dyn.py", "helper_for_key.py"]
    assert outside_code.load(spec, "model", "forms")() == 3
    (tmp_path / "helper_for_key.py").write_text("WIDTH = 4  # edited\n")
    assert outside_code.contents(spec, "model", "forms")["contents"] != code["contents"]
    assert outside_code.load(spec, "model", "forms")() == 4


def test_a_python_sweep_file_that_changes_global_state_changes_nothing_after_it(tmp_path):
    from bayesbench.sweep.sweep_file import load_sweep

    (tmp_path / "s.py").write_text("import torch\ntorch.set_default_dtype(torch.float64)\ntorch.manual_seed(3)\n"
                                   "SWEEP = {'tasks': ['sticky'], 'archs': ['mlp'], 'seeds': [0]}\n")
    before = _state()
    load_sweep(str(tmp_path / "s.py"))
    assert _same_state(_state(), before)


def test_a_helper_imported_first_inside_the_factory_is_refused_naming_it(tmp_path, monkeypatch):
    """A module the factory imports only when called is not seen by `contents` (it imports the
    file, not the factory): what that call built is refused, naming the module and the rule
    (here the folder is on sys.path, as the current directory is for `python -m bayesbench`)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "late_helper.py").write_text("WIDTH = 3\n")
    (tmp_path / "lazy.py").write_text("import importlib\n\n\ndef build():\n"
                                      "    return importlib.import_module('late_helper').WIDTH\n")
    spec = outside_code.normalise(str(tmp_path / "lazy.py") + ":build", "model", "forms")
    with pytest.raises(ValueError, match=r"calling it imported late_helper.py from its folder, which its content key "
                                         r"does not hold \(rule: import the modules it uses when its file is imported"):
        outside_code.load(spec, "model", "forms")()
