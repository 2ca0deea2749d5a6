// Compiles every CUDA kernel of the extension with nvcc alone, without torch:
//   nvcc -std=c++17 -c csrc/standalone_check.cu -o /tmp/check.o
// (tests/test_native_nvcc.py runs this whenever nvcc is on PATH). Not part of the extension.
#include "oracle_kernels.cuh"
#include "selective_scan.h"

namespace bb::gpu {

#define BB_INSTANTIATE(scalar_t, index_t)                                                              \
  template cudaError_t launch_hmm_filter<scalar_t, index_t>(const HmmArgs<scalar_t, index_t>&, cudaStream_t); \
  template cudaError_t launch_bijection<scalar_t, index_t>(const index_t*, const index_t*, int64_t, int64_t,  \
                                                           int, int32_t*, int64_t, scalar_t*, cudaStream_t); \
  template cudaError_t launch_markov<scalar_t, index_t>(const index_t*, int64_t, int64_t, int, double,        \
                                                        int32_t*, int64_t, scalar_t*, cudaStream_t);       \
  template cudaError_t launch_ctw<scalar_t, index_t>(const index_t*, int64_t, int64_t, int, int, double, double,   \
                                                     double*, int64_t, int64_t, scalar_t*, cudaStream_t);

BB_INSTANTIATE(float, int32_t)
BB_INSTANTIATE(float, int64_t)
BB_INSTANTIATE(double, int32_t)
BB_INSTANTIATE(double, int64_t)

#undef BB_INSTANTIATE

// The selective scan has no CUDA launcher yet; compiling its per-sequence routines for the device
// keeps them __host__ __device__-clean (one channel block per thread).
template <typename scalar_t>
__global__ void selective_scan_check(ScanBlock<scalar_t> s, ScanGrads<scalar_t> g, const scalar_t* dy,
                                     scalar_t* work, scalar_t* y) {
  selective_scan_forward(s, work, y);
  selective_scan_backward(s, dy, work, g);
}
template __global__ void selective_scan_check<float>(ScanBlock<float>, ScanGrads<float>, const float*, float*, float*);
template __global__ void selective_scan_check<double>(ScanBlock<double>, ScanGrads<double>, const double*, double*,
                                                      double*);

}  // namespace bb::gpu
