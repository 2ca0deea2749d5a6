"""scripts/gpu_check.sh's opt-in EM-vs-SGD step (issue 44: the controls in the authors' T = 2000
setting where a GPU is lent), checked by a dry run on the CPU: off by default (the default steps
stay those tests/test_gpu_scripts.py names), on with RUN_EMSGD=1, with its own time limit."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _dry_run(tmp_path, **env_extra) -> dict:
    env = dict(os.environ, GPU_CHECK_DRY_RUN="1", PYTHON=sys.executable, TORCH_CUDA_ARCH_LIST="9.0",
               GPU_CHECK_BUDGET_S="2000", **env_extra)
    env.pop("GPU_CHECK_DEADLINE", None)
    out = tmp_path / "out"
    subprocess.run(["bash", os.path.join(ROOT, "scripts", "gpu_check.sh"), str(out)], env=env, capture_output=True,
                   text=True, timeout=120)
    return {s["step"]: s for s in json.loads((out / "summary.json").read_text())["steps"]}


def test_the_emsgd_step_is_opt_in_and_runs_the_authors_setting(tmp_path):
    assert "emsgd" not in _dry_run(tmp_path / "off")
    steps = _dry_run(tmp_path / "on", RUN_EMSGD="1")
    assert steps["emsgd"]["rc"] == 0
    log = (tmp_path / "on" / "out" / "work" / "emsgd.log").read_text()
    assert "limit 900s" in log and "length=2000" in log and "device='cuda'" in log and "steps=1000" in log
