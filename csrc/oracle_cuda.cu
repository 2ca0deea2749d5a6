// CUDA implementations: torch tensors in, kernel launches of oracle_kernels.cuh out. Checks
// and layout handling are shared with the CPU side (oracle.h).
#include <ATen/Dispatch.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>

#include "oracle.h"
#include "oracle_kernels.cuh"

namespace bb {
namespace {

// Cap on the int32 working memory of the bijection / Markov kernels (batch chunks reuse it).
constexpr int64_t kMaxWorkInts = int64_t{1} << 26;  // 256 MB

int64_t work_sequences(int64_t B, int64_t per_sequence) {
  return std::max<int64_t>(1, std::min<int64_t>(B, kMaxWorkInts / std::max<int64_t>(1, per_sequence)));
}

}  // namespace

HmmResult hmm_filter_cuda(const at::Tensor& trans, const at::Tensor& emit, const at::Tensor& obs,
                          const std::optional<at::Tensor>& init) {
  const HmmInputs in = prepare_hmm(trans, emit, obs, init);
  TORCH_CHECK(in.trans.is_cuda(), "hmm_filter_cuda: tensors must be on a CUDA device");
  const c10::cuda::CUDAGuard guard(in.trans.device());
  auto post = at::empty({in.B, in.L, in.S}, in.trans.options());
  auto loglik = at::empty({in.B}, in.trans.options().dtype(at::kDouble));
  auto dead = at::empty({in.B}, in.trans.options().dtype(at::kLong));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(in.trans.scalar_type(), "hmm_filter_cuda", [&] {
    AT_DISPATCH_INDEX_TYPES(in.obs.scalar_type(), "hmm_filter_cuda", [&] {
      const gpu::HmmArgs<scalar_t, index_t> args{
          in.trans.data_ptr<scalar_t>(), in.emit.data_ptr<scalar_t>(), in.obs.data_ptr<index_t>(),
          in.init.defined() ? in.init.data_ptr<scalar_t>() : nullptr, post.data_ptr<scalar_t>(),
          loglik.data_ptr<double>(), dead.data_ptr<int64_t>(), in.B, in.L,
          static_cast<int>(in.S), static_cast<int>(in.V)};
      C10_CUDA_CHECK(gpu::launch_hmm_filter(args, stream));  // launch errors only (asynchronous)
    });
  });
  return {post, loglik, dead};
}

at::Tensor bijection_posterior_cuda(const at::Tensor& keys, const at::Tensor& values, int64_t V,
                                    at::ScalarType dtype) {
  check_float_dtype(dtype, "dtype");
  const auto kv = prepare_bijection(keys, values, V);
  const at::Tensor &k = kv.first, &v = kv.second;
  TORCH_CHECK(k.is_cuda(), "bijection_posterior_cuda: tensors must be on a CUDA device");
  const c10::cuda::CUDAGuard guard(k.device());
  const int64_t B = k.size(0), L = k.size(1);
  auto out = at::empty({B, L, V}, k.options().dtype(dtype));
  if (B == 0) return out;
  const int64_t per = bijection_work_size(static_cast<int>(V));
  const int64_t seqs = work_sequences(B, per);
  auto work = at::empty({seqs * per}, k.options().dtype(at::kInt));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(dtype, "bijection_posterior_cuda", [&] {
    AT_DISPATCH_INDEX_TYPES(k.scalar_type(), "bijection_posterior_cuda", [&] {
      const cudaError_t err = gpu::launch_bijection<scalar_t, index_t>(
          k.data_ptr<index_t>(), v.data_ptr<index_t>(), B, L, static_cast<int>(V), work.data_ptr<int32_t>(),
          seqs, out.data_ptr<scalar_t>(), stream);
      C10_CUDA_CHECK(err);
    });
  });
  return out;
}

at::Tensor markov_predictive_cuda(const at::Tensor& seq, int64_t V, double alpha, at::ScalarType dtype) {
  check_float_dtype(dtype, "dtype");
  const at::Tensor x = prepare_sequence(seq, "seq", V, 2);
  TORCH_CHECK(x.is_cuda(), "markov_predictive_cuda: tensors must be on a CUDA device");
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t B = x.size(0), L = x.size(1);
  auto out = at::empty({B, L, V}, x.options().dtype(dtype));
  if (B == 0) return out;
  const int64_t per = markov_work_size(static_cast<int>(V));
  const int64_t seqs = work_sequences(B, per);
  auto work = at::empty({seqs * per}, x.options().dtype(at::kInt));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(dtype, "markov_predictive_cuda", [&] {
    AT_DISPATCH_INDEX_TYPES(x.scalar_type(), "markov_predictive_cuda", [&] {
      const cudaError_t err = gpu::launch_markov<scalar_t, index_t>(
          x.data_ptr<index_t>(), B, L, static_cast<int>(V), alpha, work.data_ptr<int32_t>(), seqs,
          out.data_ptr<scalar_t>(), stream);
      C10_CUDA_CHECK(err);
    });
  });
  return out;
}

at::Tensor ctw_predictive_cuda(const at::Tensor& seq, int64_t V, int64_t depth, double alpha, double leaf_prob,
                               at::ScalarType dtype) {
  check_float_dtype(dtype, "dtype");
  const at::Tensor x = prepare_sequence(seq, "seq", V, 2);
  TORCH_CHECK(x.is_cuda(), "ctw_predictive_cuda: tensors must be on a CUDA device");
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t B = x.size(0), L = x.size(1);
  const int64_t per = ctw_checked_work(V, depth, alpha, leaf_prob, L);
  auto out = at::empty({B, L, V}, x.options().dtype(dtype));
  if (B == 0) return out;
  // the same cap as the int32 work of the other kernels, in bytes (2 ints per double)
  const int64_t seqs = work_sequences(B, 2 * std::max<int64_t>(1, per));
  auto work = at::zeros({std::max<int64_t>(1, seqs * per)}, x.options().dtype(at::kDouble));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(dtype, "ctw_predictive_cuda", [&] {
    AT_DISPATCH_INDEX_TYPES(x.scalar_type(), "ctw_predictive_cuda", [&] {
      const cudaError_t err = gpu::launch_ctw<scalar_t, index_t>(
          x.data_ptr<index_t>(), B, L, static_cast<int>(V), static_cast<int>(depth), alpha, leaf_prob,
          work.data_ptr<double>(), per, seqs, out.data_ptr<scalar_t>(), stream);
      C10_CUDA_CHECK(err);
    });
  });
  return out;
}

}  // namespace bb
