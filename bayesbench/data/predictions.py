"""The predictions file: a model's predictive on an exported set, from any framework (docs/data.md).

A file holds, for every sequence of one set, the model's log-probabilities (or probabilities)
over the C classes at every position, [N, L, C], and the set's key: its id, its number of
sequences, the tunnel's name and the tunnel's code (`data.sets.SetSpec.key`, in the export's
`bayesbench.json`).

- parquet: one row per sequence; columns `sequence` (its index in the set), `log_probs` or
  `probs` (a list of L lists of C numbers), and the key as the columns `set_id`,
  `n_sequences`, `tunnel`, `tunnel_code` (the same value in every row);
- .npy: the array [N, L, C] in sequence order; the key in a JSON file beside it with the same
  name (`preds.npy` -> `preds.json`): `{"set_id", "n_sequences", "tunnel", "tunnel_code",
  "kind"}`, kind "log_probs" or "probs".

Which of the two a file holds is said, never guessed: the column's name, the JSON's "kind".

A continuous tunnel's file (linreg, mixreg, kalman: issue 41) holds a predictive density of the
real y at every position instead, kind "gaussian" ([N, L, 2]: mean, variance) or "mixture"
([N, L, 3M]: the M weights, the M means, the M variances), in the column or JSON "kind" of that
name. Its rules at every scored position: finite numbers, every variance > 0, every weight >= 0
and the weights summing to 1 within `NORMALISED_ATOL`.

`check(predictions, batch)` applies the rules a file must meet before it is scored, each
refusal one line naming its rule: the set's shape; at every scored position finite values
(a log-probability may be -inf: a probability of 0), probabilities non-negative, each
distribution normalised within `NORMALISED_ATOL` (probabilities summing to 1, log-probabilities
with logsumexp 0), and no probability of 0 where the exact posterior has mass (its KL would be
infinite: the one way a file could give a number that is not a result). Positions that are not
scored are not read. What passes is renormalised exactly (in float64) and scored.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ..tasks import Batch

KINDS = ("log_probs", "probs", "gaussian", "mixture")
#: The kinds of a continuous tunnel's predictions (issue 41): "gaussian" [N, L, 2] (mean, variance)
#: or "mixture" [N, L, 3M] (M weights, M means, M variances) at every position.
CONTINUOUS_KINDS = ("gaussian", "mixture")
KEY_FIELDS = ("set_id", "n_sequences", "tunnel", "tunnel_code")
#: How far a predicted distribution may be from normalised: |sum - 1| for probabilities,
#: |logsumexp| for log-probabilities, at every scored position (float32 softmax outputs pass).
NORMALISED_ATOL = 1e-4


@dataclass
class Predictions:
    """A read predictions file: the set's key, what the numbers are and the numbers [N, L, C]."""

    path: str
    key: dict
    kind: str
    values: np.ndarray
    #: the id of the exported set the file was made from, where it says (a parquet written from the
    #: export's own table keeps the export's metadata, which names the set), else None
    made_on: str | None = None

    def where(self) -> str:
        return f"predictions {self.path}"


