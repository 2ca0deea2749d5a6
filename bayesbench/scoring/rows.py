"""A trained ensemble -> scored run records: one `RunRecord` per member, evaluated on the task's
fixed evaluation sets (`evaluate.evaluate`), with its configuration, training curve and
environment. Writing them is the store's (`store.database.write_records`).
"""

from __future__ import annotations

import dataclasses
import math

import torch

from .. import versions
from ..identity import identity_key
from ..metric_table import metric_versions
from ..models.base import other_float_dtypes
from ..models.state import no_model_record, state_record
from ..running.provenance import environment
from ..store.database import cache_dir_for, write_records
from ..store.records import LearningCurve, RunRecord
from ..training.config import MEMBER_LRS_RULE
from ..training.result import TrainResult, task_of
from .evaluate import DEFAULT_SEQUENCES, evaluate, evaluation_tasks


def scored_code(task, arch: str, model) -> dict:
    """The code of a model scored without training here (`bayesbench score`, `evaluate_model`):
    the tunnel's, and the model's when a name says where it came from (an outside model's
    contents, a built-in architecture's version); a Python object handed over is not recorded."""
    from ..models.registry import is_outside, list_models, model_code

    if isinstance(arch, str) and (is_outside(arch) or arch in list_models()):
        try:
            model_entry = model_code(arch)
        except ValueError:
            model_entry = {"contents": f"not recorded: {type(model).__name__} handed over in Python"}
    else:
        model_entry = {"contents": f"not recorded: {type(model).__name__} handed over in Python"}
    return {"task": task.code(), "model": model_entry}


def check_as_keyed(model, ident: dict) -> None:
    """Refuse to score a model that is not what its key says: every key stands for float32
    parameters (training keeps them so whatever `precision` says; evaluation runs in float32) on
    the key's device type. Outside code that changed torch's default dtype or device for the
    process would otherwise store its numbers under the key of a float32 run."""
    params = list(model.parameters()) if hasattr(model, "parameters") else []  # none: predictions given in a file
    name = ident.get("arch")
    dtypes = other_float_dtypes(model)
    if dtypes:
        raise ValueError(f"{name}: its parameters are {', '.join(dtypes)}, but its key says float32 (rule: a scored "
                         "model's parameters are float32: outside code that calls torch.set_default_dtype, or a "
                         "model that casts itself, would store other numbers under a float32 run's key)")
    device_type = ident.get("device_type")
    devices = sorted({p.device.type for p in params} - {device_type}) if device_type else []
    if devices:
        raise ValueError(f"{name}: its parameters are on {', '.join(devices)}, but its key says {device_type} (rule: "
                         "a scored model is on its key's device type)")


