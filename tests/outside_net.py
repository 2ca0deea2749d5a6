"""A small model from outside the package, for the sweep tests: `build(spec, width=8)` makes one
module, tokens [B, L] -> logits [B, L, C] (a running sum of token and position embeddings, then a
linear head). Used as a file ('./mine.py:build', a copy) and by module path ('outside_net:build',
pytest puts tests/ on sys.path)."""

from __future__ import annotations

from torch import nn


class Net(nn.Module):
    def __init__(self, spec, width: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(spec.vocab_size, width)
        self.pos = nn.Embedding(spec.max_len, width)
        self.head = nn.Linear(width, spec.num_classes)

    def forward(self, tokens):
        return self.head((self.embed(tokens) + self.pos.weight[: tokens.shape[1]]).cumsum(1))


def build(spec, width: int = 8) -> Net:
    return Net(spec, width)


def broken(spec) -> Net:
    raise RuntimeError("this factory always fails")


def params(width: int, vocab: int, max_len: int, classes: int) -> int:
    """Parameters of one Net, counted by hand: two embeddings and the head's weight and bias."""
    return vocab * width + max_len * width + width * classes + classes
