"""The dataset card: README.md in an exported folder, saying what each column is.

It opens with YAML front matter a Hugging Face dataset card reads (for parquet exports, the
`configs` that let `datasets.load_dataset(folder)` find each set as a split), then says what
the sets are, how they were made and what identifies them, one table of the columns, one of
the latent variables, and how to score predictions of them (docs/data.md).
"""

from __future__ import annotations

import html
import json
import re

# What the latent variables of the built-in tunnels are (tunnel, latents key) -> meaning.
LATENTS = {
    ("bijection", "perm"): "the bijection pi of the sequence: entry k is pi(k), the value index (0..V-1) of key k; "
                           "the value token of key k is V + pi(k)",
    ("bijection", "keys"): "the keys x_1..x_L in order (token ids 0..V-1), then the query when the task has one",
    ("bijection", "values"): "pi(x_k) for each entry of latent_keys (value indices 0..V-1)",
    ("hmm", "trans"): "the HMM's transition matrix T [S][S] (row i: p(s_t+1 | s_t = i)), as the header gives it",
    ("hmm", "emit"): "the emission matrix E [S][V] (row i: p(o_t | s_t = i)), as the header gives it",
    ("hmm", "init"): "the initial state distribution [S]",
    ("hmm", "states"): "the hidden path s_1..s_K (state indices 0..S-1)",
    ("hmm", "obs"): "the observations o_1..o_K (symbol indices 0..V-1)",
    ("sticky", "rho"): "the sequence's stickiness rho ~ Beta(a, b): the probability that a symbol repeats",
    ("markov", "trans"): "the sequence's transition matrix [V][V], drawn from Dirichlet(alpha) per row",
}

SPLIT_WORDS = {
    "eval": "the fixed evaluation sets every leaderboard row of this task is scored on",
    "curve": "the fixed learning-curve set (the sequences the learning curves are measured on)",
    "train": "fresh training sequences from a training-data seed (never an evaluation sequence)",
}


def columns(manifest_set: dict, tunnel: str) -> list[tuple[str, str, str]]:
    """(column, shape and type, meaning) of a set's columns."""
    L, C = manifest_set["seq_len"], manifest_set["num_classes"]
    out = [
        ("sequence", "int64", "the sequence's index in the set (0..N-1); predictions name sequences by it"),
        ("tokens", f"int64 [{L}]", f"the model's input: token ids 0..{manifest_set['vocab_size'] - 1}; position t "
                                   "sees tokens 0..t"),
        ("mask", f"bool [{L}]", "True at the scored positions: where a prediction is scored against the posterior "
                                f"({manifest_set['scored']})"),
        ("posterior", f"float32 [{L}][{C}]", f"the exact Bayes posterior over the {C} classes at each position, "
                                             "given tokens 0..t (and the header): the distribution a perfect model "
                                             "predicts there; all zeros at unscored positions"),
    ]
    cols = manifest_set["columns"]
    if "targets" in cols:
        out.append(("targets", f"int64 [{L}]", "the training target (a class index) at each supervised position, "
                                               "-100 elsewhere (torch's ignore index)"))
    else:
        out.append(("(targets)", "-", "none: this task trains on soft targets, the posterior itself"))
    if "header" in cols:
        H, D = manifest_set["header"]
        out.append(("header", f"float32 [{H}][{D}]", f"continuous vectors fed at positions 0..{H - 1} beside their "
                                                     "tokens (forward(tokens, header)): the HMM's rows of T then E, "
                                                     "zero-padded"))
    for name in cols:
        if name.startswith("latent_"):
            key = name[len("latent_"):]
            meaning = LATENTS.get((tunnel, key), "a latent variable of the tunnel (see its own docs)")
            out.append((name, cols[name], meaning))
    return out


def _one_line(text) -> str:
    """`text` on one line: a newline or other control character written as its escape (\\n)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def _md(text) -> str:
    """Markdown text: one line, HTML's special characters escaped (a label holds task options)."""
    return html.escape(_one_line(text), quote=False)


def _code(text) -> str:
    """Inline code: one line, fenced by more backticks than it holds."""
    text = _one_line(text)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    return f"{fence} {text} {fence}" if len(fence) > 1 else f"`{text}`"


def _yaml_str(text) -> str:
    """A YAML scalar holding `text` exactly, whatever it holds (a JSON string is a YAML double-quoted one)."""
    return json.dumps(str(text))


def _yaml(manifest: dict) -> list[str]:
    lines = ["---", "pretty_name: " + _yaml_str(f"bayesbench {manifest['label']} ({manifest['split']})"),
             "tags:", "- bayesbench", "- exact-posterior", "- synthetic"]
    if manifest["format"] == "parquet":
        lines += ["configs:", "- config_name: default", "  data_files:"]
        for s in manifest["sets"]:
            lines += [f"  - split: {_yaml_str(s['slug'])}", f"    path: {_yaml_str(s['file'])}"]
    return lines + ["---", ""]


def render(manifest: dict) -> str:
    """The README.md of an exported folder."""
    tunnel = manifest["tunnel"]
    sets = manifest["sets"]
    lines = _yaml(manifest)
    lines += [f"# bayesbench: {_md(manifest['label'])}, {manifest['split']} split", "",
              f"{SPLIT_WORDS[manifest['split']].capitalize()}: sequences of a Bayesian wind tunnel with the exact "
              "Bayes posterior at every scored position (docs/science.md of bayesbench). A model computes the "
              "posterior when its predictive matches `posterior` at every position where `mask` is True.", "",
              f"Made by {_code(manifest['command'])} (bayesbench {manifest['bayesbench']}). Tunnel {_code(tunnel)}, "
              f"code {_code(json.dumps(manifest['tunnel_code'], sort_keys=True))}; task configuration "
              f"{_code(json.dumps(manifest['task_config'], sort_keys=True))}.", "",
              "| set | sequences | length | classes | scored positions | seed | set id | file |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for s in sets:
        where = s["file"] if manifest["format"] == "parquet" else f"split `{s['slug']}`"
        lines.append(f"| {_md(s['name'])} | {s['n_sequences']} | {s['seq_len']} | {s['num_classes']} | {s['scored']} | "
                     f"{s['seed']} | `{s['set_id']}` | {where} |")
    lines += ["", "A set is identified by its id: a hash of the tunnel's configuration and code, the number of "
              "sequences and the seed. The same id is the same sequences and posteriors; a changed tunnel (a raised "
              "version, an edited file) makes other sets with other ids. `bayesbench.json` beside this card holds "
              "every set's id, seed, task and the key a predictions file carries.", "",
              "## Columns", "", "One row per sequence.", "", "| column | type [shape] | what it is |",
              "| --- | --- | --- |"]
    for name, kind, meaning in columns(sets[0], tunnel):
        lines.append(f"| `{name}` | {kind} | {meaning} |")
    load = ("pyarrow.parquet.read_table(path)" if manifest["format"] == "parquet"
            else "datasets.load_from_disk(folder)")
    lines += ["", "## Use", "", f"Load with `{load}` (docs/data.md of bayesbench shows PyTorch, NumPy and plain "
              "Python). To score a model's predictions on the leaderboard, write its log-probabilities (or "
              "probabilities) at every position of every sequence, `[N][L][C]`, with the set's key "
              "(`set_id`, `n_sequences`, `tunnel`, `tunnel_code`, from `bayesbench.json`), and run `bayesbench score "
              "--predictions FILE --name NAME`: it checks the file (shape, finite, normalised within 1e-4, the "
              "set and the tunnel's version) and scores it with every metric and its interval.", ""]
    return "\n".join(lines)
