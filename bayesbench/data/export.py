"""`bayesbench data export`: the tunnels as datasets, with everything a scorer needs.

One row per sequence: the tokens, the scored mask, the exact posterior at every position, the
training targets (hard targets), the header (the HMM's rows) and every latent variable
(the bijection, the HMM's matrices and hidden states, ...), for each set a split names
(`data.sets`). Written as parquet (one file per set, zstd) or as a Hugging Face `datasets`
DatasetDict saved to disk (one split per set), beside a dataset card (README.md, `data.card`)
and `bayesbench.json`: the manifest with every set's id, seed, sizes, task and the key a
predictions file of it carries.

An export replaces the folder's previous export as a whole (written beside it, then swapped in),
and refuses a folder that holds anything else: `bayesbench.json` lists the files the export wrote
("files"), the only ones a later export there deletes (running/outfolder.py).
"""

from __future__ import annotations

import json
import os

import numpy as np

from .. import __version__
from ..running.outfolder import check_out, folder_bytes, rebuilt
from ..scoring.evaluate import scored_positions
from ..tasks import Batch
from . import FORMATS, card
from .sets import SetSpec, sets_of, task_setup

MANIFEST = "bayesbench.json"
CARD = "README.md"
FORMAT_VERSION = 1


def _pyarrow():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ValueError("bayesbench data export needs pyarrow: pip install 'bayesbench[data]'") from None
    return pa, pq


def nested(array: np.ndarray):
    """An [N, ...] array as one arrow column: nested fixed-size lists, one row per sequence."""
    pa, _ = _pyarrow()
    array = np.ascontiguousarray(array)
    flat = pa.array(array.reshape(-1))
    for size in reversed(array.shape[1:]):
        flat = pa.FixedSizeListArray.from_arrays(flat, size)
    return flat


def _kind(array: np.ndarray) -> str:
    dims = "".join(f"[{d}]" for d in array.shape[1:])
    return f"{array.dtype} {dims}".strip()


def table(batch: Batch):
    """The set as an arrow table (column order: sequence, tokens, mask, posterior, targets,
    [posterior_weights, posterior_means, posterior_variances: a continuous tunnel's exact
    predictive, the mixture of J Gaussians its posterior column holds as [L, 3J]], header, latent_*)."""
    pa, _ = _pyarrow()
    cols = {"sequence": np.arange(batch.batch_size, dtype=np.int64), "tokens": batch.tokens.numpy(),
            "mask": batch.mask.numpy(), "posterior": batch.posterior.numpy()}
    if not batch.soft_targets:
        cols["targets"] = batch.targets.numpy()
    if batch.targets.is_floating_point() and batch.targets.dim() == 2:  # a continuous tunnel (issue 41)
        J = batch.posterior.shape[-1] // 3  # the exact predictive, a mixture of J Gaussians, as columns
        for i, part in enumerate(("weights", "means", "variances")):
            cols[f"posterior_{part}"] = batch.posterior[..., i * J:(i + 1) * J].numpy()
    if batch.header is not None:
        cols["header"] = batch.header.numpy()
    for name, value in batch.latents.items():
        cols[f"latent_{name}"] = value.numpy()
    arrays = {name: nested(a) for name, a in cols.items()}
    return pa.table(arrays), {name: _kind(a) for name, a in cols.items()}


def set_entry(spec: SetSpec, batch: Batch, kinds: dict, fmt: str) -> dict:
    """A set's entry in the manifest."""
    per_sequence = batch.mask.sum(1)
    return {
        "name": spec.name, "slug": spec.slug, "split": spec.split,
        "file": f"{spec.slug}.parquet" if fmt == "parquet" else spec.slug,
        "set_id": spec.set_id, "key": spec.key(), "seed": spec.seed, "n_sequences": spec.n,
        "seq_len": batch.seq_len, "num_classes": int(batch.posterior.shape[-1]), "vocab_size": spec.task.vocab_size,
        "header": None if batch.header is None else list(batch.header.shape[1:]),
        "scored": scored_positions(spec.task),
        "scored_per_sequence": sorted({int(x) for x in per_sequence.unique()}),
        "task": spec.task.describe(), "task_config": spec.task.config(), "tunnel_code": spec.task.code(),
        "columns": kinds,
    }


