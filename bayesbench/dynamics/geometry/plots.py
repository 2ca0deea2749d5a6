"""Figures of `bayesbench geometry`: layer-0 key cosines, attention entropy by layer, the value
manifold's PC1 against the posterior entropy, and the ablation ratios."""

from __future__ import annotations

import os

import torch

from ...store.figures import pyplot, save
from .measure import Geometry, random_abs_cos


def key_cosines(path: str, g: Geometry) -> str:
    """|cos| between layer-0 keys of each token group (rows), one panel per head (first seed)."""
    plt = pyplot()
    H = g.keys[0].cos.shape[1]
    fig, axes = plt.subplots(len(g.keys), H, figsize=(3.6 * H + 1, 3.8 * len(g.keys)), squeeze=False)
    for r, k in enumerate(g.keys):
        for h in range(H):
            ax = axes[r][h]
            im = ax.imshow(k.cos[0, h].abs().numpy(), vmin=0, vmax=1, cmap="magma")
            ax.set_title(f"{k.name}, head {h}\nmean off-diagonal |cos| {float(k.offdiag[0, h]):.2f}", fontsize=8)
            ax.set_xticks(range(len(k.tokens)), k.tokens, fontsize=6)
            ax.set_yticks(range(len(k.tokens)), k.tokens, fontsize=6)
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8)
    fig.suptitle(f"layer-0 keys, seed {g.seeds[0]} (random directions in {g.d_head} dims: "
                 f"{random_abs_cos(g.d_head):.2f})", fontsize=8)
    return save(fig, path, tight=False, bbox_inches="tight")


def entropy_by_layer(path: str, g: Geometry) -> str:
    """Mean attention entropy / log2(i+1) per layer, one line per seed (mean over heads)."""
    plt = pyplot()
    layers = sorted(g.attn_entropy_ratio)
    fig, ax = plt.subplots(figsize=(5, 3.4))
    for e, s in enumerate(g.seeds):
        ax.plot(layers, [float(g.attn_entropy_ratio[i][e].mean()) for i in layers], marker="o", label=f"seed {s}")
    ax.set_xticks(layers)
    ax.set_xlabel("layer")
    ax.set_ylabel("attention entropy / uniform (log2(i+1))")
    ax.set_ylim(0, 1.05)
    return save(fig, path, grid=True, legend=True)


def value_manifold(path: str, g: Geometry) -> str:
    """PC1 of the last attention layer's outputs against the exact posterior entropy (first seed)."""
    plt = pyplot()
    pc1, h = g.value_points
    last = max(g.value_spearman)
    fig, ax = plt.subplots(figsize=(5, 3.6))
    n = min(4000, pc1.numel())
    idx = torch.randperm(pc1.numel(), generator=torch.Generator().manual_seed(0))[:n]
    ax.scatter(h[idx].numpy(), pc1[idx].numpy(), s=3, alpha=0.4)
    ax.set_xlabel("exact posterior entropy (bits)")
    ax.set_ylabel(f"PC1 of layer-{last} attention output")
    ax.set_title(f"seed {g.seeds[0]}: Spearman rho = {g.value_spearman[last][0]:+.3f} (PC1 sign-aligned)", fontsize=9)
    return save(fig, path, grid=True)


def ablations(path: str, g: Geometry) -> str:
    """Entropy MAE ratio (ablated / intact, per sequence), mean over seeds: heads (left), whole
    layers (right)."""
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.4))
    intact = g.intact_mae[0]
    hk = list(g.head_mae)
    a1.bar([f"L{i}H{h}" for i, h in hk], [float((g.head_mae[k][0] / intact).mean()) for k in hk], color="tab:purple")
    a1.set_ylabel("entropy MAE / intact")
    a1.set_title("one head zeroed", fontsize=9)
    a1.set_yscale("log")
    lk = list(g.layer_mae)
    a2.bar([f"L{i}" for i in lk], [float((g.layer_mae[k][0] / intact).mean()) for k in lk], color="tab:orange")
    a2.set_title("one block skipped (attention + FFN)", fontsize=9)
    a2.set_yscale("log")
    for ax in (a1, a2):
        ax.axhline(1.0, color="k", lw=0.8)
        ax.grid(alpha=0.3, axis="y")
    return save(fig, path)


def all_figures(out_dir: str, g: Geometry) -> list[str]:
    os.makedirs(out_dir, exist_ok=True)
    return [key_cosines(os.path.join(out_dir, "key_cosines.png"), g),
            entropy_by_layer(os.path.join(out_dir, "attention_entropy_by_layer.png"), g),
            value_manifold(os.path.join(out_dir, "value_manifold.png"), g),
            ablations(os.path.join(out_dir, "ablations.png"), g)]
