// Shared by the CPU loop (plain C++), the CUDA kernels (nvcc) and the torch-free nvcc check:
// no torch headers here, only what a __host__ __device__ routine needs.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

// Marks a routine compiled for both the CPU and the GPU; empty for a plain C++ compiler.
#if defined(__CUDACC__)
#define BB_HOST_DEVICE __host__ __device__
#else
#define BB_HOST_DEVICE
#endif

// Forced inline into the CPU lane loop (oracle_cpu.cpp) and the CUDA kernels.
#if defined(__CUDACC__)
#define BB_INLINE __forceinline__
#elif defined(__GNUC__)
#define BB_INLINE inline __attribute__((always_inline))
#else
#define BB_INLINE inline
#endif

// Marks a loop over independent lanes for SIMD on the CPU (OpenMP simd); nothing elsewhere.
#if !defined(__CUDACC__) && defined(_OPENMP)
#define BB_SIMD _Pragma("omp simd")
#else
#define BB_SIMD
#endif

namespace bb {

// Running log-likelihood of a scaled forward pass: the product of the step normalisers is kept
// in double and folded into a log only when it nears underflow, so a step costs a multiply
// instead of a log (log p = log_sum + log(prod)).
struct LogLik {
  static constexpr double kOrdinary = 1e-150;  // fold or take logs below this
  double prod = 1.0;
  double log_sum = 0.0;

  BB_HOST_DEVICE void add(double norm) {
    if (norm < kOrdinary) {  // tiny normaliser (float64 inputs): take its log directly
      log_sum += ::log(norm);
      return;
    }
    prod *= norm;  // both factors >= kOrdinary: no underflow
    if (prod < kOrdinary) {
      log_sum += ::log(prod);
      prod = 1.0;
    }
  }
  // Normalisers with margin(norm) >= kOrdinary make add(norm) just prod *= norm (no log, no
  // dead step); a minimum over lanes tests them all at once.
  BB_HOST_DEVICE double margin(double norm) const { return norm < prod * norm ? norm : prod * norm; }
  BB_HOST_DEVICE double value() const { return log_sum + ::log(prod); }
};

// Call f(std::integral_constant<int, s>) for the runtime value s in [First, Last]; false if
// s is outside (the caller then takes its generic path). Host-only compile-time dispatch.
template <int First, int Last, class F>
bool dispatch_fixed(int s, F&& f) {
  if constexpr (First > Last) {
    return false;
  } else {
    if (s == First) {
      f(std::integral_constant<int, First>{});
      return true;
    }
    return dispatch_fixed<First + 1, Last>(s, static_cast<F&&>(f));
  }
}

}  // namespace bb
