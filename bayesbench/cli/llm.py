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
    p.add_argument("--task", default="bijection",
                   help="task key of the preset, or a registered tunnel's name such as sula (default bijection)")
    p.add_argument("--verbaliser", nargs="+", default=["integers"], metavar="KIND",
                   help="how symbols become words: integers, letters, words (opaque random words from "
                        "--verbaliser-seed) or a JSON file of words (default integers); several: a row each and a "
                        "pooled row whose interval is over (verbaliser x prompt seed) units")
    p.add_argument("--verbaliser-seed", type=int, default=0, help="seed of the 'words' verbaliser (default 0)")
    p.add_argument("--prompt-seeds", nargs="+", type=int, metavar="S",
                   help="renderings per verbaliser: seed S draws the 'words' verbaliser's words, and gives a fixed "
                        "verbaliser's words to the symbols in a permutation drawn from S (0: as they are); each "
                        "verbaliser's row has its interval over them (docs/llm.md)")
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

    seeds = "" if args.prompt_seeds is None else f", prompt seeds {' '.join(map(str, args.prompt_seeds))}"
    print(f"bayesbench llm: {args.model} on {args.task} ({args.preset}), verbaliser {' '.join(args.verbaliser)}"
          f"{seeds}, {args.device} {args.dtype}, batch {args.batch_size}", file=sys.stderr)

    def progress(line: str) -> None:
        print(f"  {line}", file=sys.stderr)

    verbaliser = args.verbaliser[0] if len(args.verbaliser) == 1 else args.verbaliser
    records = score_lm(args.model, args.task, verbaliser=verbaliser, verbaliser_seed=args.verbaliser_seed,
                       prompt_seeds=args.prompt_seeds, name=args.name, preset=args.preset, device=args.device,
                       dtype=args.dtype, batch_size=args.batch_size, sequences=args.sequences, db=args.db,
                       progress=progress)
    many = len(records) > 1
    for rec in records:
        if rec.arch.endswith("-pooled") and "units" in rec.config["llm"]:
            continue  # its units' masses are said on their own rows
        who = f"{rec.arch} seed {rec.seed}: " if many else ""
        for i, s in enumerate(rec.config["llm"]["outside_mass"], 1):
            print(f"{who}set {i}: mass outside the candidates {s['outside_mass_mean']:.4g} mean, "
                  f"{s['outside_mass_max']:.4g} max "
                  f"over {s['scored_positions']} scored positions", file=sys.stderr)
    print(json.dumps(json_runs(records), indent=2) if args.json else markdown(records))
    return 0
