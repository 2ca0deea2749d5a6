// Mamba-1's selective scan for one sequence and a block of channels, forward and backward:
//   h_t[d, n] = exp(delta_t[d] A[d, n]) h_{t-1}[d, n] + delta_t[d] B_t[n] x_t[d],  h_{-1} = 0,
//   y_t[d] = sum_n C_t[n] h_t[d, n]
// (the skip term D x_t is added outside, in Python). The forward keeps the block's state in a
// working buffer of N x nd; the backward recomputes the states (the forward saves nothing) into
// one of 2 L x N x nd for this block alone, so nothing of size [M, L, D, N] is ever materialised.
// The inner loops run over the nd channels of the block (contiguous in every row): the SIMD lanes
// on a CPU; a GPU would call the same routines with nd = 1 per thread. No torch headers
// (common.h's rules); the CUDA build does not use them yet (the PyTorch parallel scan runs there).
#pragma once

#include <cstdint>
#include <cstring>

#include "common.h"

// An `omp simd` loop with sum reductions into the named scalars (CPU with OpenMP only).
#if !defined(__CUDACC__) && defined(_OPENMP)
#define BB_PRAGMA(x) _Pragma(#x)
#define BB_SIMD_SUM(...) BB_PRAGMA(omp simd reduction(+ : __VA_ARGS__))
#else
#define BB_SIMD_SUM(...)
#endif

namespace bb {

// exp for the decays exp(delta A). float on the CPU: a Cephes-style expf (range reduction by
// ln 2, degree-6 polynomial, ~1 ulp; results below exp(-87) ~ 1.6e-38 are flushed to 0) that
// vectorises inside an `omp simd` loop, which libm's expf does not without -ffast-math. Its
// clamps are bitwise selects (`select_bits`), not `?:`: a `?:` with a constant arm lets GCC's
// PRE fold that arm into a branch, and a loop with branches does not vectorise.
// double (and float under nvcc): the libm exp.
template <typename scalar_t>
BB_HOST_DEVICE BB_INLINE scalar_t scan_exp(scalar_t v) {
  return ::exp(v);
}

#if !defined(__CUDA_ARCH__)
// cond ? a : b, branch-free through the bits.
BB_INLINE float select_bits(bool cond, float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, sizeof(ia));
  std::memcpy(&ib, &b, sizeof(ib));
  const int32_t mask = -static_cast<int32_t>(cond);
  const int32_t r = (ia & mask) | (ib & ~mask);
  float out;
  std::memcpy(&out, &r, sizeof(out));
  return out;
}
#endif

template <>
BB_HOST_DEVICE BB_INLINE float scan_exp<float>(float v) {
#if defined(__CUDA_ARCH__)
  return ::expf(v);
#else
  // kLo: below it n = -126, whose scale 2^(n - 1) has a zero exponent field, so the result is 0.
  // kHi: above log(FLT_MAX) = 88.72 so that exp overflows to inf by itself (n = 128, p > 1).
  // A NaN passes the clamps and makes p, hence the result, NaN.
  constexpr float kLo = -87.3f, kHi = 89.0f;
  float c = select_bits(v < kLo, kLo, v);
  c = select_bits(c > kHi, kHi, c);
  // n = round(c / ln 2) by the 1.5 * 2^23 trick (vectorises without SSE4.1's round)
  constexpr float kRound = 12582912.0f;
  const float n = (c * 1.44269504088896341f + kRound) - kRound;
  float r = c - n * 0.693359375f;  // c - n ln 2 in two parts (Cody-Waite)
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // p * 2^n as (p * 2^(n - 1)) * 2, so n = 128 (c near log(FLT_MAX)) stays finite
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 126) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale * 2.0f;
#endif
}

