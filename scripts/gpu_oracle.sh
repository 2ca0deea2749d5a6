#!/usr/bin/env bash
# The native oracle on a GPU machine: pure-Python install, bayesbench._C built with CUDA, the
# import check, the native tests on cpu and cuda, and the HMM filter benchmark (once).
#
#   scripts/gpu_oracle.sh [OUT_DIR]          (default ./gpu_out; works offline)
#
# Expected on one H200: about 4 minutes (build 150 s, tests 60 s, benchmark 30 s). Writes
# summary.json, summary.txt and logs.tar.gz into OUT_DIR and exits with the worst step status.
# Environment: see scripts/gpu_lib.sh.
set -uo pipefail
# shellcheck source=scripts/gpu_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/gpu_lib.sh"
gpu_init "${1:-./gpu_out}"

step_env
step_install
built=0
step_build && built=1
step_oracle_tests "$built"
if [ "$built" = 1 ]; then
    step_hmm_bench
else
    printf 'hmm_bench\t126\t0\t0\n' >> "$WORK/steps.tsv"
    echo "hmm_bench: not run, bayesbench._C with CUDA is missing (status 126)"
fi
finish
