"""A command's settings as data: the keys of `bayesbench run`'s (and `train`'s) options, from a
TOML file (`run --config FILE`), from a stored run (`run --replay RUN_DIR/run.json`), from
keyword arguments (`bayesbench.run(...)`, `bayesbench/api.py`), and written back as TOML
(`run --print-config`) that `--config` reads again.

    bayesbench run --tasks bijection --archs mlp --steps 20 --print-config > tiny.toml
    bayesbench run --config tiny.toml

A key is an option's name with `_` for `-` (`eval_sequences` for `--eval-sequences`): the keys are
read off the command's parser, so a new option is a new key. Each value is checked by the
option's own rule (type, choices), and a mistake is one error naming the key and where it came
from ("tiny.toml: steps must be a positive integer, got 0"). `--train-args`, `--task-args`,
`--model-args` and `--tune-args` are tables (keyword arguments also take them as KEY=VALUE
strings). `seeds` is a count (seeds 0..N-1, as `--seeds N`) or a list of seeds.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

from .args import seed_list

# Options that are not settings: how the command is called, not what it runs.
NOT_SETTINGS = frozenset({"help", "debug", "config", "replay", "print_config", "json", "trust_code"})
# Settings that change no number of a run: where it is stored and how it is driven. `--replay`
# accepts these beside it; every other setting would change what the stored run ran.
PLACEMENT = frozenset({"db", "runs_dir", "no_progress", "jobs", "ray", "max_retries", "resume", "log"})
TABLES = ("train_args", "task_args", "model_args", "tune_args")  # KEY=VALUE options: tables in TOML


def command_parser(command: str) -> argparse.ArgumentParser:
    """The parser of `bayesbench COMMAND` (building it imports no torch)."""
    from . import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


def setting_actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """dest -> option of every setting of a command's parser."""
    return {a.dest: a for a in parser._actions if a.option_strings and a.dest not in NOT_SETTINGS}


