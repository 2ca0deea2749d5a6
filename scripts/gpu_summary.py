"""Collect a GPU check run (scripts/gpu_*.sh) into OUT_DIR/summary.json and summary.txt.

    python scripts/gpu_summary.py OUT_DIR

Reads OUT_DIR/work/: steps.tsv (name, exit status, seconds, limit per step), the JUnit XML of the
test steps (passed / failed / errors / skipped, with the skip reasons) and the pytest-benchmark
JSON of the benchmark steps (median seconds and every extra_info number). Nothing is dropped: a
step without its files is listed with its status.
"""

from __future__ import annotations

import json
import os
import sys
import xml.etree.ElementTree as ET

STATUS = {0: "passed", 124: "timed out", 125: "no time left", 126: "not run (needs bayesbench._C with CUDA)",
          137: "killed"}


def read_steps(work: str) -> list[dict]:
    steps = []
    path = os.path.join(work, "steps.tsv")
    if os.path.exists(path):
        for line in open(path):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 4:
                continue
            name, rc, seconds, limit = parts[0], int(parts[1]), int(parts[2]), int(parts[3])
            steps.append({"step": name, "rc": rc, "status": STATUS.get(rc, "failed"), "seconds": seconds,
                          "limit_s": limit, "log": f"work/{name}.log"})
    return steps


def read_junit(path: str) -> dict | None:
    if not os.path.exists(path):
        return None
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as err:
        return {"error": f"unreadable JUnit XML: {err}"}
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    for suite in suites:
        for key in counts:
            counts[key] += int(suite.get(key, 0))
    counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    counts["skip_reasons"] = sorted({s.get("message", "") for s in root.iter("skipped")})
    counts["failed_tests"] = [f"{c.get('classname')}::{c.get('name')}" for c in root.iter("testcase")
                              if c.find("failure") is not None or c.find("error") is not None]
    return counts


def read_benchmarks(path: str) -> list[dict] | None:
    if not os.path.exists(path):
        return None
    try:
        data = json.load(open(path))
    except ValueError as err:
        return [{"error": f"unreadable benchmark JSON: {err}"}]
    out = []
    for b in data.get("benchmarks", []):
        stats = b.get("stats", {})
        out.append({"name": b.get("name"), "median_s": stats.get("median"), "min_s": stats.get("min"),
                    "rounds": stats.get("rounds"), **b.get("extra_info", {})})
    return out


def read_kernel_checks(path: str) -> dict:
    """The outside kernels' comparisons (max differences per layer and shape, what was skipped and why)."""
    try:
        return json.load(open(path))
    except ValueError as err:
        return {"status": "unreadable", "error": f"unreadable kernel checks JSON: {err}"}


def summarize(out_dir: str) -> dict:
    work = os.path.join(out_dir, "work")
    steps = read_steps(work)
    for s in steps:
        tests = read_junit(os.path.join(work, f"{s['step']}.xml"))
        if tests is not None:
            s["tests"] = tests
        bench = read_benchmarks(os.path.join(work, f"{s['step']}.json"))
        if bench is not None:
            s["benchmarks"] = bench
        kernels = os.path.join(work, f"{s['step']}.kernels.json")  # scripts/external_kernels_check.py
        if os.path.exists(kernels):
            s["kernel_checks"] = read_kernel_checks(kernels)
            if s["rc"] == 0 and s["kernel_checks"].get("status") == "skipped":
                s["status"] = "skipped"
        log = os.path.join(work, f"{s['step']}.log")
        if s["rc"] != 0 and os.path.exists(log):
            s["log_tail"] = open(log, errors="replace").read()[-2000:]
    env = os.path.join(work, "env.log")
    worst = max((s["rc"] for s in steps), default=1)
    return {"out_dir": out_dir, "env": open(env).read() if os.path.exists(env) else None,
            "worst_rc": worst, "passed": bool(steps) and worst == 0, "steps": steps}


def text(summary: dict) -> str:
    lines = ["step              status                 rc  seconds  limit  details"]
    for s in summary["steps"]:
        detail = ""
        if "tests" in s and "passed" in s["tests"]:
            t = s["tests"]
            detail = f"{t['passed']} passed, {t['failures']} failed, {t['errors']} errors, {t['skipped']} skipped"
        elif "benchmarks" in s:
            detail = f"{len(s['benchmarks'])} benchmarks"
        elif "kernel_checks" in s:
            k = s["kernel_checks"]
            detail = (f"{len(k.get('checks', []))} comparisons, {len(k.get('errors', []))} errors, "
                      f"{len(k.get('skipped', []))} kernels skipped")
        lines.append(f"{s['step']:<17} {s['status']:<22} {s['rc']:>3} {s['seconds']:>8} {s['limit_s']:>6}  {detail}")
    for s in summary["steps"]:
        for b in s.get("benchmarks", []):
            nums = {k: v for k, v in b.items() if isinstance(v, (int, float)) and k not in ("rounds",)}
            lines.append(f"  {s['step']} {b.get('name')}: " + ", ".join(
                f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in nums.items()))
    for s in summary["steps"]:
        k = s.get("kernel_checks", {})
        for c in k.get("checks", []):
            lines.append(f"  {s['step']} {c['arch']} kernel={c['kernel']} E,B,L,H={c['E']},{c['B']},{c['L']},{c['H']}: "
                         f"output diff {c['max_abs_diff_output']:.3g} (of {c['max_abs_output']:.3g}), "
                         f"grad diff {c['max_abs_diff_grad']:.3g} (of {c['max_abs_grad']:.3g})"
                         + ("" if c["within_tolerance"] else "  OVER TOLERANCE"))
        for skipped in k.get("skipped", []):
            lines.append(f"  {s['step']} skipped {skipped['kernel']}: {skipped['reason']}")
    lines.append(f"worst status: {summary['worst_rc']} ({'all passed' if summary['passed'] else 'FAILED'})")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python scripts/gpu_summary.py OUT_DIR", file=sys.stderr)
        return 2
    summary = summarize(os.path.abspath(argv[0]))
    with open(os.path.join(argv[0], "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    with open(os.path.join(argv[0], "summary.txt"), "w") as f:
        f.write(text(summary) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
