"""The command line for outside models: `--model`/`--name` on `run` and `train`, and `score`.

    bayesbench run --model my_pkg.my_mod:build --name mine --tasks bijection,hmm
    bayesbench train --model ./mine.py:build --task hmm --seeds 0,1,2
    bayesbench run --model hf:llama --tasks bijection
    bayesbench score --model ./mine.py:build --checkpoint mine.pt --task bijection

A run of an outside model takes everything but the architecture from the preset's transformer
job for the same task (training, seeds, evaluation, max_len), and reports its capacity against
that transformer (parameters per member and their ratio). `hf:` models also take the
transformer's sizes (layers, heads, width, FFN width).
"""

from __future__ import annotations

import argparse
import dataclasses
import json


def add_model_options(p: argparse.ArgumentParser) -> None:
    """--model and --name, for `run` and `train`."""
    p.add_argument("--model", metavar="SPEC", help="your own model instead of a built-in arch: 'pkg.mod:build', "
                   "'./file.py:build' (build(spec) -> nn.Module, tokens [B, L] -> logits [B, L, C]) or "
                   "hf:gpt2|llama|mamba (needs bayesbench[hf]); see docs/models.md")
    p.add_argument("--name", help="leaderboard name of --model (default: the file or module name, e.g. mine)")


def split_list(values: list[str] | None) -> list[str] | None:
    """'a,b c' -> ['a', 'b', 'c'] (space- or comma-separated option values)."""
    if values is None:
        return None
    return [v for item in values for v in item.split(",") if v]


def model_jobs(args, *, tasks: list[str] | None, seeds: list[int] | None, say) -> list:
    """The preset's transformer jobs for `tasks`, with the architecture replaced by args.model."""
    from ..sweep.jobs import make_jobs, resolve_model
    from ..models.outside import default_name, load_factory, normalise
    from ..scoring.outside import check_name

    if getattr(args, "archs", None):
        raise ValueError("give either --model or --archs, not both (run the built-in archs separately)")
    spec = normalise(args.model)
    load_factory(spec)  # an unimportable model fails here, before anything runs
    name = check_name(args.name or default_name(spec))
    base = make_jobs(args.preset, tasks=tasks, archs=["transformer"], seeds=seeds, steps=args.steps,
                     device=args.device, attention=args.attention, compile=args.compile, precision=args.precision,
                     checkpoint_every=args.checkpoint_every, eval_sequences=args.eval_sequences)
    jobs = []
    for job in base:
        options = resolve_model(job.setup, spec, job.task, job.max_len, args.attention)  # hf: the transformer's sizes
        mine = dataclasses.replace(job, arch=spec, model=options, name=name)
        ratio = mine.params / job.params
        say(f"capacity: {name} on {job.setup.label}: {mine.params:,} parameters per member = {ratio:.2f}x the "
            f"preset's transformer ({job.params:,}; {_sizes(job.model)})"
            + ("" if 0.9 <= ratio <= 1.1 else " -- NOT capacity-matched (outside 10%): compare with care")
            + f"; forward: {trial_forward(mine)}")
        jobs.append(mine)
    return jobs


def trial_forward(job) -> str:
    """Build two members for the job's task (factory, trial forward, path choice) before anything
    runs, so a broken model fails here; says which forward path it got."""
    import warnings

    from ..models import get_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the fallback is reported in the line instead
        model = get_model(job.arch, job.task, seeds=[0, 1], max_len=job.max_len, **job.model)
    if model.path == "vmap":
        return "vmap over members (one batched call)"
    return f"a loop over members (vmap failed: {model.cfg.fallback})"


def _sizes(cfg: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in cfg.items())


# ---------------------------------------------------------------- bayesbench score

def add_score_parser(sub) -> None:
    from ..presets import PRESETS

    sc = sub.add_parser("score", help="score an already trained model of yours on the fixed evaluation sets and "
                        "store it (no training)")
    sc.add_argument("--model", required=True, metavar="SPEC", help="'pkg.mod:build', './file.py:build' or hf:NAME")
    sc.add_argument("--checkpoint", required=True, help="a state_dict() of one module the factory builds, or a "
                    "bayesbench checkpoint.pt of this model (every member)")
    sc.add_argument("--task", help="task key of the preset (required for a plain state dict; e.g. bijection, hmm)")
    sc.add_argument("--name", help="leaderboard name (default: the file or module name)")
    sc.add_argument("--preset", default="quick", choices=sorted(PRESETS), help="whose task and evaluation (default quick)")
    sc.add_argument("--seed", type=int, default=0, help="seed label of a plain state dict's model (default 0)")
    sc.add_argument("--eval-sequences", type=int, help="evaluation set size (default: the preset's, 4096)")
    sc.add_argument("--device", default="cpu", help="device to evaluate on (default cpu)")
    sc.add_argument("--json", action="store_true", help="print {\"runs\": [...]}")
    sc.add_argument("--db", help="results store (default: $BAYESBENCH_DB or ./results/bayesbench.sqlite)")


def cmd_score(args) -> int:
    from ..checks import positive_int
    from ..store.leaderboard import json_runs, markdown
    from ..store.database import read_records
    from ..scoring.outside import score_checkpoint

    if args.eval_sequences is not None:
        positive_int("--eval-sequences", args.eval_sequences)
    scored = score_checkpoint(args.model, args.checkpoint, task=args.task, name=args.name, preset=args.preset,
                              seed=args.seed, db=args.db, eval_sequences=args.eval_sequences, device=args.device)
    records = read_records(args.db, where="run_id = ?", params=(scored[0].run_id,))
    print(json.dumps(json_runs(records), indent=2) if args.json else markdown(records))
    return 0
