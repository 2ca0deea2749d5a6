"""`bayesbench tunnels`: sample every wind tunnel and print its exact posterior entropy curve (no
training): what a model that computes the Bayes posterior would show at each position."""

from __future__ import annotations

from .args import positive

DEMO_TASKS = (
    ("bijection", {}),
    ("bijection", {"variant": "code"}),
    ("hmm", {}),
    ("hmm", {"encoding": "tokens"}),
    ("sticky", {}),
    ("markov", {}),
)


def add_parser(sub) -> None:
    p = sub.add_parser("tunnels", help="sample every wind tunnel and print its exact posterior entropy curve")
    p.add_argument("--batch-size", type=positive, default=2048, help="sequences per tunnel (default 2048)")
    p.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    p.set_defaults(handler=cmd_tunnels)


def cmd_tunnels(args) -> int:
    print_tunnel_curves(args.batch_size, args.seed)
    return 0


def tunnel_curves(batch_size: int = 2048, seed: int = 0) -> list[tuple[str, list[float]]]:
    """(description, mean Bayes entropy in bits at each supervised position) for each tunnel."""
    import torch

    from ..scoring.metrics import entropy_bits, per_position
    from ..tasks import get_task

    out = []
    for name, config in DEMO_TASKS:
        task = get_task(name, **config)
        batch = task.sample(batch_size, torch.Generator().manual_seed(seed))
        curve = per_position(entropy_bits(batch.posterior), batch.mask)
        out.append((task.describe(), [float(c) for c in curve[~torch.isnan(curve)]]))
    return out


def print_tunnel_curves(batch_size: int = 2048, seed: int = 0) -> None:
    for description, curve in tunnel_curves(batch_size, seed):
        print(f"{description}\n  H_Bayes (bits) at each supervised position, mean over {batch_size} sequences:")
        for start in range(0, len(curve), 10):
            print("   " + " ".join(f"{h:6.3f}" for h in curve[start : start + 10]))
