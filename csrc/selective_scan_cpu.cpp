// CPU implementation of the fused selective scan (selective_scan.h): the forward runs
// dynamically scheduled over (sequence, channel block) pairs, the backward over sequences (a
// sequence's channel blocks run in one task, so the sums over channels of dB and dC need no
// atomics); each block's working memory is a small per-task buffer. The loops over channels are
// SIMD loops, compiled twice: baseline x86-64 and an AVX2 + FMA clone chosen at run time.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cpu_loops.h"
#include "oracle.h"
#include "selective_scan.h"

namespace bb {
namespace {

constexpr int64_t kBackwardWorkBytes = 1 << 20;  // backward work buffer per block, at most (unless kMinBlock)
constexpr int64_t kForwardBlock = 512;            // channels per forward block, at most
constexpr int64_t kMinBlock = 16;                 // and at least (unless D is smaller)

// Checked, contiguous inputs; AT = A transposed to [M or 1, N, D].
struct ScanInputs {
  at::Tensor x, delta, AT, B, C;
  int64_t M, L, D, N;
  bool per_member_A;  // A was [M, D, N] (else [D, N], shared)
};

ScanInputs prepare_scan(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& A, const at::Tensor& B,
                        const at::Tensor& C) {
  TORCH_CHECK(x.dim() == 3, "x must be [M, L, D], got ", x.sizes());
  check_float_dtype(x.scalar_type(), "x");
  const int64_t M = x.size(0), L = x.size(1), D = x.size(2);
  TORCH_CHECK(delta.sizes() == x.sizes(), "delta must have the shape of x ", x.sizes(), ", got ", delta.sizes());
  TORCH_CHECK((A.dim() == 2 && A.size(0) == D) || (A.dim() == 3 && A.size(0) == M && A.size(1) == D),
              "A must be [D, N] or [M, D, N] with M, D of x, got ", A.sizes());
  const int64_t N = A.size(-1);
  TORCH_CHECK(N <= INT32_MAX && D <= INT32_MAX, "A is too large: ", A.sizes());
  TORCH_CHECK(B.dim() == 3 && B.size(0) == M && B.size(1) == L && B.size(2) == N, "B must be [M, L, N] = [", M,
              ", ", L, ", ", N, "], got ", B.sizes());
  TORCH_CHECK(C.sizes() == B.sizes(), "C must be [M, L, N] = [", M, ", ", L, ", ", N, "], got ", C.sizes());
  for (const at::Tensor* t : {&delta, &A, &B, &C}) {
    TORCH_CHECK(t->scalar_type() == x.scalar_type(), "x, delta, A, B and C must have one dtype, got ",
                x.scalar_type(), " and ", t->scalar_type());
    TORCH_CHECK(t->device() == x.device(), "x, delta, A, B and C must be on one device");
  }
  const at::Tensor A3 = A.dim() == 3 ? A : A.unsqueeze(0);
  return {x.contiguous(), delta.contiguous(), A3.transpose(1, 2).contiguous(), B.contiguous(), C.contiguous(),
          M, L, D, N, A.dim() == 3};
}

// Channels per backward block: as many as fit kBackwardWorkBytes of work buffer (wide blocks
// amortise the per-(step, state) sums over the channels better than cache-sized narrow ones).
int64_t backward_block(int64_t L, int64_t N, int64_t D, int64_t elem) {
  const int64_t fit = kBackwardWorkBytes / ((2 * L * N + N + 3) * elem);
  const int64_t nd = std::max(kMinBlock, fit / kMinBlock * kMinBlock);
  return std::min(nd, D);
}

template <typename scalar_t>
struct ScanPtrs {
  const scalar_t *x, *delta, *AT, *B, *C;
  int64_t L, D, N, A_stride;  // A_stride: 0 when A is shared by the sequences

