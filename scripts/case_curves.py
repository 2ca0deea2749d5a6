"""Learning curves of a bijection run with the error split by case (docs/reproducing.md).

Trains one ensemble (one member per seed, as `bayesbench train` does) and, at the steps given,
scores every member on the fixed evaluation set of the value positions: the positional entropy
MAE (the papers' bijection metric), KL by case (repeated keys, new keys; `scoring/by_case.py`) and
which truncated-context predictor the model is closest to (`pairs_used`: a model that uses only
the first m pairs of its context). The trainer's own curves record KL by case too; this script
adds the positional metric and the pairs used at chosen steps, as the staircase of the quick
transformer was measured:

    PYTHONPATH=. python scripts/case_curves.py --steps 2000 --at 250,500,1000,2000 --out curves.json
    PYTHONPATH=. python scripts/case_curves.py --model '{"pointer": "replace"}' --task '{"supervise": "authors"}'

--model and --train are merged into the quick preset's configuration of --arch (capacity
matching resolved) and its bijection training; --task into its task. Prints one line per
evaluated step and writes every number to --out.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from bayesbench.presets import get_preset
from bayesbench.scoring.by_case import case_scores, pairs_used
from bayesbench.scoring.evaluate import eval_set, predict
from bayesbench.scoring.metrics import score
from bayesbench.sweep.jobs import resolve_model
from bayesbench.tasks import task_from_config
from bayesbench.training.config import TrainConfig
from bayesbench.training.trainer import Trainer


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", default="transformer")
    p.add_argument("--model", default="{}", help="JSON merged into the quick bijection model config")
    p.add_argument("--train", default="{}", help="JSON merged into the quick bijection training (TrainConfig fields)")
    p.add_argument("--task", default="{}", help="JSON merged into the quick bijection task")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--steps", type=int, default=None, help="training steps (default: the preset's)")
    p.add_argument("--at", default="", help="comma-separated steps to evaluate at (default: 8 log-spaced)")
    p.add_argument("--eval-sequences", type=int, default=1024)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default="", help="write the curves here as JSON")
    return p.parse_args(argv)


def log_spaced(steps: int, n: int = 8) -> list[int]:
    return sorted({max(1, round(steps ** (i / (n - 1)))) for i in range(n)} | {steps})


def main(argv: list[str]) -> int:
    a = parse(argv)
    torch.set_num_threads(a.threads)
    setup = get_preset("quick").tasks["bijection"]
    task = task_from_config({**setup.task, **json.loads(a.task)})
    scored = task_from_config({**setup.task, "supervise": "values"})  # the papers' positions
    max_len = max(task.seq_len, scored.seq_len)
    # the preset's config (capacity matching resolved, as a job does) with the given settings on top
    model_cfg = {**resolve_model(setup, a.arch, task, max_len), **json.loads(a.model)}
    train = {**setup.train, **json.loads(a.train)}
    if a.steps:
        train["steps"] = a.steps
    cfg = TrainConfig(**train)
    at = [int(s) for s in a.at.split(",")] if a.at else log_spaced(cfg.steps)
    if any(s < 1 or s > cfg.steps for s in at):
        raise SystemExit(f"case_curves: --at steps must lie in 1..{cfg.steps}, got {at}")
    seeds = [int(s) for s in a.seeds.split(",")]
    batch = eval_set(scored, a.eval_sequences)
    trainer = Trainer(task, a.arch, seeds, cfg, model_cfg=model_cfg, max_len=max_len)
    rows, start = [], time.perf_counter()
    print(f"{a.arch} {model_cfg} on {task.describe()}\ntraining {train}; scored: {scored.describe()} "
          f"({a.eval_sequences} sequences); per seed: positional entropy MAE [KL repeated / new, pairs used m: "
          "KL to that predictor], bits", flush=True)
    for step in sorted(set(at)):
        trainer.fit(progress=False, stop_at=step)
        log_q = predict(trainer.model, batch)
        members = []
        for e in range(len(seeds)):
            s = score(batch.posterior.double(), batch.mask, log_q=log_q[e], nonfinite="nan")
            cases = case_scores(scored, batch, log_q[e])
            used = pairs_used(scored, batch, log_q[e])
            members.append({"seed": seeds[e], "entropy_mae_positional": s.entropy_mae_positional.mean,
                            "entropy_mae": s.entropy_mae.mean, "kl": s.kl.mean,
                            **{f"kl:{c}": v.kl.mean for c, v in cases.items()},
                            **{f"positions:{c}": v.n_positions for c, v in cases.items()},
                            "pairs_used": used.best, "kl:pairs_used": used.kl[used.best].mean})
        rows.append({"step": step, "wall_s": time.perf_counter() - start, "members": members})
        print(f"step {step:6d} {rows[-1]['wall_s']:6.0f}s  " + "  ".join(
            f"{m['entropy_mae_positional']:.3f} [{m['kl:repeated']:.2f}/{m['kl:new']:.2f} m{m['pairs_used']}:"
            f"{m['kl:pairs_used']:.2f}]" for m in members), flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"arch": a.arch, "model": model_cfg, "task": task.config(), "train": train, "seeds": seeds,
                       "eval": scored.describe(), "eval_sequences": a.eval_sequences, "curve": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
