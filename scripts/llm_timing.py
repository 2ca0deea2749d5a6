"""Measure `bayesbench llm` on the tiny GPT-2 of the tests on a CPU thread, and derive from a stated
FLOP and byte count what a GPU with a 1B model should take (an estimate, not a measurement); write
both to the summary docs/llm.md quotes (checked by tests/scoring/test_llm_timing_numbers.py).

    OMP_NUM_THREADS=1 python scripts/llm_timing.py --out docs/numbers/llm_timing_2026-12-07.json

Measured: the wall time to read 1000 prompts (the quick bijection's evaluation sequences, one
forward pass per prompt with single-token integer candidates, batch 8) through
`scoring.llm.LMPredictions`, and the whole `score_lm` (reading, scoring, floors) on the same set.

Estimated for a 1B model on one H100 (numbers stated in ESTIMATE, from the model card and the
spec sheet): per forward pass of B prompts of T tokens, the larger of the compute time
2 N B T / (peak bf16 FLOP/s) and the time to read the weights once, 2 N bytes / (memory
bandwidth); plus the copy of the float64 log-probabilities of the whole vocabulary to the host
(`scoring.llm._forward`), 8 V T bytes per prompt at the stated link rate; plus the host time per
prompt the tiny model measures here (its forward passes cost next to nothing, so its wall time is
the Python and tokenizer work around them, an upper bound of that part on a faster host).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

#: The stated numbers the GPU estimate is derived from (not measured here).
ESTIMATE = {
    "model": "Llama-3.2-1B", "params": 1.236e9,  # parameters, from the model card (1.24B)
    "gpu": "NVIDIA H100 SXM", "peak_bf16_flops": 989e12,  # dense bf16 tensor-core peak, spec sheet
    "memory_bandwidth_bytes": 3.35e12,  # HBM3, spec sheet
    "bytes_per_param": 2,  # bf16 weights
    "batch_size": 64,  # prompts per forward pass (--batch-size 64)
    "vocab": 128256,  # Llama-3.2's vocabulary: the float64 log-probabilities of every token come to the host
    "host_link_bytes": 25e9,  # device-to-host copy rate assumed (PCIe 5.0 x16 is 64 GB/s peak)
}


def measure(prompts: int, batch_size: int) -> dict:
    import torch

    from bayesbench.presets import get_preset
    from bayesbench.scoring import llm
    from bayesbench.scoring.evaluate import eval_set, evaluation_tasks
    from bayesbench.scoring.trained_elsewhere import resolve_task
    from bayesbench.tasks import task_from_config
    from tests.scoring.llm_fixtures import tiny_gpt2, word_tokenizer

    torch.set_num_threads(1)
    folder = tempfile.mkdtemp(prefix="llm-timing-")
    tok = word_tokenizer([str(i) for i in range(16)], folder)
    tiny_gpt2(folder, len(tok))
    lm, tok = llm.load_lm(folder)
    task = task_from_config(get_preset("quick").tasks["bijection"].task)
    t, _, lengths, _, scored = resolve_task("bijection", "quick")
    primary = next(iter(evaluation_tasks(t, lengths, scored).values()))
    batch = eval_set(primary, prompts)
    verb = llm.make_verbaliser("integers", task.vocab_size)
    given = llm.LMPredictions(lm, tok, verb, task, batch_size=batch_size)
    start = time.perf_counter()
    given.log_probs(batch)
    read = time.perf_counter() - start
    prompt_tokens = len(llm._prompt(batch.tokens[0].tolist(), given.pieces)[0])
    start = time.perf_counter()
    llm.score_lm(folder, "bijection", sequences=prompts, batch_size=batch_size, store=False, name="tiny")
    whole = time.perf_counter() - start
    return {"prompts": prompts, "batch_size": batch_size, "threads": torch.get_num_threads(),
            "tiny_params": int(sum(p.numel() for p in lm.parameters())),
            "tiny_config": {"n_layer": 1, "n_head": 2, "n_embd": 32, "vocab": len(tok)},
            "prompt_tokens": prompt_tokens, "scored_positions": int(batch.mask.sum()),
            "read_s": round(read, 2), "read_s_per_1000": round(read * 1000 / prompts, 2),
            "score_lm_s": round(whole, 2), "score_lm_s_per_1000": round(whole * 1000 / prompts, 2)}


def estimate(measured: dict, prompts: int = 1000) -> dict:
    """The GPU estimate for `prompts` prompts (module doc), from ESTIMATE and the measured host time."""
    e, T = ESTIMATE, measured["prompt_tokens"]
    forwards = -(-prompts // e["batch_size"])
    flops = 2 * e["params"] * T * prompts
    compute_s = flops / e["peak_bf16_flops"]
    weights_s = forwards * e["params"] * e["bytes_per_param"] / e["memory_bandwidth_bytes"]
    device_s = max(compute_s, weights_s)
    copy_s = prompts * T * e["vocab"] * 8 / e["host_link_bytes"]
    host_s = measured["read_s_per_1000"] * prompts / 1000
    return {**e, "prompts": prompts, "prompt_tokens": T, "flops": flops, "forwards": forwards,
            "compute_s": round(compute_s, 3), "weights_read_s": round(weights_s, 3), "device_s": round(device_s, 3),
            "copy_s": round(copy_s, 2), "host_s_upper": round(host_s, 2),
            "estimate_s": round(device_s + copy_s + host_s, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--prompts", type=int, default=1000)
    ap.add_argument("--batch-size", type=int, default=8)
    args = ap.parse_args(argv)
    m = measure(args.prompts, args.batch_size)
    out = {"measured": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
           "command": f"OMP_NUM_THREADS=1 python scripts/llm_timing.py --prompts {args.prompts} --batch-size "
                      f"{args.batch_size}",
           "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                       "load_average_1min": round(os.getloadavg()[0], 1)},
           "cpu_tiny": m, "gpu_1b_estimate": estimate(m)}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