  ScanBlock<scalar_t> block(int64_t m, int64_t d0, int64_t nd) const {
    const int64_t xo = m * L * D + d0;
    return {x + xo, delta + xo, AT + m * A_stride + d0, B + m * L * N, C + m * L * N,
            L, D, static_cast<int>(N), static_cast<int>(nd)};
  }
};

template <typename scalar_t>
BB_INLINE void forward_items(const ScanPtrs<scalar_t>& p, int64_t nd, int64_t nb, scalar_t* y, int64_t i0,
                             int64_t i1) {
  std::vector<scalar_t> work(scan_forward_work(static_cast<int>(p.N), static_cast<int>(nd)));
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t m = i / nb, d0 = (i % nb) * nd;
    const int64_t len = std::min(nd, p.D - d0);
    selective_scan_forward(p.block(m, d0, len), work.data(), y + m * p.L * p.D + d0);
  }
}

template <typename scalar_t>
BB_INLINE void backward_items(const ScanPtrs<scalar_t>& p, int64_t nd, const scalar_t* dy, scalar_t* dx,
                              scalar_t* ddelta, scalar_t* dAT, scalar_t* dB, scalar_t* dC, int64_t m0, int64_t m1) {
  std::vector<scalar_t> work(scan_backward_work(p.L, static_cast<int>(p.N), static_cast<int>(nd)));
  for (int64_t m = m0; m < m1; ++m) {
    for (int64_t d0 = 0; d0 < p.D; d0 += nd) {
      const int64_t len = std::min(nd, p.D - d0), xo = m * p.L * p.D + d0;
      const ScanGrads<scalar_t> g{dx + xo, ddelta + xo, dAT + m * p.N * p.D + d0, dB + m * p.L * p.N,
                                  dC + m * p.L * p.N};
      selective_scan_backward(p.block(m, d0, len), dy + xo, work.data(), g);
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define BB_SCAN_AVX2 1
template <typename scalar_t>
__attribute__((target("avx2,fma"))) void forward_items_avx2(const ScanPtrs<scalar_t>& p, int64_t nd, int64_t nb,
                                                            scalar_t* y, int64_t i0, int64_t i1) {
  forward_items(p, nd, nb, y, i0, i1);
}
template <typename scalar_t>
__attribute__((target("avx2,fma"))) void backward_items_avx2(const ScanPtrs<scalar_t>& p, int64_t nd,
                                                             const scalar_t* dy, scalar_t* dx, scalar_t* ddelta,
                                                             scalar_t* dAT, scalar_t* dB, scalar_t* dC, int64_t m0,
                                                             int64_t m1) {
  backward_items(p, nd, dy, dx, ddelta, dAT, dB, dC, m0, m1);
}
#endif

template <typename scalar_t>
ScanPtrs<scalar_t> pointers(const ScanInputs& in) {
  return {in.x.data_ptr<scalar_t>(), in.delta.data_ptr<scalar_t>(), in.AT.data_ptr<scalar_t>(),
          in.B.data_ptr<scalar_t>(), in.C.data_ptr<scalar_t>(), in.L, in.D, in.N,
          in.per_member_A ? in.N * in.D : 0};
}

}  // namespace

at::Tensor selective_scan_fwd_cpu(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& A,
                                  const at::Tensor& B, const at::Tensor& C) {
  const ScanInputs in = prepare_scan(x, delta, A, B, C);
  at::Tensor y = at::empty({in.M, in.L, in.D}, in.x.options());
  if (y.numel() == 0) return y;
  if (in.N == 0) return y.zero_();
  const int64_t nd = std::min(in.D, kForwardBlock), nb = (in.D + nd - 1) / nd;
  AT_DISPATCH_FLOATING_TYPES(in.x.scalar_type(), "selective_scan_fwd_cpu", [&] {
    const ScanPtrs<scalar_t> p = pointers<scalar_t>(in);
    scalar_t* yp = y.data_ptr<scalar_t>();
#ifdef BB_SCAN_AVX2
    const bool avx2 = cpu_has_avx2();
#endif
    parallel_for_dynamic(in.M * nb, grain_for(in.L * nd * in.N), [&](int64_t i0, int64_t i1) {
#ifdef BB_SCAN_AVX2
      if (avx2) return forward_items_avx2(p, nd, nb, yp, i0, i1);
#endif
      forward_items(p, nd, nb, yp, i0, i1);
    });
  });
  return y;
}

ScanGradsResult selective_scan_bwd_cpu(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& A,
                                       const at::Tensor& B, const at::Tensor& C, const at::Tensor& dy) {
  const ScanInputs in = prepare_scan(x, delta, A, B, C);
  TORCH_CHECK(dy.sizes() == x.sizes(), "dy must have the shape of x ", x.sizes(), ", got ", dy.sizes());
  TORCH_CHECK(dy.scalar_type() == x.scalar_type() && dy.device() == x.device(),
              "dy must have the dtype and device of x");
  const at::Tensor g = dy.contiguous();
  const auto opts = in.x.options();
  at::Tensor dx = at::empty({in.M, in.L, in.D}, opts), ddelta = at::empty({in.M, in.L, in.D}, opts);
  at::Tensor dAT = at::zeros({in.M, in.N, in.D}, opts);
  at::Tensor dB = at::zeros({in.M, in.L, in.N}, opts), dC = at::zeros({in.M, in.L, in.N}, opts);
  if (in.N == 0) {
    dx.zero_();
    ddelta.zero_();
  } else if (in.M * in.L * in.D > 0) {
    const int64_t nd = backward_block(in.L, in.N, in.D, static_cast<int64_t>(in.x.element_size()));
    AT_DISPATCH_FLOATING_TYPES(in.x.scalar_type(), "selective_scan_bwd_cpu", [&] {
      const ScanPtrs<scalar_t> p = pointers<scalar_t>(in);
      const scalar_t* gp = g.data_ptr<scalar_t>();
      scalar_t *dxp = dx.data_ptr<scalar_t>(), *ddp = ddelta.data_ptr<scalar_t>();
      scalar_t *dap = dAT.data_ptr<scalar_t>(), *dbp = dB.data_ptr<scalar_t>(), *dcp = dC.data_ptr<scalar_t>();
#ifdef BB_SCAN_AVX2
      const bool avx2 = cpu_has_avx2();
#endif
      parallel_for_dynamic(in.M, grain_for(in.L * in.D * in.N), [&](int64_t m0, int64_t m1) {
#ifdef BB_SCAN_AVX2
        if (avx2) return backward_items_avx2(p, nd, gp, dxp, ddp, dap, dbp, dcp, m0, m1);
#endif
        backward_items(p, nd, gp, dxp, ddp, dap, dbp, dcp, m0, m1);
      });
    });
  }
  // dA in A's shape: [M, D, N] per sequence, or summed over the sequences for a shared [D, N]
  at::Tensor dA = (in.per_member_A ? dAT : dAT.sum(0)).transpose(-1, -2).contiguous();
  return {dx, ddelta, dA, dB, dC};
}

}  // namespace bb
