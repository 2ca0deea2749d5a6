"""`bayesbench tasks`: the wind tunnels, their sizes and floors; `--check` an outside tunnel.

    bayesbench tasks                                   # every preset's tunnels: sizes, evaluations, floors
    bayesbench tasks --check ./coin.py:build --task-args L=12   # your own tunnel, checked (docs/tasks.md)
    bayesbench tasks --check vomc --task-args depth=3             # a registered tunnel, the same checks
"""

from __future__ import annotations

import json
import shlex

from .args import as_dict, key_values, positive


def add_parser(sub) -> None:
    from ..presets import PRESETS

    p = sub.add_parser("tasks", help="the wind tunnels of each preset with their sizes and floors; --check SPEC "
                                     "checks your own tunnel")
    p.add_argument("--preset", choices=sorted(PRESETS), help="only this preset's tunnels (default: every preset)")
    p.add_argument("--check", metavar="SPEC", help="check a tunnel: an outside one, 'pkg.mod:build' or "
                   "'./file.py:build' (a factory(**options) -> bayesbench.tasks.Task), or a registered one by name; "
                   "runs check_task and the validity check (tasks/check.py) and prints its sizes and floors")
    p.add_argument("--task-args", nargs="+", type=key_values("--task-args"), metavar="KEY=VALUE",
                   help="options passed to the tunnel's factory (with --check)")
    p.add_argument("--sequences", type=positive, default=1024, help="sequences the floors are estimated on "
                   "(default 1024)")
    p.set_defaults(handler=cmd_tasks)


def _floor_line(task, n: int, name: str | None = None) -> str:
    import torch

    from ..models.heads import is_continuous
    from ..scoring.floors import floor_scores

    batch = task.sample(n, torch.Generator().manual_seed(0))
    reference = task.sample(n, torch.Generator().manual_seed(1))
    if is_continuous(task.head):  # its reference predictors: the prior predictive first (floors.py)
        refs = floor_scores(batch, reference, task=task)
        return (f"{name}: " if name else "") + "; ".join(
            f"{ref} floor: entropy MAE {m['entropy_mae'].mean:.4f}, KL {m['kl'].mean:.4f} bits"
            for ref, m in refs.items()) + f" (on {n} fresh sequences)"
    f = floor_scores(batch, reference)
    return ((f"{name}: " if name else "") + f"uniform floor: entropy MAE {f['uniform']['entropy_mae'].mean:.4f}, "
            f"positional {f['uniform']['entropy_mae_positional'].mean:.4f}, KL {f['uniform']['kl'].mean:.4f} bits; "
            f"marginal floor KL {f['marginal']['kl'].mean:.4f} bits (on {n} fresh sequences)")


def _as_typed(value) -> str:
    """A --task-args value as typed again: JSON, except a string that reads back as itself."""
    if isinstance(value, str):
        try:
            json.loads(value)
        except ValueError:
            return value
    return json.dumps(value)


def _sizes(task) -> str:
    head = f", header {task.header_len} x {task.header_dim}" if task.header_len else ""
    return f"vocab {task.vocab_size}, classes {task.num_classes}, length {task.seq_len}{head}"


def cmd_tasks(args) -> int:
    from ..presets import PRESETS, get_preset
    from ..scoring.evaluate import evaluation_tasks
    from ..tasks import Task, get_task, is_outside_task, outside_task, task_from_config
    from ..tasks.check import check_task, check_validity

    if args.task_args and not args.check:
        raise ValueError("--task-args go with --check SPEC (the options of your tunnel's factory)")
    if args.check:
        options = as_dict("--task-args", args.task_args)
        if is_outside_task(args.check):
            outside = outside_task(args.check, options)
            print(f"{outside.describe()} from {outside.spec}: {_sizes(outside)}")
            checked: Task = outside
        else:
            checked = get_task(args.check, **options)
            print(f"{checked.describe()}: {_sizes(checked)}")
        for line in check_task(checked) + check_validity(checked):
            print(f"  ok: {line}")
        print(f"  {_floor_line(checked, args.sequences)}")
        typed = [f"{k}={_as_typed(v)}" for k, v in args.task_args or ()]
        command = ["bayesbench", "train", "--task", args.check, *(["--task-args", *typed] if typed else []),
                   "--arch", "transformer"]
        print(f"Train it: {shlex.join(command)} (docs/tasks.md)")  # quoted: a path may hold spaces
        return 0
    for name in ([args.preset] if args.preset else sorted(PRESETS)):
        preset = get_preset(name)
        print(f"preset {name}:")
        for key, setup in preset.tasks.items():
            task = task_from_config(setup.task)
            evals = (f"scored at K = {', '.join(map(str, setup.eval_lengths))}" if setup.eval_lengths else
                     f"scored on {', '.join(setup.eval_scored)}" if setup.eval_scored else "scored where supervised")
            print(f"  {key:10s} {setup.label}: {task.describe()}")
            print(f"             {_sizes(task)}; {evals}; {setup.eval_sequences} evaluation sequences")
            for ev_name, ev_task in evaluation_tasks(task, setup.eval_lengths, setup.eval_scored).items():
                print(f"             {_floor_line(ev_task, args.sequences, ev_name)}")
    return 0
