// CUDA kernels of the oracle ops: pure CUDA (no torch headers), so `nvcc -c` compiles them
// alone (csrc/standalone_check.cu). The per-sequence math is the shared __host__ __device__
// code of the headers; this file only maps sequences to threads and stages memory.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "bijection.h"
#include "common.h"
#include "ctw.h"
#include "hmm_filter.h"
#include "markov.h"

namespace bb::gpu {

// ---- HMM filter -----------------------------------------------------------------------------

template <typename scalar_t, typename index_t>
struct HmmArgs {
  const scalar_t* trans;  // [B, S, S]
  const scalar_t* emit;   // [B, S, V]
  const index_t* obs;     // [B, L]
  const scalar_t* init;   // [B, S], or nullptr for uniform
  scalar_t* post;         // [B, L, S]
  double* loglik;         // [B]
  int64_t* dead;          // [B]
  int64_t B, L;
  int S, V;
};

constexpr int kHmmThreads = 64;          // HMMs per block of the tiled kernel, one per thread
constexpr int kHmmMaxFixedS = 8;         // largest S with a register-resident filter
constexpr int kHmmMaxChunk = 8;          // time steps per round of the tiled kernel
constexpr size_t kHmmSmemBudget = 48 * 1024;  // default dynamic shared memory limit

// Odd row strides in shared memory: thread i's row starts in bank (i * stride) % 32, all distinct.
__host__ __device__ constexpr int odd_stride(int n) { return n | 1; }

template <typename scalar_t>
size_t hmm_smem_bytes(int S, int V, int chunk) {
  return sizeof(scalar_t) * kHmmThreads * (static_cast<size_t>(odd_stride(S * V)) + odd_stride(chunk * S));
}

// One thread per HMM, S known at compile time (filter state in registers). Each thread's output
// is a run of L*S elements, so writing it directly would scatter every store across a warp;
// instead a block filters `chunk` steps into shared memory, then writes them back coalesced
// (each HMM's chunk is contiguous in post). The block's emission matrices are staged in shared
// memory once; obs is read a chunk at a time into registers.
template <typename scalar_t, typename index_t, int S>
__global__ void __launch_bounds__(kHmmThreads) hmm_filter_tiled_kernel(HmmArgs<scalar_t, index_t> a, int chunk) {
  extern __shared__ __align__(16) unsigned char smem_bytes[];
  const int V = a.V;
  const int es = odd_stride(S * V), ps = odd_stride(chunk * S);
  scalar_t* s_emit = reinterpret_cast<scalar_t*>(smem_bytes);  // [kHmmThreads][es]
  scalar_t* s_post = s_emit + kHmmThreads * es;                 // [kHmmThreads][ps]

  const int tid = threadIdx.x;
  const int64_t b0 = static_cast<int64_t>(blockIdx.x) * kHmmThreads;
  const int nb = static_cast<int>(a.B - b0 < kHmmThreads ? a.B - b0 : kHmmThreads);
  const bool active = tid < nb;
  const int64_t b = b0 + tid;

  const int sv = S * V;  // the block's emit is nb * sv contiguous elements
  copy_runs(s_emit, es, a.emit + b0 * sv, sv, nb, sv, tid, kHmmThreads);
  HmmFixed<scalar_t, S> f;
  if (active) f.start(0, a.trans + b * S * S, a.init ? a.init + b * S : nullptr);
  __syncthreads();

  const scalar_t* my_emit = s_emit + tid * es;
  scalar_t* my_post = s_post + tid * ps;
  const int64_t row = a.L * S;  // posterior elements per HMM
  for (int64_t t0 = 0; t0 < a.L; t0 += chunk) {
    const int n = static_cast<int>(a.L - t0 < chunk ? a.L - t0 : chunk);
    if (active) {
      int64_t o[kHmmMaxChunk];  // this chunk's observations, loads issued together
      const index_t* src = a.obs + b * a.L + t0;
#pragma unroll
      for (int i = 0; i < kHmmMaxChunk; ++i) o[i] = i < n ? static_cast<int64_t>(src[i]) : 0;
#pragma unroll
      for (int i = 0; i < kHmmMaxChunk; ++i) {
        if (i < n) {
          const bool valid = o[i] >= 0 && o[i] < V;
          scalar_t lik[S][1];
          for (int j = 0; j < S; ++j) lik[j][0] = valid ? my_emit[j * V + o[i]] : scalar_t(0);
          f.step(t0 + i, lik, my_post + i * S, 0);
        }
      }
    }
    __syncthreads();
    // Each HMM's chunk is n * S contiguous elements of post, one row apart.
    copy_runs(a.post + b0 * row + t0 * S, row, s_post, ps, nb, n * S, tid, kHmmThreads);
    __syncthreads();
  }
  if (active) {
    a.loglik[b] = f.loglik(0);
    a.dead[b] = f.dead[0];
  }
}

// Any S: one thread per HMM running the generic routine in its rows of post (global memory).
template <typename scalar_t, typename index_t>
__global__ void hmm_filter_generic_kernel(HmmArgs<scalar_t, index_t> a) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= a.B) return;
  const int64_t S = a.S;
  hmm_filter_generic<scalar_t, index_t>(a.trans + b * S * S, a.emit + b * S * a.V, a.obs + b * a.L,
                                        a.init ? a.init + b * S : nullptr, a.L, a.S, a.V,
                                        a.post + b * a.L * S, a.loglik + b, a.dead + b);
}