def write(path: str, values, key: dict, kind: str = "log_probs") -> str:
    """Write `values` [N, L, C] (any array-like: numpy, torch, jax) for the set whose `key` is
    given (the export's bayesbench.json, sets[i]["key"]) as parquet or .npy, by the path's ending."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    missing = [k for k in KEY_FIELDS if k not in (key or {})]
    if missing:
        raise ValueError(f"key must hold {KEY_FIELDS} (a set's 'key' in the export's bayesbench.json); missing "
                         f"{missing}")
    values = np.asarray(values)
    if kind in CONTINUOUS_KINDS and (values.ndim != 3 or (values.shape[-1] != 2 if kind == "gaussian"
                                                          else values.shape[-1] % 3)):
        raise ValueError(f"values of kind {kind!r} must be [N, L, 2] (mean, variance) for 'gaussian' or [N, L, 3M] "
                         f"(weights, means, variances) for 'mixture', got shape {list(values.shape)}")
    if values.ndim != 3:
        raise ValueError(f"values must be [N, L, C] (sequences, positions, classes), got shape {list(values.shape)}")
    if path.endswith(".npy"):
        np.save(path, values)
        with open(sidecar(path), "w") as f:
            json.dump({**{k: key[k] for k in KEY_FIELDS}, "kind": kind}, f, indent=1)
        return path
    if not path.endswith(".parquet"):
        raise ValueError(f"a predictions file is .parquet or .npy, got {path}")
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .export import nested

    n = values.shape[0]
    t = pa.table({"sequence": np.arange(n, dtype=np.int64), kind: nested(values),
                  **{k: pa.array([key[k]] * n) for k in KEY_FIELDS}})
    pq.write_table(t, path, compression="zstd")
    return path


def sidecar(path: str) -> str:
    """The key file of an .npy predictions file: the same name ending in .json."""
    return os.path.splitext(path)[0] + ".json"


def read(path: str) -> Predictions:
    """A predictions file (see the module doc); its form refused in one line when it is not one."""
    if os.path.isdir(path):
        raise ValueError(f"--predictions {path} is a folder; give a predictions file (.parquet or .npy)")
    if not os.path.isfile(path):
        raise ValueError(f"--predictions: no such file {path}")
    if path.endswith(".npy"):
        return _read_npy(path)
    if path.endswith(".parquet"):
        return _read_parquet(path)
    raise ValueError(f"--predictions {path}: a predictions file is .parquet or .npy (docs/data.md)")


def _read_npy(path: str) -> Predictions:
    key_path = sidecar(path)
    if not os.path.isfile(key_path):
        raise ValueError(f"predictions {path}: no key file {key_path} (rule: an .npy file's set is named by the "
                         "JSON beside it, {\"set_id\", \"n_sequences\", \"tunnel\", \"tunnel_code\", \"kind\"}: "
                         "a set's key from the export's bayesbench.json)")
    try:
        with open(key_path) as f:
            key = json.load(f)
    except (OSError, ValueError) as err:
        raise ValueError(f"predictions {path}: its key file {key_path} is unreadable ({type(err).__name__}: "
                         f"{str(err).splitlines()[0] if str(err) else 'no message'})") from None
    if not isinstance(key, dict):
        raise ValueError(f"predictions {path}: {key_path} must hold a JSON object")
    kind = key.get("kind")
    if kind not in KINDS:
        raise ValueError(f"predictions {path}: {key_path} must say \"kind\": \"log_probs\" or \"probs\" (or "
                         f"\"gaussian\" or \"mixture\" for a continuous tunnel) (rule: what the numbers are is said, "
                         f"not guessed), got {kind!r}")
    key = _key(path, key)
    shape = _npy_shape(path)
    if shape[0] != key["n_sequences"]:
        raise ValueError(f"predictions {path}: {shape[0]} sequences, but its key names a set of {key['n_sequences']} "
                         "(rule: one predictive per sequence of the set, in its order)")
    # mapped, not read: `check` compares the whole shape with the set's before a number is read
    return Predictions(path, key, kind, np.load(path, mmap_mode="r", allow_pickle=False))


def _npy_shape(path: str) -> tuple[int, ...]:
    """The [N, L, C] shape of an .npy file, read from its header alone (the numbers are not read)
    and checked: a float array of three dimensions whose numbers the file holds in full."""
    from numpy.lib import format as npy

    where = f"predictions {path}"
    try:
        with open(path, "rb") as f:
            version = npy.read_magic(f)
            # 3.0 is 2.0 with a UTF-8 header (a float array's header is ASCII)
            read_header = {(1, 0): npy.read_array_header_1_0, (2, 0): npy.read_array_header_2_0,
                           (3, 0): npy.read_array_header_2_0}.get(version)
            if read_header is None:
                raise ValueError(f"format version {version[0]}.{version[1]} is not 1.0, 2.0 or 3.0")
            shape, _fortran, dtype = read_header(f)
            offset = f.tell()
    except (EOFError, ValueError) as err:
        why = (str(err).splitlines() or ["cut short"])[0]
        what = "empty" if os.path.getsize(path) == 0 else f"not an .npy array ({why})"
        raise ValueError(f"{where}: {what} (rule: an .npy file of the numbers [N, L, C], as numpy.save writes it)") \
            from None
    if len(shape) != 3:
        raise ValueError(f"{where}: shape {list(shape)} is not [N, L, C] (sequences, positions, classes)")
    if not np.issubdtype(dtype, np.floating):
        raise ValueError(f"{where}: the numbers must be floating-point, got {dtype}" +
                         (" (Python objects are never read from a file)" if dtype.hasobject else ""))
    size = offset + math.prod(shape) * dtype.itemsize
    if os.path.getsize(path) < size:
        raise ValueError(f"{where}: cut short: its header says {list(shape)} {dtype} ({size:,} bytes) but the file has "
                         f"{os.path.getsize(path):,} bytes")
    return tuple(shape)


def _key(path: str, key: dict) -> dict:
    def good(k):
        v = key.get(k)
        return (isinstance(v, int) and not isinstance(v, bool) and v > 0) if k == "n_sequences" else \
            (isinstance(v, str) and bool(v))

    missing = [k for k in KEY_FIELDS if not good(k)]
    if missing:
        raise ValueError(f"predictions {path}: no valid {', '.join(missing)} (rule: a predictions file names the set "
                         f"it predicts by the set's key, {', '.join(KEY_FIELDS)}, from the export's bayesbench.json)")
    return {k: key[k] for k in KEY_FIELDS}


def _read_parquet(path: str) -> Predictions:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        t = pq.read_table(path)
    except Exception as err:  # a damaged or foreign file is the user's to fix
        raise ValueError(f"predictions {path}: not a readable parquet file ({type(err).__name__})") from None
    kinds = [k for k in KINDS if k in t.column_names]
    if not kinds and {"tokens", "posterior"} <= set(t.column_names):
        raise ValueError(f"predictions {path}: this is an exported set (its tokens and exact posterior, from "
                         "bayesbench data export), not a model's predictions (rule: a predictions file holds "
                         "log_probs or probs for every sequence of a set, with the set's key; write one with "
                         "bayesbench.data.predictions.write, docs/data.md)")
    if len(kinds) != 1:
        raise ValueError(f"predictions {path}: needs exactly one of the columns log_probs or probs (rule: what the "
                         f"numbers are is said by the column's name), got columns {t.column_names}")
    for name in ("sequence", *KEY_FIELDS):
        if name not in t.column_names:
            raise ValueError(f"predictions {path}: no column {name!r} (rule: one row per sequence, its index in "
                             f"`sequence`, and the set's key in {', '.join(KEY_FIELDS)})")
    key = {}
    for name in KEY_FIELDS:
        distinct = pc.unique(t.column(name)).to_pylist()
        if len(distinct) != 1:
            raise ValueError(f"predictions {path}: column {name} must hold one value in every row (one file, one "
                             f"set), got {len(distinct)}")
        key[name] = distinct[0]
    order = np.asarray(t.column("sequence").to_numpy(zero_copy_only=False))
    n = len(order)
    if n == 0 or not np.array_equal(np.sort(order), np.arange(n)):
        raise ValueError(f"predictions {path}: `sequence` must hold each index 0..N-1 once (N = {n} rows)")
    values = _dense(t.column(kinds[0]), path, kinds[0])
    return Predictions(path, _key(path, key), kinds[0], values[np.argsort(order)], _exported_set(t))


def _exported_set(table) -> str | None:
    """The set id the export wrote into the table's metadata (`data.export`), if it is there."""
    try:
        entry = json.loads((table.schema.metadata or {}).get(b"bayesbench", b"null"))
    except ValueError:
        return None
    found = entry.get("set_id") if isinstance(entry, dict) else None
    return found if isinstance(found, str) else None


