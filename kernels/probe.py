"""`AttentionProbe`: what the instrumented attention backward records (Paper II's routing law).

For one head with weights alpha = softmax(s), s_ij = scale * q_i . k_j, output g_i = sum_j
alpha_ij v_j and upstream gradient u_i = dL/dg_i, the backward pass already computes (in
FlashAttention-2 names) dO = u, dP = b with b_ij = u_i . v_j, Delta_i = rowsum(dO * O) =
E_alpha_i[b] and dS = alpha * (b - E[b]). A probe keeps those tensors (mode "full") or only
per-query / per-key reductions of them (mode "stats", no T x T memory).

Every field is stored and accumulated in float32 whatever the input dtype (float64 only for a
float64 reference run). One caveat in float16/bfloat16: `expected_b` (Delta = rowsum(dO * O)) is
computed from the output O as the forward stored it, in the input dtype, so it and `advantage`
carry O's rounding (about 2^-8 relative in bf16), as FlashAttention-2's Delta does. Fields are None
until a backward pass through `attention(..., probe=probe)` has filled them; each backward
overwrites them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import torch

MODES = ("full", "stats")

# Field names written in each mode (shapes for q of shape [B, H, T, D]).
FULL_FIELDS = ("u", "b", "expected_b", "advantage", "ds")
STATS_FIELDS = (
    "expected_b",
    "entropy",
    "mean_abs_advantage",
    "max_abs_advantage",
    "value_update_norm",
    "ds_norm",
)


@dataclass
class AttentionProbe:
    """Container filled by the attention backward.

    mode "full" (memory O(B H T^2), float32):
      u [B,H,T,D]           dL/dg_i, the gradient at the head's output (= dO)
      b [B,H,T,T]           b_ij = u_i . v_j (= dP = dL/dalpha_ij); 0 where causally masked
      expected_b [B,H,T]    E_alpha_i[b] = sum_j alpha_ij b_ij (= Delta_i = rowsum(dO * O))
      advantage [B,H,T,T]   A_ij = E_alpha_i[b] - b_ij (descent raises s_ij when A_ij > 0); 0 masked
      ds [B,H,T,T]          dL/ds_ij = alpha_ij (b_ij - E[b]) = -alpha_ij A_ij, s the scaled score
    plus everything of mode "stats".

    mode "stats" (memory O(B H T)):
      expected_b [B,H,T]         as above
      entropy [B,H,T]            -sum_j alpha_ij log2 alpha_ij, in bits
      mean_abs_advantage [B,H,T] mean of |A_ij| over the keys j that query i may see
      max_abs_advantage [B,H,T]  max of |A_ij| over the same keys
      value_update_norm [B,H,T]  per key j: || sum_i alpha_ij u_i ||_2 (= ||dL/dv_j||)
      ds_norm [B,H,T]            per query i: || dL/ds_i. ||_2 = sqrt(sum_j (alpha_ij A_ij)^2)
    """

    mode: str = "full"
    causal: bool | None = None
    scale: float | None = None
    u: torch.Tensor | None = field(default=None, repr=False)
    b: torch.Tensor | None = field(default=None, repr=False)
    expected_b: torch.Tensor | None = field(default=None, repr=False)
    advantage: torch.Tensor | None = field(default=None, repr=False)
    ds: torch.Tensor | None = field(default=None, repr=False)
    entropy: torch.Tensor | None = field(default=None, repr=False)
    mean_abs_advantage: torch.Tensor | None = field(default=None, repr=False)
    max_abs_advantage: torch.Tensor | None = field(default=None, repr=False)
    value_update_norm: torch.Tensor | None = field(default=None, repr=False)
    ds_norm: torch.Tensor | None = field(default=None, repr=False)

    entropy_unit = "bits"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"AttentionProbe: mode must be one of {MODES}, got {self.mode!r}")

    @property
    def full(self) -> bool:
        """True when the T x T tensors (b, advantage, ds) and u are recorded."""
        return self.mode == "full"

    @property
    def filled(self) -> bool:
        """True once a backward pass has written the probe."""
        return self.expected_b is not None

    def field_names(self) -> tuple[str, ...]:
        """Names of the tensors this probe's mode records."""
        if self.full:
            return FULL_FIELDS + tuple(n for n in STATS_FIELDS if n not in FULL_FIELDS)
        return STATS_FIELDS

    def clear(self) -> None:
        """Drop every recorded tensor (keeps mode)."""
        for f in fields(self):
            if f.name not in ("mode", "causal", "scale"):
                setattr(self, f.name, None)

    def tensors(self) -> dict[str, torch.Tensor]:
        """The recorded tensors by name (empty before backward)."""
        return {n: getattr(self, n) for n in self.field_names() if getattr(self, n) is not None}
