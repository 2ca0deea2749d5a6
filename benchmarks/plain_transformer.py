"""The baseline the trainer is measured against: one plain single-model PyTorch training loop.

A GPT-style transformer of nn.Linear / nn.LayerNorm / nn.Embedding layers with SDPA attention,
trained by torch.optim.AdamW on the same data streams, nothing else (no ensemble dimension, no
per-member clipping, no divergence guard). It is what a researcher would write by hand for one
seed, so "the seed dimension costs nothing" means: bayesbench at E = 1 is at least as fast.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bayesbench.tasks import Task
from bayesbench.training.stream import MemberStream


class Block(nn.Module):
    def __init__(self, d: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        q, k, v = self.qkv(self.ln_1(x)).view(B, T, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, d)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln_2(x))))


class PlainTransformer(nn.Module):
    def __init__(self, vocab: int, classes: int, max_len: int, d: int, layers: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(Block(d, heads, ffn) for _ in range(layers))
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.tok(tokens) + self.pos.weight[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


class PlainLoop:
    """`step()` = sample a batch, forward, cross-entropy on the supervised positions, AdamW."""

    def __init__(self, task: Task, seed: int, batch_size: int, *, d: int, layers: int, heads: int, ffn: int,
                 lr: float = 1e-3, weight_decay: float = 0.01) -> None:
        torch.manual_seed(seed)
        batch = task.sample(1, torch.Generator().manual_seed(0))
        self.model = PlainTransformer(task.vocab_size, task.num_classes, batch.tokens.shape[1], d, layers, heads, ffn)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr, weight_decay=weight_decay)
        self.stream = MemberStream(task, seed, batch_size)

    def step(self) -> None:
        batch = self.stream.next()
        logits = self.model(batch.tokens)
        loss = F.cross_entropy(logits[batch.mask], batch.targets[batch.mask])
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
