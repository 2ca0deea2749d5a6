"""`bayesbench llm`: a pretrained Hugging Face causal LM scored against the exact posterior
(docs/llm.md; the work is `scoring/llm.py`).

    bayesbench llm --model ./my-gpt2 --task bijection --verbaliser integers --sequences 64

A command of its own rather than `--model hf-lm:PATH` of `score` or `run`: the engine
(`sweep/engine.py` from a `RunRequest`) plans jobs that train and score ensembles, and `score
--model` loads a module's checkpoint and reads class logits; an LM is neither trained here nor
a module of class logits, and needs settings none of them has (verbaliser, prompt format,
dtype, batch size). The row it makes is the row `score --predictions` makes (`scoring.rows.score_run`).
"""

from __future__ import annotations

import json
import sys

from .args import add_db


def add_parser(sub) -> None:
    from ..presets import PRESETS

    p = sub.add_parser("llm", help="score a pretrained Hugging Face causal LM (a local folder) against the exact "
                       "posterior, its tunnel written as text (docs/llm.md)")
    p.add_argument("--model", required=True, metavar="PATH",
                   help="a folder save_pretrained wrote (config, weights, tokenizer), or a model name already in the "
                        "Hugging Face cache; nothing is downloaded")
    p.add_argument("--task", default="bijection", help="task key of the preset (default bijection)")
    p.add_argument("--verbaliser", default="integers", metavar="KIND",
                   help="how symbols become words: integers, letters, words (opaque random words from "
                        "--verbaliser-seed) or a JSON file of words (default integers)")
    p.add_argument("--verbaliser-seed", type=int, default=0, help="seed of the 'words' verbaliser (default 0)")
    p.add_argument("--name", help="leaderboard name (default lm-<folder>-<verbaliser>)")
    p.add_argument("--preset", default="quick", choices=sorted(PRESETS),
                   help="whose task and evaluation (default quick)")
    p.add_argument("--device", default="cpu", help="device the LM runs on (default cpu)")
    p.add_argument("--dtype", default="float32", help="float32, float16 or bfloat16 (default float32)")
    p.add_argument("--batch-size", type=int, default=8, help="prompts per forward pass (default 8)")
    p.add_argument("--sequences", type=int, help="evaluation sequences (default: the preset's, 4096)")
    p.add_argument("--json", action="store_true", help="print {\"runs\": [...]}")
    add_db(p)
    p.set_defaults(handler=cmd_llm)


def cmd_llm(args) -> int:
    from ..report.leaderboard import json_runs, markdown
    from ..scoring.llm import score_lm

    print(f"bayesbench llm: {args.model} on {args.task} ({args.preset}), verbaliser {args.verbaliser}, "
          f"{args.device} {args.dtype}, batch {args.batch_size}", file=sys.stderr)

    def progress(line: str) -> None:
        print(f"  {line}", file=sys.stderr)

    records = score_lm(args.model, args.task, verbaliser=args.verbaliser, verbaliser_seed=args.verbaliser_seed,
                       name=args.name, preset=args.preset, device=args.device, dtype=args.dtype,
                       batch_size=args.batch_size, sequences=args.sequences, db=args.db, progress=progress)
    llm = records[0].config["llm"]
    for i, s in enumerate(llm["outside_mass"], 1):
        print(f"set {i}: mass outside the candidates {s['outside_mass_mean']:.4g} mean, "
              f"{s['outside_mass_max']:.4g} max "
              f"over {s['scored_positions']} scored positions", file=sys.stderr)
    print(json.dumps(json_runs(records), indent=2) if args.json else markdown(records))
    return 0
