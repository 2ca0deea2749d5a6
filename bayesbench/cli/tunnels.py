"""Sample every wind tunnel and print its exact posterior entropy curve (no training)."""

from __future__ import annotations

import torch

from ..scoring.metrics import entropy_bits, per_position
from ..tasks import get_task

DEMO_TASKS = (
    ("bijection", {}),
    ("bijection", {"variant": "code"}),
    ("hmm", {}),
    ("hmm", {"encoding": "tokens"}),
    ("sticky", {}),
    ("markov", {}),
)


def tunnel_curves(batch_size: int = 2048, seed: int = 0) -> list[tuple[str, list[float]]]:
    """(description, mean Bayes entropy in bits at each supervised position) for each tunnel."""
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
