"""Figures of an EM-vs-SGD study: loss curves against the Bayes floors, and Paper II section 7.1's
toy figures (attention heatmaps sharpening over the first ~100 steps, attention entropy over
training, PCA trajectories of the value prototypes mu_s W_V)."""

from __future__ import annotations

import torch
from torch import Tensor

from ...store.figures import pyplot, save

COLORS = {"sgd": "tab:red", "em": "tab:blue", "adamw": "tab:red", "adamw-em": "tab:blue", "wo10": "tab:green",
          "wqk10": "tab:purple", "sgd3": "tab:orange", "sgd10": "tab:brown"}


def loss_curves(path: str, losses: Tensor, schedules: list[str], floors: dict[str, float], title: str,
                steps: list[int] | None = None, ylabel: str = "training cross-entropy (nats)",
                ylim: tuple[float, float] | None = None) -> str:
    """Mean loss over seeds per schedule ([S, E, n] at `steps`, default 0..n-1), a band from the
    10th to the 90th percentile seed, and horizontal lines at each floor (nats)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    steps = torch.arange(losses.shape[-1]) if steps is None else torch.tensor(steps)
    for j, name in enumerate(schedules):
        curves = losses[j]
        lo, hi = torch.quantile(curves, torch.tensor([0.1, 0.9]), dim=0)
        ax.plot(steps, curves.mean(0), color=COLORS.get(name), label=f"{name} (mean of {curves.shape[0]} seeds)")
        ax.fill_between(steps, lo, hi, color=COLORS.get(name), alpha=0.2)
    for (label, value), style in zip(floors.items(), ("--", ":", "-.")):
        ax.axhline(value, color="black", linestyle=style, lw=1, label=f"{label} = {value:.4f}")
    ax.set_xlabel("full-batch update")
    ax.set_ylabel(ylabel)
    if ylim is not None:  # e.g. a diverging schedule's held-out loss shown to its edge, not its end
        ax.set_ylim(*ylim)
    ax.set_title(title)
    return save(fig, path, grid=True, legend=True)


def heatmaps(path: str, maps: dict[str, dict[int, Tensor]], seed: int) -> str:
    """Rows: schedules; columns: training steps; each panel the attention weights of the first
    positions (query rows, key columns)."""
    plt = pyplot()
    names = list(maps)
    steps = sorted(maps[names[0]])
    fig, axes = plt.subplots(len(names), len(steps), figsize=(2.2 * len(steps), 2.3 * len(names)), squeeze=False)
    for r, n in enumerate(names):
        for c, s in enumerate(steps):
            ax = axes[r][c]
            ax.imshow(maps[n][s].numpy(), cmap="viridis", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f"{n}, step {s}", fontsize=8)
    fig.suptitle(f"attention weights alpha[query, key], first positions, seed {seed}", fontsize=9)
    return save(fig, path, dpi=110)


def attention_entropy(path: str, record_steps: list[int], ent: Tensor, schedules: list[str]) -> str:
    """Mean attention-row entropy (nats) over training, mean over seeds with a 10-90% band."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for j, n in enumerate(schedules):
        lo, hi = torch.quantile(ent[j], torch.tensor([0.1, 0.9]), dim=0)
        ax.plot(record_steps, ent[j].mean(0), color=COLORS.get(n), label=n)
        ax.fill_between(record_steps, lo, hi, color=COLORS.get(n), alpha=0.2)
    ax.set_xlabel("full-batch update")
    ax.set_ylabel("attention entropy (nats)")
    ax.set_xscale("symlog", linthresh=10)
    ax.legend()
    return save(fig, path, grid=True)


def pca_fit(points: Tensor, k: int = 2) -> tuple[Tensor, Tensor, Tensor]:
    """Principal axes of points [n, d]: (mean [d], axes [k, d], explained-variance fraction [k])."""
    mean = points.mean(0)
    _, s, vh = torch.linalg.svd(points - mean, full_matrices=False)
    var = s.pow(2)
    return mean, vh[:k], var[:k] / var.sum()


def value_trajectories(path: str, protos: Tensor, schedules: list[str], record_steps: list[int],
                       seed: int) -> tuple[str, list[float]]:
    """PCA (fitted on every schedule's trajectory together) of the value prototypes mu_s W_V of one
    seed: one line per symbol from its start (circle) to its end (star). protos [S, R, V, d_v].
    Returns the path and the variance fraction of PC1 and PC2."""
    plt = pyplot()
    S, R, V, d = protos.shape
    mean, axes_, frac = pca_fit(protos.reshape(-1, d).double())
    proj = (protos.double() - mean) @ axes_.T  # [S, R, V, 2]
    fig, axes = plt.subplots(1, S, figsize=(4.2 * S, 4), squeeze=False)
    cmap = plt.get_cmap("tab10")
    for j, n in enumerate(schedules):
        ax = axes[0][j]
        for v in range(V):
            ax.plot(proj[j, :, v, 0], proj[j, :, v, 1], color=cmap(v % 10), lw=1)
            ax.scatter(proj[j, 0, v, 0], proj[j, 0, v, 1], color=cmap(v % 10), marker="o", s=12)
            ax.scatter(proj[j, -1, v, 0], proj[j, -1, v, 1], color=cmap(v % 10), marker="*", s=60)
        ax.set_title(f"{n}: value prototypes, steps {record_steps[0]}-{record_steps[-1]}", fontsize=9)
        ax.set_xlabel(f"PC1 ({100 * frac[0]:.0f}% of variance)")
        ax.set_ylabel(f"PC2 ({100 * frac[1]:.0f}%)")
    fig.suptitle(f"PCA of mu_s W_V over training (seed {seed}; one colour per symbol)", fontsize=9)
    return save(fig, path, grid=True), [float(f) for f in frac]

