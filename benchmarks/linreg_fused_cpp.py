"""Would a C++ path for the linreg oracle be worth it (issue 41)? A measurement, not a kernel of the
package: a fused C++ loop (per sequence: K = tau^2 X X' + sigma^2 I row by row, its Cholesky in
place, the forward substitution; the same algebra as `oracle.linreg.gaussian_prior_predictive`)
compiled with torch.utils.cpp_extension.load_inline, checked equal to the torch fast path, then
both timed at the same B in alternating rounds (median of 3), one thread, float64.

    OMP_NUM_THREADS=1 python benchmarks/linreg_fused_cpp.py [B]      (default B = 65536; needs g++)

Its answer (the issue-41 BENCHMARKS rows): the loop was 2.1x to 2.7x faster than the torch path
taking the batch in one call, and 1.0x the torch path in chunks of `oracle.linreg.CPU_CHUNK`
sequences, so no C++ path was built (docs/tasks.md, "Oracle speed and the C++ question").
"""

from __future__ import annotations

import sys
import tempfile
import time

import torch
from torch.utils.cpp_extension import load_inline

from bayesbench.oracle.linreg import gaussian_prior_predictive

SOURCE = r"""
#include <torch/extension.h>
#include <cmath>
#include <vector>
std::vector<torch::Tensor> linreg(torch::Tensor x, torch::Tensor y, double tau2, double s2) {
  auto B = x.size(0), n = x.size(1), d = x.size(2);
  auto mean = torch::empty({B, n}, x.options()), var = torch::empty({B, n}, x.options());
  const double* X = x.data_ptr<double>(); const double* Y = y.data_ptr<double>();
  double* M = mean.data_ptr<double>(); double* V = var.data_ptr<double>();
  std::vector<double> L(n * n), z(n);
  for (int64_t b = 0; b < B; ++b) {
    const double* xb = X + b * n * d; const double* yb = Y + b * n;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j <= i; ++j) {
        double k = 0; const double* a = xb + i * d; const double* c = xb + j * d;
        for (int64_t t = 0; t < d; ++t) k += a[t] * c[t];
        k *= tau2; if (j == i) k += s2;
        for (int64_t t = 0; t < j; ++t) k -= L[i * n + t] * L[j * n + t];
        if (j == i) L[i * n + i] = std::sqrt(k); else L[i * n + j] = k / L[j * n + j];
      }
      double r = yb[i]; for (int64_t t = 0; t < i; ++t) r -= L[i * n + t] * z[t];
      z[i] = r / L[i * n + i];
      M[b * n + i] = yb[i] - L[i * n + i] * z[i]; V[b * n + i] = L[i * n + i] * L[i * n + i];
    }
  }
  return {mean, var};
}
"""


def main(B: int = 65536, n: int = 40, d: int = 20, tau: float = 1.0, sigma: float = 0.5) -> None:
    module = load_inline("linreg_fused", cpp_sources=SOURCE, functions=["linreg"], extra_cflags=["-O3"],
                         build_directory=tempfile.mkdtemp())
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(B, n, d, generator=g, dtype=torch.float64)
    w = torch.randn(B, d, 1, generator=g, dtype=torch.float64)
    y = (x @ w).squeeze(-1) + sigma * torch.randn(B, n, generator=g, dtype=torch.float64)
    mean, var = gaussian_prior_predictive(x, y, None, tau * tau, sigma)
    mean_c, var_c = module.linreg(x, y, tau * tau, sigma * sigma)
    assert float(((var - var_c).abs() / var).max()) < 1e-10
    assert float(((mean - mean_c).abs() / var.sqrt()).max()) < 1e-10
    fast, fused = [], []
    for _ in range(3):
        t = time.perf_counter()
        gaussian_prior_predictive(x, y, None, tau * tau, sigma)
        fast.append(time.perf_counter() - t)
        t = time.perf_counter()
        module.linreg(x, y, tau * tau, sigma * sigma)
        fused.append(time.perf_counter() - t)
    a, b = sorted(fast)[1], sorted(fused)[1]
    print(f"B={B} n={n} d={d}, one thread: torch fast path {a:.2f} s, fused C++ loop {b:.2f} s: {a / b:.2f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 65536)
