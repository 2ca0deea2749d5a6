// The scaled forward algorithm of one HMM, written once for the CPU loop and the CUDA kernels
// (docs/science.md#hmm-state-tracking; Paper I, Sec. 3.2): alpha_1 = pi0 * E[:, o_1], alpha_t = (alpha_{t-1} T) * E[:, o_t], normalised
// every step; the log-likelihood is the sum of the logs of the normalisers. A step whose
// normaliser is zero is "dead": its belief restarts uniform (no NaN) and the first such step is
// reported, so the caller can raise the same error as the PyTorch reference.
#pragma once

#include "common.h"

namespace bb {

// Filter state of K independent HMMs ("lanes") with a compile-time number of states S. The
// matrices and beliefs live in fixed-size local arrays: registers on the GPU (K = 1, one thread
// per HMM); on the CPU, K = 4 lanes run in lockstep so the innermost loops over k are SIMD
// and K independent dependency chains hide the latency of each step.
template <typename scalar_t, int S, int K = 1>
struct HmmFixed {
  scalar_t T[S][S][K];    // T[i][j][k] = p(s_t = j | s_{t-1} = i) of lane k
  scalar_t belief[S][K];  // p(s_t | o_1..t), or the initial distribution before step 0
  double ll_prod[K];      // log-likelihood of lane k = ll_sum[k] + log(ll_prod[k]) (see LogLik)
  double ll_sum[K];
  int64_t dead[K];        // first step with zero likelihood, -1 if none

  // Lane k: trans is its [S, S] matrix, init its [S] initial distribution or nullptr (uniform).
  BB_HOST_DEVICE void start(int k, const scalar_t* trans, const scalar_t* init) {
    for (int i = 0; i < S; ++i)
      for (int j = 0; j < S; ++j) T[i][j][k] = trans[i * S + j];
    for (int j = 0; j < S; ++j) belief[j][k] = init ? init[j] : scalar_t(1) / scalar_t(S);
    ll_prod[k] = 1.0;
    ll_sum[k] = 0.0;
    dead[k] = -1;
  }

  BB_HOST_DEVICE double loglik(int k) const { return LogLik{ll_prod[k], ll_sum[k]}.value(); }

  // Step t. lik[j][k] = E[j, o_t] of lane k (all zero for an observation no state can emit);
  // writes lane k's posterior to out[k * lane_stride + j].
  BB_HOST_DEVICE BB_INLINE void step(int64_t t, const scalar_t (&lik)[S][K], scalar_t* out, int64_t lane_stride) {
    update(t, lik);
    write(out, lane_stride);
  }

  BB_HOST_DEVICE BB_INLINE void write(scalar_t* out, int64_t lane_stride) const {
    for (int k = 0; k < K; ++k)
      for (int j = 0; j < S; ++j) out[k * lane_stride + j] = belief[j][k];
  }

  // The math of step t: belief <- normalised (belief T) * lik. The loops over k are SIMD lanes.
  BB_HOST_DEVICE BB_INLINE void update(int64_t t, const scalar_t (&lik)[S][K]) {
    scalar_t joint[S][K];  // prior (belief propagated through T), then times the likelihood
    if (t == 0) {
      for (int j = 0; j < S; ++j) BB_SIMD for (int k = 0; k < K; ++k) joint[j][k] = belief[j][k];
    } else {
      for (int j = 0; j < S; ++j) {
        BB_SIMD for (int k = 0; k < K; ++k) joint[j][k] = belief[0][k] * T[0][j][k];
        for (int i = 1; i < S; ++i)
          BB_SIMD for (int k = 0; k < K; ++k) joint[j][k] += belief[i][k] * T[i][j][k];
      }
    }
    scalar_t norm[K];
    BB_SIMD for (int k = 0; k < K; ++k) norm[k] = 0;
    for (int j = 0; j < S; ++j) {
      BB_SIMD for (int k = 0; k < K; ++k) {
        joint[j][k] *= lik[j][k];
        norm[k] += joint[j][k];
      }
    }
    // belief = joint / norm. The common case (every lane's normaliser is ordinary: no dead step,
    // no log to fold) has no per-lane branch; the rare one takes the per-lane path.
    double margin[K];
    BB_SIMD for (int k = 0; k < K; ++k) margin[k] = LogLik{ll_prod[k], ll_sum[k]}.margin(static_cast<double>(norm[k]));
    double worst = margin[0];
    for (int k = 1; k < K; ++k) worst = margin[k] < worst ? margin[k] : worst;
    const bool ordinary = worst >= LogLik::kOrdinary;
    if (ordinary) {
      scalar_t inv[K];
      BB_SIMD for (int k = 0; k < K; ++k) inv[k] = scalar_t(1) / norm[k];
      BB_SIMD for (int k = 0; k < K; ++k) ll_prod[k] *= static_cast<double>(norm[k]);
      for (int j = 0; j < S; ++j) BB_SIMD for (int k = 0; k < K; ++k) belief[j][k] = joint[j][k] * inv[k];
    } else {
      for (int k = 0; k < K; ++k) rare_step(t, k, joint, norm[k]);
    }
  }

