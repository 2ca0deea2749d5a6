"""Argument types and option groups shared by the commands.

An argparse type raises `argparse.ArgumentTypeError`; argparse then prints the option's name in
front of the message and exits 2, as for any other bad argument (`cli/errors.py` says what every
other failure prints).
"""

from __future__ import annotations

import argparse
import sys

DB_HELP = "results store (default: $BAYESBENCH_DB or ./results/bayesbench.sqlite)"


def seed_list(text: str) -> list[int]:
    """'0,1,2' -> [0, 1, 2]: distinct non-negative integers."""
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated integers like 0,1,2, got {text!r}") from None
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise argparse.ArgumentTypeError(f"must list distinct non-negative integers, got {text!r}")
    if max(seeds) > 2**63 - 1:
        raise argparse.ArgumentTypeError(f"seeds must be at most 2^63 - 1 (an int64), got {max(seeds)}")
    return seeds


def positive(text: str) -> int:
    """The text of an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def count(text: str) -> int:
    """The text of an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def bits(text: str) -> float:
    """A positive, finite number of bits (a threshold)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value > 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"must be a positive number of bits, e.g. 0.1, got {text!r}")
    return value


def until(text: str) -> float | str:
    """--until: a threshold in bits (a positive number) or 'plateau'."""
    from ..training.until import parse_until

    try:
        return parse_until(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a threshold in bits (a positive number, e.g. 0.1) or 'plateau', "
                                         f"got {text!r}") from None


def split_list(values: list[str] | None) -> list[str] | None:
    """'a,b c' -> ['a', 'b', 'c'] (space- or comma-separated option values)."""
    if values is None:
        return None
    return [v for item in values for v in item.split(",") if v]


def add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", help=DB_HELP)


def add_training(p: argparse.ArgumentParser) -> None:
    """The options `run` and `train` share: preset, steps, device, backends, checkpoints, threads."""
    from ..presets import PRESETS

    p.add_argument("--preset", default="quick", choices=sorted(PRESETS),
                   help="sizes, steps and evaluation (default quick)")
    p.add_argument("--steps", type=positive, help="override the preset's number of training steps")
    p.add_argument("--device", help="cpu, cuda, cuda:1 or auto (default: the preset's; quick=cpu, paper=auto)")
    p.add_argument("--attention", choices=("sdpa", "eager", "triton"),
                   help="transformer attention backend (default sdpa)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--precision", choices=("auto", "fp32", "tf32", "bf16"),
                   help="training matmul precision: auto (TF32 on CUDA, float32 on CPU; the default), fp32, tf32, "
                        "or bf16 (autocast forward); evaluation always runs in float32")
    p.add_argument("--runs-dir", default="runs", help="where checkpoints go (default ./runs)")
    p.add_argument("--resume", action="store_true", help="continue from the run directory's checkpoint if there is one")
    p.add_argument("--checkpoint-every", type=positive,
                   help="checkpoint every N steps (default: the preset's; always at the end)")
    p.add_argument("--eval-sequences", type=positive, help="evaluation set size (default: the preset's, 4096)")
    p.add_argument("--threads", type=positive, help="torch CPU threads per process (default: cores / processes)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--until", type=until, metavar="BITS|plateau",
                   help="stop each member once its learning curve reaches BITS (on --until-metric) or has stopped "
                        "improving ('plateau'); --steps stays the budget (docs/training.md)")
    p.add_argument("--until-metric", choices=("entropy_mae", "entropy_mae_positional", "kl"),
                   help="the curve metric --until reads (default entropy_mae)")
    p.add_argument("--curve-every", type=positive, help="measure the learning curve every N steps (default: "
                   "log-spaced, 8 points per decade, always the last step)")
    p.add_argument("--curve-sequences", type=positive, help="size of the fixed curve set (default 256)")
    p.add_argument("--no-curves", action="store_true", help="no learning curves (and so no --until)")
    add_db(p)


def train_overrides(args: argparse.Namespace) -> dict:
    """TrainConfig fields the learning-curve options of `run` and `train` set (none: the preset's)."""
    out = {}
    if getattr(args, "no_curves", False):
        if args.until is not None:
            raise ValueError("--until reads the learning curves: it cannot be combined with --no-curves")
        out["curves"] = False
    for option, name in (("until", "until"), ("until_metric", "until_metric"), ("curve_every", "curve_every"),
                         ("curve_sequences", "curve_sequences")):
        if getattr(args, option, None) is not None:
            out[name] = getattr(args, option)
    if "until_metric" in out and "until" not in out:
        raise ValueError("--until-metric names the metric --until reads: give --until too")
    return out


def set_threads(args: argparse.Namespace) -> None:
    """--threads, where the command has it."""
    if getattr(args, "threads", None):
        import torch

        torch.set_num_threads(args.threads)


def progress(args: argparse.Namespace) -> bool:
    """A progress bar: unless --no-progress, and only on a terminal."""
    return not args.no_progress and sys.stderr.isatty()


def line_printer(args: argparse.Namespace):
    """Progress lines: to stderr when stdout carries --json, else to stdout."""
    stream = sys.stderr if getattr(args, "json", False) else sys.stdout
    return lambda m: print(m, file=stream, flush=True)


def db_name(db: str | None) -> str:
    from ..store.database import db_path

    return db_path(db)


def key_values(option: str):
    """An argparse type for `KEY=VALUE` items (`--task-args L=8 wrong=true`): the value read as JSON
    (numbers, true/false, null, lists, quoted strings), else kept as the plain string."""
    import json

    def parse(text: str) -> tuple[str, object]:
        key, sep, raw = text.partition("=")
        if not sep or not key.strip().isidentifier():
            raise argparse.ArgumentTypeError(f"items must be KEY=VALUE with KEY a name, got {text!r}")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        return key.strip(), value

    parse.__name__ = option  # argparse names the type in its messages
    return parse


def as_dict(option: str, items: list[tuple[str, object]] | None) -> dict:
    """KEY=VALUE items as a dict; a key given twice is refused."""
    out: dict = {}
    for key, value in items or ():
        if key in out:
            raise ValueError(f"{option}: {key} given twice ({out[key]!r} and {value!r})")
        out[key] = value
    return out
