"""FLOPs of one training step, measured: `torch.utils.flop_counter.FlopCounterMode` around the
forward and backward pass of a real batch, never a formula by hand.

What it counts: the operations torch's flop counter has formulas for (matrix products,
convolutions, scaled-dot-product attention; forward and backward); element-wise work (the
activations, the norms, a pure-PyTorch recurrent scan's gates and state updates, the optimiser's
update) is not counted. So the number is the matrix-product work of a step: comparable across
architectures for the matmul-dominated ones, an undercount for a scan whose cost is element-wise
(Mamba's selective scan here) and for the LSTM's and GRU's gate non-linearities.
"""

from __future__ import annotations

import torch

from ..tasks import Task
from .numerics import member_losses
from .stream import stack_members

#: What the count covers, said with every number (the leaderboard's note, a row's config["flops"]).
COUNTED = ("torch.utils.flop_counter.FlopCounterMode over one forward and backward pass: matrix products, "
           "convolutions and attention; element-wise operations and the optimiser step not counted")


def step_flops(model, task: Task, batch_size: int) -> int:
    """FLOPs of one training step (forward and backward) of ONE member at `batch_size` sequences:
    the ensemble's count over its members. Draws its batch from a generator of its own and leaves
    the model's gradients, training mode and torch's global RNG as they were."""
    from torch.utils.flop_counter import FlopCounterMode

    E = model.ensemble
    g = torch.Generator().manual_seed(0)
    device = next(model.parameters()).device
    batches = [task.sample(batch_size, g).to(device) for _ in range(E)]
    tokens, header, targets, mask = stack_members(batches)
    saved = [p.grad for p in model.parameters()]
    was_training = model.training
    model.train()
    try:
        with torch.random.fork_rng(devices=[]), FlopCounterMode(display=False) as counter:
            loss = member_losses(model(tokens, header), targets, mask)
            loss.sum().backward()
        total = counter.get_total_flops()
    finally:
        for p, grad in zip(model.parameters(), saved):
            p.grad = grad
        model.train(was_training)
    return int(round(total / E))


def flops_record(per_step: int, steps: int) -> dict:
    """A row's `config["flops"]`: per training step of one member, over its steps, and what is counted."""
    return {"per_step": int(per_step), "total": int(per_step) * int(steps), "counted": COUNTED}
