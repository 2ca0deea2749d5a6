// Compiles every CUDA kernel of the extension with nvcc alone, without torch:
//   nvcc -std=c++17 -c csrc/standalone_check.cu -o /tmp/check.o
// (tests/test_native_nvcc.py runs this whenever nvcc is on PATH). Not part of the extension.
#include "oracle_kernels.cuh"

namespace bb::gpu {

#define BB_INSTANTIATE(scalar_t, index_t)                                                              \
  template cudaError_t launch_hmm_filter<scalar_t, index_t>(const HmmArgs<scalar_t, index_t>&, cudaStream_t); \
  template cudaError_t launch_bijection<scalar_t, index_t>(const index_t*, const index_t*, int64_t, int64_t,  \
                                                           int, int32_t*, int64_t, scalar_t*, cudaStream_t); \
  template cudaError_t launch_markov<scalar_t, index_t>(const index_t*, int64_t, int64_t, int, double,        \
                                                        int32_t*, int64_t, scalar_t*, cudaStream_t);

BB_INSTANTIATE(float, int32_t)
BB_INSTANTIATE(float, int64_t)
BB_INSTANTIATE(double, int32_t)
BB_INSTANTIATE(double, int64_t)

#undef BB_INSTANTIATE

}  // namespace bb::gpu