// One sequence's inputs, restricted to the channel block [d0, d0 + nd): row pointers already
// offset by d0 (rows of x, delta, dy and y have stride D); AT is A transposed, [N, D], offset by d0.
template <typename scalar_t>
struct ScanBlock {
  const scalar_t* x;      // [L, D] (+ d0)
  const scalar_t* delta;  // [L, D] (+ d0)
  const scalar_t* AT;     // [N, D] (+ d0)
  const scalar_t* B;      // [L, N]
  const scalar_t* C;      // [L, N]
  int64_t L, D;
  int N, nd;
};

// Working memory of `selective_scan_forward`, in elements.
BB_HOST_DEVICE inline int64_t scan_forward_work(int N, int nd) { return (static_cast<int64_t>(N) + 1) * nd; }

// Forward: y [L, D] (+ d0) of the block. work: scan_forward_work(N, nd) elements.
template <typename scalar_t>
BB_HOST_DEVICE BB_INLINE void selective_scan_forward(const ScanBlock<scalar_t>& s, scalar_t* work, scalar_t* y) {
  const int N = s.N, nd = s.nd;
  scalar_t* h = work;                                 // [N, nd]: h_t
  scalar_t* u = work + static_cast<int64_t>(N) * nd;  // [nd]: delta_t x_t
  for (int64_t i = 0; i < static_cast<int64_t>(N) * nd; ++i) h[i] = scalar_t(0);
  for (int64_t t = 0; t < s.L; ++t) {
    const scalar_t* xt = s.x + t * s.D;
    const scalar_t* dt = s.delta + t * s.D;
    const scalar_t* Bt = s.B + t * N;
    const scalar_t* Ct = s.C + t * N;
    scalar_t* yt = y + t * s.D;
    BB_SIMD
    for (int j = 0; j < nd; ++j) {
      u[j] = dt[j] * xt[j];
      yt[j] = scalar_t(0);
    }
    for (int n = 0; n < N; ++n) {
      const scalar_t b = Bt[n], c = Ct[n];
      const scalar_t* a = s.AT + n * s.D;
      scalar_t* hn = h + static_cast<int64_t>(n) * nd;
      BB_SIMD
      for (int j = 0; j < nd; ++j) {
        const scalar_t v = scan_exp(dt[j] * a[j]) * hn[j] + u[j] * b;
        hn[j] = v;
        yt[j] += c * v;
      }
    }
  }
}

// Gradient outputs of one block. dx, ddelta: [L, D] (+ d0), written. dAT: [N, D] (+ d0), dB and
// dC: [L, N], accumulated into (+=), so the caller zeroes them and may sum blocks and sequences.
template <typename scalar_t>
struct ScanGrads {
  scalar_t* dx;
  scalar_t* ddelta;
  scalar_t* dAT;
  scalar_t* dB;
  scalar_t* dC;
};

// Working memory of `selective_scan_backward`, in elements.
BB_HOST_DEVICE inline int64_t scan_backward_work(int64_t L, int N, int nd) {
  return (2 * L * N + N + 3) * static_cast<int64_t>(nd);
}

