"""Every number the "Wall time" section of docs/llm.md quotes is the one its summary keeps
(docs/numbers/llm_timing_2026-12-06.json, written by scripts/llm_timing.py): a re-measurement
refreshed with the script either leaves the page true or fails here, naming the number."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
SUMMARY = ROOT / "docs" / "numbers" / "llm_timing_2026-12-06.json"


def _section() -> str:
    text = (ROOT / "docs" / "llm.md").read_text()
    start = text.index("## Wall time")
    return text[start: text.index("\n## ", start + 1)]


def test_the_wall_time_section_quotes_its_summary():
    n = json.loads(SUMMARY.read_text())
    c, g = n["cpu_tiny"], n["gpu_1b_estimate"]
    section = " ".join(_section().split())
    quoted = [n["measured"], n["command"], f"{n['machine']['load_average_1min']}", f"{c['tiny_params']:,}",
              f"{c['read_s_per_1000']} s", f"{c['score_lm_s_per_1000']} s", f"batch {c['batch_size']}",
              f"{g['params']:.4g} parameters", f"{g['vocab']:,}", f"{g['peak_bf16_flops']:.3g} FLOP/s",
              f"{g['memory_bandwidth_bytes']:.3g} B/s", f"--batch-size {g['batch_size']}",
              f"{g['prompt_tokens']} tokens", f"{g['flops']:.3g} FLOPs", f"{g['compute_s']} s at peak",
              f"({g['forwards']} passes), {g['weights_read_s']} s", f"device time is {g['device_s']} s",
              f"{g['host_link_bytes']:.3g} B/s", f"that is {g['copy_s']} s", f"at most {g['host_s_upper']} s",
              f"**{g['estimate_s']} s per 1000 prompts**"]
    assert [q for q in quoted if q not in section] == []


def test_the_estimate_is_the_sum_of_its_terms():
    g = json.loads(SUMMARY.read_text())["gpu_1b_estimate"]
    assert abs(g["estimate_s"] - (g["device_s"] + g["copy_s"] + g["host_s_upper"])) <= 0.05
    assert g["flops"] == 2 * g["params"] * g["prompt_tokens"] * g["prompts"]
