"""The belief-geometry probe's figure (as Shai et al. 2024, arXiv 2405.15943, draw it): the
exact beliefs of the held-out positions on the simplex, beside the probe's linear read-out of
the residual stream at the same positions, in the same projection and colours."""

from __future__ import annotations

import math

import torch

from ...figures import heading, save, subplots


def simplex_projection(beliefs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A 2-D projection [K, 2] and its origin [K] for points of the (K-1)-simplex: the
    equilateral triangle for K = 3 (barycentric coordinates), the first two principal axes of
    the beliefs otherwise (the same map is applied to the probe's outputs)."""
    K = beliefs.shape[1]
    if K == 3:
        corners = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.5, math.sqrt(3) / 2]], dtype=torch.float64)
        return corners, torch.zeros(K, dtype=torch.float64)
    centre = beliefs.mean(0)
    _, _, v = torch.linalg.svd(beliefs - centre, full_matrices=False)
    axes = v[:2].T if v.shape[0] >= 2 else torch.cat([v.T, torch.zeros_like(v.T)], 1)
    return axes, centre


def colours(beliefs: torch.Tensor) -> list:
    """Each state a colour (red, green, blue for three states; evenly spaced hues otherwise) and
    each point the belief-weighted mix of its states' colours, so a point keeps its colour in
    both panels and a point near a vertex takes that state's colour."""
    import colorsys

    K = beliefs.shape[1]
    if K == 3:
        palette = torch.eye(3, dtype=torch.float64)
    else:
        palette = torch.tensor([colorsys.hsv_to_rgb(k / K, 0.9, 0.9) for k in range(K)], dtype=torch.float64)
    return (beliefs.double() @ palette).clamp(0, 1).tolist()


def simplex_figure(path: str, beliefs: torch.Tensor, predicted: torch.Tensor, stream: str, r2: float,
                   r2_shuffled: float, setting: str, max_points: int = 4000) -> str:
    """Two panels: the exact beliefs and the probe's read-out of `stream` (one member), projected."""
    n = min(max_points, beliefs.shape[0])
    b, p = beliefs[:n], predicted[:n]
    axes_map, origin = simplex_projection(b)
    fig, axes = subplots(1, 2, figsize=(10, 5))
    col = colours(b)
    for ax, pts, title in ((axes[0], b, f"exact beliefs ({n} held-out positions)"),
                           (axes[1], p, f"linear probe of the {stream} stream: R^2 {r2:.3f} "
                                        f"(shuffle control {r2_shuffled:.3f})")):
        xy = (pts - origin) @ axes_map
        ax.scatter(xy[:, 0].numpy(), xy[:, 1].numpy(), s=2, c=col, alpha=0.6, linewidths=0)
        if b.shape[1] == 3:
            tri = torch.cat([axes_map, axes_map[:1]])
            ax.plot(tri[:, 0].numpy(), tri[:, 1].numpy(), color="0.6", lw=0.8)
        ax.set_title(title, fontsize=8)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
    heading(fig, "belief simplex: exact beliefs and the residual stream's linear read-out", setting,
            "2-simplex drawn as a triangle" if b.shape[1] == 3 else
            f"{b.shape[1]} belief coordinates, projected on their first two principal axes", fontsize=9)
    return save(fig, path)
