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
import dataclasses


def add_model_options(p: argparse.ArgumentParser) -> None:
    """--model and --name, for `run` and `train`."""
    p.add_argument("--model", metavar="SPEC", help="your own model instead of a built-in arch: 'pkg.mod:build', "
                   "'./file.py:build' (build(spec) -> nn.Module, tokens [B, L] -> logits [B, L, C]) or "
                   "hf:gpt2|llama|mamba (needs bayesbench[hf]); see docs/models.md")
    p.add_argument("--name", help="leaderboard name of --model (default: the file or module name, e.g. mine)")


def model_jobs(args, *, tasks: list[str] | None, seeds: list[int] | None, say, place=None) -> list:
    """The preset's transformer jobs for `tasks`, with the architecture replaced by args.model
    (`place`: as `sweep.jobs.make_jobs`)."""
    from ..models.outside import default_name, load_factory, normalise
    from ..scoring.outside import check_name
    from ..sweep.jobs import make_jobs, resolve_model, trial_forward
    from .args import task_and_model_args, train_overrides

    if getattr(args, "archs", None):
        raise ValueError("give either --model or --archs, not both (run the built-in archs separately)")
    spec = normalise(args.model)
    load_factory(spec)  # an unimportable model fails here, before anything runs
    name = check_name(args.name or default_name(spec))
    extra = task_and_model_args(args)
    model_args = extra.pop("model_args") or {}
    base = make_jobs(args.preset, tasks=tasks, archs=["transformer"], seeds=seeds, steps=args.steps,
                     device=args.device, attention=args.attention, compile=args.compile, precision=args.precision,
                     checkpoint_every=args.checkpoint_every, eval_sequences=args.eval_sequences,
                     train=train_overrides(args), place=place, **extra)
    jobs = []
    for job in base:
        options = resolve_model(job.setup, spec, job.task, job.max_len, args.attention)  # hf: the transformer's sizes
        options = {**options, **model_args}  # --model-args: the factory's own options
        overrides = {**job.overrides, **({"model": model_args} if model_args else {})}
        mine = dataclasses.replace(job, arch=spec, model=options, name=name, overrides=overrides)
        try:  # the factory built with its options: a failure there is theirs, and --model-args named
            params, forward = mine.params, trial_forward(mine)
        except ValueError as err:
            if not model_args:
                raise
            given = " ".join(f"{k}={v}" for k, v in model_args.items())
            raise ValueError(f"--model-args {given}: {err}") from None
        ratio = params / job.params
        say(f"capacity: {name} on {job.setup.label}: {params:,} parameters per member = {ratio:.2f}x the "
            f"preset's transformer ({job.params:,}; {_sizes(job.model)})"
            + ("" if 0.9 <= ratio <= 1.1 else " -- NOT capacity-matched (outside 10%): compare with care")
            + f"; forward: {forward}")
        jobs.append(mine)
    return jobs


def _sizes(cfg: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in cfg.items())