def _command(task: str, task_args: dict | None, preset: str, split: str, n: int | None, evals, seed: int,
             fmt: str) -> str:
    parts = ["bayesbench data export", task]
    if task_args:
        parts += ["--task-args", *(f"{k}={json.dumps(v)}" for k, v in task_args.items())]
    if preset != "quick":
        parts += ["--preset", preset]
    parts += ["--split", split]
    if n is not None:
        parts += ["--sequences", str(n)]
    for e in evals or ():
        parts += ["--eval", e]
    if split == "train":
        parts += ["--seed", str(seed)]
    return " ".join(parts + ["--format", fmt])


def export(task: str, *, out: str, task_args: dict | None = None, preset: str = "quick", split: str = "eval",
           sequences: int | None = None, evals: list[str] | None = None, seed: int = 0, fmt: str = "parquet",
           cache_dir: str | None = None) -> dict:
    """Write the sets `split` names for `task` to the folder `out` in `fmt`; returns the manifest
    (with "bytes": the folder's size on disk)."""
    if fmt not in FORMATS:
        raise ValueError(f"--format must be one of {FORMATS}, got {fmt!r}")
    _, pq = _pyarrow()
    if fmt == "hf":
        try:
            import datasets  # noqa: F401  (needed by _save_hf: asked for before anything is drawn)
        except ImportError:
            raise ValueError("--format hf needs the datasets package: pip install 'bayesbench[data]' (or pip install "
                             "datasets)") from None
    check_out(out, MANIFEST, "export")  # before anything is drawn
    setup = task_setup(task, task_args, preset)
    specs = sets_of(setup, split, n=sequences, evals=evals, seed=seed)
    first = specs[0].task
    entries: list[dict] = []
    manifest = {"format_version": FORMAT_VERSION, "what": "bayesbench dataset", "format": fmt, "split": split,
                "preset": preset, "task": task, "task_args": task_args or {}, "label": setup.label,
                "task_config": setup.task, "tunnel": first.name, "tunnel_code": first.code(),
                "bayesbench": __version__,
                "command": _command(task, task_args, preset, split, sequences, evals, seed, fmt), "sets": entries}
    with rebuilt(out, MANIFEST, "export") as (tmp, marker):
        tables = {}
        for spec in specs:
            batch = spec.draw(cache_dir)
            t, kinds = table(batch)
            entry = set_entry(spec, batch, kinds, fmt)
            entries.append(entry)
            t = t.replace_schema_metadata({"bayesbench": json.dumps(entry, sort_keys=True)})
            if fmt == "parquet":
                pq.write_table(t, os.path.join(tmp, entry["file"]), compression="zstd")
            else:
                tables[entry["slug"]] = (t, entry)
        if fmt == "hf":
            _save_hf(tables, tmp)
        with open(os.path.join(tmp, CARD), "w") as f:
            f.write(card.render(manifest))
        marker.update(manifest)  # written last, with "files": the files of this export (running/outfolder.py)
    manifest["files"] = marker["files"]
    manifest["bytes"] = folder_bytes(out)
    return manifest


def _save_hf(tables: dict, folder: str) -> None:
    import datasets

    was = datasets.utils.logging.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        splits = {}
        for name, (t, entry) in tables.items():
            info = datasets.DatasetInfo(description=f"bayesbench {entry['task']}: {entry['n_sequences']} sequences, "
                                                    f"set id {entry['set_id']} (README.md: what each column is)")
            splits[name] = datasets.Dataset(t, info=info)
        datasets.DatasetDict(splits).save_to_disk(folder)
    finally:
        if was:
            datasets.enable_progress_bars()


def read_manifest(folder: str) -> dict:
    """The manifest of an exported folder."""
    path = os.path.join(folder, MANIFEST)
    if not os.path.isfile(path):
        raise ValueError(f"{folder} holds no bayesbench export ({MANIFEST} is missing)")
    with open(path) as f:
        return json.load(f)
