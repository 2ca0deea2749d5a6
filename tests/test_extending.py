"""Extending bayesbench is adding one module: a throwaway architecture, tunnel and final metric,
written to a temporary file and imported, run through `bayesbench run` and `bayesbench.run` end
to end with no other edit (no preset entry, no table in the registry, no test to extend), and
are gone from every registry afterwards (docs/layout.md, "Where each kind of change goes")."""

from __future__ import annotations

import importlib
import json
import sys
import textwrap

import pytest

import bayesbench
from bayesbench.cli import main
from bayesbench.metric_table import METRICS, final_metrics, registered_metrics
from bayesbench.models import list_models
from bayesbench.models.registry import registered_models
from bayesbench.tasks import list_tasks
from bayesbench.tasks.registry import registered_tasks

MODULE = "bayesbench_throwaway_extension"  # imported from tmp_path; no other test uses the name
ARCH, TUNNEL, METRIC = "bow", "coin-laplace", "entropy_bias_extension"

# One module, as a user writes it: an architecture (a bag of embeddings, capacity-matchable through
# `match_params` like every built-in one) and a tunnel with an exact posterior (a coin of uniform bias:
# Laplace's rule of succession is the exact predictive), and a final metric (the signed entropy error).
SOURCE = '''
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from bayesbench.models.base import EnsembleModel, TaskShape
from bayesbench.models.capacity import fit_width, meta_params
from bayesbench.models.layers import EnsembleEmbedding, EnsembleLinear
from bayesbench.metric_table import Metric, register
from bayesbench.models.registry import register_model
from bayesbench.tasks.base import Batch, batch_device, check_batch_size
from bayesbench.tasks.next_symbol import NextSymbolTask, next_symbol_batch
from bayesbench.tasks.registry import register_task


class BagOfEmbeddings(EnsembleModel):
    """Position t sees the mean embedding of tokens 0..t, then a linear head."""

    def __init__(self, shape: TaskShape, ensemble: int, width: int) -> None:
        super().__init__(shape, ensemble)
        self.embed = EnsembleEmbedding(ensemble, shape.vocab_size, width)
        self.head = EnsembleLinear(ensemble, width, shape.num_classes)

    def forward(self, tokens: Tensor, header: Tensor | None = None) -> Tensor:
        self.check_inputs(tokens, header)
        n = torch.arange(1, tokens.shape[2] + 1, device=tokens.device).view(1, 1, -1, 1)
        return self.head(self.embed(tokens).cumsum(2) / n)


@register_model("bow", "bag of embeddings: the prefix's mean embedding, a linear head")
def build_bow(shape: TaskShape, ensemble: int, match_params: int | None = None, width: int = 16):
    if match_params is not None:
        width = fit_width(lambda w: meta_params(lambda: BagOfEmbeddings(shape, 1, w)), int(match_params))
    return BagOfEmbeddings(shape, ensemble, width)


@register_task("coin-laplace")
@dataclass(frozen=True)
class CoinTask(NextSymbolTask):
    """A coin of bias p ~ Uniform(0, 1) tossed L times: P(heads next) = (1 + heads) / (2 + tosses)."""

    V: int = 2
    L: int = 8

    name = "coin-laplace"

    def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32) -> Batch:
        B, L = check_batch_size(batch_size), self.L
        dev = batch_device(generator, device)
        p = torch.rand((B, 1), generator=generator, device=dev, dtype=torch.float64)
        x = (torch.rand((B, L), generator=generator, device=dev, dtype=torch.float64) < p).long()
        t = torch.arange(1, L + 1, device=dev, dtype=torch.float64)
        heads = (1 + x.cumsum(1)) / (2 + t)
        predictive = torch.stack([1 - heads, heads], -1).to(dtype)
        return next_symbol_batch(x, predictive, {"p": p.squeeze(1).to(dtype)})


def _entropy_bias(p, plogp, h_p, log_q, h_q):
    return h_q - h_p  # signed: above 0 a model too unsure, below 0 too sure


register(Metric("entropy_bias_extension", "mean H(model) - H(Bayes) per (sequence, position), signed",
                "entropy bias", _entropy_bias, lower=None))
'''