template <typename scalar_t, typename index_t>
cudaError_t launch_hmm_filter(const HmmArgs<scalar_t, index_t>& a, cudaStream_t stream) {
  if (a.B == 0) return cudaSuccess;
  bool launched = false;
  int chunk = kHmmMaxChunk;
  size_t smem = 0;
  // The tiled kernel keeps each block's emission tables in shared memory; when they do not fit
  // the budget (S * V beyond a few hundred elements) the loop below shrinks the chunk, and the
  // generic kernel takes over. The V bound only keeps the size arithmetic small.
  if (a.S <= kHmmMaxFixedS && a.V <= 4096) {
    while (chunk > 1 && hmm_smem_bytes<scalar_t>(a.S, a.V, chunk) > kHmmSmemBudget) chunk /= 2;
    smem = hmm_smem_bytes<scalar_t>(a.S, a.V, chunk);
  }
  if (smem > 0 && smem <= kHmmSmemBudget) {
    const unsigned blocks = static_cast<unsigned>((a.B + kHmmThreads - 1) / kHmmThreads);
    launched = dispatch_fixed<1, kHmmMaxFixedS>(a.S, [&](auto s_const) {
      constexpr int kS = decltype(s_const)::value;
      hmm_filter_tiled_kernel<scalar_t, index_t, kS><<<blocks, kHmmThreads, smem, stream>>>(a, chunk);
    });
  }
  if (!launched) {
    constexpr int kThreads = 128;
    const unsigned blocks = static_cast<unsigned>((a.B + kThreads - 1) / kThreads);
    hmm_filter_generic_kernel<scalar_t, index_t><<<blocks, kThreads, 0, stream>>>(a);
  }
  return cudaGetLastError();
}

// ---- Bijection and Markov: one thread per sequence, int32 working memory in global memory ----

template <typename scalar_t, typename index_t>
__global__ void bijection_kernel(const index_t* keys, const index_t* values, int64_t B, int64_t L, int V,
                                 int32_t* work, scalar_t* out) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= B) return;
  bijection_sequence<scalar_t, index_t>(keys + b * L, values + b * L, L, V, work + b * bijection_work_size(V),
                                        out + b * L * V);
}

template <typename scalar_t, typename index_t>
__global__ void markov_kernel(const index_t* seq, int64_t B, int64_t L, int V, double alpha, int32_t* work,
                              scalar_t* out) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= B) return;
  markov_sequence<scalar_t, index_t>(seq + b * L, L, V, alpha, work + b * markov_work_size(V), out + b * L * V);
}

constexpr int kSeqThreads = 128;

inline unsigned seq_blocks(int64_t n) { return static_cast<unsigned>((n + kSeqThreads - 1) / kSeqThreads); }

// keys, values: [B, L]; out: [B, L, V]; work holds work_seqs * bijection_work_size(V) int32s and
// is reused by batch chunks of work_seqs sequences.
template <typename scalar_t, typename index_t>
cudaError_t launch_bijection(const index_t* keys, const index_t* values, int64_t B, int64_t L, int V,
                             int32_t* work, int64_t work_seqs, scalar_t* out, cudaStream_t stream) {
  for (int64_t s = 0; s < B; s += work_seqs) {
    const int64_t n = B - s < work_seqs ? B - s : work_seqs;
    bijection_kernel<scalar_t, index_t><<<seq_blocks(n), kSeqThreads, 0, stream>>>(
        keys + s * L, values + s * L, n, L, V, work, out + s * L * V);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

// seq: [B, L]; out: [B, L, V]; work holds work_seqs * markov_work_size(V) int32s.
template <typename scalar_t, typename index_t>
cudaError_t launch_markov(const index_t* seq, int64_t B, int64_t L, int V, double alpha, int32_t* work,
                          int64_t work_seqs, scalar_t* out, cudaStream_t stream) {
  for (int64_t s = 0; s < B; s += work_seqs) {
    const int64_t n = B - s < work_seqs ? B - s : work_seqs;
    markov_kernel<scalar_t, index_t><<<seq_blocks(n), kSeqThreads, 0, stream>>>(seq + s * L, n, L, V, alpha,
                                                                                 work, out + s * L * V);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

// ---- Context-tree weighting: one thread per sequence, float64 working memory in global memory ----

// work: n * per doubles, zero on entry; each sequence leaves its part zero (ctw_sequence), so
// batch chunks reuse it without clearing.
template <typename scalar_t, typename index_t>
__global__ void ctw_kernel(const index_t* seq, int64_t B, int64_t L, int V, int D, double alpha, double leaf_prob,
                           double* work, int64_t per, scalar_t* out) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= B) return;
  ctw_sequence<scalar_t, index_t>(seq + b * L, L, V, D, alpha, leaf_prob, work + b * per, out + b * L * V);
}

// seq: [B, L]; out: [B, L, V]; work holds work_seqs * per doubles (per = ctw_work_size(V, D), or 0
// when D > L), zeroed once by the caller.
template <typename scalar_t, typename index_t>
cudaError_t launch_ctw(const index_t* seq, int64_t B, int64_t L, int V, int D, double alpha, double leaf_prob,
                       double* work, int64_t per, int64_t work_seqs, scalar_t* out, cudaStream_t stream) {
  for (int64_t s = 0; s < B; s += work_seqs) {
    const int64_t n = B - s < work_seqs ? B - s : work_seqs;
    ctw_kernel<scalar_t, index_t><<<seq_blocks(n), kSeqThreads, 0, stream>>>(seq + s * L, n, L, V, D, alpha,
                                                                             leaf_prob, work, per, out + s * L * V);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace bb::gpu
