// CPU implementations: at::parallel_for (OpenMP, dynamically scheduled) over the batch, each
// sequence running the shared per-sequence routines of the headers. For S <= 16 the HMM filter
// runs groups of 4 HMMs as the SIMD lanes of HmmFixed (2x the generic routine); larger S take the
// generic routine. (An 8-lane AVX2 clone of the lane loop and a float32 AVX2-intrinsics kernel
// existed; measured at B = 65536, L = 50, S = V = 5 they were no faster than the 4 lanes or within
// 10% of them, so they were removed: BENCHMARKS.md.)
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <cstdint>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "bijection.h"
#include "cpu_loops.h"
#include "ctw.h"
#include "hmm_filter.h"
#include "markov.h"
#include "oracle.h"

namespace bb {
namespace {

constexpr int kMaxFixedS = 16;  // S in 1..16 gets a fixed-size filter
constexpr int kLanes = 4;       // HMMs per fixed-size filter (SIMD over the batch)

// A new output tensor whose pages this op touches first. Large ones ask for transparent huge
// pages (as numpy does for its large arrays): the page faults of a fresh 64 MB output otherwise
// cost as much as the filtering itself.
at::Tensor empty_output(at::IntArrayRef sizes, const at::TensorOptions& options) {
  at::Tensor out = at::empty(sizes, options);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const uintptr_t p = reinterpret_cast<uintptr_t>(out.data_ptr());
  const uintptr_t begin = (p + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (p + out.nbytes()) & ~(kHuge - 1);
  if (out.nbytes() >= 4 * kHuge && end > begin)
    madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);  // a hint: errors are harmless
#endif
  return out;
}

// Groups [g_begin, g_end) of K consecutive HMMs through the fixed-size filter.
template <typename scalar_t, typename index_t, int S, int K>
BB_INLINE void hmm_groups(const HmmPtrs<scalar_t, index_t>& p, int64_t g_begin, int64_t g_end) {
  const int64_t L = p.L, V = p.V;
  for (int64_t g = g_begin; g < g_end; ++g) {
    const int64_t b0 = g * K;
    HmmFixed<scalar_t, S, K> f;
    const scalar_t* emit[K];
    for (int k = 0; k < K; ++k) {
      f.start(k, p.trans + (b0 + k) * S * S, p.init ? p.init + (b0 + k) * S : nullptr);
      emit[k] = p.emit + (b0 + k) * S * V;
    }
    // lik[t % 2][j][k] = E[j, o_t] of lane k; two buffers so gathering step t + 1 does not wait
    // for step t to finish reading.
    scalar_t lik[2][S][K];
    for (int64_t t = 0; t < L; ++t) {
      for (int k = 0; k < K; ++k) {
        const int64_t o = static_cast<int64_t>(p.obs[(b0 + k) * L + t]);
        const scalar_t* e = (o >= 0 && o < V) ? emit[k] + o : p.zeros;
        for (int j = 0; j < S; ++j) lik[t & 1][j][k] = e[j * V];
      }
      f.step(t, lik[t & 1], p.post + b0 * L * S + t * S, L * S);
    }
    for (int k = 0; k < K; ++k) {
      p.loglik[b0 + k] = f.loglik(k);
      p.dead[b0 + k] = f.dead[k];
    }
  }
}

template <typename scalar_t, typename index_t>
void hmm_filter_loop(const HmmInputs& in, at::Tensor& post, at::Tensor& loglik, at::Tensor& dead) {
  const int64_t L = in.L, S = in.S, V = in.V;
  const std::vector<scalar_t> zeros(S * V, scalar_t(0));
  const HmmPtrs<scalar_t, index_t> p{
      in.trans.data_ptr<scalar_t>(), in.emit.data_ptr<scalar_t>(), in.obs.data_ptr<index_t>(),
      in.init.defined() ? in.init.data_ptr<scalar_t>() : nullptr, zeros.data(), post.data_ptr<scalar_t>(),
      loglik.data_ptr<double>(), dead.data_ptr<int64_t>(), L, V};

  // HMMs [begin, end) through the generic routine (any S; also the batch tail after the groups).
  auto generic = [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b)
      hmm_filter_generic<scalar_t, index_t>(p.trans + b * S * S, p.emit + b * S * V, p.obs + b * L,
                                            p.init ? p.init + b * S : nullptr, L, static_cast<int>(S),
                                            static_cast<int>(V), p.post + b * L * S, p.loglik + b, p.dead + b);
  };
  const bool fixed = dispatch_fixed<1, kMaxFixedS>(static_cast<int>(S), [&](auto s_const) {
    constexpr int kS = decltype(s_const)::value;
    parallel_for_dynamic(in.B / kLanes, grain_for(kLanes * L * kS), [&](int64_t g0, int64_t g1) {
      hmm_groups<scalar_t, index_t, kS, kLanes>(p, g0, g1);
    });
    generic(in.B / kLanes * kLanes, in.B);
  });
  if (!fixed) parallel_for_dynamic(in.B, grain_for(L * S), generic);
}

}  // namespace

