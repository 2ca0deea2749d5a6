"""Attach routing-law probes to every attention layer of a transformer and reduce them per head.

The probe (`bayesbench.kernels.AttentionProbe`) is filled by the attention backward with
per-query / per-key vectors [E*B, H, T] (the ensemble folded into the batch, row e*B + b). This
module reduces them, on the device, to one number per (member, layer, head):

    attn_entropy       mean over sequences and queries of -sum_j alpha_ij log2 alpha_ij (bits)
    adv_abs_mean       mean over sequences and queries of (1/n_i) sum_j |A_ij|, n_i visible keys
    adv_abs_max        max over sequences, queries and keys of |A_ij|
    ds_norm            ||dL/ds||_F over the member's batch: sqrt(sum_{b,i,j} (alpha_ij A_ij)^2)
    value_update_mean  mean over sequences and keys of ||sum_i alpha_ij u_i|| (= ||dL/dv_j||)
    value_update_max   max over sequences and keys of the same norm

with A_ij = E_alpha_i[b] - b_ij the advantage and u_i = dL/dg_i (Paper II, arXiv 2512.22473,
section 3). L is the member's own loss (the ensemble's total loss is the sum over members).
"""

from __future__ import annotations

import torch
from torch import Tensor

from bayesbench.kernels.probe import AttentionProbe
from bayesbench.models.transformer import PROBE_BACKENDS, Transformer

PROBE_NAMES = ("attn_entropy", "adv_abs_mean", "adv_abs_max", "ds_norm", "value_update_mean", "value_update_max")


def profiled_transformer(model) -> Transformer:
    """`model` itself, checked to be a softmax-attention transformer; ValueError for any other model."""
    if not isinstance(model, Transformer):
        raise ValueError(f"profiling needs a softmax-attention transformer (arch 'transformer' or "
                         f"'transformer-no-late-attention'); got a {type(model).__name__}, which has no "
                         f"attention probe to record")
    return model


def attention_layers(model) -> list[int]:
    """Indices of the blocks that have softmax attention; ValueError for any other model."""
    layers = [i for i, b in enumerate(profiled_transformer(model).typed_blocks()) if b.attn is not None]
    if not layers:
        raise ValueError("this transformer has attention in no layer (attn_off_top = n_layer): nothing to profile")
    return layers


def _recorded(value: Tensor | None, name: str) -> Tensor:
    """A field of a filled probe: an error naming it when the backward did not record it."""
    if value is None:
        raise ValueError(f"probe.{name} is empty: the backward pass did not record it")
    return value


def summarize_probe(probe: AttentionProbe, ensemble: int) -> Tensor:
    """[len(PROBE_NAMES), E, H] summaries of one filled probe (float32, float64 for a float64
    model; stays on its device)."""
    if not probe.filled:
        raise ValueError("probe is empty: no backward pass has filled it")

    def split(value: Tensor | None, name: str) -> Tensor:  # probe.<name> [E*B, H, T] -> [E, B, H, T]
        x = _recorded(value, name)
        x = x.reshape(ensemble, -1, *x.shape[1:])
        return x if x.dtype == torch.float64 else x.float()

    ent = split(probe.entropy, "entropy")
    mean_a = split(probe.mean_abs_advantage, "mean_abs_advantage")
    max_a = split(probe.max_abs_advantage, "max_abs_advantage")
    dsn, vn = split(probe.ds_norm, "ds_norm"), split(probe.value_update_norm, "value_update_norm")
    return torch.stack([
        ent.mean((1, 3)), mean_a.mean((1, 3)), max_a.amax((1, 3)),
        dsn.pow(2).sum((1, 3)).sqrt(), vn.mean((1, 3)), vn.amax((1, 3)),
    ])


class ProbeSet:
    """Probes on every attention layer of `model` for one step.

    `attach(mode)` switches the layers to the probe backend and attaches fresh probes; after the
    backward, `summaries()` gives [names, E, L, H], `advantages()` the T x T advantage per layer
    (mode "full" only) and `detach()` restores the layers' own backend.
    """

    def __init__(self, model: Transformer, backend: str) -> None:
        if backend not in PROBE_BACKENDS:
            raise ValueError(f"attention must be one of {PROBE_BACKENDS} to profile, got {backend!r}")
        self.model, self.backend = model, backend
        self.layers = attention_layers(model)
        first = model.typed_blocks()[self.layers[0]].attn
        assert first is not None  # attention_layers lists the blocks that have attention
        self.original = first.backend
        self.probes: list[AttentionProbe] = []

    def attach(self, mode: str = "stats") -> None:
        self.detach()
        self.model.set_attention(self.backend)
        self.probes = [AttentionProbe(mode=mode) for _ in self.layers]
        for layer, probe in zip(self.layers, self.probes):
            self.model.set_probe(probe, layer)

    @property
    def attached(self) -> bool:
        return bool(self.probes)

    @property
    def filled(self) -> bool:
        return bool(self.probes) and all(p.filled for p in self.probes)

    def summaries(self) -> Tensor:
        """[len(PROBE_NAMES), E, L, H] on the model's device."""
        E = self.model.ensemble
        return torch.stack([summarize_probe(p, E) for p in self.probes], dim=2)

    def advantages(self) -> Tensor:
        """[L, E, B, H, T, T] advantage A_ij of every layer (needs mode 'full')."""
        E = self.model.ensemble
        if not all(p.full for p in self.probes):
            raise ValueError("advantages need probes of mode 'full'")
        advantages = [_recorded(p.advantage, "advantage") for p in self.probes]
        return torch.stack([a.reshape(E, -1, *a.shape[1:]) for a in advantages])

    def upstream(self) -> Tensor:
        """[L, E, B, H, T, Dh] u_i = dL/dg_i of every layer, the head outputs' gradient (mode 'full'):
        with alpha it gives the value push dL/dv_j = sum_i alpha_ij u_i (the M-step of Paper II)."""
        E = self.model.ensemble
        if not all(p.full for p in self.probes):
            raise ValueError("upstream gradients need probes of mode 'full'")
        upstream = [_recorded(p.u, "u") for p in self.probes]
        return torch.stack([u.reshape(E, -1, *u.shape[1:]) for u in upstream])

    def detach(self) -> None:
        if not self.probes:
            return
        for layer in self.layers:
            self.model.set_probe(None, layer)
        self.model.set_attention(self.original)
        self.probes = []
