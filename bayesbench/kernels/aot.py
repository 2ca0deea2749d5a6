"""Compile the attention kernels ahead of time for a CUDA target (default sm_90, the H100/H200)
without a GPU, and read each binary's resource usage: registers per thread, spilled bytes
(local memory) and shared memory per block.

Triton's `triton.compile` with an `ASTSource` and a `GPUTarget` runs the whole pipeline
(TTIR -> TTGIR -> LLVM -> PTX -> cubin, ptxas included, which triton ships) on any machine; the
cubin's resource usage comes from `cuobjdump --dump-resource-usage` (also shipped with triton).
The argument specialisation mirrors what the launcher sees for contiguous inputs with T a multiple
of 16: feature strides equal to 1 are compile-time constants, other strides, T, D and pointers are
divisible by 16.

    python -m bayesbench.kernels.aot --workers 2    # the full matrix as a Markdown table
    python -m bayesbench.kernels.aot --quick        # the representative subset the CI test compiles
"""

from __future__ import annotations

import argparse
import concurrent.futures
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass

import torch

from .config import Config, Tile, config_for

# The H100/H200 (sm_90) limit on shared memory per block (opt-in): 227 KB.
SM90_SMEM_PER_BLOCK = 227 * 1024
KERNELS = ("fwd", "delta", "dkdv", "dq")
PROBES = ("off", "stats", "full", "full_bf16")  # full_bf16: advantage/alpha kept in bfloat16
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
HEAD_DIMS = (16, 32, 64, 128)
_TRITON_TYPE = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


@dataclass(frozen=True)
class Variant:
    """One compiled kernel: which kernel, input dtype, head dim, causality, probe mode."""

    kernel: str
    dtype: str
    head_dim: int
    causal: bool
    probe: str

    @property
    def name(self) -> str:
        return f"{self.kernel}-{self.dtype}-D{self.head_dim}-{'causal' if self.causal else 'full'}-{self.probe}"


@dataclass(frozen=True)
class Usage:
    """Resource usage of one compiled variant."""

    variant: Variant
    tile: Tile
    registers: int  # per thread
    spill_bytes: int  # local memory per thread (register spills and stack arrays)
    shared_bytes: int  # shared memory per block (Triton's dynamic allocation + static)
    seconds: float  # compile time


def variants(quick: bool = False, dtypes: tuple[str, ...] = tuple(DTYPES),
             head_dims: tuple[int, ...] = HEAD_DIMS) -> list[Variant]:
    """Every distinct kernel variant (kernels that ignore a setting appear once for it).

    quick: a representative subset: every kernel at its largest tiles (D = 128 and 64) in bf16,
    the full probe (the register-heaviest dq) causal and not, and float32 (tf32x3) at D = 128.
    """
    if quick:
        return [
            Variant("fwd", "bf16", 64, True, "off"),
            Variant("delta", "bf16", 128, False, "off"),
            Variant("dkdv", "bf16", 128, True, "stats"),
            Variant("dq", "bf16", 64, False, "full"),
            Variant("dq", "bf16", 128, True, "full_bf16"),
            Variant("dq", "fp32", 128, True, "stats"),
        ]
    out = []
    for dtype, d in itertools.product(dtypes, head_dims):
        out.append(Variant("delta", dtype, d, False, "off"))
        for causal in (True, False):
            out.append(Variant("fwd", dtype, d, causal, "off"))
            out += [Variant("dkdv", dtype, d, causal, p) for p in ("off", "stats")]
            out += [Variant("dq", dtype, d, causal, p) for p in PROBES]
    return out


def _tile(cfg: Config, kernel: str) -> Tile:
    return {"fwd": cfg.fwd, "delta": cfg.dq, "dkdv": cfg.dkdv, "dq": cfg.dq}[kernel]


