#!/usr/bin/env bash
# Build bayesbench._C with CUDA on a GPU machine, run the native-oracle tests (CPU and CUDA) and
# the GPU benchmark, and leave every log and JSON in the directory given as $1.
#
#   scripts/gpu_oracle.sh OUT_DIR        (from anywhere; works offline)
#
# Needs: a CUDA build of torch with its toolkit (nvcc, CUDA_HOME), pytest; pytest-benchmark is
# optional (without it the GPU numbers come from the benchmark module's __main__). Step time
# limits (seconds) can be changed with BUILD_TIMEOUT, TEST_TIMEOUT and BENCH_TIMEOUT.
set -uo pipefail

OUT=${1:?usage: scripts/gpu_oracle.sh OUT_DIR}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
PY=${PYTHON:-python}
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }

# 1. Environment.
{
  date -u
  nvidia-smi || true
  command -v nvcc && nvcc --version
  "$PY" -c "import sys, torch; print('python', sys.version.split()[0], '| torch', torch.__version__, '| cuda', torch.version.cuda, '| device', torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)"
  "$PY" -c "from torch.utils.cpp_extension import CUDA_HOME; print('CUDA_HOME', CUDA_HOME)"
} > "$OUT/env.txt" 2>&1
note "env: $(tail -2 "$OUT/env.txt" | tr '\n' ' ')"

# 2. Build in place with CUDA for this GPU only (fewer architectures, faster build).
export MAX_JOBS=${MAX_JOBS:-$(nproc)}
if [ -z "${TORCH_CUDA_ARCH_LIST:-}" ]; then
  TORCH_CUDA_ARCH_LIST=$("$PY" -c "import torch; print('%d.%d' % torch.cuda.get_device_capability())" 2>/dev/null)
  export TORCH_CUDA_ARCH_LIST
fi
start=$(date +%s)
BAYESBENCH_CUDA=1 timeout "${BUILD_TIMEOUT:-480}" "$PY" -m pip install --no-build-isolation --no-deps --no-index -v -e . \
  > "$OUT/build.log" 2>&1
rc=$?
note "build: rc=$rc in $(( $(date +%s) - start )) s (TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-})"
if [ $rc -ne 0 ]; then
  tail -40 "$OUT/build.log"
  rm -f bayesbench/_C*.so  # never leave a half-built extension behind
  exit 1
fi
"$PY" -c "import bayesbench.ops, bayesbench._C as C; print('extension:', bayesbench.ops.extension_status(), '| WITH_CUDA', C.WITH_CUDA, '| WITH_OPENMP', C.WITH_OPENMP)" \
  2>&1 | tee -a "$SUMMARY"

# 3. Tests: every native test runs on cpu and cuda (the device list comes from the build).
start=$(date +%s)
timeout "${TEST_TIMEOUT:-300}" "$PY" -m pytest tests/test_oracle_native.py tests/test_native_nvcc.py -q -ra \
  -p no:cacheprovider --junitxml="$OUT/tests.xml" > "$OUT/tests.log" 2>&1
note "tests: rc=$? in $(( $(date +%s) - start )) s: $(tail -1 "$OUT/tests.log")"

# 4. GPU benchmark: 2^20 HMMs x 50 steps against the memory-bandwidth floor.
start=$(date +%s)
if "$PY" -c "import pytest_benchmark" 2>/dev/null; then
  timeout "${BENCH_TIMEOUT:-180}" "$PY" -m pytest benchmarks/test_oracle_speed.py -k gpu -q -s -p no:cacheprovider \
    --benchmark-json="$OUT/bench_gpu_pytest.json" > "$OUT/bench_gpu.log" 2>&1
  rc=$?
else
  rc=skipped
fi
# The same measurement as plain JSON (no pytest-benchmark needed).
timeout "${BENCH_TIMEOUT:-180}" "$PY" benchmarks/test_oracle_speed.py "$OUT/bench_gpu.json" \
  >> "$OUT/bench_gpu.log" 2>&1
note "benchmark: pytest rc=$rc, json rc=$? in $(( $(date +%s) - start )) s"
grep -E "^hmm_filter CUDA" "$OUT/bench_gpu.log" | tee -a "$SUMMARY"
note "outputs in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