HmmResult hmm_filter_cpu(const at::Tensor& trans, const at::Tensor& emit, const at::Tensor& obs,
                         const std::optional<at::Tensor>& init) {
  const HmmInputs in = prepare_hmm(trans, emit, obs, init);
  auto post = empty_output({in.B, in.L, in.S}, in.trans.options());
  auto loglik = at::empty({in.B}, in.trans.options().dtype(at::kDouble));
  auto dead = at::empty({in.B}, in.trans.options().dtype(at::kLong));
  AT_DISPATCH_FLOATING_TYPES(in.trans.scalar_type(), "hmm_filter_cpu", [&] {
    AT_DISPATCH_INDEX_TYPES(in.obs.scalar_type(), "hmm_filter_cpu", [&] {
      hmm_filter_loop<scalar_t, index_t>(in, post, loglik, dead);
    });
  });
  return {post, loglik, dead};
}

at::Tensor bijection_posterior_cpu(const at::Tensor& keys, const at::Tensor& values, int64_t V,
                                   at::ScalarType dtype) {
  check_float_dtype(dtype, "dtype");
  const auto kv = prepare_bijection(keys, values, V);
  const at::Tensor &k = kv.first, &v = kv.second;
  const int64_t B = k.size(0), L = k.size(1);
  auto out = empty_output({B, L, V}, k.options().dtype(dtype));
  AT_DISPATCH_FLOATING_TYPES(dtype, "bijection_posterior_cpu", [&] {
    AT_DISPATCH_INDEX_TYPES(k.scalar_type(), "bijection_posterior_cpu", [&] {
      const index_t* kp = k.data_ptr<index_t>();
      const index_t* vp = v.data_ptr<index_t>();
      scalar_t* op = out.data_ptr<scalar_t>();
      parallel_for_dynamic(B, grain_for(L * V), [&](int64_t begin, int64_t end) {
        std::vector<int32_t> work(bijection_work_size(static_cast<int>(V)));
        for (int64_t b = begin; b < end; ++b)
          bijection_sequence<scalar_t, index_t>(kp + b * L, vp + b * L, L, static_cast<int>(V), work.data(),
                                                op + b * L * V);
      });
    });
  });
  return out;
}

at::Tensor markov_predictive_cpu(const at::Tensor& seq, int64_t V, double alpha, at::ScalarType dtype) {
  check_float_dtype(dtype, "dtype");
  const at::Tensor x = prepare_sequence(seq, "seq", V, 2);
  const int64_t B = x.size(0), L = x.size(1);
  auto out = empty_output({B, L, V}, x.options().dtype(dtype));
  AT_DISPATCH_FLOATING_TYPES(dtype, "markov_predictive_cpu", [&] {
    AT_DISPATCH_INDEX_TYPES(x.scalar_type(), "markov_predictive_cpu", [&] {
      const index_t* xp = x.data_ptr<index_t>();
      scalar_t* op = out.data_ptr<scalar_t>();
      parallel_for_dynamic(B, grain_for(L * V), [&](int64_t begin, int64_t end) {
        std::vector<int32_t> work(markov_work_size(static_cast<int>(V)));
        for (int64_t b = begin; b < end; ++b)
          markov_sequence<scalar_t, index_t>(xp + b * L, L, static_cast<int>(V), alpha, work.data(),
                                             op + b * L * V);
      });
    });
  });
  return out;
}

at::Tensor ctw_predictive_cpu(const at::Tensor& seq, int64_t V, int64_t depth, double alpha, double leaf_prob,
                              at::ScalarType dtype) {
  check_float_dtype(dtype, "dtype");
  const at::Tensor x = prepare_sequence(seq, "seq", V, 2);
  const int64_t B = x.size(0), L = x.size(1);
  const int64_t per = ctw_checked_work(V, depth, alpha, leaf_prob, L);
  auto out = empty_output({B, L, V}, x.options().dtype(dtype));
  AT_DISPATCH_FLOATING_TYPES(dtype, "ctw_predictive_cpu", [&] {
    AT_DISPATCH_INDEX_TYPES(x.scalar_type(), "ctw_predictive_cpu", [&] {
      const index_t* xp = x.data_ptr<index_t>();
      scalar_t* op = out.data_ptr<scalar_t>();
      parallel_for_dynamic(B, grain_for(L * V * (depth + 1)), [&](int64_t begin, int64_t end) {
        std::vector<double> work(per, 0.0);  // zero on entry; each sequence leaves it zero
        for (int64_t b = begin; b < end; ++b)
          ctw_sequence<scalar_t, index_t>(xp + b * L, L, static_cast<int>(V), static_cast<int>(depth), alpha,
                                          leaf_prob, work.data(), op + b * L * V);
      });
    });
  });
  return out;
}

}  // namespace bb
