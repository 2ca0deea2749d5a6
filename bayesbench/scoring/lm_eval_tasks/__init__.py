"""lm-evaluation-harness task files of bayesbench (docs/llm.md): the folder for lm_eval --include_path;
the work is `bayesbench.scoring.lm_eval_task`."""
