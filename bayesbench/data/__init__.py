"""The tunnels as datasets, and predictions made anywhere scored against them (docs/data.md).

- `sets`: which sequences a task and a split name (the fixed evaluation sets, the curve set,
  fresh training sequences), each identified by `scoring.evaluate.eval_set_id`;
- `export`: `bayesbench data export`, the sets as parquet or a Hugging Face dataset on disk,
  with a dataset card (`card`) and a manifest of the sets' ids;
- `predictions`: the predictions file (parquet or .npy, keyed by the set's id and the tunnel's
  version): writing, reading and its checks;
- `score`: `bayesbench score --predictions`: a checked file scored by the code that scores every
  model (`scoring.rows.score_run`) and stored as a row.
"""

# The choices of `bayesbench data export`, here so that building the command line parser imports
# no torch (tests/cli/test_commands.py).
SPLITS = ("eval", "curve", "train")
FORMATS = ("parquet", "hf")
