"""Recurrent state size: the floats a model holds per sequence across positions at inference,
counted from the model's own tensors (issue 43; /work/wt/PROTOCOL-state.md).

Every sequence-mixing layer (a module mapping x [E, B, L, d] -> y [E, B, L, d] whose output at t
reads earlier positions) has a plain recurrent reference `recurrent_step(x [E, B, d], state)
-> (y [E, B, d], state)`: the truth its fast `forward` is tested against, whose state is exactly
what the layer carries from one position to the next (attention: its K and V cache, which grows
with the length; a convolution: its last inputs; a recurrent mixer: its fixed state). The count
here runs the model once on a dummy batch of `length` positions with forward pre-hooks that
capture each such layer's input, loops the layer's `recurrent_step` over those inputs, and sums
the floating-point numel of the final state over layers, per sequence and member. No formula per
architecture is typed anywhere: a formula that overstates a state (zoology issue #34: RWKV-7's,
4-16x) cannot be made here, since only what the reference carries is counted.

What is not counted: integer tensors of a state (a position counter, which every model with a
position table holds too), the parameters, and the activations of one position. A model with no
`recurrent_step` layer either mixes no positions (`mixes_positions = False`: the position-wise
MLP, 0 floats) or cannot be counted (`StateUnknown`: an outside model).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

State = dict[str, Tensor]
#: what a count covers, said with every stored number (a row's config["state"])
COUNTED = ("floats carried from one position to the next by every sequence-mixing layer's recurrent reference "
           "(recurrent_step) after the scored length, per sequence and member: KV caches, convolution histories, "
           "recurrent states; integer counters and parameters not counted")


#: what a row scored from predictions made elsewhere (`bayesbench score`) says in place of a count
NO_MODEL = ("no model: predictions made elsewhere (bayesbench score) come with no layers whose state could be "
            "counted; no number is given")


class StateUnknown(ValueError):
    """The model has no layer with a recurrent reference and does not say it mixes no positions."""


def mixers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The outermost submodules with a `recurrent_step` (a mixer inside a mixer is its parent's
    business), in registration order, with their names. A model that is one mixer from a submodule
    on (Paper II's toy attention) has the recurrent_step itself and names that submodule, whose
    output is the mixer's input, in `recurrent_input`: then it alone, named ""."""
    if callable(getattr(model, "recurrent_step", None)) and getattr(model, "recurrent_input", None):
        return [("", model)]
    found: list[tuple[str, nn.Module]] = []
    for name, module in model.named_modules():
        if not callable(getattr(module, "recurrent_step", None)) or module is model:
            continue
        if any(name.startswith(outer + ".") for outer, _ in found):
            continue
        found.append((name, module))
    return found


def fast_form(layer: nn.Module) -> Callable[[Tensor], Tensor]:
    """The mixer's fast form over x [E, B, L, d]: its forward, or `mix` for a model that is one mixer."""
    return getattr(layer, "mix") if getattr(layer, "recurrent_input", None) else layer


def run_steps(layer: nn.Module, x: Tensor, state: State | None = None, *more: Tensor) -> tuple[Tensor, State | None]:
    """The layer's recurrent reference looped over x [E, B, L, d]: y [E, B, L, d'] and the final state.
    A layer whose forward takes more per-position inputs (the pointer head: its hidden states and
    the tokens, `models/pointer.py`) gets each of `more` [E, B, L, ...] at the same position."""
    step: Callable = getattr(layer, "recurrent_step")
    ys = []
    for t in range(x.shape[2]):
        y, state = step(x[:, :, t], *(m[:, :, t] for m in more), state)
        ys.append(y)
    return torch.stack(ys, dim=2), state


def capture_inputs(model: nn.Module, tokens: Tensor, header: Tensor | None = None) -> dict[str, Tensor]:
    """{mixer name: its input x [E, B, L, d]} of one forward pass of `model` on tokens (and header);
    a mixer whose forward takes several inputs is given its first here (all of them: `capture_all`)."""
    return capture_all(model, tokens, header)[0]


