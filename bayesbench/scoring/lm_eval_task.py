"""bayesbench as an lm-evaluation-harness task: the documents and the per-document metrics that
the task files in `scoring/lm_eval_tasks/` name (docs/llm.md, "lm-evaluation-harness").

    lm_eval --model hf --model_args pretrained=PATH --tasks bayesbench_bijection \\
        --include_path "$(bayesbench lm-eval-tasks)" --output_path out --log_samples

The question of the authors' third paper ("Geometric Scaling of Bayesian Inference in LLMs",
Misra et al., arXiv 2512.23752, Sec. 3: a pretrained LM's answer distribution against a Bayes
posterior per prompt) asked the way lm-eval users ask everything else. One lm-eval document is
one scored position of one evaluation sequence: its context is the sequence up to that position
written through a verbaliser (`scoring.llm`, prompt format words-v1 without the BOS: see below),
its choices the C classes' words, and it carries the exact posterior. lm-eval's
`multiple_choice` output reads the log-likelihood of each choice with its space in front (a
choice of several tokens: its full sequence probability), and `process_results` renormalises
them over the choices and returns per document, in bits, the entropy error |H(q) - H(p)|, the
KL(p || q) (`metric_table.kl_terms_bits`, the suite's one definition) and the mass outside the
choices. lm-eval averages them over documents ("mean"): every evaluation sequence of a tunnel has
the same number of scored positions, so this is bayesbench's mean over (sequence, position),
the `entropy_mae` and `kl` of `bayesbench llm` on the same sequences.

The documents are bayesbench's own: the primary evaluation set `bayesbench llm` scores (the
preset's task and evaluation, `scoring.evaluate.eval_set`, drawn from its fixed seed), built by
`dataset` when lm-eval asks (its `custom_dataset`); nothing is downloaded. Settings come from
lm-eval's `--metadata` JSON: `preset`, `sequences`, `verbaliser`, `verbaliser_seed`.

BOS: `bayesbench llm` puts the tokenizer's BOS token first when it has one; lm-eval's `hf`
model encodes the context as the tokenizer does by default (Llama's adds its BOS, GPT-2's and
Pythia's do not). The numbers are equal where the tokenizer adds its BOS itself or has none
(tests/scoring/test_lm_eval_task.py, on a tokenizer without one).
"""

from __future__ import annotations

import os
from typing import Any

#: The tunnels the shipped task files name (bayesbench_<name>.yaml in lm_eval_tasks/).
TASKS = ("bijection", "sula")
#: The lm-evaluation-harness version these task files are tested with (requirements.txt pins it).
LM_EVAL_VERSION = "0.4.13"


def folder() -> str:
    """The folder of the task files, for lm-eval's --include_path (`bayesbench lm-eval-tasks`)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "lm_eval_tasks")


def documents(task: str = "bijection", *, preset: str = "quick", sequences: int | None = None,
              verbaliser: str = "integers", verbaliser_seed: int = 0) -> list[dict]:
    """One document per scored position of the primary evaluation set `bayesbench llm` scores
    for `task` (the same sequences for the same preset and sequences): context, choices, the
    exact posterior [C] and the sampled target class."""
    from .evaluate import eval_set, evaluation_tasks
    from .llm import class_symbols, make_verbaliser, resolve_lm_task

    t, _, lengths, n_seq, scored = resolve_lm_task(task, preset)
    n = sequences or n_seq
    primary = next(iter(evaluation_tasks(t, lengths, scored).values()))
    classes = class_symbols(t)
    verb = make_verbaliser(verbaliser, t.vocab_size, verbaliser_seed)
    batch = eval_set(primary, n)
    choices = [verb.words[s] for s in classes]
    docs = []
    for i in range(batch.batch_size):
        words = [verb.words[s] for s in batch.tokens[i].tolist()]
        for pos in batch.mask[i].nonzero().flatten().tolist():
            docs.append({"sequence": i, "position": pos, "context": " ".join(words[: pos + 1]), "choices": choices,
                         "posterior": [float(x) for x in batch.posterior[i, pos].tolist()],
                         "target": int(batch.targets[i, pos])})
    return docs


def dataset(task: str, **settings: Any):
    """lm-eval's `custom_dataset`: {"test": a `datasets.Dataset` of `documents`}; `settings`
    are lm-eval's metadata (`version` and other keys of its own are ignored)."""
    import datasets

    known = {k: settings[k] for k in ("preset", "sequences", "verbaliser", "verbaliser_seed") if k in settings}
    if "sequences" in known and known["sequences"] is not None:
        known["sequences"] = int(known["sequences"])
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(documents(task, **known))})


def _log_likelihood(result: Any) -> float:
    """One choice's log-likelihood as lm-eval hands it: a (loglikelihood, is_greedy) pair or a float."""
    return float(result[0] if isinstance(result, (tuple, list)) else result)


def scores(posterior: list[float], log_likelihoods: list[float]) -> dict[str, float]:
    """Per document, in bits: entropy error |H(q) - H(p)| and KL(p || q) with q the choices'
    probabilities renormalised over them, and the mass outside the choices (1 - their sum)."""
    import torch

    from ..metric_table import kl_terms_bits
    from .metrics import entropy_bits, entropy_bits_from_log_probs

    p = torch.tensor(posterior, dtype=torch.float64)
    ll = torch.tensor(log_likelihoods, dtype=torch.float64)
    log_q = ll - torch.logsumexp(ll, 0)
    return {"entropy_error_bits": abs(float(entropy_bits_from_log_probs(log_q)) - float(entropy_bits(p))),
            "kl_bits": float(kl_terms_bits(p, log_q)),
            "outside_mass": max(0.0, 1.0 - float(ll.exp().sum()))}


def process_results(doc: dict, results: list) -> dict[str, float]:
    """lm-eval's `process_results` for a document (its choices' log-likelihoods in order)."""
    return scores(doc["posterior"], [_log_likelihood(r) for r in results])
