"""Figures of an EM-vs-SGD study: loss curves against the Bayes floors, and Paper II section 7.1's
toy figures (attention heatmaps sharpening over the first ~100 steps, attention entropy over
training, PCA trajectories of the value prototypes mu_s W_V). Each figure's heading carries the
study's `setting` (variant, data size, updates, seeds), and bands are said to be bands.
`toy_figures` and `deep_figures` draw a study's set of them into its report folder."""

from __future__ import annotations

import math
import os

import torch
from torch import Tensor

from ...figures import count, heading, save, subplots, unique_legend
from .deep import DeepRun
from .toy import ToyRun
from .train import TEST_SEED_OFFSET

COLORS = {"sgd": "tab:red", "em": "tab:blue", "adamw": "tab:red", "adamw-em": "tab:blue", "wo10": "tab:green",
          "wqk10": "tab:purple", "sgd3": "tab:orange", "sgd10": "tab:brown", "sgd-emtotal": "tab:cyan",
          "sgd-emnorm": "tab:olive"}
BAND = "line: mean over seeds, band: 10th to 90th percentile seed"


def loss_curves(path: str, losses: Tensor, schedules: list[str], floors: dict[str, float], title: str,
                steps: list[int] | None = None, ylabel: str = "training cross-entropy (nats)",
                ylim: tuple[float, float] | None = None, setting: str = "") -> str:
    """Mean loss over seeds per schedule ([S, E, n] at `steps`, default 0..n-1), a band from the
    10th to the 90th percentile seed, and horizontal lines at each floor (nats)."""
    fig, ax = subplots(figsize=(8, 5))
    x = torch.arange(losses.shape[-1]) if steps is None else torch.tensor(steps)
    for j, name in enumerate(schedules):
        curves = losses[j]
        lo, hi = torch.quantile(curves, torch.tensor([0.1, 0.9]), dim=0)
        ax.plot(x, curves.mean(0), color=COLORS.get(name), label=f"{name} ({count(curves.shape[0], 'seed')})")
        ax.fill_between(x, lo, hi, color=COLORS.get(name), alpha=0.2)
    for (label, value), style in zip(floors.items(), ("--", ":", "-.")):
        ax.axhline(value, color="black", linestyle=style, lw=1, label=f"{label} = {value:.4f}")
    ax.set_xlabel("full-batch update (step)")
    ax.set_ylabel(ylabel)
    if ylim is not None:  # e.g. a diverging schedule's held-out loss shown to its edge, not its end
        ax.set_ylim(*ylim)
    unique_legend(fig, where="outside lower center")
    heading(fig, title, setting, BAND)
    return save(fig, path, grid=True)


def heatmaps(path: str, maps: dict[str, dict[int, Tensor]], seed: int, setting: str = "") -> str:
    """Rows: schedules; columns: training steps; each panel the attention weights of the first
    positions (query rows, key columns)."""
    names = list(maps)
    steps = sorted(maps[names[0]])
    fig, axes = subplots(len(names), len(steps), figsize=(2.2 * len(steps) + 1.4, 2.3 * len(names) + 1.4),
                         squeeze=False)
    for r, n in enumerate(names):
        for c, s in enumerate(steps):
            ax = axes[r][c]
            im = ax.imshow(maps[n][s].numpy(), cmap="viridis", vmin=0, vmax=1)
            ax.set_title(f"{n}, step {s}", fontsize=8)
            ax.tick_params(labelsize=6)
    fig.supxlabel("key position j", fontsize=9)
    fig.supylabel("query position i", fontsize=9)
    bar = fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8)
    bar.set_label("attention weight alpha[i, j]")
    width = maps[names[0]][steps[0]].shape[-1]
    heading(fig, f"attention weights of the first {width} positions, seed {seed}", setting, fontsize=9)
    return save(fig, path, dpi=110)


def attention_entropy(path: str, record_steps: list[int], ent: Tensor, schedules: list[str], setting: str = "",
                      uniform: float | None = None) -> str:
    """Mean attention-row entropy (nats) over training, mean over seeds with a 10-90% band;
    `uniform`: uniform attention's entropy, drawn as a reference line."""
    fig, ax = subplots(figsize=(7.5, 4.6))
    for j, n in enumerate(schedules):
        lo, hi = torch.quantile(ent[j], torch.tensor([0.1, 0.9]), dim=0)
        ax.plot(record_steps, ent[j].mean(0), color=COLORS.get(n), label=f"{n} ({count(ent.shape[1], 'seed')})")
        ax.fill_between(record_steps, lo, hi, color=COLORS.get(n), alpha=0.2)
    if uniform is not None:
        ax.axhline(uniform, color="0.4", ls="--", lw=1, label=f"uniform attention, {uniform:.3f} nats")
    ax.set_xlabel("full-batch update (step)" + (", linear to 10, log beyond" if max(record_steps) > 100 else ""))
    ax.set_ylabel("attention entropy, mean over query rows (nats)")
    if max(record_steps) > 100:
        ax.set_xscale("symlog", linthresh=10)
    ax.set_xlim(left=min(record_steps))
    unique_legend(fig, where="outside lower center")
    heading(fig, "attention entropy over training", setting, BAND)
    return save(fig, path, grid=True)


def pca_fit(points: Tensor, k: int = 2) -> tuple[Tensor, Tensor, Tensor]:
    """Principal axes of points [n, d]: (mean [d], axes [k, d], explained-variance fraction [k])."""
    mean = points.mean(0)
    _, s, vh = torch.linalg.svd(points - mean, full_matrices=False)
    var = s.pow(2)
    return mean, vh[:k], var[:k] / var.sum()