def capture_all(model: nn.Module, tokens: Tensor, header: Tensor | None = None
                ) -> tuple[dict[str, Tensor], dict[str, tuple[Tensor, ...]]]:
    """`capture_inputs` and, per mixer, the inputs of its forward after the first (the pointer head's
    tokens), empty for a mixer of one input."""
    inputs: dict[str, Tensor] = {}
    more: dict[str, tuple[Tensor, ...]] = {}
    hooks = []
    for name, module in mixers(model):
        if module is model:  # its input is a submodule's output
            def grab_output(_module, _args, output, _name=name) -> None:
                inputs[_name] = output
            source = model.get_submodule(getattr(model, "recurrent_input"))
            hooks.append(source.register_forward_hook(grab_output))
            continue

        def grab(_module, args, _name=name) -> None:
            inputs[_name] = args[0]
            more[_name] = tuple(args[1:])
        hooks.append(module.register_forward_pre_hook(grab))
    try:
        model(tokens, header)
    finally:
        for h in hooks:
            h.remove()
    return inputs, more


def state_numel(state: State | None) -> int:
    """Floating-point entries of a state (integer counters are not floats held)."""
    if not state:
        return 0
    return sum(v.numel() for v in state.values() if v.is_floating_point())


def dummy_batch(model: nn.Module, length: int) -> tuple[Tensor, Tensor | None]:
    """Token 0 at every position of one sequence per member (and a zero header where the model reads one);
    a model whose forward needs a token layout (the pointer head's key, value pairs) says which tokens
    by its `dummy_tokens(length)` [length]. A state's size does not depend on the tokens' values."""
    shape = getattr(model, "shape")
    E = int(getattr(model, "ensemble"))
    device = next(model.parameters()).device
    layout = getattr(model, "dummy_tokens", None)
    one = layout(length) if callable(layout) else torch.zeros(length, dtype=torch.long)
    tokens = one.to(device).expand(E, 1, length).contiguous()
    # a dense header (the continuous tunnels: a real vector at every position) is as long as the
    # tokens; a fixed one (the HMM's rows) keeps its own length
    header_len = length if getattr(shape, "dense_header", False) else shape.header_len
    header = (torch.zeros(E, 1, header_len, shape.header_dim, device=device)
              if shape.header_dim > 0 else None)
    return tokens, header


def state_floats(model: nn.Module, length: int) -> int:
    """Floats one member holds per sequence after `length` positions (what it carries into the
    next one), summed over its sequence-mixing layers, found by running their recurrent references.

    The model's gradients, training mode and torch's RNG are left as they were."""
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ValueError(f"length must be a positive integer (the number of positions), got {length!r}")
    layers = mixers(model)
    if not layers:
        if getattr(model, "mixes_positions", True) is False:
            return 0
        raise StateUnknown(f"{type(model).__name__} has no layer with a recurrent reference (recurrent_step): "
                           "its state size cannot be counted")
    max_len = getattr(getattr(model, "shape", None), "max_len", length)
    if length > max_len:
        raise ValueError(f"length must be at most the model's max_len {max_len}, got {length}")
    E = int(getattr(model, "ensemble", 1))
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            tokens, header = dummy_batch(model, length)
            inputs, more = capture_all(model, tokens, header)
            total = 0
            for name, layer in layers:
                if name not in inputs:  # a layer the forward does not run (e.g. switched off) holds nothing
                    continue
                x = inputs[name]
                _, state = run_steps(layer, x, None, *more.get(name, ()))
                total += state_numel(state) // (E * x.shape[1])
    finally:
        model.train(was_training)
    return total


def no_model_record(length: int) -> dict:
    """A row's `config["state"]` for predictions made elsewhere: no count (floats None) and why, so the
    leaderboard's state column says 'no model' where a number would be made up."""
    return {"floats": None, "length": int(length), "counted": NO_MODEL, "no_model": True}


def state_record(model: nn.Module, length: int) -> dict | None:
    """A row's `config["state"]`: the floats per sequence and member at the scored length and what is
    counted; None for a model whose state cannot be counted (`StateUnknown`)."""
    try:
        floats = state_floats(model, length)
    except StateUnknown:
        return None
    return {"floats": int(floats), "length": int(length), "counted": COUNTED}
