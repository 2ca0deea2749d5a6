"""`bayesbench tunnels`: sample every wind tunnel and print its exact posterior entropy curve (no
training): what a model that computes the Bayes posterior would show at each position. For a
continuous tunnel (linreg, mixreg, kalman) it is the differential entropy of the exact predictive
density, in bits (negative where the predictive is narrower than a unit-width uniform)."""

from __future__ import annotations

from .args import positive

DEMO_TASKS: tuple[tuple[str, dict[str, object]], ...] = (
    ("bijection", {}),
    ("bijection", {"variant": "code"}),
    ("hmm", {}),
    ("hmm", {"encoding": "tokens"}),
    ("sticky", {}),
    ("markov", {}),
    ("linreg", {}),
    ("mixreg", {}),
    ("kalman", {}),
)


def add_parser(sub) -> None:
    from ..presets import PRESETS

    p = sub.add_parser("tunnels", help="sample every wind tunnel and print its exact posterior entropy curve")
    p.add_argument("--preset", choices=sorted(PRESETS), help="the tunnels of this preset, at its sizes (default: "
                   "every tunnel and variant at its default size)")
    p.add_argument("--batch-size", type=positive, default=2048, help="sequences per tunnel (default 2048)")
    p.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    p.set_defaults(handler=cmd_tunnels)


def cmd_tunnels(args) -> int:
    print_tunnel_curves(args.batch_size, args.seed, preset=args.preset)
    return 0


def tunnel_curves(batch_size: int = 2048, seed: int = 0, *,
                  preset: str | None = None) -> list[tuple[str, list[float]]]:
    """(description, mean Bayes entropy in bits at each supervised position) for each tunnel: the
    preset's tasks, or without one every tunnel and variant at its default size (DEMO_TASKS, then
    every other registered tunnel at its defaults, so a new tunnel file is listed with no edit)."""
    import torch

    from ..models.heads import is_continuous
    from ..oracle.gaussian_bits import entropy_bits as continuous_entropy_bits
    from ..presets import get_preset
    from ..scoring.metrics import entropy_bits, per_position
    from ..tasks import get_task, list_tasks, task_from_config

    if preset is None:
        named = {name for name, _ in DEMO_TASKS}
        tasks = [get_task(name, **config) for name, config in DEMO_TASKS]
        tasks += [get_task(name) for name in list_tasks() if name not in named]
    else:
        tasks = [task_from_config(setup.task) for setup in get_preset(preset).tasks.values()]
    out = []
    for task in tasks:
        batch = task.sample(batch_size, torch.Generator().manual_seed(seed))
        if is_continuous(task.head):  # the predictive density's differential entropy (issue 41)
            curve = per_position(continuous_entropy_bits(batch.posterior.double()), batch.mask)
        else:
            curve = per_position(entropy_bits(batch.posterior), batch.mask)
        out.append((task.describe(), [float(c) for c in curve[~torch.isnan(curve)]]))
    return out


def print_tunnel_curves(batch_size: int = 2048, seed: int = 0, *, preset: str | None = None) -> None:
    for description, curve in tunnel_curves(batch_size, seed, preset=preset):
        print(f"{description}\n  H_Bayes (bits) at each supervised position, mean over {batch_size} sequences:")
        for start in range(0, len(curve), 10):
            print("   " + " ".join(f"{h:6.3f}" for h in curve[start : start + 10]))