def value_trajectories(path: str, protos: Tensor, schedules: list[str], record_steps: list[int],
                       seed: int, setting: str = "") -> tuple[str, list[float]]:
    """PCA (fitted on every schedule's trajectory together) of the value prototypes mu_s W_V of one
    seed: one line per symbol from its start (circle) to its end (star). protos [S, R, V, d_v].
    Returns the path and the variance fraction of PC1 and PC2."""
    from ...figures import pyplot

    S, R, V, d = protos.shape
    mean, axes_, frac = pca_fit(protos.reshape(-1, d).double())
    proj = (protos.double() - mean) @ axes_.T  # [S, R, V, 2]
    fig, axes = subplots(1, S, figsize=(4.4 * S + 1.6, 4.8), squeeze=False, sharex=True, sharey=True)
    cmap = pyplot().get_cmap("tab10")
    for j, n in enumerate(schedules):
        ax = axes[0][j]
        for v in range(V):
            ax.plot(proj[j, :, v, 0], proj[j, :, v, 1], color=cmap(v % 10), lw=1, label=f"symbol {v}")
        ax.scatter(proj[j, 0, :, 0], proj[j, 0, :, 1], color="0.3", marker="o", s=14, zorder=3,
                   label=f"start (step {record_steps[0]})")
        ax.scatter(proj[j, -1, :, 0], proj[j, -1, :, 1], color=[cmap(v % 10) for v in range(V)], marker="*", s=70,
                   zorder=3, edgecolors="k", linewidths=0.4, label=f"end (step {record_steps[-1]})")
        ax.set_title(f"{n}", fontsize=9)
        ax.set_xlabel(f"PC1 ({100 * frac[0]:.0f}% of variance)")
        ax.set_ylabel(f"PC2 ({100 * frac[1]:.0f}% of variance)")
        ax.grid(alpha=0.3)
    unique_legend(fig, where="outside right center")
    heading(fig, f"PCA of the value prototypes mu_s W_V over training, seed {seed} (one colour per symbol)",
            setting, fontsize=9)
    return save(fig, path), [float(f) for f in frac]


def toy_setting(variant: str, seeds: list[int], *, steps: int, length: int, sequences: int, means: str) -> str:
    """The line under every toy figure's title: the variant, its data, updates, seeds and symbol means."""
    data_words = f"T={length}" if variant == "paper" else f"{sequences} sequences of L={length} per seed"
    return (f"{variant} variant, {data_words}; {steps} full-batch updates; {len(seeds)} seeds {seeds}; symbol "
            f"means {means}")


def toy_figures(out_dir: str, run: ToyRun, summary: dict, seeds: list[int], n_classes: int,
                setting: str) -> tuple[list[str], list[float]]:
    """A toy study's figures in `out_dir`: training and test loss of every schedule against the
    floors, and for SGD and EM-like (the two schedules of Paper II section 7.1's figures) the
    attention heatmaps, attention entropy and value trajectories. Returns the paths and the
    variance fraction of the trajectories' PC1 and PC2."""
    from .toy import GRID

    held = summary["held_out"]
    # the fixed schedules and the grid's two tuned points (the grid's other points: its table in the report)
    chosen = set((summary.get("grid") or {}).get("chosen", {}).values())
    shown = [j for j, n in enumerate(run.schedules) if n not in GRID or n in chosen]
    names, ent = [run.schedules[j] for j in shown], run.attn_entropy[shown]
    pair = [run.schedules.index("sgd"), run.schedules.index("em")]
    figures = [loss_curves(os.path.join(out_dir, "loss.png"), run.losses[shown], names, summary["floors_nats"],
                           "training loss of each schedule", setting=setting),
               loss_curves(os.path.join(out_dir, "held_out_loss.png"), run.split_losses("test")[shown], names,
                           {"exact filtering floor, test split (mean over seeds)": held["floor_mean"],
                            "chance, ln 8": math.log(n_classes)},
                           f"test-split loss: a held-out sequence per seed (seed + {TEST_SEED_OFFSET}), scored "
                           "every 10 updates", steps=run.record_steps, ylabel="test cross-entropy (nats)",
                           ylim=(held["floor_mean"] - 0.05, math.log(n_classes) + 0.25), setting=setting),
               heatmaps(os.path.join(out_dir, "attention_heatmaps.png"), {n: run.heatmaps[n] for n in ("sgd", "em")},
                        seeds[0], setting),
               attention_entropy(os.path.join(out_dir, "attention_entropy.png"), run.record_steps, ent, names,
                                 setting, uniform=summary["max_attention_entropy_nats"])]
    path, frac = value_trajectories(os.path.join(out_dir, "value_pca.png"), run.prototypes[pair, 0], ["sgd", "em"],
                                    run.record_steps, seeds[0], setting)
    return [*figures, path], frac


def deep_figures(out_dir: str, run: DeepRun, summary: dict, seeds: list[int], *, steps: int, length: int) -> list[str]:
    """The deep variant's figure in `out_dir`: each schedule's training loss against the floors."""
    return [loss_curves(os.path.join(out_dir, "loss.png"), run.losses, run.schedules, summary["floors_nats"],
                        "deep variant (4 layers x 4 heads, AdamW): training loss",
                        setting=f"T={length}; {steps} steps; {len(seeds)} seeds {seeds}")]
