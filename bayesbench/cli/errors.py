"""What the command line says when a command cannot finish: one line and an exit code.

- a user's mistake or a damaged input (ValueError, which the store's, the checkpoints' and the
  run lock's errors are): `bayesbench CMD: message`, exit 2;
- the system refusing (OSError: a full disk, a missing permission): named, exit 1;
- a command's own summary of what failed (`CommandFailed`, e.g. jobs whose worker died): exit 1;
- code the command ran (a model's factory, a tunnel's sampler) calling sys.exit(): said, exit 2;
- a stop request (`interrupt.Interrupted`): what was stopped, where its checkpoint is and the
  command that continues it, exit 130 (SIGINT) or 143 (SIGTERM);
- anything else (a bug): one line saying so, exit 1.

`--debug` or BAYESBENCH_DEBUG=1 lets the exception through instead, for its traceback.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable

from ..running import interrupt
from ..running.interrupt import Interrupted

DEBUG_ENV = "BAYESBENCH_DEBUG"
EXIT_USAGE = 2  # a user's mistake or a damaged input (argparse's code for bad arguments)
EXIT_FAILURE = 1
EXIT_BROKEN_PIPE = 128 + 13


class CommandFailed(Exception):
    """A command could not do all it was asked and says why in its message (exit 1)."""


def flag_of(command: str | None) -> Callable[[str], str]:
    """How the command line names a request's field (`sweep.request.FieldError`): its option,
    '--train-args' for train_args; `train`'s one task and arch are --task and --arch."""
    def flag(field: str) -> str:
        if command == "train" and field in ("tasks", "archs"):
            field = field[:-1]
        return "--tune" if field == "tuning" else "--" + field.replace("_", "-")
    return flag


def phrased(err: BaseException, command: str | None) -> str:
    """An error's message, a request's field named as the command line's option."""
    from ..sweep.request import FieldError

    return err.phrase(flag_of(command)) if isinstance(err, FieldError) else str(err)


def add_debug_flag(parser: argparse.ArgumentParser, subparsers: argparse._SubParsersAction) -> None:
    """--debug before or after the command name."""
    text = f"show the full traceback of an error (same as {DEBUG_ENV}=1)"
    parser.add_argument("--debug", action="store_true", help=text)
    for sub in subparsers.choices.values():
        sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=text)


def debug_enabled(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "debug", False)) or os.environ.get(DEBUG_ENV, "") not in ("", "0")


