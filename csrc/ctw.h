// Context-tree weighting for one sequence (docs/science.md#order-k-and-variable-order-markov-chains;
// Willems, Shtarkov and Tjalkens 1995, "The context-tree weighting method: basic properties",
// IEEE Trans. Inf. Theory 41(3), Sec. III; the variable-order chains of Zhou, Tian and Diggavi,
// arXiv 2410.05493), written once for the CPU loop and the CUDA kernel. It is the recursion of
// bayesbench/oracle/ctw.py's batched PyTorch path, one sequence at a time: only the D + 1 nodes on
// the current context's path change at a step, and the predictive is
//
//   r_D(j) = f_D(j),   r_d(j) = w_d f_d(j) + (1 - w_d) r_{d+1}(j),   p(j | x) = r_0(j),
//
// f_d(j) = (alpha + n_{s_d, j}) / (V alpha + n_{s_d}) the node's Dirichlet predictive and
// w_d = q P_e(s_d) / P_w(s_d) = sigmoid(b_d) the posterior probability that the node is a leaf,
// with b = log(q P_e(s) / ((1 - q) prod_a P_w(a s))) kept per node in double (the PyTorch path
// keeps its two logs apart; one log-odds costs one log and one exp per node and step). When x_s = y
// is seen, P_e(s_d) gains the factor f_d(y) and prod_a P_w(a s_d) the factor r_{d+1}(y), so
// b_d += log(f_d(y) / r_{d+1}(y)). O(L D V) per sequence.
#pragma once

#include "common.h"

namespace bb {

// Nodes of the full V-ary context tree of depth D: 1 + V + ... + V^D (the caller checks that it fits).
BB_HOST_DEVICE inline int64_t ctw_node_count(int V, int D) {
  int64_t n = 0, level = 1;
  for (int d = 0; d <= D; ++d) {
    n += level;
    level *= V;
  }
  return n;
}

// Working memory per sequence, in doubles: per node its counts [V], their total and the log-odds
// accumulated since the prior's (b - b_prior), [N, V + 2]; and the path's f [D + 1, V],
// r [D + 1, V] and w [D + 1].
BB_HOST_DEVICE inline int64_t ctw_work_size(int V, int D) {
  return ctw_node_count(V, D) * (V + 2) + static_cast<int64_t>(D + 1) * (2 * V + 1);
}

// Node index at each depth d of the context ending at position t (the suffix x_t, ..., x_{t-d+1}):
// node_count(V, d - 1) + sum_{i<d} x_{t-i} V^i, as oracle/ctw.py `context_paths` numbers them.
template <typename index_t>
BB_HOST_DEVICE inline void ctw_path(const index_t* seq, int64_t t, int V, int D, int64_t* path) {
  int64_t offset = 1, level = 1, ctx = 0;  // offset: node_count(V, d - 1); level: V^(d - 1)
  path[0] = 0;
  for (int d = 1; d <= D; ++d) {
    ctx += static_cast<int64_t>(seq[t - d + 1]) * level;
    path[d] = offset + ctx;
    level *= V;
    offset += level;
  }
}

// Deepest context tree the per-sequence routine takes (its path indices live on the stack); the
// working-memory cap of the ops (oracle.h) already stops binary trees at depth 24.
constexpr int kCtwMaxDepth = 26;

// seq: [L]; work: ctw_work_size(V, D) doubles, all zero on entry and left all zero on return;
// out: [L, V], computed in double and rounded once to scalar_t, as the PyTorch path. Positions
// t < D - 1 (no full context) get the uniform predictive; so do all of them when D >= L + 1. A
// symbol outside [0, V) (rejected by the Python API) makes the whole sequence's output NaN.
// leaf_prob 0 or 1 gives w = 0 or 1 at every node (the full tree of depth D, or the root alone).
template <typename scalar_t, typename index_t>
BB_HOST_DEVICE void ctw_sequence(const index_t* seq, int64_t L, int V, int D, double alpha, double leaf_prob,
                                 double* work, scalar_t* out) {
  for (int64_t t = 0; t < L; ++t)
    if (seq[t] < 0 || seq[t] >= V) {
      for (int64_t i = 0; i < L * V; ++i) out[i] = scalar_t(NAN);
      return;
    }
  for (int64_t i = 0; i < L * V; ++i) out[i] = static_cast<scalar_t>(1.0 / V);
  if (D > L) return;  // no symbol of the tree's is seen or predicted
  const int64_t N = ctw_node_count(V, D);
  const int64_t stride = V + 2;        // a node: counts [V], total, log-odds gained
  double* nodes = work;                // [N, V + 2]
  double* f = nodes + N * stride;      // [D + 1, V]
  double* r = f + (D + 1) * V;         // [D + 1, V]
  double* w = r + (D + 1) * V;         // [D + 1]
  const double v_alpha = static_cast<double>(V) * alpha;
  const double prior_odds = ::log(leaf_prob) - ::log1p(-leaf_prob);  // +-inf at the ends
  int64_t path[kCtwMaxDepth + 1];
  for (int64_t s = D; s <= L; ++s) {  // x_s is the tree's symbol; its context ends at s - 1
    ctw_path(seq, s - 1, V, D, path);
    for (int d = 0; d <= D; ++d) {
      const double* node = nodes + path[d] * stride;
      const double denom = v_alpha + node[V];
      for (int j = 0; j < V; ++j) f[d * V + j] = (alpha + node[j]) / denom;
      if (d < D)
        w[d] = leaf_prob <= 0.0 ? 0.0 : leaf_prob >= 1.0 ? 1.0 : 1.0 / (1.0 + ::exp(-(prior_odds + node[V + 1])));
    }
    for (int j = 0; j < V; ++j) r[D * V + j] = f[D * V + j];
    for (int d = D - 1; d >= 0; --d)
      for (int j = 0; j < V; ++j) r[d * V + j] = w[d] * f[d * V + j] + (1.0 - w[d]) * r[(d + 1) * V + j];
    if (s >= 1)
      for (int j = 0; j < V; ++j) out[(s - 1) * V + j] = static_cast<scalar_t>(r[j]);
    if (s == L) break;
    const int64_t y = static_cast<int64_t>(seq[s]);
    for (int d = 0; d <= D; ++d) {
      double* node = nodes + path[d] * stride;
      if (d < D) node[V + 1] += ::log(f[d * V + y] / r[(d + 1) * V + y]);
      node[y] += 1.0;
      node[V] += 1.0;
    }
  }
  // Leave the working memory zero for the next sequence: only the nodes on this sequence's paths
  // were written (clearing all N (V + 2) doubles would cost O(V^D) per sequence).
  for (int64_t s = D; s < L; ++s) {
    ctw_path(seq, s - 1, V, D, path);
    for (int d = 0; d <= D; ++d)
      for (int64_t j = 0; j < stride; ++j) nodes[path[d] * stride + j] = 0.0;
  }
}

}  // namespace bb