// Backward. A forward pass recomputes, per step t, state n and channel d, the decay
// e_t = exp(delta_t A) and w_t = e_t h_{t-1} into the work buffer (and dC_t[n] = sum_d dy_t h_t,
// which needs only h_t); then the adjoint lam_t = dy_t C_t + e_{t+1} lam_{t+1} runs in reverse:
//   dB_t[n] += sum_d lam_t delta_t x_t,   dx_t = delta_t sum_n lam_t B_t[n],
//   ddelta_t = sum_n (A lam_t w_t + lam_t B_t[n] x_t),   dA[d, n] += sum_t lam_t w_t delta_t.
// dy: [L, D] (+ d0); work: scan_backward_work(L, N, nd) elements.
template <typename scalar_t>
BB_HOST_DEVICE BB_INLINE void selective_scan_backward(const ScanBlock<scalar_t>& s, const scalar_t* dy,
                                                      scalar_t* work, const ScanGrads<scalar_t>& g) {
  const int N = s.N, nd = s.nd;
  const int64_t L = s.L, D = s.D, row = static_cast<int64_t>(N) * nd;
  scalar_t* E = work;            // [L, N, nd]: e_t
  scalar_t* W = E + L * row;     // [L, N, nd]: w_t = e_t h_{t-1}
  scalar_t* h = W + L * row;     // [N, nd]: h_t in the forward pass, e_{t+1} lam_{t+1} in the reverse
  scalar_t* u = h + row;         // [nd]: delta_t x_t
  scalar_t* s1 = u + nd;         // [nd]: sum_n lam_t B_t[n]
  scalar_t* s2 = s1 + nd;        // [nd]: sum_n A lam_t w_t
  for (int64_t i = 0; i < row; ++i) h[i] = scalar_t(0);
  for (int64_t t = 0; t < L; ++t) {
    const scalar_t* xt = s.x + t * D;
    const scalar_t* dt = s.delta + t * D;
    const scalar_t* dyt = dy + t * D;
    const scalar_t* Bt = s.B + t * N;
    BB_SIMD
    for (int j = 0; j < nd; ++j) u[j] = dt[j] * xt[j];
    for (int n = 0; n < N; ++n) {
      const scalar_t b = Bt[n];
      const scalar_t* a = s.AT + n * D;
      scalar_t* hn = h + static_cast<int64_t>(n) * nd;
      scalar_t* en = E + t * row + static_cast<int64_t>(n) * nd;
      scalar_t* wn = W + t * row + static_cast<int64_t>(n) * nd;
      scalar_t accC = 0;
      BB_SIMD_SUM(accC)
      for (int j = 0; j < nd; ++j) {
        const scalar_t e = scan_exp(dt[j] * a[j]);
        const scalar_t w = e * hn[j];
        const scalar_t v = w + u[j] * b;
        en[j] = e;
        wn[j] = w;
        hn[j] = v;
        accC += dyt[j] * v;
      }
      g.dC[t * N + n] += accC;
    }
  }
  for (int64_t i = 0; i < row; ++i) h[i] = scalar_t(0);
  for (int64_t t = L - 1; t >= 0; --t) {
    const scalar_t* xt = s.x + t * D;
    const scalar_t* dt = s.delta + t * D;
    const scalar_t* dyt = dy + t * D;
    const scalar_t* Bt = s.B + t * N;
    const scalar_t* Ct = s.C + t * N;
    BB_SIMD
    for (int j = 0; j < nd; ++j) {
      u[j] = dt[j] * xt[j];
      s1[j] = s2[j] = scalar_t(0);
    }
    for (int n = 0; n < N; ++n) {
      const scalar_t b = Bt[n], c = Ct[n];
      const scalar_t* a = s.AT + n * D;
      const scalar_t* en = E + t * row + static_cast<int64_t>(n) * nd;
      const scalar_t* wn = W + t * row + static_cast<int64_t>(n) * nd;
      scalar_t* cn = h + static_cast<int64_t>(n) * nd;
      scalar_t* dA = g.dAT + n * D;
      scalar_t accB = 0;
      BB_SIMD_SUM(accB)
      for (int j = 0; j < nd; ++j) {
        const scalar_t lam = dyt[j] * c + cn[j];
        const scalar_t q = lam * wn[j];
        accB += lam * u[j];
        s1[j] += lam * b;
        s2[j] += q * a[j];
        dA[j] += q * dt[j];
        cn[j] = lam * en[j];
      }
      g.dB[t * N + n] += accB;
    }
    scalar_t* dxt = g.dx + t * D;
    scalar_t* ddt = g.ddelta + t * D;
    BB_SIMD
    for (int j = 0; j < nd; ++j) {
      dxt[j] = dt[j] * s1[j];
      ddt[j] = s2[j] + xt[j] * s1[j];
    }
  }
}

}  // namespace bb
