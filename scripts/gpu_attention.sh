#!/usr/bin/env bash
# Attention kernel on a GPU machine: the tests, run natively (no interpreter), then the GPU-scale
# benchmarks (T in 64..4096, D in 32, 64; Triton with/without probe vs SDPA vs eager).
#
#   scripts/gpu_attention.sh [OUT_DIR]        (default ./gpu_out)
#
# Needs: python3 with torch (CUDA), triton, pytest, pytest-benchmark; no network, no install.
# Writes into OUT_DIR (6 files): env.txt, tests_attention.log, tests_attention.xml,
# bench_attention.log, bench_attention.json, summary.txt. Exit status: 0 when tests and
# benchmarks both passed, else 1 (everything is still written).
# Environment: PYTHON (default python3), BENCH_ARGS (extra pytest args for the benchmarks,
# e.g. "-k 'D64'"), TEST_ARGS (extra pytest args for the tests).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-./gpu_out}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
PY="${PYTHON:-python3}"
cd "$ROOT"

unset TRITON_INTERPRET            # run the kernels natively
export PYTHONSAFEPATH=1           # don't put the repo root on sys.path (its bayesbench/ has no kernels/)
export PYTHONDONTWRITEBYTECODE=1

# bayesbench.kernels is kernels/ mapped by setup.py's package_dir. If the package is not installed,
# import it through a throwaway tree of symlinks instead of installing anything.
if ! "$PY" -c "import bayesbench.kernels" >/dev/null 2>&1; then
    SHIM="$(mktemp -d)"
    mkdir -p "$SHIM/bayesbench"
    for f in "$ROOT"/bayesbench/*; do ln -s "$f" "$SHIM/bayesbench/"; done
    ln -s "$ROOT/kernels" "$SHIM/bayesbench/kernels"
    export PYTHONPATH="$SHIM${PYTHONPATH:+:$PYTHONPATH}"
fi

{
    date -u +"%Y-%m-%dT%H:%M:%SZ"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1
    "$PY" - <<'PY'
import sys, torch, triton, bayesbench.kernels as K
print("python", sys.version.split()[0])
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
print("device", torch.cuda.get_device_name() if torch.cuda.is_available() else None)
print("triton", triton.__version__)
print("bayesbench.kernels from", K.__file__)
PY
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "no CUDA device: this script is for a GPU machine" | tee -a "$OUT/env.txt"
    exit 1
fi

status=0
echo "== tests (native) =="
# shellcheck disable=SC2086
"$PY" -m pytest tests/test_attention_kernel.py -p no:cacheprovider -q -rs \
    --junitxml="$OUT/tests_attention.xml" ${TEST_ARGS:-} 2>&1 | tee "$OUT/tests_attention.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== benchmarks =="
# shellcheck disable=SC2086
"$PY" -m pytest benchmarks/test_attention.py -p no:cacheprovider -q \
    --benchmark-json="$OUT/bench_attention.json" --benchmark-columns=min,median,mean,stddev,rounds \
    --benchmark-sort=name ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench_attention.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

"$PY" - "$OUT/bench_attention.json" <<'PY' 2>&1 | tee "$OUT/summary.txt"
"""Ratios from the benchmark JSON: one line per (T, D, variant)."""
import json, sys
try:
    data = json.load(open(sys.argv[1]))
except (OSError, ValueError) as err:
    sys.exit(f"no benchmark JSON: {err}")
rows = sorted((b["extra_info"] for b in data["benchmarks"]), key=lambda i: (i["T"], i["D"], i["variant"]))
fmt = "{:>5} {:>4} {:<13} {:>10} {:>9} {:>10} {:>10}  {}"
print(fmt.format("T", "D", "variant", "median_ms", "x_sdpa", "x_triton", "eager/x", "goals"))
for i in rows:
    goals = " ".join(f"{k[5:]}={'ok' if v else 'MISSED'}" for k, v in i.items() if k.startswith("goal_"))
    get = lambda k: f"{i[k]:.3f}" if k in i else "-"
    print(fmt.format(i["T"], i["D"], i["variant"], f"{i['median_ms']:.3f}", get("ratio_vs_sdpa"),
                     get("ratio_vs_triton"), get("speedup_vs_eager"), goals))
PY

echo "outputs in $OUT; status $status"
exit "$status"
