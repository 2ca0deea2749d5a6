// The torch-facing side of the oracle ops: declarations of the CPU and CUDA implementations
// and the shape/dtype checks both share. Value checks (distributions, ranges, bijection
// consistency) are done once in Python before dispatch, so both backends raise the same errors.
#pragma once

#include <ATen/ATen.h>

#include "ctw.h"

#include <optional>
#include <tuple>
#include <utility>

namespace bb {

using HmmResult = std::tuple<at::Tensor, at::Tensor, at::Tensor>;  // posteriors, loglik, dead_step

HmmResult hmm_filter_cpu(const at::Tensor& trans, const at::Tensor& emit, const at::Tensor& obs,
                         const std::optional<at::Tensor>& init);
at::Tensor bijection_posterior_cpu(const at::Tensor& keys, const at::Tensor& values, int64_t V,
                                   at::ScalarType dtype);
at::Tensor markov_predictive_cpu(const at::Tensor& seq, int64_t V, double alpha, at::ScalarType dtype);
at::Tensor ctw_predictive_cpu(const at::Tensor& seq, int64_t V, int64_t depth, double alpha, double leaf_prob,
                              at::ScalarType dtype);

// Fused selective scan (selective_scan.h, selective_scan_cpu.cpp; CPU only): y [M, L, D], and the
// gradients (dx, ddelta, dA in A's shape, dB, dC) from dy, recomputing the states.
using ScanGradsResult = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;
at::Tensor selective_scan_fwd_cpu(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& A,
                                  const at::Tensor& B, const at::Tensor& C);
ScanGradsResult selective_scan_bwd_cpu(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& A,
                                       const at::Tensor& B, const at::Tensor& C, const at::Tensor& dy);

#ifdef BAYESBENCH_WITH_CUDA
HmmResult hmm_filter_cuda(const at::Tensor& trans, const at::Tensor& emit, const at::Tensor& obs,
                          const std::optional<at::Tensor>& init);
at::Tensor bijection_posterior_cuda(const at::Tensor& keys, const at::Tensor& values, int64_t V,
                                    at::ScalarType dtype);
at::Tensor markov_predictive_cuda(const at::Tensor& seq, int64_t V, double alpha, at::ScalarType dtype);
at::Tensor ctw_predictive_cuda(const at::Tensor& seq, int64_t V, int64_t depth, double alpha, double leaf_prob,
                               at::ScalarType dtype);
#endif

// Integer symbols as a contiguous int32 or int64 tensor (the two index types the kernels take).
inline at::Tensor as_index(const at::Tensor& x, const char* name) {
  TORCH_CHECK(at::isIntegralType(x.scalar_type(), /*includeBool=*/false), name,
              " must be an integer tensor, got ", x.scalar_type());
  const auto t = x.scalar_type();
  return (t == at::kInt || t == at::kLong ? x : x.to(at::kLong)).contiguous();
}

inline void check_float_dtype(at::ScalarType dtype, const char* name) {
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kDouble, name, " must be float32 or float64, got ", dtype);
}

// Checked, contiguous inputs of hmm_filter.
struct HmmInputs {
  at::Tensor trans, emit, obs, init;  // init undefined = uniform
  int64_t B, L, S, V;
};

inline HmmInputs prepare_hmm(const at::Tensor& trans, const at::Tensor& emit, const at::Tensor& obs,
                             const std::optional<at::Tensor>& init) {
  TORCH_CHECK(trans.dim() == 3 && trans.size(1) == trans.size(2), "trans must be [B, S, S], got ", trans.sizes());
  check_float_dtype(trans.scalar_type(), "trans");
  const int64_t B = trans.size(0), S = trans.size(1);
  TORCH_CHECK(S >= 1, "trans must have at least one state");
  TORCH_CHECK(emit.dim() == 3 && emit.size(0) == B && emit.size(1) == S && emit.size(2) >= 1,
              "emit must be [B, S, V] with B, S of trans, got ", emit.sizes());
  TORCH_CHECK(obs.dim() == 2 && obs.size(0) == B, "obs must be [B, L], got ", obs.sizes());
  TORCH_CHECK(emit.scalar_type() == trans.scalar_type(), "emit must have the dtype of trans");
  TORCH_CHECK(emit.device() == trans.device() && obs.device() == trans.device(),
              "trans, emit and obs must be on one device");
  HmmInputs in{trans.contiguous(), emit.contiguous(), as_index(obs, "obs"), at::Tensor(),
               B, obs.size(1), S, emit.size(2)};
  if (init.has_value() && init->defined()) {
    TORCH_CHECK(init->dim() == 2 && init->size(0) == B && init->size(1) == S, "init must be [B, S], got ",
                init->sizes());
    TORCH_CHECK(init->scalar_type() == trans.scalar_type() && init->device() == trans.device(),
                "init must have the dtype and device of trans");
    in.init = init->contiguous();
  }
  return in;
}

// Checked [B, L] integer sequences (keys, values, symbols) as int32/int64.
inline at::Tensor prepare_sequence(const at::Tensor& x, const char* name, int64_t V, int64_t min_V) {
  TORCH_CHECK(x.dim() == 2, name, " must be [B, L], got ", x.sizes());
  TORCH_CHECK(V >= min_V && V <= INT32_MAX, "V must be in [", min_V, ", 2^31 - 1], got ", V);
  return as_index(x, name);
}

// Checked settings of ctw_predictive (the Python API checks them first, with its own messages) and
// the working memory of one sequence in doubles, which must stay below 2^27 (1 GiB); 0 when the
// depth exceeds the length (every position is then uniform and no tree node is touched).
constexpr int64_t kCtwMaxWorkDoubles = int64_t{1} << 27;

inline int64_t ctw_checked_work(int64_t V, int64_t depth, double alpha, double leaf_prob, int64_t L) {
  TORCH_CHECK(depth >= 0, "depth must be >= 0, got ", depth);
  TORCH_CHECK(alpha > 0, "alpha must be > 0, got ", alpha);
  TORCH_CHECK(leaf_prob >= 0 && leaf_prob <= 1, "leaf_prob must be in [0, 1], got ", leaf_prob);
  if (depth > L) return 0;
  int64_t nodes = 0, level = 1;
  for (int64_t d = 0; d <= depth; ++d) {
    nodes += level;
    TORCH_CHECK(nodes * (V + 2) <= kCtwMaxWorkDoubles && (d == depth || level <= kCtwMaxWorkDoubles / V),
                "ctw_predictive: V^depth is too large (the context tree of V=", V, ", depth=", depth,
                " needs more than 2^27 doubles of working memory per sequence)");
    level *= V;
  }
  TORCH_CHECK(depth <= kCtwMaxDepth, "ctw_predictive: depth must be <= ", kCtwMaxDepth, ", got ", depth);
  return nodes * (V + 2) + (depth + 1) * (2 * V + 1);
}

// Checked keys and values of bijection_posterior, both in the keys' index type.
inline std::pair<at::Tensor, at::Tensor> prepare_bijection(const at::Tensor& keys, const at::Tensor& values,
                                                           int64_t V) {
  at::Tensor k = prepare_sequence(keys, "keys", V, 1);
  TORCH_CHECK(values.sizes() == keys.sizes() && values.device() == keys.device(),
              "values must have the shape and device of keys");
  return {k, as_index(values, "values").to(k.scalar_type())};
}

}  // namespace bb
