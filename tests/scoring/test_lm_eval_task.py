"""bayesbench as an lm-evaluation-harness task (scoring/lm_eval_task.py, the task files in
scoring/lm_eval_tasks/): run through lm-eval's Python API on a tiny GPT-2 built here (nothing
downloaded), its metrics equal `bayesbench llm`'s on the same sequences.

The tokenizer has no BOS (lm-eval's `hf` model does not put one first where the tokenizer does
not add it; `bayesbench llm` puts a tokenizer's BOS first: equal where there is none)."""

from __future__ import annotations

import json

import pytest

from bayesbench.scoring import llm
from bayesbench.scoring.lm_eval_task import LM_EVAL_VERSION, documents, folder, scores
from tests.scoring.llm_fixtures import tiny_gpt2, word_tokenizer

SEQUENCES = 4
#: lm-eval and `bayesbench llm` read the same float32 forward passes, batched and padded
#: differently: their means agree to float32 rounding, far inside this (bits).
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def folder_no_bos(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("lm-no-bos"))
    tok = word_tokenizer([str(i) for i in range(16)] + ["</s>"], d, bos=False)
    tok.eos_token = "</s>"  # lm-eval's hf model reads an EOS (its prefix token)
    tok.save_pretrained(d)
    tiny_gpt2(d, len(tok))
    return d


def test_the_pinned_version_is_the_installed_one():
    import lm_eval

    assert lm_eval.__version__ == LM_EVAL_VERSION


def test_documents_are_the_evaluation_sets_scored_positions():
    docs = documents("bijection", sequences=2)
    assert len(docs) == 2 * 7  # the quick bijection: 7 scored positions per sequence
    assert docs[0]["context"].split() == [docs[0]["context"]] and len(docs[0]["choices"]) == 8
    assert all(abs(sum(d["posterior"]) - 1) < 1e-6 for d in docs)
    sula = documents("sula", sequences=2)
    assert {len(d["choices"]) for d in sula} == {2} and len(sula) == 2 * 7


def test_scores_are_zero_at_the_posterior_and_count_the_outside_mass():
    import math

    s = scores([0.25, 0.75], [math.log(0.125), math.log(0.375)])  # the posterior, with half the mass outside
    assert s["entropy_error_bits"] == pytest.approx(0, abs=1e-12) and s["kl_bits"] == pytest.approx(0, abs=1e-12)
    assert s["outside_mass"] == pytest.approx(0.5, abs=1e-12)


def test_lm_eval_task_equals_bayesbench_llm(tmp_path, folder_no_bos):
    import lm_eval
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=folder(), include_defaults=False, metadata={"sequences": SEQUENCES})
    out = lm_eval.simple_evaluate(model="hf", model_args=f"pretrained={folder_no_bos},dtype=float32",
                                  tasks=["bayesbench_bijection"], task_manager=manager, device="cpu", batch_size=8,
                                  log_samples=True)
    res = out["results"]["bayesbench_bijection"]
    (rec,) = llm.score_lm(folder_no_bos, "bijection", sequences=SEQUENCES, store=False, name="tiny")
    ev = rec.evaluation.evals[rec.evaluation.primary]
    assert abs(res["entropy_error_bits,none"] - ev.scores["entropy_mae"].mean) < TOLERANCE
    assert abs(res["kl_bits,none"] - ev.scores["kl"].mean) < TOLERANCE
    want_outside = rec.config["llm"]["outside_mass"][0]["outside_mass_mean"]
    assert abs(res["outside_mass,none"] - want_outside) < TOLERANCE
    samples = out["samples"]["bayesbench_bijection"]
    assert len(samples) == SEQUENCES * 7 and {"entropy_error_bits", "kl_bits"} <= set(samples[0])
    # lm-eval's own results JSON and --log_samples files, as its command line writes them
    tracker = EvaluationTracker(output_path=str(tmp_path / "out"))
    tracker.save_results_aggregated(results=out, samples=out["samples"])
    tracker.save_results_samples(task_name="bayesbench_bijection", samples=samples)
    written = sorted(p.name.split("_")[0] for p in (tmp_path / "out").rglob("*.json*"))
    assert written == ["results", "samples"]
    results_file = next((tmp_path / "out").rglob("results_*.json"))
    assert "kl_bits,none" in json.loads(results_file.read_text())["results"]["bayesbench_bijection"]


def test_the_command_prints_the_folder_of_the_task_files(capsys):
    import os

    from bayesbench.cli import main

    assert main(["lm-eval-tasks"]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == folder()
    assert {f"bayesbench_{t}.yaml" for t in ("bijection", "sula")} <= set(os.listdir(printed))
