# shellcheck shell=bash
# Shared by scripts/gpu_check.sh, gpu_oracle.sh and gpu_attention.sh (sourced, not run).
#
# Every step runs under its own `timeout` and inside the run's overall time budget, logs to
# $WORK/<step>.log and appends one line "name<TAB>rc<TAB>seconds<TAB>limit" to $WORK/steps.tsv, so no
# failure is lost: the scripts exit with the worst status and `gpu_summary.py` turns steps.tsv,
# the JUnit XML and the benchmark JSON into one summary.json.
#
# Environment (all optional):
#   PYTHON              the one interpreter every step uses (default python3); exported
#   GPU_CHECK_BUDGET_S  overall time budget of the run in seconds (default 540: 9 minutes)
#   GPU_CHECK_DRY_RUN=1 print each step's command instead of running it (exit status from
#                       GPU_CHECK_FAKE_RC_<step>, default 0): tests the scripts' logic on a CPU
#   BAYESBENCH_REQUIRE_CUDA  default 1: a missing CUDA device, extension or a skipped CUDA
#                       test case fails the step (tests/conftest.py)

PYTHON=${PYTHON:-python3}
export PYTHON
export BAYESBENCH_REQUIRE_CUDA=${BAYESBENCH_REQUIRE_CUDA:-1}
export PYTHONDONTWRITEBYTECODE=1
unset TRITON_INTERPRET  # the kernels run natively on the GPU
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GPU_CHECK_BUDGET_S=${GPU_CHECK_BUDGET_S:-540}
GPU_CHECK_DEADLINE=${GPU_CHECK_DEADLINE:-$(( $(date +%s) + GPU_CHECK_BUDGET_S ))}
export GPU_CHECK_DEADLINE  # shared with the scripts gpu_check.sh starts

# gpu_init OUT_DIR: make OUT_DIR and its work/ folder; sets OUT, WORK.
gpu_init() {
    OUT=${1:?output directory}
    mkdir -p "$OUT/work" && OUT="$(cd "$OUT" && pwd)"
    WORK="$OUT/work"
    touch "$WORK/steps.tsv"
    cd "$ROOT" || exit 1
}

# step NAME LIMIT_S CMD...: run CMD under `timeout` (the smaller of LIMIT_S and the time left),
# output to $WORK/NAME.log; records and returns its exit status (124: timed out; 125: no time left).
step() {
    local name=$1 limit=$2
    shift 2
    local left=$(( GPU_CHECK_DEADLINE - $(date +%s) ))
    (( left < limit )) && limit=$left
    local start rc
    start=$(date +%s)
    if (( limit <= 0 )); then
        echo "no time left in the run's budget" > "$WORK/$name.log"
        rc=125
    elif [ "${GPU_CHECK_DRY_RUN:-0}" = 1 ]; then
        echo "dry run (limit ${limit}s): $*" > "$WORK/$name.log"
        local fake="GPU_CHECK_FAKE_RC_${name}"
        rc=${!fake:-0}
    else
        timeout --kill-after=10 "$limit" "$@" > "$WORK/$name.log" 2>&1
        rc=$?
    fi
    printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$(( $(date +%s) - start ))" "$limit" >> "$WORK/steps.tsv"
    echo "[$(date -u +%H:%M:%S)] $name: rc=$rc in $(( $(date +%s) - start )) s (limit ${limit} s)"
    return "$rc"
}

# worst_status: the largest exit status recorded in steps.tsv (0 when every step passed).
worst_status() {
    awk -F'\t' 'BEGIN { w = 0 } $2 + 0 > w { w = $2 + 0 } END { print w }' "$WORK/steps.tsv"
}

# finish: write summary.json / summary.txt and logs.tar.gz into $OUT; exit with the worst status.
finish() {
    "$PYTHON" "$ROOT/scripts/gpu_summary.py" "$OUT" || echo "gpu_summary.py failed" >&2
    tar -czf "$OUT/logs.tar.gz" -C "$OUT" work 2>/dev/null
    cat "$OUT/summary.txt" 2>/dev/null
    local worst
    worst=$(worst_status)
    echo "outputs in $OUT (summary.json, summary.txt, logs.tar.gz); worst status $worst"
    exit "$worst"
}

# ---- the steps ----------------------------------------------------------------------------------

step_env() {
    step env 60 bash -c '
        date -u +"%Y-%m-%dT%H:%M:%SZ"
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true
        command -v nvcc && nvcc --version | tail -n 2
        "$PYTHON" -c "import sys, torch; print(\"python\", sys.version.split()[0], \"torch\", torch.__version__, \"cuda\", torch.version.cuda, \"device\", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)"
        "$PYTHON" -c "import triton; print(\"triton\", triton.__version__)" || true
        nproc'
}

