"""The Python API: what the `bayesbench` command does, from a notebook or a script.

    import bayesbench

    rows = bayesbench.run(tasks="bijection", archs="mlp", steps=20, seeds=2, db="tiny.sqlite")
    board = bayesbench.leaderboard(db="tiny.sqlite")        # one row per task, eval, arch and configuration
    board.to_pandas()                                        # a DataFrame (needs pandas)

- `run(...)`: `bayesbench run` (a preset's tasks x architectures, each an ensemble of seeds,
  trained, scored and stored); returns one row per (run, seed).
- `train(task, arch, ...)`: `bayesbench train` (one task x one architecture); returns a
  `TrainedRun`: its numbers, learning curves, per-position curves and its trained ensemble.
- `leaderboard(...)`: the stored results as the leaderboard pools them; one row per (task,
  evaluation, architecture, configuration).
- `records(...)`: the stored rows themselves, one per (run, seed).

The keyword arguments are the command's options with `_` for `-` (`eval_sequences=64` for
`--eval-sequences 64`; `train_args={"lr": 5e-4}` for `--train-args lr=5e-4`), checked by the
same rules; a mistake is one `ValueError` naming the argument. Running the same call again
trains nothing: the store holds every job by its key (docs/results.md).

The rule for what comes back: every function returns plain Python, never something that depends
on what is installed. Rows are a `Rows`: a list of dicts (one per row, numbers in bits, keys as
in `bayesbench leaderboard --json`), with `.to_pandas()` for a pandas DataFrame when pandas is
installed (and an error saying how to install it when it is not).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable

__all__ = ["Rows", "TrainedRun", "leaderboard", "records", "run", "train"]


def _board():
    """What the leaderboard is made of (`bayesbench/report/`): which stored rows (`selection`),
    their checks (`rows`) and their JSON forms (`leaderboard`: per run and seed, and the pooled
    rows' one schema), as one namespace."""
    from types import SimpleNamespace

    from .report import leaderboard, rows, selection

    return SimpleNamespace(
        select_rows=selection.select_rows, json_runs=leaderboard.json_runs, board_rows=leaderboard.board_rows,
        check_metric=rows.check_metric, check_threshold=rows.check_threshold,
        curve_metric_for=rows.curve_metric_for, DEFAULT_THRESHOLD=rows.DEFAULT_THRESHOLD)


class Rows(list):
    """A list of dicts, one per row; `.to_pandas()` gives them as a pandas DataFrame.

    >>> Rows([{"arch": "mlp", "entropy_mae_bits": 0.12}])[0]["arch"]
    'mlp'
    """

    # a slice, a sum or a copy of rows is rows (list's own would return a plain list, without to_pandas)
    def __getitem__(self, index):
        got = super().__getitem__(index)
        return Rows(got) if isinstance(index, slice) else got

    def __add__(self, other):
        return Rows(list(self) + list(other))

    def copy(self):
        return Rows(self)

    def to_pandas(self):
        """The rows as a pandas DataFrame (one column per key); needs pandas."""
        try:
            import pandas
        except ImportError:
            raise ImportError("Rows.to_pandas() needs pandas: pip install pandas (the rows themselves are a "
                              "plain list of dicts)") from None
        return pandas.DataFrame(list(self))


# ---------------------------------------------------------------- arguments

# The settings a replay accepts beside it: where it is stored and how it is driven, no number.
_PLACEMENT = frozenset({"db", "runs_dir", "no_progress", "jobs", "ray", "max_retries", "resume", "log"})
# The run settings `train` does not take (its one task and arch are its own arguments).
_NOT_TRAIN = frozenset({"tasks", "archs", "jobs", "ray", "max_retries", "tune", "tune_args"})


def _keyword(command: str):
    """How a keyword caller names a request's field: its keyword (`train`'s one task and arch)."""
    def name(field: str) -> str:
        if command == "train" and field in ("tasks", "archs"):
            return field[:-1]
        return "tune" if field == "tuning" else field
    return name


def _phrased(err: ValueError, caller: str, command: str) -> ValueError:
    """An error of the request or the engine as the caller's: `caller(field=...) rule` when the
    rule is about the one field it starts with, else `caller: rule`, fields said as keywords."""
    from .sweep.request import FieldError

    if not isinstance(err, FieldError):
        return ValueError(f"{caller}: {err}")
    name = _keyword(command)
    text = err.phrase(name)
    if err.leads():
        return ValueError(f"{caller}({name(err.field)}=...){text[len(name(err.field)):]}")
    return ValueError(f"{caller}: {text}")


def _request(settings: dict, command: str, caller: str, own: tuple[str, ...]):
    """The `RunRequest` of keyword settings (None: not given), each checked by its field's rule."""
    from .sweep.request import SETTINGS, FieldError, RunRequest

    if command == "train":
        for key in settings:
            if key in _NOT_TRAIN and key not in ("tasks", "archs"):
                known = [k for k in SETTINGS if k not in _NOT_TRAIN]
                raise ValueError(f"{caller}: {key!r} is not a setting of {caller}; settings: "
                                 f"{', '.join(sorted([*known, *own]))}")
    try:
        return RunRequest.of(settings, command=command, own=own)
    except FieldError as err:
        raise _phrased(err, caller, command) from None


def _config_settings(config: str | os.PathLike, caller: str) -> dict:
    """The settings of a TOML file (`bayesbench run --config`'s reader, `cli/settings.py`)."""
    from .cli.settings import file_settings

    try:
        return file_settings(os.fspath(config), "run")
    except ValueError as err:
        raise ValueError(f"{caller}(config=...): {err}") from None


def _replay_settings(replay: str | os.PathLike, settings: dict, caller: str):
    """(the stored run, its settings with the placement ones given here): only settings that change
    no number may be given beside `replay`."""
    from .cli.settings import read_run_file, replay_settings
    from .sweep.replay import Replay

    path = os.fspath(replay)
    changes = [k for k, v in settings.items()
               if v is not None and k not in _PLACEMENT and not (k == "preset" and v == "quick")]
    if changes:
        raise ValueError(f"{caller}(replay=...) runs exactly what the stored run ran, and {changes[0]}=... would "
                         f"change it; for a variant, write its settings (bayesbench run --replay {path} --print-config "
                         "> run.toml), edit them and give config='run.toml'")
    try:
        doc = read_run_file(path)
        stored = replay_settings(doc, path)
    except ValueError as err:
        raise _phrased(err, caller, "run") from None
    placed = {k: v for k, v in settings.items() if k in _PLACEMENT and v is not None}
    return Replay(path, doc), {**stored, **placed}


def _sink(quiet: bool):
    """The engine's lines (`sweep/events.py`) printed, unless `quiet`."""
    from .sweep.events import line

    def sink(event) -> None:
        text = line(event)
        if text is not None and not quiet:
            print(text, flush=True)
    return sink


def _shown(request, quiet: bool, no_progress: bool | None):
    """The request with progress as the command shows it: a bar on a terminal, else a line per
    checkpoint; neither when `quiet` or `no_progress`."""
    import sys

    shown = not quiet and not no_progress
    return dataclasses.replace(request, progress=shown and sys.stderr.isatty(),
                               lines=shown and not sys.stderr.isatty())


def _engine_run(request, quiet: bool, caller: str, command: str):
    """The request run on the engine (`sweep.engine.run`), its errors in keyword terms."""
    from types import SimpleNamespace

    from .cli.errors import interrupt_line
    from .running.interrupt import Interrupted
    from .sweep import engine

    _refuse_in_starting_worker(caller)
    try:
        return engine.run(request, _sink(quiet))
    except ValueError as err:
        raise _phrased(err, caller, command) from None
    except Interrupted as stop:  # still a KeyboardInterrupt, now saying what was kept and how to go on
        line = interrupt_line(stop, SimpleNamespace(), [])
        line = line.replace("; rerun the command to do it again", f"; call {caller} again to continue (stored jobs "
                            "are skipped, stopped ones resume from their checkpoints)")
        stop.args = (f"{caller}: {line}",)
        raise
    except engine.RunFailed as err:
        if "worker process died" in str(err) and _main_is_a_script():
            raise engine.RunFailed(f"{caller}: {err}. The worker processes run your script {_main_file()} again as "
                                   f"they start: put the call to {caller} under `if __name__ == \"__main__\":` "
                                   "(docs/api.md#scripts)") from None
        raise


def _main_file() -> str | None:
    import sys

    main = sys.modules.get("__main__")
    return getattr(main, "__file__", None) if getattr(main, "__spec__", None) is None else None


def _main_is_a_script() -> bool:
    """Whether this process runs a script file (`python script.py`), which `spawn` worker
    processes import again as they start (a notebook or `python -m` is not)."""
    return _main_file() is not None


def _refuse_in_starting_worker(caller: str) -> None:
    """A worker process importing the user's script again (multiprocessing's `spawn`) must not
    start jobs of its own: say why, instead of multiprocessing's bootstrapping error."""
    import multiprocessing

    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise RuntimeError(f"{caller} was called while a worker process was starting: the worker runs your script "
                           f"again, and its call to {caller} is not under "
                           "`if __name__ == \"__main__\":`; put it there (docs/api.md#scripts)")


def _json_rows(recs: list) -> Rows:
    """One row per record: `bayesbench leaderboard --json`'s, with the environment that made it
    (package version and commit, torch, device: `running/provenance.py`)."""
    rows = _board().json_runs(recs)["runs"]
    return Rows({**row, "environment": dict(r.environment or {})} for r, row in zip(recs, rows))


# ---------------------------------------------------------------- run, train

def run(preset: str = "quick", *, tasks: str | list[str] | None = None, archs: str | list[str] | None = None,
        seeds: int | list[int] | None = None, steps: int | None = None, train_args: dict | None = None,
        task_args: dict | None = None, model_args: dict | None = None, db: str | os.PathLike | None = None,
        runs_dir: str | os.PathLike = "runs", config: str | os.PathLike | None = None,
        replay: str | os.PathLike | None = None, quiet: bool = False, trust_code: bool = False, **options) -> Rows:
    """Train every selected architecture on every selected task of a preset, store the rows and
    return them: `bayesbench run`. One row per (run, seed) (`Rows`, keys as `records`).

    preset: "quick" or "paper". tasks, archs: names (default: the preset's). seeds: a count
    (seeds 0..N-1) or a list of seeds. steps: training steps (default: the preset's).
    train_args, task_args, model_args: settings over the preset's (`--train-args` etc.). db: the
    store (default $BAYESBENCH_DB or ./results/bayesbench.sqlite); runs_dir: where the run
    directories go. config: a TOML file of settings (`bayesbench run --config`), which the other
    arguments override. replay: a stored run's run.json (or run directory) to run again exactly,
    as `bayesbench run --replay` does (then only db, runs_dir and quiet may be given; the lines
    comparing its numbers with the stored ones are printed). quiet: no progress lines.
    trust_code: import outside code (a model or tunnel) that the config or replay file names, as
    `--trust-code` does; without it such code is refused unless these arguments name it too.
    **options: any other option of `bayesbench run` by its name (eval_sequences=64,
    device="cpu", until=0.1, model="./mine.py:build", ...).

    Jobs already in the store are not trained again (their stored rows come back).

    Example:

        rows = bayesbench.run(tasks="bijection", archs="mlp", steps=20, seeds=1, eval_sequences=256,
                              db="tiny.sqlite")
        rows[0]["entropy_mae_bits"]
    """
    from . import trust

    given_here = (tasks, archs, *options.values())  # code named here is the caller's own choice
    with trust.guard(trust_code, typed=given_here), trust.source(replay if replay is not None else config):
        return _run(preset, tasks, archs, seeds, steps, train_args, task_args, model_args, db, runs_dir, config,
                    replay, quiet, options)


def _run(preset, tasks, archs, seeds, steps, train_args, task_args, model_args, db, runs_dir, config, replay, quiet,
         options) -> Rows:
    caller = "bayesbench.run"
    request = _run_request(preset, tasks, archs, seeds, steps, train_args, task_args, model_args, db, runs_dir,
                           config, replay, quiet, options)
    result = _engine_run(request, quiet, caller, "run")
    recs = _board().select_rows(request.db, run_ids=result.keys)
    if request.replay is not None:
        from .sweep.replay import compare

        for line in compare(request.replay, recs):  # the replay's result, not progress: said even when quiet
            print(line, flush=True)
    return _json_rows(recs)


def _run_request(preset, tasks, archs, seeds, steps, train_args, task_args, model_args, db, runs_dir, config, replay,
                 quiet, options):
    """The `RunRequest` of `run`'s arguments: the keywords, over a config file's settings, or a
    stored run's settings (`replay`) with the placement keywords given here."""
    caller = "bayesbench.run"
    own = ("config", "replay", "quiet", "trust_code")
    settings = {"preset": preset, "tasks": tasks, "archs": archs, "seeds": seeds, "steps": steps,
                "train_args": train_args, "task_args": task_args, "model_args": model_args, "db": db,
                "runs_dir": runs_dir, **options}
    _request({k: v for k, v in settings.items() if v is not None}, "run", caller, own)  # each keyword checked first
    stored_run = None
    if replay is not None:
        if config is not None:
            raise ValueError(f"{caller}: give one of config and replay (replay runs the stored run's settings)")
        stored_run, settings = _replay_settings(replay, settings, caller)
    elif config is not None:  # the file's settings, under the arguments given here
        settings = {**_config_settings(config, caller), **{k: v for k, v in settings.items() if v is not None}}
    no_progress = settings.pop("no_progress", None)
    request = _request({k: v for k, v in settings.items() if v is not None}, "run", caller, own)
    return dataclasses.replace(_shown(request, quiet, no_progress), replay=stored_run)


@dataclasses.dataclass(frozen=True)
class TrainedRun:
    """One trained run (an ensemble of seeds of one architecture on one task), as stored.

    key: the run's key (`run_id` of its rows, the suffix of its run directory); run_dir: its
    run directory (checkpoint and run.json); records: its stored rows (`store.records.RunRecord`,
    one per seed)."""

    key: str
    run_dir: str
    records: tuple

    @property
    def task(self) -> str:
        """The task's label, as the leaderboard names it."""
        return self.records[0].task_label

    @property
    def arch(self) -> str:
        return self.records[0].arch

    @property
    def seeds(self) -> list[int]:
        return [r.seed for r in self.records]

    @property
    def params(self) -> int:
        """Parameters per ensemble member."""
        return self.records[0].params

    @property
    def primary(self) -> str:
        """The evaluation set its headline numbers are on (e.g. 'values')."""
        return self.records[0].primary

    def metrics(self, eval: str | None = None) -> dict[str, float]:
        """Each metric's mean over the seeds (bits) on evaluation set `eval` (default the primary):
        {"entropy_mae": ..., "entropy_mae_positional": ..., "kl": ...}. A diverged seed is NaN."""
        name = eval or self.primary
        out: dict[str, list[float]] = {}
        for r in self.records:
            if name not in r.evals:
                raise ValueError(f"eval must be one of {', '.join(r.evals)}, got {name!r}")
            for metric, summary in r.evals[name].metrics().items():
                out.setdefault(metric, []).append(math.nan if r.diverged else summary.mean)
        return {metric: sum(v) / len(v) for metric, v in out.items()}

    @property
    def rows(self) -> Rows:
        """One row per seed, as `records` gives them."""
        return _json_rows(list(self.records))

    @property
    def learning_curves(self) -> Rows:
        """The learning curves, one row per (seed, measured step): step, sequences seen, and each
        metric in bits on the run's fixed curve set (empty when curves were off)."""
        out = Rows()
        for r in self.records:
            c = r.learning_curve
            if c is None:
                continue
            for i, step in enumerate(c.step):
                out.append({"seed": r.seed, "eval": c.eval, "step": step, "sequences": c.sequences[i],
                            **{metric: values[i] for metric, values in c.values.items()}})
        return out

    @property
    def position_curves(self) -> Rows:
        """Per scored position, one row per (seed, evaluation set, position): the entropy MAE, KL,
        the model's and the Bayes posterior's entropy (bits, means over the evaluation set)."""
        out = Rows()
        for r in self.records:
            for name, curves in r.curves.items():
                fields = dataclasses.asdict(curves)
                for i, position in enumerate(fields.pop("position")):
                    out.append({"seed": r.seed, "eval": name, "position": position,
                                **{k: v[i] for k, v in fields.items()}})
        return out

    def load(self, device: str = "cpu"):
        """The trained ensemble and its training record from the checkpoint
        (`training.result.TrainResult`: `.model`, `.losses`, `.curve`, ...)."""
        from .sweep.jobs import resolve_device
        from .training.checkpoint import load_result

        try:  # a device this machine lacks is that, not a damaged checkpoint
            resolve_device(device)
        except ValueError as err:
            raise ValueError(f"TrainedRun.load(device=...): {str(err).removeprefix('device ')}") from None
        path = (self.records[0].config or {}).get("checkpoint") or os.path.join(self.run_dir, "checkpoint.pt")
        return load_result(path, device)

    def to_pandas(self):
        """`rows` as a pandas DataFrame."""
        return self.rows.to_pandas()

    def __repr__(self) -> str:
        numbers = ", ".join(f"{m} {v:.4f}" for m, v in self.metrics().items())
        return (f"TrainedRun({self.task} / {self.arch}, seeds {self.seeds}, key {self.key}: mean over seeds on "
                f"{self.primary}, bits: {numbers})")


def train(task: str, arch: str | None = None, *, preset: str = "quick", seeds: Iterable[int] | None = None,
          steps: int | None = None, train_args: dict | None = None, task_args: dict | None = None,
          model_args: dict | None = None, db: str | os.PathLike | None = None,
          runs_dir: str | os.PathLike = "runs", quiet: bool = False, **options) -> TrainedRun:
    """Train one architecture on one task (an ensemble of `seeds`), evaluate and store it:
    `bayesbench train`. Returns a `TrainedRun` with its numbers (`.metrics()`), learning curves
    (`.learning_curves`), per-position curves (`.position_curves`) and trained ensemble (`.load()`).

    task: a task of the preset ("bijection", "hmm", "sticky" in quick) or your own tunnel
    ("./mine.py:build"); arch: a built-in architecture (`bayesbench models`), or give
    model="./mine.py:build" for your own. seeds: a list of seeds (default: the preset's 0..N-1).
    The other arguments as for `run`. A run already stored is not trained again.

    Example:

        result = bayesbench.train("bijection", "mlp", steps=20, seeds=[0, 1], eval_sequences=256,
                                  db="tiny.sqlite")
        result.metrics()["entropy_mae"], len(result.learning_curves)
    """
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        raise ValueError(f"bayesbench.train(seeds=...) must be a list of seeds, e.g. [0, 1, 2], got {seeds!r} "
                         "(bayesbench.run takes a count)")
    caller = "bayesbench.train"
    settings = {"tasks": [task], "archs": [arch] if arch is not None else None, "preset": preset,
                "seeds": list(seeds) if seeds is not None else None, "steps": steps, "train_args": train_args,
                "task_args": task_args, "model_args": model_args, "db": db, "runs_dir": runs_dir, **options}
    settings = {k: v for k, v in settings.items() if v is not None}
    no_progress = settings.pop("no_progress", None)
    request = _shown(_request(settings, "train", caller, ("task", "arch", "quiet")), quiet, no_progress)
    (sweep_job,) = _engine_run(request, quiet, caller, "train").jobs
    recs = _board().select_rows(request.db, run_ids=[sweep_job.key])
    return TrainedRun(sweep_job.key, sweep_job.run_dir(request.runs_dir), tuple(recs))


# ---------------------------------------------------------------- stored results

def _store(db: str | os.PathLike | None, caller: str) -> str | None:
    """The store to read: `db` must exist when given (a typo is not an empty store)."""
    from .store.database import check_store_exists

    if db is None:
        return None
    db = os.fspath(db)
    if os.path.isdir(db):
        raise ValueError(f"{caller}(db={db!r}) is a folder; give the store's file (e.g. 'results/bayesbench.sqlite')")
    try:
        check_store_exists(db, f"run bayesbench.run(..., db={db!r}) first")
    except ValueError as err:
        raise ValueError(f"{caller}(db={db!r}): {err}") from None
    return db


def records(db: str | os.PathLike | None = None, *, task: str | None = None, arch: str | None = None,
            group_id: str | None = None, run_ids: list[str] | None = None, latest: bool = False) -> Rows:
    """The stored rows, one per (run, seed), newest last: numbers in bits with their 95%
    intervals over sequences, every evaluation set, the learning curve, the settings that define
    its leaderboard row, the code that made it (the keys of `bayesbench leaderboard --json`'s
    "runs"), and its `environment`: the bayesbench version and commit, torch, device, threads.

    db: the store (default $BAYESBENCH_DB or ./results/bayesbench.sqlite). task: a task name
    ('hmm') or label; arch: an architecture; group_id: one command's rows ('run-quick');
    run_ids: those runs; latest: only the newest run of each task and arch.

    Example:

        bayesbench.run(tasks="bijection", archs="mlp", steps=20, seeds=1, eval_sequences=256,
                       db="tiny.sqlite", quiet=True)
        rows = bayesbench.records(db="tiny.sqlite", arch="mlp")
        [(r["seed"], r["entropy_mae_bits"], r["settings"]["train"]["lr"]) for r in rows]
    """
    path = _store(db, "bayesbench.records")
    if run_ids is not None and (isinstance(run_ids, str) or not all(isinstance(k, str) for k in run_ids)):
        raise ValueError(f"bayesbench.records(run_ids=...) must be a list of run ids, got {run_ids!r}")
    _check_flags("bayesbench.records", latest=latest)
    recs = _board().select_rows(path, task=task, arch=arch, group_id=group_id, run_ids=run_ids, latest=latest)
    return _json_rows(_matching(recs, path, "bayesbench.records", task, arch))


def _check_flags(caller: str, **flags) -> None:
    """True/False arguments are booleans: latest="no" would be true."""
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise ValueError(f"{caller}({name}=...) must be True or False, got {value!r}")


def _matching(recs: list, db: str | None, caller: str, task: str | None, arch: str | None) -> list:
    """`recs`; or, when a selection matched nothing and names no built-in task or architecture
    (a typo, not a task with nothing stored yet), the error `bayesbench leaderboard --task` gives."""
    from .models.registry import known_model
    from .tasks.registry import list_tasks

    known = (task is None or task in list_tasks()) and (arch is None or known_model(arch))
    if recs or known:
        return recs
    from .cli.errors import no_rows_message
    from .store.database import read_rows

    if not read_rows(db):
        return recs
    message = no_rows_message(db, task=task, arch=arch)
    raise ValueError(f"{caller}: {message.replace('--task ', 'task=').replace('--arch ', 'arch=')}")


def leaderboard(db: str | os.PathLike | None = None, *, task: str | None = None, arch: str | None = None,
                latest: bool = False, per_run: bool = False, metric: str = "entropy_mae",
                threshold: float | None = None, curve_metric: str | None = None) -> Rows:
    """The leaderboard's rows: one per (task, evaluation set, architecture, configuration), pooling
    every stored seed of that configuration (`per_run`: one per run), in the order `bayesbench
    leaderboard` ranks them (by `metric` within each task and evaluation set).

    Each row: task, eval, arch, params, steps, n_sequences (the evaluation set's size), seeds, the
    mean over seeds of every metric (`<metric>_bits`), the ranked metric's values per seed and
    95% t-interval over seeds (`ci_bits`), the floors of its set, `at_floor`, wall time, the
    learning curve's steps to `threshold` bits per seed, and the row's `settings` (what its seeds
    share), every metric's interval over seeds (`intervals_bits`) and `trained_here`. The rows of
    `bayesbench leaderboard --json` ("rows"), one schema (docs/results.md#the-leaderboard-as-json).
    metric: entropy_mae, entropy_mae_positional, kl or auc (docs/leaderboard.md).

    Example:

        bayesbench.run(tasks="bijection", archs="mlp", steps=20, seeds=2, eval_sequences=256,
                       db="tiny.sqlite", quiet=True)
        board = bayesbench.leaderboard(db="tiny.sqlite")
        [(row["task"], row["eval"], row["arch"], row["entropy_mae_bits"]) for row in board]
    """
    board = _board()
    path = _store(db, "bayesbench.leaderboard")
    if latest and per_run:
        raise ValueError("bayesbench.leaderboard: give at most one of latest and per_run")
    _check_flags("bayesbench.leaderboard", latest=latest, per_run=per_run)
    def argument(name: str, check, value):
        try:
            return check(value)
        except ValueError as err:
            raise ValueError(f"bayesbench.leaderboard({name}=...): {err}") from None

    metric = argument("metric", board.check_metric, metric)
    threshold = argument("threshold", board.check_threshold,
                         board.DEFAULT_THRESHOLD if threshold is None else threshold)
    curve_metric = argument("curve_metric", lambda v: board.curve_metric_for(metric, v), curve_metric)
    recs = _matching(board.select_rows(path, task=task, arch=arch, latest=latest), path, "bayesbench.leaderboard",
                     task, arch)
    return Rows(board.board_rows(recs, metric, per_run, threshold=threshold, curve_metric=curve_metric))
