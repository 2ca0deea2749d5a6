"""`bayesbench lm-eval-tasks`: the folder of bayesbench's lm-evaluation-harness task files, for
lm-eval's --include_path (docs/llm.md, "lm-evaluation-harness"; the work is
`scoring/lm_eval_task.py`).

    lm_eval --model hf --model_args pretrained=PATH --tasks bayesbench_bijection \\
        --include_path "$(bayesbench lm-eval-tasks)"

The files ship inside the package (package data), so the folder is where bayesbench is
installed; this command says where, and nothing else (no lm-eval import: it stays fast).
"""

from __future__ import annotations


def add_parser(sub) -> None:
    p = sub.add_parser("lm-eval-tasks", help="print the folder of bayesbench's lm-evaluation-harness tasks "
                       "(bayesbench_bijection, bayesbench_sula), for lm_eval --include_path (docs/llm.md)")
    p.set_defaults(handler=cmd_lm_eval_tasks)


def cmd_lm_eval_tasks(args) -> int:
    from ..scoring.lm_eval_task import folder

    print(folder())
    return 0
