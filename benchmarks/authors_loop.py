"""A second baseline: the authors' own model and optimiser, loaded from a checkout of their code.

The authors' bijection training script (`experiments/paper1_bijection/train.py` of
vishalmisra/bayesian-wind-tunnel, the code of Paper I, arXiv 2512.22471) defines its TinyGPT
(pre-norm blocks with RMSNorm, attention written as matmul + softmax, tied embeddings) and trains
it with torch.optim.Adam and `clip_grad_norm_` at 1.0. Nothing of it is copied here: the module is
imported from the checkout named by BAYESBENCH_AUTHORS_REPO, and `AuthorsLoop.step()` trains their
model, as their script builds it at the quick size, on bayesbench's data stream (one seed).
Without the variable the benchmarks that need it are skipped, saying how to run them.
"""

from __future__ import annotations

import importlib.util
import os

import torch
import torch.nn.functional as F

from bayesbench.tasks import Task
from bayesbench.training.stream import MemberStream

ENV = "BAYESBENCH_AUTHORS_REPO"
SCRIPT = os.path.join("experiments", "paper1_bijection", "train.py")


def authors_script():
    """The authors' training script as a module, or None when ENV does not name a checkout."""
    root = os.environ.get(ENV)
    if not root:
        return None
    path = os.path.join(root, SCRIPT)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{ENV}={root}: no {SCRIPT} there (a checkout of vishalmisra/bayesian-wind-tunnel)")
    spec = importlib.util.spec_from_file_location("authors_bijection_train", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class AuthorsLoop:
    """`step()` = sample a batch, their TinyGPT forward, cross-entropy on the supervised positions,
    their optimiser step (Adam, gradient norm clipped at 1)."""

    def __init__(self, script, task: Task, seed: int, batch_size: int, *, d: int, layers: int, heads: int,
                 lr: float = 1e-3) -> None:
        torch.manual_seed(seed)
        batch = task.sample(1, torch.Generator().manual_seed(0))
        vocab = max(task.vocab_size, task.num_classes)
        self.model = script.TinyGPT(vocab, batch.tokens.shape[1], n_layers=layers, n_heads=heads, dim=d)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.stream = MemberStream(task, seed, batch_size)

    def step(self) -> None:
        batch = self.stream.next()
        logits, _ = self.model(batch.tokens)
        loss = F.cross_entropy(logits[batch.mask], batch.targets[batch.mask])
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