@pytest.fixture
def extension(tmp_path):
    """The throwaway module imported from tmp_path: (arch, tunnel, metrics) registered for the test
    and unregistered after it, with the module and its path gone (no state leaks into other tests)."""
    assert ARCH not in list_models() and TUNNEL not in list_tasks() and METRIC not in METRICS
    (tmp_path / f"{MODULE}.py").write_text(textwrap.dedent(SOURCE))
    sys.path.insert(0, str(tmp_path))
    try:
        with registered_models(), registered_tasks(), registered_metrics():
            importlib.import_module(MODULE)
            assert final_metrics()[-1] == METRIC
            yield ARCH, TUNNEL, METRIC
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(MODULE, None)
    assert ARCH not in list_models() and TUNNEL not in list_tasks() and METRIC not in METRICS


TINY = ["--steps", "3", "--seeds", "1", "--eval-sequences", "64", "--curve-sequences", "32", "--jobs", "1"]


def test_a_new_architecture_tunnel_and_metric_run_end_to_end_with_no_other_edit(extension, tmp_path, capsys):
    arch, tunnel, metric = extension
    db, runs = str(tmp_path / "x.sqlite"), str(tmp_path / "runs")
    # the command line: the new architecture on a preset task and on the new tunnel, against the transformer
    assert main(["run", "--tasks", "sticky", tunnel, "--archs", "transformer", arch, *TINY,
                 "--db", db, "--runs-dir", runs]) == 0
    # the Python API: the new architecture on the new tunnel with one of its settings changed
    rows = bayesbench.run(tasks=tunnel, archs=arch, task_args={"L": 6}, steps=3, seeds=1, eval_sequences=64,
                          curve_sequences=32, jobs=1, db=db, runs_dir=runs, quiet=True)
    assert {(r["task_label"], r["arch"]) for r in rows} == {(f"{tunnel} V=2 L=6", arch)}
    capsys.readouterr()
    assert main(["leaderboard", "--db", db, "--json"]) == 0
    board = json.loads(capsys.readouterr().out)
    text = json.dumps(board)
    for label in ("sticky V=8 L=32", f"{tunnel} V=2 L=8", f"{tunnel} V=2 L=6"):
        assert label in text, label
    assert main(["leaderboard", "--db", db]) == 0
    table = capsys.readouterr().out
    assert arch in table and f"{tunnel} V=2 L=8" in table and f"{tunnel} V=2 L=6" in table
    records = bayesbench.records(db)
    ran = {(r["task_label"], r["arch"]) for r in records}
    assert ran == {("sticky V=8 L=32", "transformer"), ("sticky V=8 L=32", arch),
                   (f"{tunnel} V=2 L=8", "transformer"), (f"{tunnel} V=2 L=8", arch), (f"{tunnel} V=2 L=6", arch)}
    # capacity-matched to the transformer of the task, as every built-in architecture is by default
    params = {(r["task_label"], r["arch"]): r["params"] for r in records}
    for label in ("sticky V=8 L=32", f"{tunnel} V=2 L=8"):
        assert abs(params[(label, arch)] - params[(label, "transformer")]) <= 0.01 * params[(label, "transformer")]
    # a run of them replays (`--replay RUN`: the same job, served from the store)
    run_dir = next(str(path.parent) for path in (tmp_path / "runs").rglob("run.json")
                   if f"{tunnel}-{arch}" in path.parent.name)
    assert main(["run", "--replay", run_dir, "--db", db, "--runs-dir", runs]) == 0
    assert len(bayesbench.records(db)) == len(records)
    # the new final metric: a value on every stored row, in the rows bayesbench.run returns and in
    # every run and evaluation of leaderboard --json
    assert all(r.get(f"{metric}_bits") is not None for r in records)
    assert all(r.get(f"{metric}_bits") is not None for r in rows)
    for run in board["runs"]:
        assert run[f"{metric}_bits"] is not None
        assert all(f"{metric}_bits" in ev for ev in run["evals"].values())