def _dense(column, path: str, name: str) -> np.ndarray:
    """A column of lists of lists of numbers as an [N, L, C] array; ragged lists refused."""
    import pyarrow as pa
    import pyarrow.compute as pc

    col = column.combine_chunks()
    if not (pa.types.is_list(col.type) or pa.types.is_fixed_size_list(col.type) or pa.types.is_large_list(col.type)):
        raise ValueError(f"predictions {path}: {name} must hold one list of L lists of C numbers per sequence")
    outer = pc.list_value_length(col).to_numpy(zero_copy_only=False)
    inner_col = col.flatten()
    if not (pa.types.is_list(inner_col.type) or pa.types.is_fixed_size_list(inner_col.type)
            or pa.types.is_large_list(inner_col.type)):
        raise ValueError(f"predictions {path}: {name} must hold one list of L lists of C numbers per sequence")
    inner = pc.list_value_length(inner_col).to_numpy(zero_copy_only=False)
    if len(set(outer.tolist())) > 1 or len(set(inner.tolist())) > 1:
        raise ValueError(f"predictions {path}: the shape of {name} is ragged (lengths {sorted(set(outer.tolist()))} "
                         f"by {sorted(set(inner.tolist()))}) (rule: [N][L][C], the set's shape)")
    flat = inner_col.flatten().to_numpy(zero_copy_only=False).astype(np.float64)
    return flat.reshape(len(outer), int(outer[0]) if len(outer) else 0, int(inner[0]) if len(inner) else 0)


