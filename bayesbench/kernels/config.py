"""Launch configuration: one fixed tile shape per (device, dtype, head dim), no autotuning.

On a GPU the shapes follow FlashAttention-2 practice (long query blocks in the forward and the
dq pass, long key blocks in the dk/dv pass); they were chosen so that every kernel variant
compiles for sm_90 with (almost) no register spills in half precision (checked without a GPU
with `triton.compile` + cuobjdump resource usage; not yet tuned on a GPU). Under TRITON_INTERPRET
the kernels run in numpy; the blocks there are kept unequal on purpose so that the CPU tests
exercise the same causal-boundary logic (BLOCK_M != BLOCK_N, partial blocks) as the GPU.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch


def interpreting() -> bool:
    """True when Triton kernels run in the interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def next_pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


@dataclass(frozen=True)
class Tile:
    m: int  # query rows per tile
    n: int  # key rows per tile
    warps: int = 4
    stages: int = 1


@dataclass(frozen=True)
class Config:
    block_d: int  # head dim padded to a power of two (>= 16 for tl.dot)
    fwd: Tile  # program owns m queries, loops over n keys
    dkdv: Tile  # program owns n keys, loops over m queries
    dq: Tile  # program owns m queries, loops over n keys (also the Delta pass)
    upcast: bool  # load tiles as float32 (interpreter: numpy has no bf16 matmul)
    precision: str  # tl.dot input_precision for float32 tiles


def choose_config(q: torch.Tensor) -> Config:
    """Tile shapes for q's device, dtype and head dim."""
    allow_tf32 = q.device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32
    return config_for(q.device.type, q.dtype, q.shape[-1], allow_tf32)


def config_for(device_type: str, dtype: torch.dtype, head_dim: int, allow_tf32: bool = False) -> Config:
    """Tile shapes for a device type ("cuda" or "cpu"), dtype and head dim (the ahead-of-time
    sm_90 compile in `aot.py` uses this without a tensor or a GPU)."""
    block_d = max(16, next_pow2(head_dim))
    # float32 follows torch's matmul flag: TF32 when allowed, else 3-pass TF32 ("tf32x3",
    # close to full float32 accuracy on tensor cores). Half-precision tiles ignore it.
    precision = "tf32" if allow_tf32 else "tf32x3"
    if device_type != "cuda":
        cfg = Config(block_d, Tile(32, 16), Tile(16, 32), Tile(32, 16), True, "ieee")
    else:
        wide = block_d > 64
        if dtype == torch.float32:  # fp32 tiles (split into hi/lo for tf32x3) need small blocks
            if not wide:
                tiles = Tile(64, 32, 4, 2), Tile(16, 64, 4, 1), Tile(64, 16, 4, 1)
            else:
                tiles = Tile(64, 16, 4, 2), Tile(32, 32, 8, 1), Tile(32, 32, 8, 1)
        elif not wide:
            tiles = Tile(128, 64, 8, 3), Tile(32, 128, 8, 3), Tile(128, 32, 8, 3)
        else:
            tiles = Tile(128, 32, 8, 3), Tile(16, 64, 8, 2), Tile(64, 32, 8, 2)
        cfg = Config(block_d, *tiles, upcast=False, precision=precision)
    check_tiles(cfg)
    return cfg


def check_tiles(cfg: Config) -> None:
    """The split loops need the query tile to be a multiple of the key tile in the forward and
    dq passes (a query block's diagonal is whole key blocks) and the reverse in dk/dv."""
    for name, tile in (("fwd", cfg.fwd), ("dq", cfg.dq)):
        assert tile.m % tile.n == 0, f"{name} tile {tile}: m must be a multiple of n"
    assert cfg.dkdv.n % cfg.dkdv.m == 0, f"dkdv tile {cfg.dkdv}: n must be a multiple of m"
