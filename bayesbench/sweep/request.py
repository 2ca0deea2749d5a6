"""What a run is asked to do, as one typed value: the `RunRequest` that both front ends build
(`cli/run.py`, `cli/train.py` from the command line; `api.py` from keyword arguments) and the
engine (`sweep/engine.py`) takes.

A request's own rules live here: each value's type and range (`RunRequest.of`, for callers that
did not parse a command line) and the rules between values (`RunRequest.__post_init__`). A broken
rule is a `FieldError` naming the field; its text names fields as `{field}` placeholders, never as
a `--flag` or a keyword, and each front end phrases them: the command line says `--train-args`,
Python says `train_args` (`FieldError.phrase`).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

DEFAULT_THREADS = 1  # torch threads per training process: numbers differ between counts, so not the machine's

#: The settings of a learning-rate search (`sweep.tune.TuneSpec`), which `tune_args` may give.
TUNE_FIELDS = ("lrs", "selection_seeds", "rule", "metric", "selection_sequences", "axes", "packed", "prune")

_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


class FieldError(ValueError):
    """A request's value that breaks a rule. `field`: the `RunRequest` field it is about; `rule`:
    the text, naming fields as `{name}` placeholders (`"{until} reads the learning curves: it
    cannot be combined with {no_curves}"`). `str()` says the names plainly; a front end says them
    its way with `phrase`."""

    def __init__(self, field: str, rule: str) -> None:
        self.field, self.rule = field, rule
        super().__init__(self.phrase(lambda name: name))

    def phrase(self, name: Callable[[str], str]) -> str:
        """The rule with each field named by `name(field)` (e.g. '--train-args' or 'train_args')."""
        return _PLACEHOLDER.sub(lambda m: name(m.group(1)) if m.group(1) in NAMES else m.group(0), self.rule)

    def leads(self) -> bool:
        """Whether the text starts with its own field ("{steps} must be ..."): a keyword front end
        then says `caller(steps=...) must be ...`."""
        return self.rule.startswith("{" + self.field + "}")


def field_error(err: ValueError, field: str, where: str = "") -> FieldError:
    """An error from below (a resolver's `SettingError`, a plain ValueError) as a FieldError about
    `field`, with `where` (placeholders allowed) in front."""
    if isinstance(err, FieldError):
        return FieldError(err.field, f"{where}{err.rule}") if where else err
    return FieldError(field, f"{where}{err}")


@dataclass(frozen=True)
class RunRequest:
    """One run of the engine: every (task, arch) of a preset (or the selections), each an ensemble
    of seeds, trained, scored and stored.

    Selection: `preset`, `tasks`, `archs` (None: the preset's), `seeds` (None: the preset's
    0..N-1), or an outside `model` (a factory spec) with its leaderboard `name`. Settings over
    the preset's: `steps`, `train_args`, `task_args`, `model_args` (tables), the learning-curve
    options (`until`, `until_metric`, `curve_every`, `curve_sequences`, `no_curves`), `device`,
    `attention`, `compile`, `precision`, `checkpoint_every`, `eval_sequences`. `tuning`: the
    search's settings over the preset's (`sweep/tune.py`; {} the preset's search), None: no
    tuning. Where: `db`, `runs_dir`, `log`. How: `jobs`, `ray`, `max_retries`, `threads`;
    `progress` (a bar) or `lines` (a line per checkpoint). `replay`: the stored run being
    replayed (`sweep/replay.Replay`), whose identity the jobs must resolve to. `command`: 'run'
    or 'train' (the rows' group is `run-<preset>` for both)."""

    preset: str = "quick"
    tasks: tuple[str, ...] | None = None
    archs: tuple[str, ...] | None = None
    seeds: tuple[int, ...] | None = None
    steps: int | None = None
    train_args: dict = field(default_factory=dict)
    task_args: dict = field(default_factory=dict)
    model_args: dict = field(default_factory=dict)
    until: float | str | None = None
    until_metric: str | None = None
    curve_every: int | None = None
    curve_sequences: int | None = None
    no_curves: bool = False
    tuning: dict | None = None
    db: str | None = None
    runs_dir: str = "runs"
    jobs: int | None = None
    ray: str | None = None
    max_retries: int = 2
    threads: int | None = None
    device: str | None = None
    attention: str | None = None
    compile: bool = False
    precision: str | None = None
    checkpoint_every: int | None = None
    eval_sequences: int | None = None
    model: str | None = None
    name: str | None = None
    log: str | None = None
    progress: bool = False
    lines: bool = False
    replay: object = None
    command: str = "run"

    def __post_init__(self) -> None:
        if self.name is not None and self.model is None:
            raise FieldError("name", "{name} names a {model}; built-in archs keep their names")
        if self.model is not None and self.archs and self.command == "run":
            raise FieldError("model", "give either {model} or {archs}, not both (run the built-in archs separately)")
        if self.command == "train" and (self.archs is None) == (self.model is None):
            raise FieldError("archs", "give exactly one of {archs} (a built-in architecture) and {model} (your own)")
        if self.tuning is not None and "lr" in self.train_args:
            raise FieldError("train_args", "{train_args} lr=...: {tuning} chooses the learning rate, a fixed one "
                             "would be dropped (rule: a tuned run trains at the rate its search picks; give the rates "
                             "to try as {tune_args} lrs=[...])")

    @property
    def group(self) -> str:
        """The rows' group: one per preset, for `run` and `train` alike."""
        return f"run-{self.preset}"

    @property
    def torch_threads(self) -> int:
        return self.threads or DEFAULT_THREADS

    def train(self) -> dict:
        """The TrainConfig fields set for every job: `train_args` and the learning-curve options,
        checked by TrainConfig's rules (none: the preset's training)."""
        out: dict = {}
        if self.no_curves:
            if self.until is not None:
                raise FieldError("until", "{until} reads the learning curves: it cannot be combined with {no_curves}")
            out["curves"] = False
        for name in ("until", "until_metric", "curve_every", "curve_sequences"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if "until_metric" in out and "until" not in out:
            raise FieldError("until_metric", "{until_metric} names the metric {until} reads: give {until} too")
        given = check_train_args(self.train_args)
        for key in set(given) & set(out):
            raise FieldError("train_args", f"{{train_args}} {key}=...: its own option sets it ({_OPTION_OF[key]})")
        merged = {**out, **given}
        check_settings(merged, lambda f: f"{{train_args}} {f}" if f in given else _OPTION_OF.get(f, f"{{{f}}}"))
        return merged

    @classmethod
    def of(cls, settings: dict, *, command: str = "run", own: Iterable[str] = ()) -> RunRequest:
        """A request from settings by their names (keyword arguments, a settings file): each value
        checked by its field's rule and put in the field's form; None is not given. `own`: other
        names the caller takes, offered when a name is unknown. `tune`/`tune_args` make `tuning`."""
        known = [*SETTINGS, *own]
        values: dict = {}
        for key, value in settings.items():
            if key not in SETTINGS:
                close = difflib.get_close_matches(str(key), known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise FieldError(str(key), f"unknown setting {key!r}{hint}; settings: {', '.join(sorted(known))}")
            if value is not None:
                values[key] = SETTINGS[key](key, value)
        tune, tune_args = values.pop("tune", False), values.pop("tune_args", None)
        values.pop("resume", None)  # no effect: a rerun always resumes
        if tune or tune_args:
            values["tuning"] = dict(tune_args or {})
        if "no_progress" in values:
            values.pop("no_progress")
        return cls(command=command, **values)


# ---------------------------------------------------------------- each value's rule

def _wrong(name: str, rule: str, value) -> FieldError:
    return FieldError(name, f"{{{name}}} must be {rule}, got {value!r}")


def _positive(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _wrong(name, "a positive integer", value)
    return value


def _count(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _wrong(name, "an integer >= 0", value)
    return value


def _flag(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise _wrong(name, "true or false", value)
    return value


def _text(name: str, value) -> str:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise _wrong(name, "a string", value)
    return value


def _names(name: str, value) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) for v in value):
        raise _wrong(name, "a list of names (or one name)", value)
    return tuple(v for item in value for v in item.split(",") if v)


def _one_of(choices: Callable[[], Iterable[str]]):
    def check(name: str, value) -> str:
        options = list(choices())
        if value not in options:
            raise _wrong(name, f"one of {', '.join(options)}", value)
        return value
    return check


def _seeds(name: str, value) -> tuple[int, ...]:
    """A count (seeds 0..N-1) or a list of distinct non-negative integer seeds."""
    if isinstance(value, range):
        value = list(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return tuple(range(_positive(name, value)))
    if not isinstance(value, (list, tuple)) or not all(isinstance(s, int) and not isinstance(s, bool) for s in value):
        raise _wrong(name, "a count or a list of integer seeds", value)
    if not value or len(set(value)) != len(value) or min(value) < 0:
        raise FieldError(name, f"{{{name}}} must list distinct non-negative integers, got {list(value)!r}")
    if max(value) > 2**63 - 1:
        raise FieldError(name, f"{{{name}}} seeds must be at most 2^63 - 1 (an int64), got {max(value)}")
    return tuple(value)


def _table(name: str, value) -> dict:
    """A table of settings: a dict, or KEY=VALUE strings (values read as JSON)."""
    import json

    if isinstance(value, str):
        value = [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        out: dict = {}
        for item in value:
            key, sep, raw = item.partition("=")
            if not sep or not key.strip().isidentifier():
                raise FieldError(name, f"{{{name}}} items must be KEY=VALUE with KEY a name, got {item!r}")
            if key.strip() in out:
                raise FieldError(name, f"{{{name}}}: {key.strip()} given twice")
            try:
                out[key.strip()] = json.loads(raw)
            except ValueError:
                out[key.strip()] = raw
        value = out
    if not isinstance(value, dict):
        raise _wrong(name, "a table of settings (e.g. {lr = 5e-4}) or KEY=VALUE items", value)
    for key in value:
        if not str(key).isidentifier():
            raise FieldError(name, f"{{{name}}}: {key!r} is not a setting name")
    value = {str(k): v for k, v in value.items()}
    if name == "train_args":
        check_train_args(value)
    if name == "tune_args":
        unknown = sorted(set(value) - set(TUNE_FIELDS))
        if unknown:
            raise FieldError(name, f"{{{name}}}: unknown setting(s) {unknown}; settings: {', '.join(TUNE_FIELDS)}")
    return value


def _until(name: str, value) -> float | str:
    from ..training.until import parse_until

    try:
        out = parse_until(value)
    except ValueError:
        out = None
    if out is None:
        raise _wrong(name, "a threshold in bits (a positive number, e.g. 0.1) or 'plateau'", value)
    return out


def _presets():
    from ..presets import PRESETS

    return sorted(PRESETS)


def _precisions():
    from ..training.config import PRECISIONS

    return PRECISIONS


def _curve_metrics():
    from ..metric_table import curve_metrics

    return curve_metrics()


#: The settings a request is made of by name (`RunRequest.of`), each with its value's rule.
SETTINGS: dict[str, Callable] = {
    "preset": _one_of(_presets), "tasks": _names, "archs": _names, "seeds": _seeds, "steps": _positive,
    "train_args": _table, "task_args": _table, "model_args": _table, "until": _until,
    "until_metric": _one_of(_curve_metrics), "curve_every": _positive, "curve_sequences": _positive,
    "no_curves": _flag, "tune": _flag, "tune_args": _table, "db": _text, "runs_dir": _text, "jobs": _positive,
    "ray": _text, "max_retries": _count, "threads": _positive, "device": _text,
    "attention": _one_of(lambda: ("sdpa", "eager", "triton")), "compile": _flag, "precision": _one_of(_precisions),
    "checkpoint_every": _positive, "eval_sequences": _positive, "model": _text, "name": _text,
    "log": _one_of(lambda: ("tensorboard", "wandb")), "no_progress": _flag, "resume": _flag,
}

#: Every name a rule may say (`FieldError` placeholders): the fields, the settings, and the names
#: the train command gives its one task and arch, with the replay's and config's.
NAMES = frozenset({f.name for f in dataclasses.fields(RunRequest)} | set(SETTINGS)
                  | {"task", "arch", "config", "replay", "tuning"})


def check_folder(name: str, path: str) -> str:
    """A folder setting (`runs_dir`): a folder, or a path where one can be made."""
    probe = path
    while probe and not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if probe and not os.path.isdir(probe):
        what = "is a file" if probe == path else f"lies under the file {probe}"
        raise FieldError(name, f"{{{name}}} {path} {what}; give a folder (it is created if missing)")
    return path


# ---------------------------------------------------------------- training settings

# The option that sets each TrainConfig field `RunRequest.train` fills from its own settings.
_OPTION_OF = {"curves": "{no_curves}", "until": "{until}", "until_metric": "{until_metric}",
              "curve_every": "{curve_every}", "curve_sequences": "{curve_sequences}"}

# The TrainConfig fields train_args may not set: each has its own setting.
_OWN_SETTING = ("steps", "checkpoint_every", "compile", "precision")


def check_settings(settings: dict, source: Callable[[str], str]) -> None:
    """TrainConfig's own rules on `settings` (`TrainConfig.check_settings`), its error prefixed with
    where each setting involved came from (`source(field)`, e.g. '{train_args} beta1'): a rule
    about one setting reads "{train_args} beta1 must be ...", one between settings names them all."""
    from ..checks import SettingError
    from ..training.config import TrainConfig

    try:
        TrainConfig.check_settings(settings)
    except SettingError as err:
        fields = [f for f in err.fields if f in settings] or list(err.fields)
        first = str(err).split(" ", 1)
        if len(fields) == 1 and first[0] == fields[0]:  # "beta1 must be ..." -> "{train_args} beta1 must be ..."
            raise field_error(ValueError(first[1]), "train_args", f"{source(fields[0])} ") from None
        raise field_error(err, "train_args", f"{' with '.join(source(f) for f in fields)}: ") from None


def check_train_args(values: dict) -> dict:
    """train_args against TrainConfig's fields and rules: an unknown field (with the nearest
    name), a field with its own setting, or a value the field's rule refuses (its type or range,
    `TrainConfig.__post_init__`) is one FieldError: "{train_args} beta1 must be a number in [0, 1),
    got 1.5"."""
    from ..training.config import TrainConfig

    fields = {f.name: f.type for f in dataclasses.fields(TrainConfig)}
    out = {}
    for key, value in values.items():
        if key in _OWN_SETTING:
            raise FieldError("train_args", f"{{train_args}}: {key} has its own option, {{{key}}}")
        if key not in fields:
            close = difflib.get_close_matches(key, list(fields), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise FieldError("train_args", f"{{train_args}}: unknown training setting {key!r}{hint}; settings: "
                             f"{', '.join(k for k in fields if k not in _OWN_SETTING)}")
        if str(fields[key]) == "float" and not isinstance(value, bool):
            value = _as_float(value)  # 'inf', 'nan' (text) and 1 (an int) as numbers: the range rule judges them
        out[key] = value
    check_settings(out, lambda f: f"{{train_args}} {f}")
    return out


def _as_float(value):
    """A number (or the text of one, e.g. 'inf') as a float; anything else unchanged."""
    try:
        return float(value) if isinstance(value, (int, float, str)) else value
    except ValueError:
        return value
