"""Outside models on the command line: `--model`/`--name` of `run` and `train`.

    bayesbench run --model my_pkg.my_mod:build --name mine --tasks bijection,hmm
    bayesbench train --model ./mine.py:build --task hmm --seeds 0,1,2
    bayesbench run --model hf:llama --tasks bijection

A run of an outside model takes everything but the architecture from the preset's transformer
job for the same task (training, seeds, evaluation, max_len), and reports its capacity against
that transformer (parameters per member and their ratio). `hf:` models also take the
transformer's sizes (layers, heads, width, FFN width). The jobs are the engine's
(`sweep.engine.outside_jobs`).
"""

from __future__ import annotations

import argparse


def add_model_options(p: argparse.ArgumentParser) -> None:
    """--model and --name, for `run` and `train`."""
    p.add_argument("--model", metavar="SPEC", help="your own model instead of a built-in arch: 'pkg.mod:build', "
                   "'./file.py:build' (build(spec) -> nn.Module, tokens [B, L] -> logits [B, L, C]) or "
                   "hf:gpt2|llama|mamba (needs bayesbench[hf]); see docs/models.md")
    p.add_argument("--name", help="leaderboard name of --model (default: the file or module name, e.g. mine)")
