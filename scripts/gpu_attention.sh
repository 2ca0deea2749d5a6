#!/usr/bin/env bash
# The Triton attention kernels on a GPU machine: the tests natively (no interpreter), then the
# benchmarks (T in 64..4096, D in 32, 64; kernel with/without probe vs SDPA vs eager).
#
#   scripts/gpu_attention.sh [OUT_DIR]       (default ./gpu_out; works offline)
#
# Expected on one H200: about 4 minutes (tests 150 s, mostly Triton compiles; benchmarks 90 s).
# Writes summary.json, summary.txt and logs.tar.gz into OUT_DIR and exits with the worst step
# status. Environment: see scripts/gpu_lib.sh (TEST_ARGS, BENCH_ARGS: extra pytest arguments).
set -uo pipefail
# shellcheck source=scripts/gpu_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/gpu_lib.sh"
gpu_init "${1:-./gpu_out}"

step_env
step_install
step_attention_tests
step_attention_bench
finish