def _source(v: Variant, cfg: Config):
    """The ASTSource of one variant: signature types, constants and divisibility hints."""
    from triton.compiler import ASTSource

    from . import attention_bwd, attention_fwd

    fn = {"fwd": attention_fwd._attn_fwd, "delta": attention_bwd._bwd_delta,
          "dkdv": attention_bwd._bwd_dkdv, "dq": attention_bwd._bwd_dq}[v.kernel]
    tile = _tile(cfg, v.kernel)
    dt = _TRITON_TYPE[DTYPES[v.dtype]]
    mat = "bf16" if v.probe == "full_bf16" else "fp32"
    ptr_type = {n: f"*{dt}" for n in ("Q", "K", "V", "O", "DO", "DQ", "DK", "DV")}
    ptr_type.update({n: "*fp32" for n in ("LSE", "DELTA", "VNORM", "U", "ENT", "MEANA", "MAXA", "DSN")})
    ptr_type.update({n: f"*{mat}" for n in ("ADV", "ALPHA", "BMAT", "DSMAT")})
    full = v.probe.startswith("full")
    flags = {"CAUSAL": v.causal, "STATS": v.probe != "off", "FULL": full, "STORE_B": False, "STORE_DS": False,
             "UPCAST": cfg.upcast, "PRECISION": cfg.precision, "BLOCK_M": tile.m, "BLOCK_N": tile.n,
             "BLOCK_D": cfg.block_d}
    signature, constants, attrs = {}, {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in flags:
            signature[name], constants[name] = "constexpr", flags[name]
        elif name in ptr_type:
            signature[name] = ptr_type[name]
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif name in ("scale", "qk_scale"):
            signature[name] = "fp32"
        elif re.fullmatch(r"s[a-z]d", name):  # feature strides: 1 for contiguous inputs
            signature[name], constants[name] = "constexpr", 1
        else:  # other strides, H, T, D
            signature[name] = "i32"
            if name != "H":
                attrs[(i,)] = [["tt.divisibility", 16]]
    missing = [n for n in fn.arg_names if n not in signature]
    assert not missing, missing
    return ASTSource(fn=fn, signature=signature, constexprs=constants, attrs=attrs), tile


def cuobjdump_path() -> str:
    """cuobjdump shipped with triton, else the toolkit's."""
    import triton

    shipped = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    path = shipped if os.path.exists(shipped) else shutil.which("cuobjdump")
    if path is None:
        raise RuntimeError("cuobjdump not found (neither shipped with triton nor on PATH)")
    return path


def resource_usage(cubin: bytes) -> dict[str, int]:
    """REG, STACK, SHARED, LOCAL of the (single) function in a cubin, via cuobjdump."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([cuobjdump_path(), "--dump-resource-usage", f.name], capture_output=True,
                             text=True, check=True).stdout
    fields = dict(re.findall(r"\b(REG|STACK|SHARED|LOCAL):(\d+)", out))
    if "REG" not in fields:
        raise RuntimeError(f"no resource usage in cuobjdump output:\n{out}")
    return {k: int(v) for k, v in fields.items()}


def compile_variant(v: Variant, arch: int = 90) -> Usage:
    """Compile one variant for sm_<arch> and return its resource usage (no GPU needed)."""
    import time

    import triton
    from triton.backends.compiler import GPUTarget

    cfg = config_for("cuda", DTYPES[v.dtype], v.head_dim)
    src, tile = _source(v, cfg)
    target = GPUTarget("cuda", arch, 32)
    backend = triton.compiler.make_backend(target)
    options = backend.parse_options({"num_warps": tile.warps, "num_stages": tile.stages})
    start = time.perf_counter()
    compiled = triton.compile(src, target=target, options=options.__dict__)
    seconds = time.perf_counter() - start
    res = resource_usage(compiled.asm["cubin"])
    return Usage(v, tile, res["REG"], res.get("LOCAL", 0) + res.get("STACK", 0),
                 compiled.metadata.shared + res.get("SHARED", 0), seconds)


def usage_from_dict(d: dict) -> Usage:
    return Usage(Variant(**d["variant"]), Tile(**d["tile"]), d["registers"], d["spill_bytes"], d["shared_bytes"],
                 d["seconds"])


def compile_in_subprocesses(todo: list[Variant], arch: int = 90, workers: int = 1) -> list[Usage]:
    """compile_variant in fresh interpreters without TRITON_INTERPRET (under the interpreter
    @triton.jit yields functions the compiler cannot take), `workers` at a time; input order."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # the default; silences triton 3.9's notice
    chunks = [todo[i::workers] for i in range(workers)]

    def run(chunk: list[Variant]) -> list[Usage]:
        if not chunk:
            return []
        arg = json.dumps([asdict(v) for v in chunk])
        proc = subprocess.run([sys.executable, "-m", "bayesbench.kernels.aot", "--arch", str(arch), "--json", arg],
                              env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"compiling for sm_{arch} failed:\n{proc.stderr[-4000:]}")
        return [usage_from_dict(d) for d in json.loads(proc.stdout.strip().splitlines()[-1])]

    with concurrent.futures.ThreadPoolExecutor(max(1, workers)) as pool:
        results = list(pool.map(run, chunks))
    by_variant = {u.variant: u for chunk in results for u in chunk}
    return [by_variant[v] for v in todo]


def markdown(rows: list[Usage], arch: int = 90) -> str:
    """The resource table as Markdown."""
    import triton

    lines = [f"Compiled for sm_{arch} with Triton {triton.__version__} (no GPU; `python -m bayesbench.kernels.aot`).",
             "Registers per thread, spilled bytes per thread (local memory), shared memory per block.", "",
             "| kernel | dtype | D | causal | probe | tile (m x n, warps, stages) | registers | spill B | shared KB |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for u in rows:
        v, t = u.variant, u.tile
        lines.append(f"| {v.kernel} | {v.dtype} | {v.head_dim} | {'yes' if v.causal else 'no'} | {v.probe} | "
                     f"{t.m}x{t.n}, {t.warps}, {t.stages} | {u.registers} | {u.spill_bytes} | "
                     f"{u.shared_bytes / 1024:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="only the representative subset")
    parser.add_argument("--arch", type=int, default=90, help="CUDA compute capability x 10 (default 90)")
    parser.add_argument("--workers", type=int, default=1, help="compiling processes (default 1)")
    parser.add_argument("--dtypes", default=",".join(DTYPES), help="comma-separated subset of fp32,fp16,bf16")
    parser.add_argument("--dims", default=",".join(map(str, HEAD_DIMS)), help="comma-separated head dims")
    parser.add_argument("--json", metavar="VARIANTS", help=argparse.SUPPRESS)  # internal: one JSON line out
    args = parser.parse_args(argv)
    if args.json is not None:
        rows = [compile_variant(Variant(**d), args.arch) for d in json.loads(args.json)]
        print(json.dumps([asdict(u) for u in rows]))
        return
    todo = variants(args.quick, tuple(args.dtypes.split(",")), tuple(int(d) for d in args.dims.split(",")))
    print(f"compiling {len(todo)} variants for sm_{args.arch} in {args.workers} process(es)", file=sys.stderr)
    print(markdown(compile_in_subprocesses(todo, args.arch, args.workers), args.arch))


if __name__ == "__main__":
    main()
