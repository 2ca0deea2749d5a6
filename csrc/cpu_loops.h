// CPU-side plumbing shared by oracle_cpu.cpp and selective_scan_cpu.cpp: raw pointers of one
// hmm_filter call, a dynamically scheduled parallel loop and the run-time AVX2 test.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>

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
// the environment sets BAYESBENCH_NO_AVX2, which the tests use to cover the baseline loops). The
// selective scan's AVX2 clones are chosen with it.
inline bool cpu_has_avx2() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          std::getenv("BAYESBENCH_NO_AVX2") == nullptr;
  return has;
#else
  return false;
#endif
}

}  // namespace bb
