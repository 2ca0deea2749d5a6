// Posterior of the bijection-elimination tunnel for one sequence (docs/science.md#bijection-elimination; Paper I, Sec. 3.1), written once for
// the CPU loop and the CUDA kernels. At position k, after the pairs (keys[j], values[j]), j < k:
// a point mass on the known value if keys[k] was seen, else uniform over the unseen values.
#pragma once

#include "common.h"

namespace bb {

// Working memory per sequence, in int32 elements: the value known for each key, and a flag per value.
BB_HOST_DEVICE inline int64_t bijection_work_size(int V) { return 2 * static_cast<int64_t>(V); }

// keys, values: [L]; work: bijection_work_size(V) int32s (no need to clear); out: [L, V].
// Keys or values outside [0, V) (rejected by the Python API) give a NaN row / are ignored.
template <typename scalar_t, typename index_t>
BB_HOST_DEVICE void bijection_sequence(const index_t* keys, const index_t* values, int64_t L, int V,
                                       int32_t* work, scalar_t* out) {
  int32_t* known = work;     // known[key] = its value, or -1 while unseen
  int32_t* used = work + V;  // used[value] = 1 once revealed
  for (int i = 0; i < V; ++i) {
    known[i] = -1;
    used[i] = 0;
  }
  int32_t n_free = V;  // values not yet revealed
  for (int64_t k = 0; k < L; ++k) {
    scalar_t* row = out + k * V;
    const int64_t key = static_cast<int64_t>(keys[k]);
    if (key < 0 || key >= V) {
      for (int j = 0; j < V; ++j) row[j] = scalar_t(NAN);
      continue;
    }
    const int32_t value = known[key];
    if (value >= 0) {
      for (int j = 0; j < V; ++j) row[j] = scalar_t(j == value ? 1 : 0);
    } else {
      // 1 / n_free in the output dtype, as the reference computes it (0 if nothing is free).
      const scalar_t p = n_free > 0 ? scalar_t(1) / scalar_t(n_free) : scalar_t(0);
      for (int j = 0; j < V; ++j) row[j] = used[j] ? scalar_t(0) : p;
    }
    const int64_t v = static_cast<int64_t>(values[k]);
    if (v >= 0 && v < V) {
      known[key] = static_cast<int32_t>(v);
      if (!used[v]) {
        used[v] = 1;
        --n_free;
      }
    }
  }
}

}  // namespace bb
