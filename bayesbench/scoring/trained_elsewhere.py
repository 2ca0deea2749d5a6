"""Score a model trained anywhere: `bayesbench.evaluate_model(model, task)` and `bayesbench score`.

Both evaluate on the task's fixed evaluation sets (the ones every leaderboard row uses: same
sequences, same exact posterior, same positions), write one run record per member to the
results store under the model's name, and return those records (`RunRecord`): entropy MAE and
KL in bits with 95% intervals over sequences, every evaluation length (HMM: K = 20, 30, 50),
per-position curves.

A plain `nn.Module` (tokens [B, L] (+ header) -> logits [B, L, C]) is adapted as one member;
an ensemble-native model (the zoo's, or `from_module`'s) is scored member by member. Nothing is
written when the model fails its trial forward (wrong shape, NaN/inf logits) or a checkpoint
does not fit the architecture.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence

import torch
from torch import nn

from .. import trust
from ..checks import positive_int
from ..identity import RunSpec
from ..models import EnsembleModel, TaskShape
from ..models.adapter import AdaptedModel, from_modules
from ..tasks import Task, task_from_config
from ..training.checkpoint import check_code, run_code
from ..training.result import TrainResult
from .evaluate import DEFAULT_SEQUENCES, evaluation_tasks, max_eval_len

DEFAULT_PRESET = "quick"


def resolve_task(task, preset: str = DEFAULT_PRESET) -> tuple[Task, str, tuple[int, ...], int, tuple[str, ...]]:
    """(task, leaderboard label, evaluation lengths, evaluation sequences, scored-position
    variants) for a Task or a preset's
    task key. A Task equal to one of the preset's takes that setup's label and evaluations, so
    its rows sit in the same leaderboard rows as the preset's runs."""
    from ..presets import get_preset

    p = get_preset(preset)
    if isinstance(task, str):
        if task not in p.tasks:
            raise ValueError(f"task {task!r} is not in preset {preset!r}; available: {', '.join(p.tasks)}")
        setup = p.tasks[task]
        return (task_from_config(setup.task), setup.label, tuple(setup.eval_lengths), setup.eval_sequences,
                tuple(setup.eval_scored))
    if not isinstance(task, Task):
        raise ValueError(f"task must be a Task or a task key of preset {preset!r} ({', '.join(p.tasks)}), "
                         f"got {type(task).__name__}")
    for setup in p.tasks.values():
        if task_from_config(setup.task) == task:
            return task, setup.label, tuple(setup.eval_lengths), setup.eval_sequences, tuple(setup.eval_scored)
    return task, task.describe(), (), DEFAULT_SEQUENCES, ()


def model_spec(task, preset: str = DEFAULT_PRESET) -> TaskShape:
    """The spec a factory gets for `task` (a Task or a preset task key): its sizes, with max_len
    covering the longest evaluation sequence. Build a model you train yourself with it, and
    `bayesbench score` / `evaluate_model` can score it."""
    t, _, lengths, _, scored = resolve_task(task, preset)
    return TaskShape.from_task(t, max_eval_len(t, lengths, scored))


def check_ensemble_output(model: EnsembleModel, task: Task, *, source: str = "model") -> None:
    """A trial forward of an ensemble on two sequences of `task` (give the longest evaluation
    task): logits [E, B, L, C], finite; anything else is a ValueError naming what is wrong."""
    g = torch.Generator().manual_seed(0)
    batch = task.sample(2, g)
    device = next(model.parameters()).device
    E = model.ensemble
    tokens = batch.tokens.to(device).unsqueeze(0).expand(E, *batch.tokens.shape)
    header = None if batch.header is None else batch.header.to(device).unsqueeze(0).expand(E, *batch.header.shape)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model(tokens, header)
    except ValueError:
        raise
    except Exception as err:  # any error: the user's model failing is the user's error
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else ''
        raise ValueError(f"model: forward failed on tokens {list(tokens.shape)} of {task.describe()}: "
                         f"{type(err).__name__}: {first_line}") from err
    finally:
        model.train(was_training)
    want = (E, *batch.tokens.shape, task.num_classes)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != want:
        got = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(f"model: logits must have shape [E={E}, B, L, C={task.num_classes}] (one slice per "
                         f"member: the seed dimension first), got {got} for tokens {list(tokens.shape)}")
    if not bool(torch.isfinite(out).all()):
        bad = [e for e in range(E) if not bool(torch.isfinite(out[e]).all())]
        raise ValueError(f"{source}: the logits of member(s) {bad} contain NaN or inf"
                         + ("" if source == "model" else " (its weights are not finite, or overflow)"))


