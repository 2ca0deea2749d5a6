// CPU-side plumbing shared by oracle_cpu.cpp and hmm_cpu_avx2.cpp: raw pointers of one
// hmm_filter call and a dynamically scheduled parallel loop.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace bb {

// Raw pointers and sizes of one hmm_filter call (contiguous tensors).
template <typename scalar_t, typename index_t>
struct HmmPtrs {
  const scalar_t* trans;  // [B, S, S]
  const scalar_t* emit;   // [B, S, V]
  const index_t* obs;     // [B, L]
  const scalar_t* init;   // [B, S], or nullptr for uniform
  const scalar_t* zeros;  // S * V zeros: the emission column of an out-of-range observation
  scalar_t* post;         // [B, L, S]
  double* loglik;         // [B]
  int64_t* dead;          // [B]
  int64_t L, V;
};

constexpr int64_t kGrainWork = 16384;  // output elements per parallel task, at least

inline int64_t grain_for(int64_t per_item) {
  return std::max<int64_t>(1, kGrainWork / std::max<int64_t>(1, per_item));
}

// at::parallel_for with dynamic scheduling: each thread takes the next `grain` items from a shared
// counter until none are left, so a thread that the OS preempts (a busy machine) delays the call
// by one chunk, not by half the batch as with the static split.
template <class F>
void parallel_for_dynamic(int64_t n, int64_t grain, const F& f) {
  if (n <= 0) return;
  const int64_t chunks = (n + grain - 1) / grain;
  std::atomic<int64_t> next{0};
  at::parallel_for(0, std::min<int64_t>(chunks, at::get_num_threads()), 1, [&](int64_t, int64_t) {
    for (int64_t c = next.fetch_add(1); c < chunks; c = next.fetch_add(1))
      f(c * grain, std::min(n, (c + 1) * grain));
  });
}

// Whether this CPU runs AVX2 and FMA (x86-64 builds with GCC or Clang; false elsewhere, and when
// the environment sets BAYESBENCH_NO_AVX2).
bool cpu_has_avx2();

// Filters the first (B / 8) * 8 HMMs with the AVX2 float32 kernel and returns how many it did,
// or 0 when that kernel does not apply (no AVX2, S > 8, large V); the caller does the rest.
template <typename index_t>
int64_t hmm_filter_avx2(const HmmPtrs<float, index_t>& p, int64_t B, int S);

}  // namespace bb
