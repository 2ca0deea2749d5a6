"""Outside models on the command line: `--model`/`--name` of `run` and `train`.

    bayesbench run --model my_pkg.my_mod:build --name mine --tasks bijection,hmm
    bayesbench train --model ./mine.py:build --task hmm --seeds 0,1,2
    bayesbench run --model hf:llama --tasks bijection

A run of an outside model takes everything but the architecture from the preset's transformer
job for the same task (training, seeds, evaluation, max_len), and reports its capacity against
that transformer (parameters per member and their ratio). `hf:` models also take the
transformer's sizes (layers, heads, width, FFN width).
"""

from __future__ import annotations

import argparse


def add_model_options(p: argparse.ArgumentParser) -> None:
    """--model and --name, for `run` and `train`."""
    p.add_argument("--model", metavar="SPEC", help="your own model instead of a built-in arch: 'pkg.mod:build', "
                   "'./file.py:build' (build(spec) -> nn.Module, tokens [B, L] -> logits [B, L, C]) or "
                   "hf:gpt2|llama|mamba (needs bayesbench[hf]); see docs/models.md")
    p.add_argument("--name", help="leaderboard name of --model (default: the file or module name, e.g. mine)")


def model_jobs(args, *, tasks: list[str] | None, seeds: list[int] | None, say, place=None, threads: int = 1) -> list:
    """The jobs of args.model on `tasks`: the preset's transformer jobs' points with the
    architecture replaced by the model (`sweep.jobs.make_jobs`; `place`: as there), each built
    with a trial forward and its capacity said against the preset's transformer."""
    from ..models.outside import default_name, load_factory, normalise
    from ..scoring.trained_elsewhere import check_name
    from ..sweep.jobs import make_jobs, trial_forward
    from .args import task_and_model_args, train_overrides

    if getattr(args, "archs", None):
        raise ValueError("give either --model or --archs, not both (run the built-in archs separately)")
    spec = normalise(args.model)
    load_factory(spec)  # an unimportable model fails here, before anything runs
    name = check_name(args.name or default_name(spec))
    extra = task_and_model_args(args)
    model_args = extra.pop("model_args") or {}
    common = dict(tasks=tasks, seeds=seeds, steps=args.steps, device=args.device, attention=args.attention,
                  compile=args.compile, precision=args.precision, checkpoint_every=args.checkpoint_every,
                  eval_sequences=args.eval_sequences, train=train_overrides(args), place=place, threads=threads,
                  setups={}, **extra)
    reference = make_jobs(args.preset, archs=["transformer"], **common)  # the capacity it is compared with
    jobs = make_jobs(args.preset, archs=[spec], name=name, model_args=model_args or None, **common)
    for job, transformer in zip(jobs, reference):
        try:  # the factory built with its options: a failure there is theirs, and --model-args named
            forward = trial_forward(job)
        except ValueError as err:
            if not model_args:
                raise
            given = " ".join(f"{k}={v}" for k, v in model_args.items())
            raise ValueError(f"--model-args {given}: {err}") from None
        ratio = job.params / transformer.params
        say(f"capacity: {name} on {job.setup.label}: {job.params:,} parameters per member = {ratio:.2f}x the "
            f"preset's transformer ({transformer.params:,}; {_sizes(transformer.model)})"
            + ("" if 0.9 <= ratio <= 1.1 else " -- NOT capacity-matched (outside 10%): compare with care")
            + f"; forward: {forward}")
    return jobs


def _sizes(cfg: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in cfg.items())
