// The CPU HMM filter for float32, S <= 8, with AVX2 + FMA (chosen at run time). Eight HMMs run
// as the eight lanes of a vector through the shared math (HmmFixed::update); what is specific
// here is the data movement: each lane's emission column and posterior row are contiguous, so
// they are moved as whole rows and transposed in registers (8 x 8) instead of element by element.
#include "cpu_loops.h"
#include "hmm_filter.h"

#include <cstdlib>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define BB_AVX2 __attribute__((target("avx2,fma")))

namespace bb {
namespace {

constexpr int kLanes = 8;      // HMMs per group: one 8-float vector
constexpr int64_t kMaxV = 64;  // the per-group emission table is kLanes * V rows of 8 floats

BB_AVX2 inline void transpose8(__m256 (&r)[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// Groups [g0, g1) of kLanes HMMs. table: kLanes * V * 8 floats of scratch.
template <typename index_t, int S>
BB_AVX2 void hmm_groups_avx2(const HmmPtrs<float, index_t>& p, int64_t g0, int64_t g1, float* table) {
  const int64_t L = p.L, V = p.V, row = L * S;
  for (int64_t g = g0; g < g1; ++g) {
    const int64_t b0 = g * kLanes;
    HmmFixed<float, S, kLanes> f;
    for (int k = 0; k < kLanes; ++k) {
      f.start(k, p.trans + (b0 + k) * S * S, p.init ? p.init + (b0 + k) * S : nullptr);
      // table[(k * V + o) * 8 + j] = E[j, o] of lane k (zero for j >= S): one row per symbol.
      const float* e = p.emit + (b0 + k) * S * V;
      for (int64_t o = 0; o < V; ++o)
        for (int j = 0; j < 8; ++j) table[(k * V + o) * 8 + j] = j < S ? e[j * V + o] : 0.0f;
    }
    float* out = p.post + b0 * row;
    alignas(32) float lik[S][kLanes];
    for (int64_t t = 0; t < L; ++t) {
      __m256 r[8];
      for (int k = 0; k < kLanes; ++k) {
        const int64_t o = static_cast<int64_t>(p.obs[(b0 + k) * L + t]);
        r[k] = (o >= 0 && o < V) ? _mm256_loadu_ps(table + (k * V + o) * 8) : _mm256_setzero_ps();
      }
      transpose8(r);  // r[j] = E[j, o_t] across the lanes
      for (int j = 0; j < S; ++j) _mm256_store_ps(lik[j], r[j]);
      f.update(t, lik);
      for (int j = 0; j < 8; ++j) r[j] = j < S ? _mm256_loadu_ps(f.belief[j]) : _mm256_setzero_ps();
      transpose8(r);  // r[k] = lane k's posterior, S values then zeros
      if (t * S + 8 <= row) {
        // 8-float stores: the 8 - S extra values land on step t + 1's slots, rewritten next.
        for (int k = 0; k < kLanes; ++k) _mm256_storeu_ps(out + k * row + t * S, r[k]);
      } else {
        f.write(out + t * S, row);  // the last steps: nothing past each HMM's row
      }
    }
    for (int k = 0; k < kLanes; ++k) {
      p.loglik[b0 + k] = f.loglik(k);
      p.dead[b0 + k] = f.dead[k];
    }
  }
}

}  // namespace

bool cpu_has_avx2() {
  // BAYESBENCH_NO_AVX2=1 forces the baseline loops (the tests use it to cover them on AVX2 CPUs).
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          std::getenv("BAYESBENCH_NO_AVX2") == nullptr;
  return has;
}

template <typename index_t>
int64_t hmm_filter_avx2(const HmmPtrs<float, index_t>& p, int64_t B, int S) {
  if (S > 8 || p.V > kMaxV || B < kLanes || !cpu_has_avx2()) return 0;
  const int64_t groups = B / kLanes;
  dispatch_fixed<1, 8>(S, [&](auto s_const) {
    constexpr int kS = decltype(s_const)::value;
    parallel_for_dynamic(groups, grain_for(kLanes * p.L * kS), [&](int64_t g0, int64_t g1) {
      std::vector<float> table(kLanes * p.V * 8);
      hmm_groups_avx2<index_t, kS>(p, g0, g1, table.data());
    });
  });
  return groups * kLanes;
}

}  // namespace bb

#else  // not x86-64 with GCC/Clang: no AVX2 kernel

namespace bb {
bool cpu_has_avx2() { return false; }
template <typename index_t>
int64_t hmm_filter_avx2(const HmmPtrs<float, index_t>&, int64_t, int) {
  return 0;
}
}  // namespace bb

#endif

namespace bb {
template int64_t hmm_filter_avx2<int32_t>(const HmmPtrs<float, int32_t>&, int64_t, int);
template int64_t hmm_filter_avx2<int64_t>(const HmmPtrs<float, int64_t>&, int64_t, int);
}  // namespace bb