def evaluate_model(model: nn.Module, task, *, name: str | None = None, db: str | None = None,
                   preset: str = DEFAULT_PRESET, seeds: list[int] | None = None, steps: int = 0,
                   eval_sequences: int | None = None, store: bool = True, spec: str | None = None,
                   device: str | None = None, run_id: str | None = None) -> list:
    """Score `model` on `task` (a Task or a preset task key) and store it; returns one RunRecord per member.

    `model`: a plain nn.Module (one member; it must accept the spec's longest evaluation length,
    `max_eval_len`) or an EnsembleModel. `name` is its leaderboard name (default: its class
    name); `seeds` label the members (default: the model's own, else 0..E-1); `steps` says how
    long it was trained (0: unknown, trained outside bayesbench). With `store=False` nothing is
    written and the rows are only returned. `run_id` (default: a fresh one) is the rows' key: the
    same run id replaces the rows stored under it.
    """
    from .rows import score_run, scored_code

    if eval_sequences is not None:
        positive_int("eval_sequences", eval_sequences, "evaluation sequences; None: the preset's")
    task, label, lengths, n_seq, scored = resolve_task(task, preset)
    max_len = max_eval_len(task, lengths, scored)
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(model, EnsembleModel):
        model = from_modules([model], TaskShape.from_task(task, max_len), seeds=seeds, spec=spec)
    elif model.shape.max_len < max_len:
        raise ValueError(f"model: its max_len {model.shape.max_len} does not cover the longest evaluation "
                         f"sequence ({max_len} tokens); build it with max_len={max_len}")
    if seeds is not None:
        if len(seeds) != model.ensemble:
            raise ValueError(f"seeds must have one entry per member ({model.ensemble}), got {len(seeds)}")
        model.seeds = [int(s) for s in seeds]
    if not model.seeds:
        model.seeds = list(range(model.ensemble))
    longest = max(evaluation_tasks(task, lengths, scored).values(), key=lambda t: t.seq_len)
    check_ensemble_output(model, longest)
    name = name or (type(model.template).__name__ if isinstance(model, AdaptedModel) else type(model).__name__)
    check_name(name)
    arch = model.cfg.spec if isinstance(model, AdaptedModel) else name
    run_spec = scored_spec(task, label, lengths, scored, eval_sequences or n_seq, arch=arch,
                           model=dict(getattr(model, "options", {}) or {}), max_len=model.shape.max_len,
                           device_type=next(model.parameters()).device.type, code=scored_code(task, arch, model))
    result = scored_result(run_spec, run_id or uuid.uuid4().hex[:12], model, list(model.seeds), int(steps),
                           preset=preset, name=name)
    return score_run(result, db=db, device=device or str(next(model.parameters()).device), write=store)


def scored_spec(task: Task, label: str, lengths: Sequence[int], scored: Sequence[str], n_sequences: int, *,
                arch: str, model: dict, max_len: int, device_type: str, code: dict) -> RunSpec:
    """The spec (`bayesbench.identity.RunSpec`) of a model scored without training here (a model
    given to `evaluate_model`, a state dict or predictions files given to `bayesbench score`): no
    training, the torch threads it is scored with; the one place such a run's identity is made."""
    return RunSpec(task=task.config(), label=label, eval_lengths=tuple(int(k) for k in lengths),
                   eval_scored=tuple(scored), eval_sequences=n_sequences, arch=arch, model=model, max_len=max_len,
                   train=None, device_type=device_type, threads=torch.get_num_threads(), code=code)


