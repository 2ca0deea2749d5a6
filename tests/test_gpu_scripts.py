"""The GPU check scripts' logic, checked on a CPU: dry runs (each step prints its command and
takes a chosen exit status) show that every step runs, that a failure anywhere sets the exit
status and lands in summary.json, and that the run's time budget is enforced; the summary
writer reads JUnit XML and benchmark JSON; BAYESBENCH_REQUIRE_CUDA=1 fails without a device."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(ROOT, "scripts")
PHASES = ["env", "install", "build", "import_ext", "oracle_tests", "attention_tests", "hmm_bench",
          "attention_bench", "train_bench", "dynamics_bench", "external_kernels"]


def dry_run(tmp_path, script="gpu_check.sh", **fake_rc):
    env = dict(os.environ, GPU_CHECK_DRY_RUN="1", PYTHON=sys.executable, TORCH_CUDA_ARCH_LIST="9.0")
    env.pop("GPU_CHECK_DEADLINE", None)
    env.update({f"GPU_CHECK_FAKE_RC_{k}": str(v) for k, v in fake_rc.items() if not k.isupper()})
    env.update({k: str(v) for k, v in fake_rc.items() if k.isupper()})
    out = tmp_path / "out"
    proc = subprocess.run(["bash", os.path.join(SCRIPTS, script), str(out)], env=env, capture_output=True,
                          text=True, timeout=120)
    summary = json.loads((out / "summary.json").read_text())
    return proc, summary, {s["step"]: s for s in summary["steps"]}


def test_dry_run_all_steps_pass(tmp_path):
    proc, summary, steps = dry_run(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert summary["passed"] and summary["worst_rc"] == 0
    assert sorted(steps) == sorted(PHASES)  # the leaderboard is opt-in
    assert (tmp_path / "out" / "logs.tar.gz").stat().st_size > 0
    assert "-m not slow" in (tmp_path / "out" / "work" / "oracle_tests.log").read_text()


def test_failures_are_kept_and_the_rest_still_runs(tmp_path):
    proc, summary, steps = dry_run(tmp_path, build=2, attention_tests=1, train_bench=3)
    assert proc.returncode == 126 and summary["worst_rc"] == 126 and not summary["passed"]
    assert steps["build"]["rc"] == 2 and "import_ext" not in steps
    assert steps["hmm_bench"]["rc"] == 126  # needs the CUDA extension
    assert steps["attention_tests"]["rc"] == 1 and steps["train_bench"]["rc"] == 3
    assert steps["attention_bench"]["rc"] == 0  # ran on the pure-Python install
    # Without the real build the slow nvcc-only checks run.
    assert "not slow" not in (tmp_path / "out" / "work" / "oracle_tests.log").read_text()


def test_a_failed_test_step_alone_fails_the_run(tmp_path):
    proc, summary, steps = dry_run(tmp_path, script="gpu_oracle.sh", oracle_tests=1)
    assert proc.returncode == 1 and steps["oracle_tests"]["status"] == "failed"
    assert steps["hmm_bench"]["rc"] == 0


def test_budget_and_opt_in_leaderboard(tmp_path):
    proc, summary, steps = dry_run(tmp_path, GPU_CHECK_BUDGET_S=0, RUN_LEADERBOARD=1)
    assert proc.returncode == 126
    assert steps["leaderboard"]["rc"] == 125 and steps["env"]["status"] == "no time left"


def test_summary_reads_junit_and_benchmark_json(tmp_path):
    sys.path.insert(0, SCRIPTS)
    try:
        import gpu_summary
    finally:
        sys.path.remove(SCRIPTS)
    work = tmp_path / "work"
    work.mkdir()
    (work / "steps.tsv").write_text("oracle_tests\t1\t12\t180\nhmm_bench\t0\t30\t120\n")
    (work / "oracle_tests.xml").write_text(
        '<testsuites><testsuite tests="4" failures="1" errors="0" skipped="1">'
        '<testcase classname="t" name="a"/><testcase classname="t" name="b"><failure message="x"/></testcase>'
        '<testcase classname="t" name="c"><skipped message="needs CUDA"/></testcase>'
        '<testcase classname="t" name="d"/></testsuite></testsuites>')
    (work / "hmm_bench.json").write_text(json.dumps({"benchmarks": [
        {"name": "test_hmm_gpu_bandwidth[int64]", "stats": {"median": 0.001, "min": 0.0009, "rounds": 10},
         "extra_info": {"ratio_to_floor": 1.3}}]}))
    (work / "oracle_tests.log").write_text("1 failed, 2 passed, 1 skipped")
    assert gpu_summary.main([str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["worst_rc"] == 1 and not summary["passed"]
    tests = summary["steps"][0]["tests"]
    assert (tests["passed"], tests["failures"], tests["skipped"]) == (2, 1, 1)
    assert tests["skip_reasons"] == ["needs CUDA"] and tests["failed_tests"] == ["t::b"]
    assert summary["steps"][1]["benchmarks"][0]["ratio_to_floor"] == 1.3
    assert "ratio_to_floor=1.3" in (tmp_path / "summary.txt").read_text()


@pytest.mark.skipif(torch.cuda.is_available(), reason="only meaningful where torch sees no device")
def test_require_cuda_fails_without_a_device():
    env = dict(os.environ, BAYESBENCH_REQUIRE_CUDA="1")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
                           os.path.join(ROOT, "tests", "ops/test_nvcc.py")], env=env, capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 4, proc.stdout + proc.stderr  # pytest's usage error
    assert "no CUDA device" in proc.stdout + proc.stderr


def _script(name: str):
    sys.path.insert(0, SCRIPTS)
    try:
        return __import__(name)
    finally:
        sys.path.remove(SCRIPTS)


def test_outside_kernel_check_skips_with_its_reasons_and_the_summary_says_so(tmp_path, monkeypatch):
    """scripts/external_kernels_check.py without a device (and, here, without the packages): every
    kernel recorded as skipped with the reason, exit 0; gpu_summary.py marks the step skipped."""
    check = _script("external_kernels_check")
    from bayesbench.models import external_kernels as ek

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(ek, "available", lambda kernel: kernel == "torch")
    work = tmp_path / "work"
    work.mkdir()
    assert check.main([str(work / "external_kernels.kernels.json")]) == 0
    (work / "steps.tsv").write_text("external_kernels\t0\t3\t240\n")
    assert _script("gpu_summary").main([str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    (step,) = summary["steps"]
    assert step["status"] == "skipped" and summary["passed"]
    skipped = {s["kernel"]: s["reason"] for s in step["kernel_checks"]["skipped"]}
    assert set(skipped) == {"fla", "mamba-ssm"}
    assert "flash-linear-attention is not importable" in skipped["fla"] and "no CUDA device" in skipped["fla"]
    assert "skipped mamba-ssm: mamba-ssm is not importable" in (tmp_path / "summary.txt").read_text()


def test_outside_kernel_comparisons_land_in_the_summary(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "steps.tsv").write_text("external_kernels\t1\t30\t240\n")
    checks = [{"arch": "gla", "kernel": "fla", "E": 3, "B": 2, "L": 13, "H": 2, "max_abs_diff_output": 2e-6,
               "max_abs_output": 1.5, "max_abs_diff_grad": 0.5, "max_abs_grad": 2.0, "within_tolerance": False}]
    (work / "external_kernels.kernels.json").write_text(json.dumps({"status": "checked", "checks": checks,
                                                                     "skipped": [], "errors": []}))
    assert _script("gpu_summary").main([str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["steps"][0]["kernel_checks"]["checks"][0]["max_abs_diff_grad"] == 0.5
    assert summary["steps"][0]["status"] == "failed"
    assert "gla kernel=fla E,B,L,H=3,2,13,2: output diff 2e-06" in (tmp_path / "summary.txt").read_text()
    assert "OVER TOLERANCE" in (tmp_path / "summary.txt").read_text()
