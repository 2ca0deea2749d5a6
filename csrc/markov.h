// Posterior predictive of the in-context Markov chain for one sequence (docs/science.md#sticky-chain-and-in-context-markov-chain; Paper II, Sec. 7.2), written
// once for the CPU loop and the CUDA kernels: rows of T ~ Dirichlet(alpha), so after the
// transitions seen up to position t, p(x_{t+1} = j | x_t = i) = (alpha + N_ij) / (V alpha + N_i).
// One pass with a V x V count table: O(V^2 + L V) per sequence (clearing the table, then the
// pass; the PyTorch reference is O(L^2 V)).
#pragma once

#include "common.h"

namespace bb {

// Working memory per sequence, in int32 elements: the count table N and its row sums.
BB_HOST_DEVICE inline int64_t markov_work_size(int V) {
  return static_cast<int64_t>(V) * V + V;
}

// seq: [L]; work: markov_work_size(V) int32s (no need to clear); out: [L, V], computed in
// double and rounded once to scalar_t, exactly like the reference. Symbols outside [0, V)
// (rejected by the Python API) give a NaN row and break the chain of counted transitions.
template <typename scalar_t, typename index_t>
BB_HOST_DEVICE void markov_sequence(const index_t* seq, int64_t L, int V, double alpha, int32_t* work,
                                    scalar_t* out) {
  int32_t* counts = work;                            // counts[i * V + j] = N_ij
  int32_t* totals = work + static_cast<int64_t>(V) * V;  // totals[i] = N_i
  for (int64_t i = 0; i < markov_work_size(V); ++i) work[i] = 0;
  const double v_alpha = static_cast<double>(V) * alpha;
  int64_t prev = -1;
  for (int64_t t = 0; t < L; ++t) {
    scalar_t* row = out + t * V;
    const int64_t x = static_cast<int64_t>(seq[t]);
    if (x < 0 || x >= V) {
      for (int j = 0; j < V; ++j) row[j] = scalar_t(NAN);
      prev = -1;
      continue;
    }
    if (prev >= 0) {  // the transition prev -> x is now part of the history
      ++counts[prev * V + x];
      ++totals[prev];
    }
    const int32_t* n = counts + x * V;
    const double denom = v_alpha + static_cast<double>(totals[x]);
    for (int j = 0; j < V; ++j) row[j] = static_cast<scalar_t>((alpha + static_cast<double>(n[j])) / denom);
    prev = x;
  }
}

}  // namespace bb