def check(pred: Predictions, batch: Batch, set_id: str | None = None) -> Tensor:
    """The file's log-probabilities [N, L, C] (float64, renormalised) once it meets every rule
    of the module doc against `batch` (its set, whose id is `set_id`); else a one-line ValueError
    naming the rule. The set is checked by its id, not only its shape: two sets of one task
    ('values' and 'values+query') have the same shape and other sequences."""
    where, want = pred.where(), tuple(batch.posterior.shape)
    named = pred.key["set_id"]
    for other, how in ((set_id, "is scored against"), (pred.made_on, "was made from the exported set")):
        if other is not None and other != named:
            raise ValueError(f"{where}: its key names set {named} but it {how} {other} (rule: a file's key is the "
                             "key of the set its predictions are of; copy that set's key from the export's "
                             "bayesbench.json)")
    continuous_set = batch.targets.is_floating_point() and batch.targets.dim() == 2
    if continuous_set != (pred.kind in CONTINUOUS_KINDS):
        raise ValueError(f"{where}: kind {pred.kind!r} does not fit this set (rule: a continuous tunnel's set takes "
                         f"kind 'gaussian' or 'mixture', a discrete tunnel's 'log_probs' or 'probs')")
    if continuous_set:
        return check_continuous(pred, batch)
    if tuple(pred.values.shape) != want:
        raise ValueError(f"{where}: shape {list(pred.values.shape)} is not the set's [N, L, C] = {list(want)} (rule: "
                         "one predictive of C classes at each of the L positions of each of the N sequences)")
    if not np.issubdtype(pred.values.dtype, np.floating):
        raise ValueError(f"{where}: {pred.kind} must be floating-point numbers, got {pred.values.dtype}")
    values = torch.from_numpy(np.array(pred.values, dtype=np.float64, order="C"))  # a copy: a mapped file is read-only
    mask = batch.mask
    rows = values[mask]  # [scored positions, C]

    def at(bad: Tensor) -> str:
        return _position(mask, bad)

    if pred.kind == "probs":
        bad = ~torch.isfinite(rows).all(-1)
        if bool(bad.any()):
            raise ValueError(f"{where}: not finite (NaN or inf) at {int(bad.sum())} scored position(s), first at "
                             f"{at(bad)} (rule: finite probabilities at every scored position)")
        bad = (rows < 0).any(-1)
        if bool(bad.any()):
            raise ValueError(f"{where}: a negative probability at {at(bad)} (rule: probabilities lie in [0, 1])")
        total = rows.sum(-1)
        off = (total - 1).abs() > NORMALISED_ATOL
        if bool(off.any()):
            i = int(off.nonzero()[0])
            raise ValueError(f"{where}: not normalised: the probabilities at {at(off)} sum to {float(total[i]):.8g} "
                             f"(rule: at every scored position they sum to 1 within {NORMALISED_ATOL:g})")
        log_q = torch.log(values)
    else:
        bad = (torch.isnan(rows) | (rows == math.inf)).any(-1)
        if bool(bad.any()):
            raise ValueError(f"{where}: not finite (NaN or +inf) at {int(bad.sum())} scored position(s), first at "
                             f"{at(bad)} (rule: finite log-probabilities at every scored position; -inf, a probability "
                             "of 0, is allowed)")
        total = torch.logsumexp(rows, -1)
        off = ~(total.abs() <= NORMALISED_ATOL)
        if bool(off.any()):
            i = int(off.nonzero()[0])
            hint = " (the values are >= 0: probabilities? name the column probs)" if bool((rows >= 0).all()) else ""
            raise ValueError(f"{where}: not normalised: exp(log_probs) at {at(off)} sums to "
                             f"{math.exp(float(total[i])):.8g} (rule: at every scored position logsumexp(log_probs) is "
                             f"within {NORMALISED_ATOL:g} of 0){hint}")
        log_q = values
    zero = ((log_q[mask] == -math.inf) & (batch.posterior[mask] > 0)).any(-1)
    if bool(zero.any()):
        raise ValueError(f"{where}: a probability of 0 at {at(zero)} for a class the exact posterior gives mass "
                         "(rule: KL(posterior || prediction) must be finite: give every class the posterior can take "
                         "a probability above 0)")
    C = want[-1]
    uniform = torch.full_like(log_q, -math.log(C))  # positions not scored are not read: held at uniform
    log_q = torch.where(mask.unsqueeze(-1), log_q, uniform)
    return log_q - torch.logsumexp(log_q, -1, keepdim=True)