def defaults(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The namespace a command line without options gives (every setting at its default)."""
    return argparse.Namespace(**{a.dest: a.default for a in parser._actions if a.dest != argparse.SUPPRESS
                                 and a.default != argparse.SUPPRESS})


def check_value(action: argparse.Action, value, where: str):
    """`value` for the option `action` as its parser would hold it, by the option's own rule;
    a ValueError starting with `where` (e.g. "tiny.toml: steps") otherwise."""
    name = action.dest
    if isinstance(action, argparse._StoreTrueAction):
        if not isinstance(value, bool):
            raise ValueError(f"{where} must be true or false, got {value!r}")
        return value
    if name in TABLES:
        if isinstance(value, str):
            value = [value]
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):  # [] as no items: {}
            from .args import as_dict  # KEY=VALUE items, as the command line takes them: read as it reads them

            try:
                parse: Callable = action.type  # type: ignore[assignment]  # `args.key_values`' parser
                value = as_dict(where, [parse(v) for v in value])
            except argparse.ArgumentTypeError as err:
                raise ValueError(f"{where} {err}") from None
        if not isinstance(value, dict):
            raise ValueError(f"{where} must be a table of settings (e.g. {{lr = 5e-4}}) or KEY=VALUE items, "
                             f"got {value!r}")
        for key in value:
            if not str(key).isidentifier():
                raise ValueError(f"{where}: {key!r} is not a setting name")
        if name == "train_args":  # TrainConfig's fields and rules, checked here to name the file
            from .args import check_train_args

            try:
                check_train_args(value)
            except ValueError as err:
                raise ValueError(str(err).replace("--train-args", where, 1)) from None
        if name == "tune_args":  # the search's fields (`sweep.tune.TuneSpec`); their values are checked per job
            from ..sweep.tune import TuneSpec

            unknown = sorted(set(map(str, value)) - set(TuneSpec.FIELDS))
            if unknown:
                raise ValueError(f"{where}: unknown setting(s) {unknown}; settings: {', '.join(TuneSpec.FIELDS)}")
        return [(str(k), v) for k, v in value.items()]  # what `args.key_values` makes of KEY=VALUE items
    if name == "seeds" and isinstance(value, range):
        value = list(value)
    if name == "seeds" and isinstance(value, (list, tuple)):  # explicit seeds (a count is the option's rule)
        if not all(isinstance(s, int) and not isinstance(s, bool) for s in value):
            raise ValueError(f"{where} must be a count or a list of integer seeds, got {value!r}")
        try:
            return seed_list(",".join(str(s) for s in value)) if value else seed_list("")
        except argparse.ArgumentTypeError as err:
            raise ValueError(f"{where} {err}") from None
    if name == "seeds" and (isinstance(value, bool) or not isinstance(value, (int, str))):
        raise ValueError(f"{where} must be a count or a list of integer seeds, got {value!r}")
    if action.nargs == "+":  # a list of names: a list, or one string with commas
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{where} must be a list of names (or one name), got {value!r}")
        return list(value)
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"{where} must be {'a number' if action.type else 'a string'}, got {value!r}")
    if callable(action.type):
        try:
            value = action.type(str(value))
        except argparse.ArgumentTypeError as err:
            raise ValueError(f"{where} {err}") from None
    elif not isinstance(value, str):
        raise ValueError(f"{where} must be a string, got {value!r}")
    if action.choices is not None and value not in action.choices:
        raise ValueError(f"{where} must be one of {', '.join(map(str, action.choices))}, got {value!r}")
    return value


def unknown_key(key: str, known, source: str) -> ValueError:
    """The error for a key no option has: the nearest name, and every key."""
    close = difflib.get_close_matches(key, list(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ValueError(f"{source}: unknown setting {key!r}{hint}; settings: {', '.join(sorted(known))}")


def checked(parser: argparse.ArgumentParser, settings: dict, where: Callable[[str], str], source: str) -> dict:
    """`settings` (key -> value; `-` or `_` in keys) checked against the command's options, as
    dest -> the value its parser would hold."""
    actions = setting_actions(parser)
    out = {}
    for key, value in settings.items():
        dest = str(key).replace("-", "_")
        if dest not in actions:
            raise unknown_key(str(key), actions, source)
        out[dest] = check_value(actions[dest], value, where(dest))
    return out


# ---------------------------------------------------------------- TOML

def read_toml(path: str, parser: argparse.ArgumentParser, option: str = "--config ") -> dict:
    """The settings of a TOML file (top-level keys, tables for the KEY=VALUE options), checked:
    dest -> value. An unreadable file, bad TOML or an unknown key is one error naming the file
    (after `option`, how the caller names the file's setting)."""
    from ..checks import read_toml as read_toml_file

    try:
        data = read_toml_file(path)
    except FileNotFoundError:
        raise ValueError(f"{option}{path}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"{option}{path} is a folder; give a TOML file") from None
    except ValueError as err:
        raise ValueError(f"{option}{path} {err}") from None
    return checked(parser, data, lambda key: f"{path}: {key}", f"{option}{path}")


def file_settings(path: str, command: str, option: str = "") -> dict:
    """The settings of a TOML file for `bayesbench COMMAND` as plain data (name -> value; the
    KEY=VALUE options as dicts), checked by the command's options: what `bayesbench.run(config=...)`
    makes its `RunRequest` of (`api.py`)."""
    values = read_toml(path, command_parser(command), option)
    return {k: dict(v) if k in TABLES else v for k, v in values.items()}


def toml_value(value, where: str) -> str:
    """One TOML value (a string, number, boolean, a list of them or an inline table)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value:
            return "nan"
        if value in (float("inf"), float("-inf")):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string: JSON's escapes are TOML's
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v, where) for v in value) + "]"
    if isinstance(value, dict):  # a table inside a table: `axes = {warmup_steps = [0, 100]}`
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(v, f'{where}.{k}')}" for k, v in value.items()) + "}"
    raise ValueError(f"{where}: {value!r} has no TOML form (strings, numbers, booleans, lists and tables of them)")


def toml_key(key) -> str:
    """A TOML key: bare when it can be, else quoted."""
    key = str(key)
    return key if key and all(c.isalnum() or c in "_-" for c in key) and key.isascii() else json.dumps(key)


def to_toml(settings: dict, comments: Sequence[str] = ()) -> str:
    """`settings` (dest -> value as the parser holds it) as TOML that `read_toml` reads back to
    the same values: scalars first, then one table per KEY=VALUE option; `comments` above."""
    lines = [f"# {c}" if c else "#" for c in comments]
    tables = []
    for key, value in settings.items():
        if key in TABLES:
            if value:
                tables.append((key, dict(value)))
        elif value is not None:
            lines.append(f"{key} = {toml_value(value, key)}")
    for key, table in tables:
        lines += ["", f"[{key}]"]
        lines += [f"{toml_key(k)} = {toml_value(v, f'{key}.{k}')}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def given(args: argparse.Namespace, parser: argparse.ArgumentParser, *, placement: bool = True) -> dict:
    """The settings of a parsed command line that differ from their defaults: dest -> value
    (without `PLACEMENT`'s unless `placement`)."""
    out = {}
    for dest, action in setting_actions(parser).items():
        value = getattr(args, dest, action.default)
        if value != action.default and (placement or dest not in PLACEMENT):
            out[dest] = value
    return out


class ConfigAction(argparse.Action):
    """`--config FILE`: the file's settings set where the option stands on the command line; a
    flag given before it with a value of its own keeps it, a flag after it overrides the file."""

    def __call__(self, parser, namespace, values, option_string=None):
        try:
            settings = read_toml(values, parser)
        except ValueError as err:  # argparse's way: "argument --config: ...", exit 2
            raise argparse.ArgumentError(self, str(err).removeprefix("--config ")) from None
        actions = setting_actions(parser)
        from_file = dict(getattr(namespace, "config_values", None) or {})
        for dest, value in settings.items():
            before = getattr(namespace, dest, None)
            if before == actions[dest].default:  # not given before --config
                setattr(namespace, dest, value)
                from_file[dest] = (values, value)
            elif dest in TABLES:  # a KEY=VALUE flag before it: its keys over the file's
                setattr(namespace, dest, list({**dict(value), **dict(before or {})}.items()))
        setattr(namespace, self.dest, values)
        namespace.config_values = from_file  # dest -> (file, value): `in_file_terms` names the file


def merge_file_tables(args: argparse.Namespace) -> None:
    """A KEY=VALUE flag after --config overrides the file's table key by key: `--config f.toml
    --train-args lr=2e-3` keeps the file's other training settings (not the preset's)."""
    for dest, (_path, file_value) in (getattr(args, "config_values", None) or {}).items():
        now = getattr(args, dest, None)
        if dest in TABLES and now is not None and now != file_value:
            setattr(args, dest, list({**dict(file_value), **dict(now)}.items()))


def in_file_terms(message: str, args: argparse.Namespace) -> str:
    """A command's error about an option whose value came from a --config file, naming the file
    and its key ("tiny.toml: task_args for task ..."), not the flag the user never typed."""
    for dest, (path, value) in (getattr(args, "config_values", None) or {}).items():
        flag = "--" + dest.replace("_", "-")
        if message.startswith(flag) and getattr(args, dest, None) == value:
            return f"{path}: {dest}{message[len(flag):]}"
    return message


# ---------------------------------------------------------------- a stored run

def read_run_file(path: str) -> dict:
    """A run.json document (`store/run_file.py`); a run directory stands for its run.json."""
    from ..store.run_file import RUN_FILE
    from ..sweep.request import FieldError

    if not str(path).strip():  # an unset shell variable: never the whole preset instead
        raise FieldError("replay", f"{{replay}} is empty: give a stored run's {RUN_FILE} or its run directory")
    if os.path.isdir(path):
        path = os.path.join(path, RUN_FILE)
    try:
        with open(path) as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise FieldError("replay", f"{{replay}} {path}: no such file (give a run directory or its "
                         f"{RUN_FILE})") from None
    except (ValueError, UnicodeDecodeError) as err:
        raise FieldError("replay", f"{{replay}} {path} is not a run file (JSON): {err}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict) \
            or not isinstance(doc["config"].get("identity"), dict):
        raise FieldError("replay", f"{{replay}} {path}: not a run.json with the run's identity (written by bayesbench "
                         "run, train or sweep from version 0.1.0)")
    try:
        check_run_document(doc, f"{{replay}} {path}")
    except ValueError as err:
        raise FieldError("replay", str(err)) from None
    return doc


def check_run_document(doc: dict, where: str) -> None:
    """The fields of a run.json that a replay reads, each of the type it must be; a ValueError
    naming `where` and the first field that is missing or wrong ("config.identity.task is missing")."""
    ident = doc["config"]["identity"]

    def wrong(field: str, rule: str, value=None, missing: bool = False) -> ValueError:
        return ValueError(f"{where}: {field} is missing (it must be {rule})" if missing else
                          f"{where}: {field} must be {rule}, got {value!r}")

    task = ident.get("task")
    if "task" not in ident:
        raise wrong("config.identity.task", "the task's configuration, a table with its name", missing=True)
    if not isinstance(task, dict) or not isinstance(task.get("task"), str):
        raise wrong("config.identity.task", "the task's configuration, a table with its name (task = ...)", task)
    for field, rule in (("label", "the task's label, a string"), ("arch", "the architecture's name, a string")):
        if field not in ident:
            raise wrong(f"config.identity.{field}", rule, missing=True)
        if not isinstance(ident[field], str):
            raise wrong(f"config.identity.{field}", rule, ident[field])
    for field in ("train", "model", "tuning"):
        if ident.get(field) is not None and not isinstance(ident[field], dict):
            raise wrong(f"config.identity.{field}", "a table", ident[field])
    per_seed = doc.get("seeds", [])
    if not isinstance(per_seed, list) or not all(isinstance(s, dict) and _is_seed(s.get("seed"))
                                                 and isinstance(s.get("evals", {}), dict) for s in per_seed):
        raise wrong("seeds", "a list of per-seed results, each with a non-negative integer seed and its evals",
                    per_seed)
    from ..store.records import EvalResult

    for i, seed in enumerate(per_seed):  # what the replay compares its numbers with, read before it trains
        loss = seed.get("final_loss_nats")
        if loss is not None and (isinstance(loss, bool) or not isinstance(loss, (int, float))):
            raise wrong(f"seeds[{i}].final_loss_nats", "a number or null", loss)
        for name, ev in seed.get("evals", {}).items():
            try:
                EvalResult.from_json(ev)
            except (AttributeError, KeyError, TypeError, ValueError) as err:
                raise ValueError(f"{where}: seeds[{i}].evals.{name} is not an evaluation's result as bayesbench "
                                 f"writes it ({type(err).__name__}: {err})") from None
    seeds = doc["config"].get("seeds")
    if seeds is not None and (not isinstance(seeds, list) or not all(_is_seed(s) for s in seeds)
                              or len(set(seeds)) != len(seeds)):
        raise wrong("config.seeds", "a list of distinct non-negative integer seeds", seeds)
    if not seeds and not per_seed:
        raise wrong("config.seeds", "a list of distinct non-negative integer seeds", missing=True)


def _is_seed(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# TrainConfig fields with an option of their own (`--train-args` refuses them).
_OWN_TRAIN_OPTIONS = ("steps", "precision", "compile", "checkpoint_every")


def replay_settings(doc: dict, path: str) -> dict:
    """The `run` settings that resolve to the stored run's job (dest -> value): its preset, task
    (the preset's task it was, its options over the preset's), architecture (its resolved model
    options, the capacity match as the parameter count it came to), seeds, every training field
    of its identity, evaluation set size, device type and threads. `cli/run.py` checks that they
    resolve to the stored identity before anything runs."""
    from ..presets import get_preset, labelled, options_label
    from ..sweep.jobs import preset_setup, preset_task_names
    from ..sweep.request import FieldError
    from ..tasks import task_from_config

    ident = doc["config"]["identity"]
    try:
        named: Any = doc.get("preset")  # checked by get_preset, whose error shows it as the file has it
        preset = get_preset(named)
    except ValueError as err:
        raise FieldError("replay", f"{{replay}} {path}: {err}") from None
    task = dict(ident["task"])
    key, options = None, {}
    for name in preset_task_names(preset):  # its own tasks, then every registered tunnel at its defaults
        setup = preset_setup(preset, name)
        if setup.task.get("task") != task.get("task"):
            continue
        base = task_from_config(setup.task).config()
        diff = {k: v for k, v in task.items() if k != "task" and base.get(k) != v}
        ran = task_from_config(task).config() if diff else base
        # the label says what ran (`presets.labelled`); a run.json of a store of schema 5 or
        # below says the options as given (`presets.options_label`)
        if ident["label"] in (labelled(setup.label, base, ran), options_label(setup.label, diff) if diff else None):
            key, options = name, diff
            break
    if key is None:
        raise FieldError("replay", f"{{replay}} {path}: its task {ident['label']!r} is none of preset "
                         f"{preset.name!r}'s tasks (an outside tunnel, or a preset changed since): run it with "
                         "{task} and the options it records")
    train = dict(ident.get("train") or {})
    if not train:
        raise FieldError("replay", f"{{replay}} {path}: the run was scored here, not trained here (no training "
                         "settings)")
    from ..models.registry import is_outside, list_models

    arch = ident["arch"]
    if not is_outside(arch) and arch not in list_models():
        raise FieldError("replay", f"{{replay}} {path}: its architecture {arch!r} is not one of this bayesbench's "
                         f"({', '.join(sorted(list_models()))})")
    settings: dict[str, Any] = {"preset": preset.name, "tasks": [key]}
    if is_outside(arch):
        settings.update(model=arch, name=doc.get("arch"))
    else:
        settings["archs"] = [arch]
    settings["seeds"] = [int(s) for s in doc["config"].get("seeds") or [s["seed"] for s in doc.get("seeds", [])]]
    for name in _OWN_TRAIN_OPTIONS:
        if name in train:
            settings[name] = train.pop(name)
    settings.update(eval_sequences=ident.get("eval_sequences"), device=ident.get("device_type"),
                    threads=ident.get("threads"))
    tuning = ident.get("tuning")
    if tuning:  # a tuned run: its search again (`run --tune`), which must choose what it chose
        if tuning.get("role") != "final":
            raise FieldError("replay", f"{{replay}} {path}: a selection job of a tuning (config.identity.tuning.role = "
                             f"{tuning.get('role')!r}), not a reported run: replay the tuned run it chose for")
        chosen = tuning.get("chosen")
        if not isinstance(chosen, dict) or not isinstance(chosen.get("lr"), (int, float)):
            raise FieldError("replay", f"{{replay}} {path}: config.identity.tuning.chosen must be the candidate "
                             f"the search chose, a table with its lr, got {chosen!r}")
        from ..sweep.tune import TuneSpec

        settings["tune"] = True
        try:
            where = f"{{replay}} {path}: config.identity.tuning"
            settings["tune_args"] = TuneSpec.of_identity(tuning, where).identity()
        except ValueError as err:
            raise FieldError("replay", str(err)) from None
        for name in tuning["chosen"]:  # what the search chooses, not a setting of the run
            train.pop(name, None)
    settings["train_args"] = train
    if options:
        settings["task_args"] = options
    if ident.get("model"):
        settings["model_args"] = {k: v for k, v in ident["model"].items() if v is not None}
    return {k: v for k, v in settings.items() if v is not None}