def _subsample(losses: torch.Tensor, member: int, points: int = 200) -> list[list[float]]:
    n = losses.shape[0]
    if n == 0:
        return []
    stride = max(1, -(-n // points))  # ceil: at most `points` windows
    out = []
    for start in range(0, n, stride):
        window = losses[start : start + stride, member]
        out.append([start + len(window), float(window.nanmean())])
    return out


def learning_curve(result: TrainResult, member: int, primary: str, primary_task: str) -> LearningCurve | None:
    """Member `member`'s learning curve from the run's, named by the evaluation it measures
    (`primary` when the curve set is drawn from that evaluation's task, else its task)."""
    c = result.curve
    if c is None or not c.steps:
        return None
    # a metric the task has no positions for (the bijection's cases elsewhere) has no uniform value either
    applies = {name for name in c.values if math.isfinite(c.uniform.get(name, math.nan))}
    return LearningCurve(eval=primary if c.task == primary_task else c.task, task=c.task, n_sequences=c.n_sequences,
                         step=list(c.steps), sequences=[s * c.batch_size for s in c.steps],
                         tokens=[s * c.batch_size * c.seq_len for s in c.steps], wall_s=list(c.wall_s),
                         values={name: c.member(member, name) for name in c.values if name in applies},
                         uniform={name: u for name, u in c.uniform.items() if name in applies},
                         cadence=c.cadence)


def stop_reason(result: TrainResult, member: int) -> str:
    """Why member `member` stopped training: "budget", "diverged" or its criterion's sentence."""
    if member in result.stopped:
        return result.stopped[member][2]
    return result.stop(member)[1]


def scored_state(model, length: int) -> dict | None:
    """A row's `config["state"]` (`models/state.py`), whatever made the row: the floats one member
    carries per sequence at the primary evaluation's length, counted from its layers' recurrent
    references (a model trained here, a checkpoint scored by `bayesbench eval` or `score --model`);
    'no model' for predictions made elsewhere (`bayesbench score --predictions`: nothing to count,
    and no number made up); None where it cannot be counted (an outside module with no recurrent
    reference, a language model read through a verbaliser)."""
    if getattr(model, "holds_model", True) is False:
        return no_model_record(length)
    if not isinstance(model, torch.nn.Module):
        return None
    return state_record(model, length)


def score_run(result: TrainResult, *, db: str | None = None, device: str = "cpu",
              cache_dir: str | None = None, write: bool = True) -> list[RunRecord]:
    """Evaluate a trained ensemble and write one record per seed (replacing that run's old ones).

    The row's arch is meta["name"] when given (an outside model's leaderboard name), else the
    identity's arch; identity["train"] is None for a model scored without training here.

    Evaluation sets are cached on disk beside the store (`<store folder>/cache`) unless
    `cache_dir` says otherwise, so parallel jobs and later `eval` calls reuse them.
    `write=False` only returns the records (a sweep's workers: the sweep driver writes them).
    """
    task, meta, ident = task_of(result), result.meta, result.identity
    if cache_dir is None:
        cache_dir = cache_dir_for(db)
    model = result.model
    check_as_keyed(model, ident)
    rates = (ident.get("train") or {}).get("member_lrs")
    if rates and len(set(rates)) > 1 and not ident.get("tuning"):  # a tuning's selection rows are its own
        raise ValueError(f"{ident['arch']}: its members trained at {len(set(rates))} learning rates; member_lrs "
                         f"{MEMBER_LRS_RULE}")
    lengths = tuple(meta.get("eval_lengths", ()))
    scored = tuple(meta.get("eval_scored", ()))
    scores = evaluate(model, task, lengths=lengths, scored=scored,
                      n_sequences=meta.get("eval_sequences", DEFAULT_SEQUENCES), cache_dir=cache_dir)
    cfg = getattr(model, "cfg", None)
    model_cfg = dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type) else {}
    attention = model_cfg.get("attention")
    env = environment(device, attention)
    final = result.final_loss()
    batch = (ident.get("train") or {}).get("batch_size")  # None: scored without training here
    code = {**(result.code or scored_code(task, ident["arch"], model)), "metrics": metric_versions()}
    # the run's identity without its seeds (`bayesbench.identity`), its code the code that trained and scored
    # the rows: the leaderboard pools the seeds of rows with equal identity_key
    identity = {**{k: v for k, v in ident.items() if k != "seeds"}, "code": versions.keyed(code)}
    config = {"model": model_cfg, "model_args": ident["model"], "train": ident["train"], "seeds": result.seeds,
              "max_len": ident["max_len"], "eval_lengths": list(lengths), "eval_scored": list(scored),
              "eval_sequences": meta.get("eval_sequences"),
              "overrides": meta.get("overrides") or {},  # what the command line changed from the preset
              "checkpoint": result.checkpoint, "code": code, "identity": identity,
              "identity_key": identity_key(identity),
              # a tuned run's search and its outcome (sweep/tune.py): the leaderboard shows it with the row
              **({"tuning": meta["tuning"]} if meta.get("tuning") else {})}
    sequences_per_s = result.steps * batch * len(result.seeds) / result.wall_s if result.wall_s and batch else None
    primary = scores[0].primary
    trained = ident.get("train") is not None  # False: a model trained elsewhere, only scored here
    primary_eval = evaluation_tasks(task, lengths, scored)[primary]
    primary_task = primary_eval.describe()
    state = scored_state(model, primary_eval.seq_len)
    if state is not None:
        config["state"] = state
    records = [RunRecord(
        run_id=result.run_id, seed=seed, member=e, group_id=meta.get("group_id"), preset=meta.get("preset"),
        task=task.name, task_label=meta.get("label", task.describe()), task_config=task.config(),
        arch=meta.get("name") or ident["arch"],
        config=config, params=model.num_params(), steps=result.steps, wall_s=result.wall_s,
        steps_per_s=result.steps_per_s, sequences_per_s=sequences_per_s, status=result.diverged.get(e, "ok"),
        final_loss=final[e], evaluation=scores[e], param_breakdown=model.param_breakdown(),
        loss_curve=_subsample(result.losses, e), environment=env,
        learning_curve=learning_curve(result, e, primary, primary_task),
        stop_step=result.stop(e)[0] if trained else None, stop_reason=stop_reason(result, e) if trained else None,
    ) for e, seed in enumerate(result.seeds)]
    if write:
        write_records(records, db)
    return records