def _position(mask: Tensor, bad_rows: Tensor) -> str:
    """'sequence 3, position 6' of the first flagged scored row."""
    index = mask.nonzero()[int(bad_rows.nonzero()[0])]
    return f"sequence {int(index[0])}, position {int(index[1])}"


def check_continuous(pred: Predictions, batch: Batch) -> Tensor:
    """A continuous file's predictive in the scoring layout [N, L, 3M] (`models.heads`: weights,
    means, variances; float64, weights renormalised) once it meets the rules of the module doc at
    every scored position; else a one-line ValueError naming the rule. Positions not scored are
    not read (held at weight 1/M, mean 0, variance 1)."""
    where = pred.where()
    N, L = batch.mask.shape
    shape = tuple(pred.values.shape)
    c = shape[-1] if len(shape) == 3 else 0
    fits = len(shape) == 3 and shape[:2] == (N, L) and (c == 2 if pred.kind == "gaussian" else c >= 3 and c % 3 == 0)
    if not fits:
        wanted = "[N, L, 2] (mean, variance)" if pred.kind == "gaussian" else "[N, L, 3M] (M weights, means, variances)"
        raise ValueError(f"{where}: shape {list(shape)} is not {wanted} with N = {N}, L = {L} (rule: one predictive "
                         "density at each of the L positions of each of the N sequences)")
    if not np.issubdtype(pred.values.dtype, np.floating):
        raise ValueError(f"{where}: {pred.kind} must be floating-point numbers, got {pred.values.dtype}")
    values = torch.from_numpy(np.array(pred.values, dtype=np.float64, order="C"))
    if pred.kind == "gaussian":
        values = torch.stack([torch.ones_like(values[..., 0]), values[..., 0], values[..., 1]], -1)
    M = values.shape[-1] // 3
    w, var = values[..., :M], values[..., 2 * M:]
    mask = batch.mask
    rows = values[mask]

    def at(bad: Tensor) -> str:
        return _position(mask, bad)

    bad = ~torch.isfinite(rows).all(-1)
    if bool(bad.any()):
        raise ValueError(f"{where}: not finite (NaN or inf) at {int(bad.sum())} scored position(s), first at "
                         f"{at(bad)} (rule: finite means, variances and weights at every scored position)")
    bad = (var[mask] <= 0).any(-1)
    if bool(bad.any()):
        raise ValueError(f"{where}: a variance that is not positive at {at(bad)} (rule: every variance > 0)")
    bad = (w[mask] < 0).any(-1)
    if bool(bad.any()):
        raise ValueError(f"{where}: a negative weight at {at(bad)} (rule: mixture weights are >= 0)")
    total = w[mask].sum(-1)
    off = (total - 1).abs() > NORMALISED_ATOL
    if bool(off.any()):
        i = int(off.nonzero()[0])
        raise ValueError(f"{where}: the weights at {at(off)} sum to {float(total[i]):.8g} (rule: at every scored "
                         f"position the weights sum to 1 within {NORMALISED_ATOL:g})")
    held = torch.cat([torch.full_like(w, 1.0 / M), torch.zeros_like(w), torch.ones_like(var)], -1)
    values = torch.where(mask.unsqueeze(-1), values, held)
    return torch.cat([values[..., :M] / values[..., :M].sum(-1, keepdim=True), values[..., M:]], -1)
