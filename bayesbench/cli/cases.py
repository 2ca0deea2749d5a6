"""`bayesbench cases RUN_DIR...`: a trained bijection run's error split by case, per member.

    bayesbench cases runs/quick/bijection-transformer-s0-1-2
    bayesbench cases /tmp/recipe_runs/sweep/*transformer* --detail free,lag --json

For each member: KL(Bayes || model) and entropy MAE at repeated keys (a point-mass posterior:
retrieval), at new keys (uniform over the unseen values: elimination) and at the query, with the
number of positions in each; and which truncated-context predictor the member is closest to
(`pairs used` m: Bayes given only the first m pairs; docs/reproducing.md). Scored at the value
positions (and the query) of the task's fixed evaluation set; nothing is stored.
"""

from __future__ import annotations

import json
import os

from .args import positive


def add_parser(sub) -> None:
    p = sub.add_parser("cases", help="a bijection run's error split by case (repeated keys, new keys, query) and the "
                       "number of context pairs it uses")
    p.add_argument("run_dir", nargs="+", help="run directories (with checkpoint.pt) or checkpoint files")
    p.add_argument("--detail", default="", help="finer splits, comma-separated: free (new keys by values left), "
                   "lag (repeated keys by pairs back)")
    p.add_argument("--eval-sequences", type=positive, default=4096, help="evaluation set size (default 4096)")
    p.add_argument("--device", default="cpu", help="device to evaluate on (default cpu)")
    p.add_argument("--json", action="store_true", help="print {\"runs\": [...]}")
    p.set_defaults(handler=cmd_cases)


def cmd_cases(args) -> int:
    import dataclasses

    from ..scoring.by_case import DETAILS, case_scores, pairs_used
    from ..scoring.evaluate import eval_set, predict
    from ..tasks.bijection import BijectionTask
    from ..training.checkpoint import CHECKPOINT_NAME, load_result
    from ..training.result import task_of

    detail = tuple(d for d in args.detail.split(",") if d)
    unknown = [d for d in detail if d not in DETAILS]
    if unknown:
        raise ValueError(f"--detail must name some of {', '.join(DETAILS)}, got {', '.join(unknown)}")
    runs = []
    for path in args.run_dir:
        ckpt = os.path.join(path, CHECKPOINT_NAME) if os.path.isdir(path) else path
        if not os.path.exists(ckpt):
            raise ValueError(f"no checkpoint at {ckpt}")
        result = load_result(ckpt, args.device)
        task = task_of(result)
        if not isinstance(task, BijectionTask):  # (its name is "bijection": no other task's is)
            raise ValueError(f"{ckpt}: cases are defined for the bijection task only, this run trained on "
                             f"{task.name!r}")
        scored = dataclasses.replace(task, supervise="both" if task.query else "values")
        batch = eval_set(scored, args.eval_sequences)
        log_q = predict(result.model, batch)
        members = []
        for e, seed in enumerate(result.seeds):
            cases = case_scores(scored, batch, log_q[e], detail)
            used = pairs_used(scored, batch, log_q[e])
            members.append({"seed": seed, "cases": {c: {"positions": s.n_positions, "kl": s.kl.mean,
                                                        "entropy_mae": s.entropy_mae.mean,
                                                        "model_entropy": s.model_entropy,
                                                        "bayes_entropy": s.bayes_entropy} for c, s in cases.items()},
                            "pairs_used": used.best, "kl_to_pairs_used": used.kl[used.best].mean,
                            "kl_by_pairs_used": {m: s.mean for m, s in used.kl.items()}})
        runs.append({"checkpoint": ckpt, "arch": result.meta.get("name") or result.identity["arch"],
                     "task": scored.describe(), "step": result.steps, "eval_sequences": args.eval_sequences,
                     "members": members})
    print(json.dumps({"runs": runs}, indent=2) if args.json else _table(runs))
    return 0


def _table(runs: list[dict]) -> str:
    lines = ["KL(Bayes || model) in bits by case (positions in each), at the value positions and the query; "
             "pairs used m: the truncated-context predictor (Bayes given the first m pairs) closest in KL"]
    for run in runs:
        lines.append(f"\n{run['checkpoint']}: {run['arch']} at step {run['step']} on {run['task']} "
                     f"({run['eval_sequences']} sequences)")
        names = list(run["members"][0]["cases"]) if run["members"] else []
        lines.append("| seed | " + " | ".join(f"KL {n}" for n in names) + " | pairs used m | KL to it |")
        lines.append("|---" * (len(names) + 3) + "|")
        for m in run["members"]:
            cells = [f"{m['cases'][n]['kl']:.4f} ({m['cases'][n]['positions']})" if n in m["cases"] else "-"
                     for n in names]
            lines.append(f"| {m['seed']} | " + " | ".join(cells)
                         + f" | {m['pairs_used']} | {m['kl_to_pairs_used']:.4f} |")
    return "\n".join(lines)
