"""Input checks shared by every oracle backend, so both raise the same errors.

Each check raises `ValueError` naming the argument and the rule it breaks.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..checks import int_at_least, positive_int

#: |row sum - 1| allowed for a probability row, by dtype (stated in the error message).
# |row sum - 1| allowed, by the precision the row is held in (a half-precision model's softmax
# rounds each of C entries to ~3 significant digits).
ROW_SUM_ATOL: dict[torch.dtype, float] = {torch.float64: 1e-6, torch.float32: 1e-4, torch.float16: 5e-3,
                                          torch.bfloat16: 3e-2}
FLOAT_DTYPES = (torch.float32, torch.float64)
INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


def require_tensor(name: str, x: object) -> Tensor:
    if not isinstance(x, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    return x


def require_shape(name: str, x: Tensor, shape: tuple[int | None, ...], meaning: str) -> None:
    """Check rank and the sizes that are given (None = any size)."""
    ok = x.dim() == len(shape) and all(s is None or s == d for s, d in zip(shape, x.shape))
    if not ok:
        want = "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
        raise ValueError(f"{name} must have shape {want} ({meaning}), got {list(x.shape)}")


def require_float(name: str, x: Tensor) -> None:
    if x.dtype not in FLOAT_DTYPES:
        raise ValueError(f"{name} must be float32 or float64, got {x.dtype}")


def require_float_dtype(name: str, dtype: torch.dtype) -> None:
    """An output dtype argument: float32 or float64."""
    if dtype not in FLOAT_DTYPES:
        raise ValueError(f"{name} must be torch.float32 or torch.float64, got {dtype}")


def require_integer(name: str, x: Tensor) -> None:
    if x.dtype not in INT_DTYPES:
        raise ValueError(
            f"{name} must be an integer tensor (symbol indices), got {x.dtype}; "
            f"convert with {name}.long() if the values are whole numbers"
        )


def require_same(name: str, x: Tensor, ref_name: str, ref: Tensor) -> None:
    if x.dtype != ref.dtype:
        raise ValueError(f"{name} must have the dtype of {ref_name} ({ref.dtype}), got {x.dtype}")
    if x.device != ref.device:
        raise ValueError(f"{name} must be on the device of {ref_name} ({ref.device}), got {x.device}")


def _where(mask: Tensor) -> str:
    """Describe the first True entry of a boolean mask as 'index (b, i, ...)'."""
    idx = mask.nonzero()[0].tolist()
    return "index (" + ", ".join(str(i) for i in idx) + ")"


def require_distribution_rows(name: str, x: Tensor) -> None:
    """Non-negative, finite entries, every row (last dim) summing to 1 within ROW_SUM_ATOL."""
    bad = ~torch.isfinite(x)
    if bool(bad.any()):
        raise ValueError(f"{name} must be finite (no NaN or inf); found {x[bad][0].item()} at {_where(bad)}")
    neg = x < 0
    if bool(neg.any()):
        raise ValueError(f"{name} must be non-negative; found {x[neg][0].item()} at {_where(neg)}")
    atol = ROW_SUM_ATOL[x.dtype]
    sums = x.sum(-1, dtype=torch.float64)
    off = (sums - 1.0).abs() > atol
    if bool(off.any()):
        raise ValueError(
            f"every row of {name} (last dimension) must be a probability distribution summing to 1 "
            f"within {atol:g} for {x.dtype}; row {_where(off)[6:]} sums to {sums[off][0].item():.8g}"
        )


def require_range(name: str, x: Tensor, low: int, high: int) -> None:
    """Every entry in [low, high) (the number of symbols names the rule)."""
    if x.numel() == 0:
        return
    bad = (x < low) | (x >= high)
    if bool(bad.any()):
        raise ValueError(
            f"{name} must lie in [{low}, {high - 1}]; found {x[bad][0].item()} at {_where(bad)}"
        )


def require_positive(name: str, value: float) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number, got {value!r}") from None
    if not v > 0 or v != v or v == float("inf"):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return v


def check_hmm_inputs(trans: Tensor, emit: Tensor, obs: Tensor, init: Tensor | None) -> None:
    """All checks of `hmm_filter` that do not need the forward pass."""
    for name, x in (("trans", trans), ("emit", emit), ("obs", obs)):
        require_tensor(name, x)
    require_float("trans", trans)
    require_shape("trans", trans, (None, None, None), "batch, from-state, to-state")
    B, S, S2 = trans.shape
    if S != S2:
        raise ValueError(f"trans must be square in its last two dimensions [B, S, S], got {list(trans.shape)}")
    if S < 1:
        raise ValueError("trans must have at least one state (S >= 1)")
    require_same("emit", emit, "trans", trans)
    require_shape("emit", emit, (B, S, None), f"batch B={B}, state S={S}, symbol V")
    if emit.shape[2] < 1:
        raise ValueError("emit must have at least one symbol (V >= 1)")
    require_integer("obs", obs)
    require_shape("obs", obs, (B, None), f"batch B={B}, time L")
    if obs.device != trans.device:
        raise ValueError(f"obs must be on the device of trans ({trans.device}), got {obs.device}")
    if init is not None:
        require_tensor("init", init)
        require_same("init", init, "trans", trans)
        require_shape("init", init, (B, S), f"batch B={B}, state S={S}")
        require_distribution_rows("init", init)
    require_distribution_rows("trans", trans)
    require_distribution_rows("emit", emit)
    require_range("obs", obs, 0, emit.shape[2])


def raise_if_impossible(dead_step: Tensor) -> None:
    """`dead_step[b]` is the first step with zero likelihood for HMM b, or -1 (both backends)."""
    dead = dead_step >= 0
    if bool(dead.any()):
        b = int(dead.nonzero()[0, 0])
        count = int(dead.sum())
        raise ValueError(
            f"obs is impossible under the HMM: batch element {b} has zero likelihood at step "
            f"{int(dead_step[b])} (no state can emit that symbol after the previous ones)"
            + (f"; {count} batch elements are impossible in all" if count > 1 else "")
        )


def check_bijection_inputs(keys: Tensor, values: Tensor, V: int) -> None:
    """Shapes, ranges and consistency of (key, value) pairs with one bijection per sequence."""
    positive_int("V", V)
    require_tensor("keys", keys)
    require_tensor("values", values)
    require_integer("keys", keys)
    require_integer("values", values)
    require_shape("keys", keys, (None, None), "batch B, position L")
    require_shape("values", values, tuple(keys.shape), "the shape of keys")
    if values.device != keys.device:
        raise ValueError(f"values must be on the device of keys ({keys.device}), got {values.device}")
    require_range("keys", keys, 0, V)
    require_range("values", values, 0, V)
    if keys.shape[1] < 2 or keys.shape[0] == 0:
        return
    k, v = keys.long(), values.long()
    # A pairing is a bijection iff each key has one value and each value one key: compare the
    # smallest and largest partner per symbol (O(B L)); locate the culprit only on failure.
    B = k.shape[0]
    for a, b_ in ((k, v), (v, k)):
        lo = torch.full((B, V), V, dtype=torch.long, device=k.device).scatter_reduce(1, a, b_, "amin")
        hi = torch.full((B, V), -1, dtype=torch.long, device=k.device).scatter_reduce(1, a, b_, "amax")
        bad = (hi >= 0) & (lo != hi)
        if bool(bad.any()):
            _raise_contradiction(k, v, int(bad.nonzero()[0, 0]))


def _raise_contradiction(k: Tensor, v: Tensor, b: int) -> None:
    """Name the first pair of positions in sequence b that no bijection can produce."""
    kb, vb = k[b], v[b]
    same_key = kb.unsqueeze(1) == kb.unsqueeze(0)
    same_val = vb.unsqueeze(1) == vb.unsqueeze(0)
    two_values = same_key & ~same_val
    if bool(two_values.any()):
        i, j = two_values.nonzero()[0].tolist()
        raise ValueError(
            f"values contradict a bijection: in batch element {b}, key {int(kb[i])} has value "
            f"{int(vb[i])} at position {i} and value {int(vb[j])} at position {j} "
            "(a bijection maps each key to one value)"
        )
    i, j = (same_val & ~same_key).nonzero()[0].tolist()
    raise ValueError(
        f"values contradict a bijection: in batch element {b}, keys {int(kb[i])} (position {i}) "
        f"and {int(kb[j])} (position {j}) both have value {int(vb[i])} "
        "(a bijection gives distinct keys distinct values)"
    )


def check_sequence_inputs(name: str, seq: Tensor, V: int) -> None:
    """A batch of symbol sequences [B, L] over V symbols."""
    int_at_least("V", V, 2)
    require_tensor(name, seq)
    require_integer(name, seq)
    require_shape(name, seq, (None, None), "batch B, position L")
    require_range(name, seq, 0, V)