def run_command(fn: Callable[[argparse.Namespace], int], args: argparse.Namespace, argv: list[str], *,
                exit_now: bool = False) -> int:
    """fn(args), with every failure turned into one line on stderr and an exit code.

    `exit_now` (the program itself, not a caller in Python): after a stop request, leave at
    once with os._exit once the line is out. Everything is saved and closed by then, and
    the interpreter's teardown of torch can take seconds on a loaded machine."""
    try:
        interrupt.startup_done()  # from here a stop request is the command's to report
        return fn(args)
    except SystemExit as err:  # no bayesbench code exits so: a model, tunnel or sweep file it ran did
        if debug_enabled(args):
            raise
        print(f"bayesbench {args.command}: stopped: code it ran called sys.exit({err.code!r}) (your --model, --task "
              "or sweep file's code?); rerun with --debug for where", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except BrokenPipeError:  # `bayesbench leaderboard | head`: the reader left; nothing to say
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        return EXIT_BROKEN_PIPE
    except BaseException as err:
        if debug_enabled(args):
            raise
        code, line = explain(err, args, argv)
        name = " ".join(filter(None, (args.command, getattr(args, "data_command", None))))  # `data export`
        print(f"bayesbench {name}: {line}", file=sys.stderr, flush=True)
        if exit_now and isinstance(err, KeyboardInterrupt):
            interrupt.exit_now(code)
        return code


def explain(err: BaseException, args: argparse.Namespace, argv: list[str]) -> tuple[int, str]:
    """(exit code, one line) for an exception that ended a command."""
    if isinstance(err, KeyboardInterrupt):
        stop = err if isinstance(err, Interrupted) else Interrupted("SIGINT")
        return stop.exit_code, interrupt_line(stop, args, argv)
    if isinstance(err, ValueError):
        from .settings import in_file_terms

        return EXIT_USAGE, _one_line(in_file_terms(phrased(err, getattr(args, "command", None)), args))
    from ..sweep.engine import RunFailed

    if isinstance(err, (OSError, CommandFailed, RunFailed)):
        return EXIT_FAILURE, _one_line(str(err))
    if isinstance(err, MemoryError):
        return EXIT_FAILURE, f"out of memory ({memory_advice(args)})"
    return EXIT_FAILURE, (f"internal error: {type(err).__name__}: {_one_line(str(err))} (rerun with --debug or "
                          f"{DEBUG_ENV}=1 for the traceback)")


def memory_advice(args: argparse.Namespace) -> str:
    """What to make smaller after running out of memory, in the options the command has and takes."""
    if getattr(args, "predictions", None):  # `score --predictions`: the files and their sets, whole
        return ("the predictions and their evaluation sets are held whole: predict on a smaller set, bayesbench data "
                "export TASK --sequences N")
    hints = []
    if hasattr(args, "eval_sequences"):
        hints.append("a smaller --eval-sequences")
    if hasattr(args, "train_args"):
        hints.append("batch (--train-args batch_size=N)")
    if hasattr(args, "model_args"):
        hints.append("model (--model-args)")
    return "try " + ", ".join(hints) if hints else "free memory or use a machine with more"


def _one_line(text: str) -> str:
    return " ".join(text.split()) or "(no message)"


def resume_command(argv: list[str]) -> str:
    """The command line that continues an interrupted one: the same one (without --debug)."""
    return shlex.join(["bayesbench", *(a for a in argv if a != "--debug")])


def interrupt_line(stop: Interrupted, args: object, argv: list[str]) -> str:
    """What a stop request cut short, where its checkpoints are, and how to continue."""
    parts = []
    for s in stop.stopped:
        run, phase = s.get("run", "a run"), s.get("phase")
        if phase == "training":
            parts.append(f"{run} at step {s.get('step')} of {s.get('steps')}")
        elif phase == "evaluation":
            parts.append(f"{run} while evaluating (its training had finished)")
        elif phase == "killed":
            parts.append(f"{run} ({s.get('why')}; its last periodic checkpoint stays)")
        elif phase == "study":
            parts.append(f"{run} while it ran")
        else:
            parts.append(f"{run} before its training started")
    line = f"interrupted by {stop.signame}"
    line += f": stopped {', '.join(parts)}" if parts else ""
    folders = sorted({os.path.dirname(s["checkpoint"]) for s in stop.stopped if s.get("checkpoint")})
    if folders:
        where = folders[0] if len(folders) == 1 else os.path.commonpath(folders)
        line += f"; checkpoints kept in {where}"
    if stop.finished or stop.not_started:
        line += f"; {stop.finished} job(s) finished and stored, {stop.not_started} not started"
    for note in getattr(stop, "notes", ()):
        line += f"; {note}"
    line += "; nothing unfinished was stored"
    if getattr(args, "rerun_resumes", False):  # `run`, `train`, `sweep`: the sweep engine
        line += (f"; continue with: {resume_command(argv)} (stored jobs are skipped, stopped ones resume from "
                 "their checkpoints)")
    else:
        line += "; rerun the command to do it again"
    return line


def no_rows_message(db: str | None, *, task: str | None = None, arch: str | None = None) -> str:
    """Why a --task / --arch selection found nothing: what the store does hold."""
    from ..store.database import db_path, read_rows

    rows = read_rows(db)
    wanted = " and ".join(f"--{k} {v!r}" for k, v in (("task", task), ("arch", arch)) if v)
    if not rows:
        return f"no results in the store {db_path(db)} yet (asked for {wanted}): run `bayesbench run --preset quick`"
    tasks = sorted({f"{r['task']} ({r['task_label']})" for r in rows})
    archs = sorted({r["arch"] for r in rows})
    return (f"no stored results match {wanted} in {db_path(db)}; stored tasks: {', '.join(tasks)}; "
            f"stored archs: {', '.join(archs)}")
