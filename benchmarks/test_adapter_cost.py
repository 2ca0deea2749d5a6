"""What the adapter costs: a plain-PyTorch model trained through `from_module` against the zoo's
ensemble-native model of the same architecture and size.

CPU, E = 4 seeds, quick bijection (V = 8, batch 64): `PlainGPT` below is the zoo transformer
(2 layers, 2 heads, d 64, FFN 256, learned positions, pre-norm, GELU) written as an ordinary
single-model nn.Module (same parameter count, asserted). One training step of each, in the same
process, interleaved: the native `transformer`, the adapted module on the vmap path, and the
same module forced onto the loop fallback. Goal: the vmapped adapter costs at most 2x the native
step (a CPU timing goal: reported, asserted with BAYESBENCH_ASSERT_CPU_GOALS=1, as
benchmarks/timing.py says); the ratios go to extra_info.

Also report-only: which of the zoo's architectures the vmap path handles when a model is
written as a plain single-model module (the zoo's own E = 1 models, wrapped).
"""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn.functional as F
from timing import check_cpu_goal, interleaved
from torch import nn

from bayesbench.models import TaskShape, build_model, count_params, from_module, list_models, register_module
from bayesbench.tasks import get_task
from bayesbench.training.config import TrainConfig
from bayesbench.training.trainer import Trainer

QUICK = dict(n_layer=2, n_head=2, d_model=64, d_ffn=256)


class PlainBlock(nn.Module):
    def __init__(self, d: int, heads: int, ffn: int, n_layer: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, ffn), nn.Linear(ffn, d)
        for lin in (self.qkv, self.fc):
            nn.init.normal_(lin.weight, std=0.02)
            nn.init.zeros_(lin.bias)
        for lin in (self.proj, self.out):
            nn.init.normal_(lin.weight, std=0.02 / math.sqrt(2 * n_layer))
            nn.init.zeros_(lin.bias)

    def attention(self, x):
        B, T, d = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        y = scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v
        return self.proj(y.transpose(1, 2).reshape(B, T, d))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.out(F.gelu(self.fc(self.ln_2(x))))


class PlainGPT(nn.Module):
    """The zoo transformer's architecture as a plain model: tokens [B, L] -> logits [B, L, C]."""

    def __init__(self, spec: TaskShape, n_layer=2, n_head=2, d_model=64, d_ffn=256) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(spec.vocab_size, d_model), nn.Embedding(spec.max_len, d_model)
        nn.init.normal_(self.tok.weight, std=0.02)
        nn.init.normal_(self.pos.weight, std=0.02)
        self.blocks = nn.ModuleList(PlainBlock(d_model, n_head, d_ffn, n_layer) for _ in range(n_layer))
        self.ln_f, self.head = nn.LayerNorm(d_model), nn.Linear(d_model, spec.num_classes)

    def forward(self, tokens):
        x = self.tok(tokens) + self.pos.weight[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


register_module("bench-plain-gpt", PlainGPT)


def test_adapter_cost_per_step_cpu(benchmark):
    task = get_task("bijection", V=8)
    cfg = TrainConfig(steps=10**9, batch_size=64, lr=1e-3)
    E = 4
    native = Trainer(task, "transformer", list(range(E)), cfg, model_cfg=QUICK)
    vmapped = Trainer(task, "bench-plain-gpt", list(range(E)), cfg, model_cfg=QUICK)
    looped = Trainer(task, "bench-plain-gpt", list(range(E)), cfg, model_cfg=QUICK)
    looped.model.set_path("loop")
    assert vmapped.model.path == "vmap"
    assert vmapped.model.num_params() == native.model.num_params() == count_params("transformer", task, **QUICK)
    t_native, t_vmap = interleaved(native.train_step, vmapped.train_step, rounds=5, n=10, warmup=3)
    t_native2, t_loop = interleaved(native.train_step, looped.train_step, rounds=3, n=10, warmup=2)
    benchmark.pedantic(vmapped.train_step, rounds=10, iterations=1)
    ratio_vmap, ratio_loop = t_vmap / t_native, t_loop / t_native2
    benchmark.extra_info.update({
        "members": E, "params_per_member": native.model.num_params(), "threads": torch.get_num_threads(),
        "native_steps_per_s": 1 / t_native, "adapted_vmap_steps_per_s": 1 / t_vmap,
        "adapted_loop_steps_per_s": 1 / t_loop, "vmap_cost_vs_native": ratio_vmap,
        "loop_cost_vs_native": ratio_loop, "goal": "vmap <= 2.0x native",
        "goal_status": check_cpu_goal(ratio_vmap, 2.0, "the vmapped adapter's step vs a native step", at_most=True),
    })
    print(f"\nE={E}, {native.model.num_params():,} params/member, batch 64, CPU {torch.get_num_threads()} threads: "
          f"native {1 / t_native:.1f} steps/s, adapted vmap {1 / t_vmap:.1f} ({ratio_vmap:.2f}x the native step), "
          f"adapted loop {1 / t_loop:.1f} ({ratio_loop:.2f}x)")


class ZooSolo(nn.Module):
    """A zoo architecture's E = 1 model as a plain module (tokens [B, L] -> logits [B, L, C]),
    its input checks skipped (they read tensor values, which vmap forbids)."""

    def __init__(self, spec: TaskShape, arch: str) -> None:
        super().__init__()
        self.model = build_model(arch, spec, ensemble=1, **ZOO_SIZES.get(arch, {}))
        self.model.init_members([int(torch.randint(0, 2**31, ()))])
        self.model.check_inputs = lambda tokens, header: None

    def forward(self, tokens):
        return self.model(tokens.unsqueeze(0)).squeeze(0)


ZOO_SIZES = {"transformer": dict(n_layer=1, n_head=2, d_model=16, d_ffn=32),
             "transformer-no-late-attention": dict(n_layer=2, n_head=2, d_model=16, d_ffn=32, attn_off_top=1),
             "linear-attention": dict(n_layer=1, n_head=2, d_model=16, d_ffn=32),
             "toy-attention": dict(d_model=8), "mlp": dict(depth=2, width=16), "mlp-prefix": dict(depth=2, width=16),
             "lstm": dict(n_layer=1, d_model=16), "gru": dict(n_layer=1, d_model=16),
             "mamba": dict(n_layer=1, d_model=16, d_state=4)}


def test_which_zoo_architectures_vmap(benchmark):
    """Report-only: the forward path the adapter picks for each zoo architecture as a plain module."""
    task = get_task("bijection", V=4)
    paths = {}
    for arch in [a for a in list_models() if a in ZOO_SIZES]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = from_module(lambda spec, arch=arch: ZooSolo(spec, arch), task, seeds=[0, 1])
        paths[arch] = model.path if model.path == "vmap" else f"loop ({model.cfg.fallback[:90]})"
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    benchmark.extra_info.update(paths)
    print("\n" + "\n".join(f"{a}: {p}" for a, p in paths.items()))
    assert paths["mlp"] == "vmap" and paths["gru"].startswith("loop")