def scored_result(spec: RunSpec, run_id: str, model, seeds: list[int], steps: int, *, preset: str,
                  name: str) -> TrainResult:
    """A model scored without training here as the `TrainResult` the scorer takes
    (`scoring.rows.score_run`): the identity, label and evaluation read from `spec`, no losses."""
    meta = {"preset": preset, "label": spec.label, "name": name, "eval_lengths": list(spec.eval_lengths),
            "eval_scored": list(spec.eval_scored), "eval_sequences": spec.eval_sequences, "scored_only": True}
    return TrainResult(run_id, model, seeds, steps, torch.zeros(0, len(seeds)), 0.0, {}, None,
                       {**spec.identity, "seeds": list(seeds)}, meta, code=dict(spec.code or {}))


def check_name(name: str) -> str:
    """A leaderboard name: non-empty, no whitespace or path separators, not a built-in architecture."""
    from ..models import list_models

    if not isinstance(name, str) or not name or any(c.isspace() for c in name) or "/" in name or os.sep in name:
        raise ValueError(f"name must be a non-empty word without spaces or '/', got {name!r}")
    if name in list_models():
        raise ValueError(f"name {name!r} is a built-in architecture; choose another name for your model")
    return name


# ---------------------------------------------------------------- checkpoints

def _read_checkpoint(path: str, device: str):
    if os.path.isdir(path):
        inside = os.path.join(path, "checkpoint.pt")
        hint = f": give its checkpoint, {inside}" if os.path.isfile(inside) else ""
        raise ValueError(f"--checkpoint {path} is a folder{hint} (a state dict file or a bayesbench checkpoint.pt)")
    if not os.path.isfile(path):
        raise ValueError(f"--checkpoint: no such file {path}")
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except Exception as err:  # any error of torch.load: the file is not what it must be, said in one line
        from ..training.checkpoint import load_failure

        raise ValueError(f"--checkpoint {path} is not a checkpoint or a state dict ({load_failure(path, err)})") \
            from None


def _state_dict_of(obj, path: str) -> dict:
    for key in ("state_dict", "model"):
        if isinstance(obj, dict) and isinstance(obj.get(key), dict):
            obj = obj[key]
            break
    if not isinstance(obj, dict) or not obj or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise ValueError(f"--checkpoint {path}: expected a state dict (module.state_dict(), or a bayesbench "
                         "checkpoint.pt), found none")
    return obj


def load_into(module: nn.Module, state: dict, path: str, spec: str) -> None:
    """module.load_state_dict(state), with a mismatch reported as one line naming what differs."""
    mine = module.state_dict()
    missing = [k for k in mine if k not in state]
    unexpected = [k for k in state if k not in mine]
    shapes = [f"{k} {list(state[k].shape)} there, {list(v.shape)} here" for k, v in mine.items()
              if k in state and tuple(state[k].shape) != tuple(v.shape)]
    if missing or unexpected or shapes:
        parts = []
        if missing:
            parts.append(f"missing {missing[:3]}{' ...' if len(missing) > 3 else ''}")
        if unexpected:
            parts.append(f"unexpected {unexpected[:3]}{' ...' if len(unexpected) > 3 else ''}")
        if shapes:
            parts.append(f"shapes differ: {'; '.join(shapes[:3])}")
        raise ValueError(f"--checkpoint {path} holds another architecture than {spec}: {', '.join(parts)}")
    module.load_state_dict(state)