  // Lane k of a step whose normaliser is zero (dead: restart uniform) or needs a log folded.
  BB_HOST_DEVICE void rare_step(int64_t t, int k, const scalar_t (&joint)[S][K], scalar_t norm) {
    if (norm > scalar_t(0)) {
      const scalar_t inv = scalar_t(1) / norm;
      for (int j = 0; j < S; ++j) belief[j][k] = joint[j][k] * inv;
      LogLik ll{ll_prod[k], ll_sum[k]};
      ll.add(static_cast<double>(norm));
      ll_prod[k] = ll.prod;
      ll_sum[k] = ll.log_sum;
    } else {
      for (int j = 0; j < S; ++j) belief[j][k] = scalar_t(1) / scalar_t(S);
      if (dead[k] < 0) dead[k] = t;
    }
  }
};

// Copy `rows` runs of `span` elements from src (run q at src + q * src_stride) to dst (run q at
// dst + q * dst_stride), `threads` threads taking consecutive elements in turn (thread `tid` the
// elements tid, tid + threads, ...). No division per element: each thread finds its first
// (run, offset) once and then steps by `threads` elements, carrying into the next run with one
// compare. The tiled CUDA HMM kernel stages emissions and writes posteriors back with it; a
// `k / span` per element was most of that kernel's instructions.
template <typename T>
BB_HOST_DEVICE BB_INLINE void copy_runs(T* __restrict__ dst, int64_t dst_stride, const T* __restrict__ src,
                                        int src_stride, int rows, int span, int tid, int threads) {
  const int n = rows * span;
  if (tid >= n) return;
  const int q0 = tid / span;  // once per call
  int r = tid - q0 * span;
  int64_t d = q0 * dst_stride + r;
  int s = q0 * src_stride + r;
  const int q_step = threads / span, r_step = threads - q_step * span;
  const int64_t d_step = q_step * dst_stride + r_step;
  const int s_step = q_step * src_stride + r_step;
  for (int k = tid; k < n; k += threads) {
    dst[d] = src[s];
    r += r_step;
    d += d_step;
    s += s_step;
    if (r >= span) {  // r and r_step are below span: at most one carry
      r -= span;
      d += dst_stride - span;
      s += src_stride - span;
    }
  }
}

// Any S, no local arrays: the posterior rows of `post` ([L, S], this HMM's slice) are the
// working memory (row t-1 is the belief that step t propagates). Used where S has no fixed
// instantiation. obs values outside [0, V) count as impossible observations.
template <typename scalar_t, typename index_t>
BB_HOST_DEVICE void hmm_filter_generic(const scalar_t* trans, const scalar_t* emit, const index_t* obs,
                                       const scalar_t* init, int64_t L, int S, int V, scalar_t* post,
                                       double* loglik_out, int64_t* dead_out) {
  LogLik loglik;
  int64_t dead = -1;
  const scalar_t uniform = scalar_t(1) / scalar_t(S);
  for (int64_t t = 0; t < L; ++t) {
    scalar_t* row = post + t * S;
    const scalar_t* prev = row - S;
    const int64_t o = static_cast<int64_t>(obs[t]);
    const bool valid = o >= 0 && o < V;
    scalar_t norm = 0;
    for (int j = 0; j < S; ++j) {
      scalar_t prior;
      if (t == 0) {
        prior = init ? init[j] : uniform;
      } else {
        prior = 0;
        for (int i = 0; i < S; ++i) prior += prev[i] * trans[i * S + j];
      }
      row[j] = valid ? prior * emit[j * V + o] : scalar_t(0);
      norm += row[j];
    }
    if (norm > scalar_t(0)) {
      const scalar_t inv = scalar_t(1) / norm;
      for (int j = 0; j < S; ++j) row[j] *= inv;
      loglik.add(static_cast<double>(norm));
    } else {
      for (int j = 0; j < S; ++j) row[j] = uniform;
      if (dead < 0) dead = t;
    }
  }
  *loglik_out = loglik.value();
  *dead_out = dead;
}

}  // namespace bb
