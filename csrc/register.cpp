// The one registration file: op schemas (TORCH_LIBRARY), the CPU and CUDA kernels
// (TORCH_LIBRARY_IMPL), and the Python module `bayesbench._C` whose import registers them.
// The Python side (fake kernels for torch.compile, the selective scan's autograd formula, typed
// wrappers) is bayesbench/ops.py, named below with set_python_module.
#include <Python.h>
#include <torch/library.h>

#include "oracle.h"

#ifdef BAYESBENCH_WITH_CUDA
#define BB_WITH_CUDA 1
#else
#define BB_WITH_CUDA 0
#endif

#ifdef _OPENMP
#define BB_WITH_OPENMP 1
#else
#define BB_WITH_OPENMP 0
#endif

TORCH_LIBRARY(bayesbench, m) {
  m.set_python_module("bayesbench.ops");
  // HMM filtering: posteriors [B, L, S] (dtype of trans), log-likelihood [B] (float64) and the
  // first step with zero likelihood [B] (int64, -1 if none).
  m.def("hmm_filter(Tensor trans, Tensor emit, Tensor obs, Tensor? init) -> (Tensor, Tensor, Tensor)");
  // Bijection elimination: posterior over pi(keys[b, k]) after the pairs before k, [B, L, V].
  m.def("bijection_posterior(Tensor keys, Tensor values, int V, ScalarType dtype) -> Tensor");
  // In-context Markov chain: predictive of x_{t+1} given x_0..t, [B, L, V].
  m.def("markov_predictive(Tensor seq, int V, float alpha, ScalarType dtype) -> Tensor");
  // Context-tree weighting (variable-order chain of depth <= depth): predictive of x_{t+1}, [B, L, V].
  m.def("ctw_predictive(Tensor seq, int V, int depth, float alpha, float leaf_prob, ScalarType dtype) -> Tensor");
  // Mamba's selective scan without the skip term (CPU only): y [M, L, D] from x, delta [M, L, D],
  // A [D, N] or [M, D, N], B, C [M, L, N]; the backward recomputes the states and returns the
  // gradients of x, delta, A (in A's shape), B and C. models/scan.py pairs them in an autograd Function.
  m.def("selective_scan_fwd(Tensor x, Tensor delta, Tensor A, Tensor B, Tensor C) -> Tensor");
  m.def("selective_scan_bwd(Tensor x, Tensor delta, Tensor A, Tensor B, Tensor C, Tensor dy)"
        " -> (Tensor, Tensor, Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(bayesbench, CPU, m) {
  m.impl("hmm_filter", &bb::hmm_filter_cpu);
  m.impl("bijection_posterior", &bb::bijection_posterior_cpu);
  m.impl("markov_predictive", &bb::markov_predictive_cpu);
  m.impl("ctw_predictive", &bb::ctw_predictive_cpu);
  m.impl("selective_scan_fwd", &bb::selective_scan_fwd_cpu);
  m.impl("selective_scan_bwd", &bb::selective_scan_bwd_cpu);
}

#ifdef BAYESBENCH_WITH_CUDA
TORCH_LIBRARY_IMPL(bayesbench, CUDA, m) {
  m.impl("hmm_filter", &bb::hmm_filter_cuda);
  m.impl("bijection_posterior", &bb::bijection_posterior_cuda);
  m.impl("markov_predictive", &bb::markov_predictive_cuda);
  m.impl("ctw_predictive", &bb::ctw_predictive_cuda);
}
#endif

// A plain extension module (no pybind11): importing it runs the static registrations above.
PyMODINIT_FUNC PyInit__C(void) {
  static PyModuleDef module_def = {
      PyModuleDef_HEAD_INIT, "_C",
      "Compiled oracle ops of bayesbench, registered as torch.ops.bayesbench.*", -1, nullptr};
  PyObject* module = PyModule_Create(&module_def);
  if (module == nullptr) return nullptr;
  if (PyModule_AddObjectRef(module, "WITH_CUDA", BB_WITH_CUDA ? Py_True : Py_False) < 0 ||
      PyModule_AddObjectRef(module, "WITH_OPENMP", BB_WITH_OPENMP ? Py_True : Py_False) < 0) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