# The package, importable: an editable pure-Python install (no network), else the checkout's
# bayesbench/ through a tree of symlinks on PYTHONPATH.
step_install() {
    if step install 120 env BAYESBENCH_NO_EXT=1 "$PYTHON" -m pip install --no-build-isolation --no-deps \
            --no-index -e "$ROOT"; then
        return 0
    fi
    SHIM="$WORK/shim"
    mkdir -p "$SHIM/bayesbench"
    for f in "$ROOT"/bayesbench/*; do ln -sf "$f" "$SHIM/bayesbench/"; done
    export PYTHONPATH="$SHIM${PYTHONPATH:+:$PYTHONPATH}"
    echo "install failed: using the symlink tree $SHIM on PYTHONPATH"
    return 1
}

# bayesbench._C with CUDA, built in place for this GPU's architecture only. On failure the
# partial extension is removed, so the rest runs on the pure-Python install.
step_build() {
    if [ -z "${TORCH_CUDA_ARCH_LIST:-}" ]; then
        TORCH_CUDA_ARCH_LIST=$("$PYTHON" -c "import torch; print('%d.%d' % torch.cuda.get_device_capability())" \
            2>/dev/null || echo 9.0)
        export TORCH_CUDA_ARCH_LIST
    fi
    export MAX_JOBS=${MAX_JOBS:-$(nproc)}
    if step build 300 env BAYESBENCH_CUDA=1 "$PYTHON" setup.py build_ext --inplace; then
        # torch first: the extension links against libc10 / libtorch, which torch loads.
        step import_ext 60 "$PYTHON" -c "
import torch, bayesbench.ops, bayesbench._C as C
print('extension:', bayesbench.ops.extension_status(), '| WITH_CUDA', C.WITH_CUDA, '| WITH_OPENMP', C.WITH_OPENMP)
assert C.WITH_CUDA, 'bayesbench._C was built without CUDA'" && return 0
    fi
    # Never leave a broken or half-built extension behind (a dry run touches nothing).
    [ "${GPU_CHECK_DRY_RUN:-0}" = 1 ] || rm -f "$ROOT"/bayesbench/_C*.so
    return 1
}

# Native oracle tests on cpu and cuda. When the real CUDA build succeeded, the slow nvcc-only
# compile checks (the CI's stand-in for that build) are left out.
step_oracle_tests() {
    local built=$1 select=()
    [ "$built" = 1 ] && select=(-m "not slow")
    step oracle_tests 180 "$PYTHON" -m pytest tests/oracle/test_native.py tests/ops/test_nvcc.py -q -rs \
        -p no:cacheprovider "${select[@]}" --junitxml="$WORK/oracle_tests.xml"
}

# The HMM filter benchmark on the GPU, once: 2^20 HMMs x 50 steps against the bandwidth floor.
step_hmm_bench() {
    step hmm_bench 120 "$PYTHON" -m pytest benchmarks/test_oracle_speed.py -k gpu -q -s -rs -p no:cacheprovider \
        --benchmark-json="$WORK/hmm_bench.json"
}

step_attention_tests() {
    # shellcheck disable=SC2086
    step attention_tests 300 "$PYTHON" -m pytest tests/kernels/test_attention.py -q -rs -p no:cacheprovider \
        --junitxml="$WORK/attention_tests.xml" ${TEST_ARGS:-}
}

step_attention_bench() {
    # shellcheck disable=SC2086
    step attention_bench 180 "$PYTHON" -m pytest benchmarks/test_attention.py -q -rs -p no:cacheprovider \
        --benchmark-json="$WORK/attention_bench.json" --benchmark-columns=min,median,rounds \
        --benchmark-sort=name ${BENCH_ARGS:-}
}

step_train_bench() {
    step train_bench 150 "$PYTHON" -m pytest benchmarks/test_train.py -k gpu -q -rs -p no:cacheprovider \
        --benchmark-json="$WORK/train_bench.json"
}

step_dynamics_bench() {
    # the profiler's GPU goal: Triton stats probe on every step <= 1.3x an unprofiled step
    step dynamics_bench 120 "$PYTHON" -m pytest benchmarks/test_dynamics.py -k gpu -q -rs -p no:cacheprovider \
        --benchmark-json="$WORK/dynamics_bench.json"
}

# The outside kernels (flash-linear-attention, mamba-ssm) against our float64 recurrent references:
# max differences per layer and shape in work/external_kernels.kernels.json (summary.json's
# "kernel_checks"); recorded as skipped, with the reason, where a package or the device is missing.
step_external_kernels() {
    step external_kernels 240 "$PYTHON" scripts/external_kernels_check.py "$WORK/external_kernels.kernels.json"
}

step_leaderboard() {
    step leaderboard 900 env BAYESBENCH_LEADERBOARD=paper BAYESBENCH_LEADERBOARD_STEPS="${LEADERBOARD_STEPS:-300}" \
        "$PYTHON" -m pytest benchmarks/test_leaderboard.py -q -rs -p no:cacheprovider \
        --benchmark-json="$WORK/leaderboard_bench.json"
}
