"""Argument types and option groups shared by the commands.

An argparse type raises `argparse.ArgumentTypeError`; argparse then prints the option's name in
front of the message and exits 2, as for any other bad argument (`cli/errors.py` says what every
other failure prints).
"""

from __future__ import annotations

import argparse
import sys

from ..metric_table import curve_metrics

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


def _integer(text: str, minimum: int, rule: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be {rule}, got {text!r}")
    return value


def positive(text: str) -> int:
    """The text of an integer >= 1."""
    return _integer(text, 1, "a positive integer")


def count(text: str) -> int:
    """The text of an integer >= 0."""
    return _integer(text, 0, "an integer >= 0")


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
        value = parse_until(text)
    except ValueError:
        value = None
    if value is None:  # (only None gives None)
        raise argparse.ArgumentTypeError(f"must be a threshold in bits (a positive number, e.g. 0.1) or 'plateau', "
                                         f"got {text!r}")
    return value


def split_list(values: list[str] | None) -> list[str] | None:
    """'a,b c' -> ['a', 'b', 'c'] (space- or comma-separated option values)."""
    if values is None:
        return None
    return [v for item in values for v in item.split(",") if v]


def add_trust_flag(parser: argparse.ArgumentParser, subparsers: argparse._SubParsersAction) -> None:
    """--trust-code, before or after the command name: import outside code that a file the command
    reads names (`bayesbench.trust`)."""
    text = ("import outside code (a model or tunnel 'pkg.mod:build', 'file.py:build') that a file this command reads "
            "names: a run.json, --config file, sweep file, checkpoint or stored row; without it such code is refused "
            "unless you name it on the command line (docs/cli.md#outside-code-named-in-files)")
    parser.add_argument("--trust-code", action="store_true", help=text)
    for sub in subparsers.choices.values():
        sub.add_argument("--trust-code", action="store_true", default=argparse.SUPPRESS, help=text)


def add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", help=DB_HELP)


def store_to_read(args: argparse.Namespace) -> None:
    """A command that reads the store (leaderboard, plot, compare, export, site): the store its
    --db (or $BAYESBENCH_DB) names must exist, "no store at PATH" as the Python API says it."""
    import os

    from ..store.database import check_store_exists

    named = args.db or os.environ.get("BAYESBENCH_DB")
    where = "--db" if args.db else "$BAYESBENCH_DB"
    check_store_exists(args.db, f"{where}; a typo? `bayesbench run --db {named}` makes a store there")


def add_training(p: argparse.ArgumentParser) -> None:
    """The options `run` and `train` share: preset, steps, device, backends, checkpoints, threads."""
    from ..presets import PRESETS
    from ..training.config import PRECISIONS

    p.add_argument("--preset", default="quick", choices=sorted(PRESETS),
                   help="sizes, steps and evaluation (default quick)")
    p.add_argument("--steps", type=positive, help="override the preset's number of training steps")
    p.add_argument("--device", help="cpu, cuda, cuda:1 or auto (default: the preset's; quick=cpu, paper=auto)")
    p.add_argument("--attention", choices=("sdpa", "eager", "triton"),
                   help="transformer attention backend (default sdpa)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--precision", choices=PRECISIONS,
                   help="training matmul precision: auto (TF32 on CUDA, float32 on CPU; the default), fp32, tf32, "
                        "or bf16 (autocast forward); evaluation always runs in float32")
    p.add_argument("--runs-dir", default="runs", help="where the run directories go: RUNS_DIR/<preset>/<task>-<arch>-"
                   "lr<lr>-s<seeds>-<key>/ (default ./runs)")
    p.add_argument("--resume", action="store_true", help="no effect: running a command again "
                   "always skips its stored jobs and continues stopped ones from their checkpoints")
    p.add_argument("--checkpoint-every", type=positive,
                   help="checkpoint every N steps (default: the preset's; always at the end)")
    p.add_argument("--eval-sequences", type=positive, help="evaluation set size (default: the preset's, 4096)")
    p.add_argument("--threads", type=positive, help="torch CPU threads per training process (default 1: the numbers "
                   "depend on the thread count, so the default does not depend on the machine)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--until", type=until, metavar="BITS|plateau",
                   help="stop each member once its learning curve reaches BITS (on --until-metric) or has stopped "
                        "improving ('plateau'); --steps stays the budget (docs/training.md)")
    p.add_argument("--until-metric", choices=curve_metrics(),
                   help="the learning-curve metric --until reads (default entropy_mae)")
    p.add_argument("--curve-every", type=positive, help="measure the learning curve every N steps (default: "
                   "log-spaced, 8 points per decade, always the last step)")
    p.add_argument("--curve-sequences", type=positive, help="size of the fixed curve set (default 256)")
    p.add_argument("--no-curves", action="store_true", help="no learning curves (and so no --until)")
    add_log(p)
    p.add_argument("--train-args", nargs="+", type=key_values("--train-args"), metavar="KEY=VALUE",
                   help="training settings over the preset's, e.g. lr=5e-4 batch_size=64 schedule=cosine "
                        "warmup_steps=100 weight_decay=0 (the fields of TrainConfig, docs/training.md)")
    p.add_argument("--task-args", nargs="+", type=key_values("--task-args"), metavar="KEY=VALUE",
                   help="the task's fields over the preset's, e.g. L=10 V=6 (docs/tasks.md); for your own tunnel "
                        "(--task ./mine.py:build) its factory's options")
    p.add_argument("--model-args", nargs="+", type=key_values("--model-args"), metavar="KEY=VALUE",
                   help="the architecture's options over the preset's, e.g. d_model=32 dropout=0.1 (one architecture: "
                        "--arch, one --archs, or --model, whose factory gets them)")
    add_db(p)


def add_log(p: argparse.ArgumentParser) -> None:
    p.add_argument("--log", choices=("tensorboard", "wandb"),
                   help="also send each member's training loss and learning curves to TensorBoard "
                        "(RUN_DIR/tensorboard) or Weights & Biases (offline unless WANDB_MODE says otherwise); needs "
                        "bayesbench[log]")


def check_train_args(values: dict) -> dict:
    """--train-args against TrainConfig's fields and rules (`sweep.request.check_train_args`), its
    error naming the flag: "--train-args beta1 must be a number in [0, 1), got 1.5"."""
    from ..sweep.request import FieldError
    from ..sweep.request import check_train_args as check

    try:
        return check(values)
    except FieldError as err:  # its fields are options of their own: --steps, --train-args
        raise ValueError(err.phrase(lambda name: "--" + name.replace("_", "-"))) from None


def progress(args: argparse.Namespace) -> bool:
    """A progress bar: unless --no-progress, and only on a terminal."""
    return not args.no_progress and sys.stderr.isatty()


def progress_lines(args: argparse.Namespace) -> bool:
    """Progress as lines (a job's checkpoints) where no bar is drawn: stderr is not a terminal."""
    return not args.no_progress and not sys.stderr.isatty()


def line_printer(args: argparse.Namespace):
    """Progress lines: to stderr when stdout carries --json, else to stdout."""
    stream = sys.stderr if getattr(args, "json", False) else sys.stdout
    return lambda m: print(m, file=stream, flush=True)


def event_printer(args: argparse.Namespace):
    """The engine's events (`sweep/events.py`) as lines, where `line_printer` puts them."""
    from ..sweep.events import line

    say = line_printer(args)

    def sink(event) -> None:
        text = line(event)
        if text is not None:
            say(text)
    return sink


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


def check_folder(option: str, path: str) -> str:
    """A folder option (--runs-dir, --out): a folder, or a path where one can be made."""
    from ..sweep.request import FieldError
    from ..sweep.request import check_folder as check

    try:
        return check("runs_dir", path)
    except FieldError as err:
        raise ValueError(err.phrase(lambda name: option)) from None
