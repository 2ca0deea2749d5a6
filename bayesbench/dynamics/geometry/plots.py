"""Figures of `bayesbench geometry`: layer-0 key cosines, attention entropy by layer, the value
manifold's PC1 against the posterior entropy, and the ablation ratios.

Every figure's heading says what was measured (`setting`: the model, task, training steps, seeds
and evaluation sequences, given by the study); values over seeds are drawn as the seeds
themselves (points) and the interval the study reports for them (docs/geometry.md)."""

from __future__ import annotations

import os

import torch

from ...figures import count, heading, save, subplots, unique_legend
from ...stats import logit_interval, ratio_interval
from .measure import ERRORS, Geometry, random_abs_cos


def key_cosines(path: str, g: Geometry, setting: str = "") -> str:
    """|cos| between layer-0 keys of each token group (rows), one panel per head (first seed)."""
    H = g.keys[0].cos.shape[1]
    fig, axes = subplots(len(g.keys), H, figsize=(3.4 * H + 1.6, 3.4 * len(g.keys) + 1.0), squeeze=False)
    for r, k in enumerate(g.keys):
        for h in range(H):
            ax = axes[r][h]
            im = ax.imshow(k.cos[0, h].abs().numpy(), vmin=0, vmax=1, cmap="magma")
            ax.set_title(f"{k.name}, head {h}: mean off-diagonal {float(k.offdiag[0, h]):.2f}", fontsize=8)
            ax.set_xticks(range(len(k.tokens)), k.tokens, fontsize=6)
            ax.set_yticks(range(len(k.tokens)), k.tokens, fontsize=6)
            ax.set(xlabel="token id", ylabel="token id")
    bar = fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8)
    bar.set_label("|cos| between the two tokens' layer-0 keys")
    bar.ax.axhline(random_abs_cos(g.d_head), color="tab:cyan", lw=2)
    heading(fig, f"layer-0 key cosines, seed {g.seeds[0]}", setting,
            f"cyan mark on the colour bar: random directions in {g.d_head} dims ({random_abs_cos(g.d_head):.2f})",
            fontsize=9)
    return save(fig, path)


def _seeds_and_interval(ax, x: float, values: list[float], interval: dict, color: str, what: str) -> None:
    """The seeds as points beside x and the study's interval of their mean as an error bar at x
    (the same two labels at every x: one legend entry each)."""
    n = len(values)
    offsets = [0.0] if n == 1 else [-0.12 + 0.24 * i / (n - 1) for i in range(n)]
    ax.scatter([x + 0.18 + o / 2 for o in offsets], values, s=14, color="0.25", zorder=3,
               label="one seed")
    m, lo, hi = interval["mean"], interval["ci_low"], interval["ci_high"]
    err = [[m - lo], [hi - m]] if lo == lo and hi == hi else None  # no bounds with one seed
    ax.errorbar([x], [m], yerr=err, fmt="o", color=color, ms=6, capsize=4, zorder=4,
                label=f"their mean, {what}")


def entropy_by_layer(path: str, g: Geometry, setting: str = "", g0: Geometry | None = None) -> str:
    """Mean attention entropy / log2(i+1) per layer: each seed (mean over heads) and the mean over
    seeds with its logit-t 95% interval; beside it the same seeds at initialisation (`g0`)."""
    layers = sorted(g.attn_entropy_ratio)
    fig, ax = subplots(figsize=(6.4, 4.6))
    for i in layers:
        values = [float(v) for v in g.attn_entropy_ratio[i].mean(1)]
        _seeds_and_interval(ax, i, values, logit_interval(values), "tab:blue", "95% logit-t interval (trained)")
        if g0 is not None:
            v0 = [float(v) for v in g0.attn_entropy_ratio[i].mean(1)]
            _seeds_and_interval(ax, i - 0.35, v0, logit_interval(v0), "tab:gray", "the same at initialisation")
    ax.axhline(1.0, color="0.4", ls="--", lw=1, label="uniform attention (ratio 1)")
    ax.set_xticks(layers)
    ax.set_xlim(layers[0] - 0.7, layers[-1] + 0.7)
    ax.set(xlabel="layer", ylabel="attention entropy / uniform attention's log2(i+1)", ylim=(0, 1.1))
    unique_legend(ax, loc="lower left")
    heading(fig, f"attention entropy by layer ({count(len(g.seeds), 'seed')}, mean over heads)", setting, fontsize=9)
    return save(fig, path, grid=True)