def score_checkpoint(spec: str, path: str, *, task: str | None = None, name: str | None = None,
                     preset: str = DEFAULT_PRESET, seed: int = 0, db: str | None = None,
                     eval_sequences: int | None = None, device: str = "cpu", steps: int = 0) -> list:
    """`bayesbench score`: the model `spec` with the weights in `path`, scored and stored.

    `path` is either a bayesbench checkpoint (`runs/.../checkpoint.pt`: every member, its task
    and sizes come from it) or a plain `state_dict()` of one module built by the factory for
    `task` (a preset task key; required then).

    A bayesbench checkpoint is that run scored again: its rows are replaced (same run id, steps,
    wall time and training curve), not added beside it as more seeds; under another `name` it is
    stored once under that name (run id `<run id>-<name>`, replaced on the next score).
    `steps`: how long a plain state dict's model was trained, as its user states it (0: not stated);
    a bayesbench checkpoint records its own.
    """
    from ..checks import int_at_least

    int_at_least("--steps", steps, 0, "the steps the model was trained, as stated; 0: not stated")
    from ..models.outside import default_name, load_factory, normalise

    spec = normalise(spec)
    factory = load_factory(spec)
    obj = _read_checkpoint(path, device)
    if isinstance(obj, dict) and "identity" in obj and "model" in obj:  # a bayesbench trainer checkpoint
        ident = obj["identity"]
        if steps:
            raise ValueError(f"--steps goes with a plain state dict or --predictions: the bayesbench checkpoint {path} "
                             f"records its own steps ({obj.get('step')})")
        if ident.get("arch") != spec:
            raise ValueError(f"--checkpoint {path} was trained as model {ident.get('arch')!r}, not {spec!r} "
                             "(for a built-in architecture use `bayesbench eval`)")
        with trust.source(path):  # a tunnel the checkpoint names: imported only when trusted
            ckpt_task = task_from_config(ident["task"])
        code = run_code(ckpt_task, spec)
        check_code(path, ident, obj.get("code"), code)  # an edited model file: say so, not "another architecture"
        if task is not None:
            wanted = resolve_task(task, preset)[0]
            if wanted != ckpt_task:
                raise ValueError(f"--task {task}: the checkpoint was trained on {ckpt_task.describe()}, "
                                 f"not {wanted.describe()}")
        from ..models import get_model

        model = get_model(spec, ckpt_task, seeds=ident["seeds"], max_len=ident["max_len"], **ident["model"])
        load_into(model, obj["model"], path, spec)
        return _rescore_run(obj, model.to(device), ckpt_task, path, name, default_name(spec), db=db,
                            eval_sequences=eval_sequences, device=device, code=code)
    if task is None:
        raise ValueError("--task is needed to score a plain state dict (which preset task it was trained on)")
    state = _state_dict_of(obj, path)
    shape = model_spec(task, preset)
    with torch.random.fork_rng(devices=[]):
        module = factory(shape)
    if not isinstance(module, nn.Module):
        raise ValueError(f"model {spec!r}: the factory must return a torch.nn.Module, got {type(module).__name__}")
    load_into(module, {k: v.to("cpu") for k, v in state.items()}, path, spec)
    model = from_modules([module], shape, seeds=[seed], spec=spec)
    name = name or default_name(spec)
    return evaluate_model(model.to(device), task, name=name, db=db, preset=preset, eval_sequences=eval_sequences,
                          device=device, run_id=_file_run_id(path, name, task, preset, seed), steps=steps)


def _rescore_run(obj: dict, model: EnsembleModel, task: Task, path: str, name: str | None, default: str, *,
                 db: str | None, eval_sequences: int | None, device: str, code: dict) -> list:
    """Score a bayesbench trainer checkpoint's run again (see `score_checkpoint`)."""
    from .rows import score_run

    meta = dict(obj.get("meta") or {})
    stored_name = meta.get("name") or default
    name = check_name(name) if name else stored_name
    run_id = obj["run_id"] if name == stored_name else f"{obj['run_id']}-{name}"
    meta["name"] = name
    if eval_sequences is not None:
        meta["eval_sequences"] = eval_sequences
    lengths, scored = tuple(meta.get("eval_lengths", ())), tuple(meta.get("eval_scored", ()))
    longest = max(evaluation_tasks(task, lengths, scored).values(), key=lambda t: t.seq_len)
    check_ensemble_output(model, longest, source=f"--checkpoint {path}")
    result = TrainResult(run_id, model, list(obj["identity"]["seeds"]), int(obj["step"]), obj["losses"].cpu(),
                         float(obj["elapsed"]), dict(obj["diverged"]), path, obj["identity"], meta, code=code)
    return score_run(result, db=db, device=device)


def _file_run_id(path: str, name: str, task: str, preset: str, seed: int) -> str:
    """A stable run id for a scored state-dict file: scoring the same weights again under the same
    name, task, preset and seed replaces their row instead of adding one beside it."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    digest.update(f"\0{name}\0{task}\0{preset}\0{seed}".encode())
    return "score-" + digest.hexdigest()[:12]
