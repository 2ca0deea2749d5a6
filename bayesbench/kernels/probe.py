"""`AttentionProbe`: what the instrumented attention backward records (Paper II's routing law).

For one head with weights alpha = softmax(s), s_ij = scale * q_i . k_j, output g_i = sum_j
alpha_ij v_j and upstream gradient u_i = dL/dg_i, the backward pass already computes (in
FlashAttention-2 names) dO = u, dP = b with b_ij = u_i . v_j, Delta_i = rowsum(dO * O) =
E_alpha_i[b] and dS = alpha * (b - E[b]). A probe keeps per-query / per-key reductions of them
(mode "stats", no T x T memory) and, in mode "full", the T x T matrices too.

The full mode stores only what cannot be derived: the advantage A and the weights alpha
(T x T each) and u. b and ds follow exactly from them (b_ij = E[b]_i - A_ij on visible keys,
ds_ij = -alpha_ij A_ij), so `probe.b` and `probe.ds` are computed on first access (and cached)
unless the probe asks the kernel to store them (`store=("b", "ds")`). The T x T matrices can be
kept in bfloat16 (`matrix_dtype=torch.bfloat16`), which halves their memory traffic.

Every other field is float32 whatever the input dtype (float64 only for a float64 reference
run). One caveat in float16/bfloat16: `expected_b` (Delta = rowsum(dO * O)) is computed from the
output O as the forward stored it, in the input dtype, so it and `advantage` carry O's rounding
(about 2^-8 relative in bf16), as FlashAttention-2's Delta does. Fields are None until a backward
pass through `attention(..., probe=probe)` has filled them; each backward overwrites them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import torch

MODES = ("full", "stats")
MATRIX_DTYPES = (torch.float32, torch.bfloat16)
DERIVED = ("b", "ds")  # T x T fields computed from advantage and alpha unless stored

# Field names written in each mode (shapes for q of shape [B, H, T, D]).
FULL_FIELDS = ("u", "expected_b", "advantage", "alpha")
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

    mode "full" (memory O(B H T^2)):
      u [B,H,T,D]           dL/dg_i, the gradient at the head's output (= dO), float32
      expected_b [B,H,T]    E_alpha_i[b] = sum_j alpha_ij b_ij (= Delta_i = rowsum(dO * O))
      advantage [B,H,T,T]   A_ij = E_alpha_i[b] - b_ij (descent raises s_ij when A_ij > 0); 0 masked
      alpha [B,H,T,T]       the attention weights; 0 masked
      b [B,H,T,T]           b_ij = u_i . v_j (= dP = dL/dalpha_ij); 0 where causally masked
      ds [B,H,T,T]          dL/ds_ij = alpha_ij (b_ij - E[b]) = -alpha_ij A_ij, s the scaled score
    plus everything of mode "stats". advantage and alpha are stored in `matrix_dtype` (float32 or
    bfloat16); b and ds are derived from them on access unless listed in `store`.

    mode "stats" (memory O(B H T)):
      expected_b [B,H,T]         as above
      entropy [B,H,T]            -sum_j alpha_ij log2 alpha_ij, in bits
      mean_abs_advantage [B,H,T] mean of |A_ij| over the keys j that query i may see
      max_abs_advantage [B,H,T]  max of |A_ij| over the same keys
      value_update_norm [B,H,T]  per key j: || sum_i alpha_ij u_i ||_2 (= ||dL/dv_j||)
      ds_norm [B,H,T]            per query i: || dL/ds_i. ||_2 = sqrt(sum_j (alpha_ij A_ij)^2)
    """

    mode: str = "full"
    store: tuple[str, ...] = ()
    matrix_dtype: torch.dtype = torch.float32
    causal: bool | None = None
    scale: float | None = None
    u: torch.Tensor | None = field(default=None, repr=False)
    expected_b: torch.Tensor | None = field(default=None, repr=False)
    advantage: torch.Tensor | None = field(default=None, repr=False)
    alpha: torch.Tensor | None = field(default=None, repr=False)
    entropy: torch.Tensor | None = field(default=None, repr=False)
    mean_abs_advantage: torch.Tensor | None = field(default=None, repr=False)
    max_abs_advantage: torch.Tensor | None = field(default=None, repr=False)
    value_update_norm: torch.Tensor | None = field(default=None, repr=False)
    ds_norm: torch.Tensor | None = field(default=None, repr=False)
    # b and ds as stored by the backward (store=...) or derived on first access.
    _matrices: dict = field(default_factory=dict, repr=False)

    entropy_unit = "bits"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"AttentionProbe: mode must be one of {MODES}, got {self.mode!r}")
        self.store = tuple(self.store)
        bad = [s for s in self.store if s not in DERIVED]
        if bad:
            raise ValueError(f"AttentionProbe: store must name fields among {DERIVED}, got {bad}")
        if self.store and not self.full:
            raise ValueError(f"AttentionProbe: store={self.store} needs mode 'full', got mode {self.mode!r}")
        if self.matrix_dtype not in MATRIX_DTYPES:
            raise ValueError(f"AttentionProbe: matrix_dtype must be one of {MATRIX_DTYPES}, got {self.matrix_dtype}")

    @property
    def full(self) -> bool:
        """True when the T x T tensors (advantage, alpha; b, ds derived or stored) and u are recorded."""
        return self.mode == "full"

    @property
    def filled(self) -> bool:
        """True once a backward pass has written the probe."""
        return self.expected_b is not None

    def _keep(self, t: int, device: torch.device) -> torch.Tensor:
        """[T, T] visibility mask of the recorded call."""
        keep = torch.ones(t, t, dtype=torch.bool, device=device)
        return keep.tril() if self.causal else keep

    @property
    def b(self) -> torch.Tensor | None:
        """b_ij = u_i . v_j (0 where masked): stored, or E[b]_i - A_ij computed on first access."""
        if "b" not in self._matrices:
            if self.advantage is None or self.expected_b is None:  # written together by the backward pass
                return None
            adv = self.advantage.to(self.expected_b.dtype)
            keep = self._keep(adv.shape[-1], adv.device)
            self._matrices["b"] = torch.where(keep, self.expected_b.unsqueeze(-1) - adv, 0.0)
        return self._matrices["b"]

    @b.setter
    def b(self, value: torch.Tensor | None) -> None:
        self._set_matrix("b", value)

    @property
    def ds(self) -> torch.Tensor | None:
        """dL/ds_ij = -alpha_ij A_ij: stored, or computed from alpha and the advantage on first access."""
        if "ds" not in self._matrices:
            if self.advantage is None or self.alpha is None or self.expected_b is None:
                return None
            dt = self.expected_b.dtype
            self._matrices["ds"] = -(self.alpha.to(dt) * self.advantage.to(dt)) + 0.0  # + 0.0: no -0
        return self._matrices["ds"]

    @ds.setter
    def ds(self, value: torch.Tensor | None) -> None:
        self._set_matrix("ds", value)

    def _set_matrix(self, name: str, value: torch.Tensor | None) -> None:
        if value is None:
            self._matrices.pop(name, None)
        else:
            self._matrices[name] = value

    def field_names(self) -> tuple[str, ...]:
        """Names of the tensors this probe's mode records (b, ds only when stored)."""
        if self.full:
            return FULL_FIELDS + self.store + tuple(n for n in STATS_FIELDS if n not in FULL_FIELDS)
        return STATS_FIELDS

    def clear(self) -> None:
        """Drop every recorded tensor (keeps mode, store and matrix_dtype)."""
        for f in fields(self):
            if f.name not in ("mode", "store", "matrix_dtype", "causal", "scale", "_matrices"):
                setattr(self, f.name, None)
        self._matrices.clear()

    def tensors(self) -> dict[str, torch.Tensor]:
        """The recorded tensors by name (empty before backward); derived b, ds are not included."""
        out = {}
        for n in self.field_names():
            x = self._matrices.get(n) if n in DERIVED else getattr(self, n)
            if x is not None:
                out[n] = x
        return out