def value_manifold(path: str, g: Geometry, setting: str = "") -> str:
    """PC1 of the last attention layer's outputs against the exact posterior entropy (first seed)."""
    if g.value_points is None:
        raise ValueError("the value manifold needs the measurement's value_points (PC1 and posterior entropy)")
    pc1, h = g.value_points
    last = max(g.value_spearman)
    fig, ax = subplots(figsize=(6.4, 4.8))
    n = min(4000, pc1.numel())
    idx = torch.randperm(pc1.numel(), generator=torch.Generator().manual_seed(0))[:n]
    ax.scatter(h[idx].numpy(), pc1[idx].numpy(), s=3, alpha=0.4)
    ax.set_xlabel("exact posterior entropy (bits)")
    ax.set_ylabel(f"PC1 of layer-{last} attention output (standardised)")
    drawn = f"{n} scored positions" if n == pc1.numel() else f"{n} of {pc1.numel()} scored positions (random)"
    ax.set_title(f"{drawn}; Spearman rho = {g.value_spearman[last][0]:+.3f} (PC1 sign-aligned)",
                 fontsize=9)
    heading(fig, f"value manifold, seed {g.seeds[0]}", setting, fontsize=9)
    return save(fig, path, grid=True)


def ablations(path: str, g: Geometry, setting: str = "") -> str:
    """Entropy MAE ratio (ablated / intact, per sequence) of each seed and their geometric mean
    with the study's log-t 95% interval: heads (left), whole layers (right)."""
    m = ERRORS.index("entropy_mae")
    intact = g.intact_mae[m]
    fig, (a1, a2) = subplots(1, 2, figsize=(10, 4.4))
    groups = ((a1, [(f"L{i}H{h}", g.head_mae[(i, h)][m]) for i, h in g.head_mae], "tab:purple",
               "one head zeroed", "head zeroed (layer, head)"),
              (a2, [(f"L{i}", g.layer_mae[i][m]) for i in g.layer_mae], "tab:orange",
               "one block skipped (attention + FFN)", "block skipped (layer)"))
    for ax, items, color, title, xlabel in groups:
        ratios = [(mae / intact).tolist() for _, mae in items]
        intervals = [ratio_interval(r) for r in ratios]
        ax.bar(range(len(items)), [r["mean"] for r in intervals], color=color, alpha=0.45, width=0.6,
               label="geometric mean over seeds")
        for j, (values, r) in enumerate(zip(ratios, intervals)):
            _seeds_and_interval(ax, j, values, r, color, "log-t 95% interval")
        ax.set_xticks(range(len(items)), [name for name, _ in items])
        ax.axhline(1.0, color="k", lw=0.8, label="intact model (ratio 1)")
        ax.set(yscale="log", title=title, xlabel=xlabel)
        ax.title.set_fontsize(9)
        ax.grid(alpha=0.3, axis="y")
        unique_legend(ax, loc="upper right")
    a1.set_ylabel("entropy MAE ablated / intact")
    a2.set_ylabel("entropy MAE ablated / intact")
    heading(fig, f"ablations: entropy MAE per sequence relative to the intact model "
                 f"(bars: geometric mean over {count(len(g.seeds), 'seed')})", setting, fontsize=9)
    return save(fig, path)


def all_figures(out_dir: str, g: Geometry, setting: str = "", g0: Geometry | None = None) -> list[str]:
    """The four figures in `out_dir`; `setting` (what was measured, in words) heads each; `g0`
    the same seeds at initialisation, where a figure shows it."""
    os.makedirs(out_dir, exist_ok=True)
    return [key_cosines(os.path.join(out_dir, "key_cosines.png"), g, setting),
            entropy_by_layer(os.path.join(out_dir, "attention_entropy_by_layer.png"), g, setting, g0),
            value_manifold(os.path.join(out_dir, "value_manifold.png"), g, setting),
            ablations(os.path.join(out_dir, "ablations.png"), g, setting)]
