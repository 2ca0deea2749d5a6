"""`bayesbench profile`: train (or continue a stored run) with the routing-law probe, store the
dynamics, draw the figures and write a one-page report.

    bayesbench profile --task bijection --arch transformer --preset quick --seeds 0,1,2,3 --every 10
    bayesbench profile --run RUN_ID_OR_DIR --steps 500 --optimizer sgd --lr 1e-3
    bayesbench plot --dynamics STUDY_ID

See docs/dynamics.md for every recorded quantity.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import sys
import time
import uuid

OPTIMIZERS = ("adamw", "sgd")
PROBE_ATTENTION = ("triton", "eager", "reference")
# The command's choices, here so that building the parser imports no torch (tests check that they
# equal frames.SPACINGS and training.trainer.SCHEDULES).
SPACINGS = ("even", "quadratic")
SCHEDULES = ("constant", "cosine")


def _make_optimizer(trainer, name: str):
    """The trainer's flat per-member optimiser, switched to plain SGD for --optimizer sgd (same
    per-member clipping and divergence guard; no momentum, no weight decay)."""
    trainer.optimizer.set_algorithm(name)
    return trainer.optimizer


def build(args, study_id: str, hold: contextlib.ExitStack):
    """Everything the profile needs, validated before the store is touched: (trainer, config dict).
    The trainer's run directory stays locked until `hold` closes."""
    import torch

    from ...sweep.jobs import make_jobs, resolve_device
    from ..runs import find_checkpoint
    from .probes import attention_layers
    from .resume import load_run_state, open_from_state, select_seeds

    if args.every < 1:
        raise ValueError(f"--every must be >= 1 (probe every k-th step), got {args.every}")
    if args.law_every < 0:
        raise ValueError(f"--law-every must be >= 0, got {args.law_every}")
    if args.checkpoints < 2:
        raise ValueError(f"--checkpoints must be >= 2 (the drift is measured against the last), got {args.checkpoints}")
    if args.lr is not None and not (args.lr > 0 and math.isfinite(args.lr)):
        raise ValueError(f"--lr must be a positive number, got {args.lr}")
    if args.law_every and args.law_sequences < 2:
        raise ValueError(f"--law-sequences must be >= 2 (the shuffle null pairs each sequence with another), "
                         f"got {args.law_sequences}")
    run_dir = os.path.join(args.runs_dir, "profile", study_id)
    batch_size = getattr(args, "batch_size", None)
    if args.run and batch_size is not None:
        raise ValueError("--batch-size cannot change a stored run's batch (--run continues its data streams)")
    if args.run:
        device = resolve_device(args.device or "cpu")
        ckpt = find_checkpoint(args.run, args.db)
        state = load_run_state(ckpt, device)
        seeds = select_seeds(state, args.seeds)
        extra = args.steps or 500
        trainer = hold.enter_context(open_from_state(state, seeds, extra, device=device, run_dir=run_dir,
                                                     meta={"profile_of": ckpt}))
        source = {"run": args.run, "checkpoint": ckpt, "from_step": trainer.step}
    else:
        seeds = args.seeds or [0, 1, 2, 3]
        job = make_jobs(args.preset, tasks=[args.task], archs=[args.arch], seeds=seeds, steps=args.steps,
                        device=args.device, task_args=getattr(args, "task_set", None))[0]
        device = job.device
        if batch_size is not None:
            job = dataclasses.replace(job, train=dataclasses.replace(job.train, batch_size=batch_size))
        trainer = hold.enter_context(job.open_trainer(run_dir, meta={"preset": args.preset,
                                                                     "label": job.setup.label}))
        source = {"preset": args.preset, "task": args.task, "task_set": dict(getattr(args, "task_set", None) or {})}
    layers = attention_layers(trainer.model)  # a clear error for an architecture without attention
    attention = args.attention or ("triton" if torch.device(device).type == "cuda" else "eager")
    if attention == "triton":
        from bayesbench.kernels import triton_available

        if not triton_available():
            raise ValueError("--attention triton needs the triton package and a CUDA GPU (or TRITON_INTERPRET=1); "
                             "use --attention eager or reference on CPU")
    if trainer.model.cfg.dropout > 0:
        raise ValueError(f"profiling needs dropout 0 (the probed backwards have no attention dropout); "
                         f"this model has dropout {trainer.model.cfg.dropout}")
    if args.lr is not None:
        trainer.cfg = dataclasses.replace(trainer.cfg, lr=args.lr)
    if args.schedule is not None and args.schedule != trainer.cfg.schedule:
        # the preset's warm-up applies to its own cosine; a cosine asked for here has none
        warmup = trainer.cfg.warmup_steps if args.schedule == "cosine" else 0
        trainer.cfg = dataclasses.replace(trainer.cfg, schedule=args.schedule, warmup_steps=warmup)
    trainer.optimizer = _make_optimizer(trainer, args.optimizer)
    config = {**source, "arch": trainer.arch, "task_config": trainer.task.config(), "seeds": trainer.seeds,
              "model": trainer.model_cfg, "train": dataclasses.asdict(trainer.cfg), "optimizer": args.optimizer,
              "attention": attention, "every": args.every, "law_every": args.law_every,
              "flush_every": args.flush_every, "law_sequences": args.law_sequences, "device": str(device),
              "layers": layers, "checkpoint_spacing": args.checkpoint_spacing, "head_ablation": args.head_ablation,
              "probe_sequences": args.probe_sequences, "eval_sequences": args.eval_sequences,
              "run_dir": run_dir, "threads": torch.get_num_threads()}
    return trainer, config


def run_profile(args) -> int:
    """The `bayesbench profile` command's work, from its parsed options (`cli/profile.py`)."""
    import torch

    torch.set_num_threads(args.threads or 1)
    study_id = f"profile-{uuid.uuid4().hex[:10]}"
    with contextlib.ExitStack() as hold:  # the run directory stays locked until the study is stored
        trainer, config = build(args, study_id, hold)
        return _profile(args, study_id, trainer, config)


def _profile(args, study_id: str, trainer, config: dict) -> int:
    """Train with the probe, store the dynamics, draw the figures, write the report."""
    import torch

    from ...scoring.evaluate import eval_seed, eval_set, scored_positions
    from ...store.database import cache_dir_for
    from ..cut_short import removed_if_stopped
    from ..report import report_dir
    from ..store import register_study
    from .frames import checkpoint_steps
    from .profiler import ProfileConfig, Profiler

    say = (lambda m: print(m, file=sys.stderr, flush=True)) if args.json else (lambda m: print(m, flush=True))
    start_step, end_step = trainer.step, trainer.cfg.steps
    checkpoints = checkpoint_steps(end_step - start_step, args.checkpoints, start=start_step,
                                   spacing=args.checkpoint_spacing)
    cfg = ProfileConfig(every=args.every, law_every=args.law_every, flush_every=args.flush_every,
                        backend=config["attention"], checkpoints=tuple(checkpoints),
                        law_sequences=args.law_sequences, head_ablation=args.head_ablation)
    eval_batch = eval_set(trainer.task, args.eval_sequences, cache_dir=cache_dir_for(args.db))
    probe_batch = eval_set(trainer.task, args.probe_sequences, seed=eval_seed(trainer.task, "profile-probe"))
    config.update(checkpoint_steps=checkpoints, scored_positions=scored_positions(trainer.task))
    profiler = Profiler(trainer, study_id, cfg, probe_batch=probe_batch, eval_batch=eval_batch, db=args.db)
    trainer.hooks.append(profiler)
    register_study(study_id, "profile", config, run_id=trainer.run_id, status="running", path=args.db)
    say(f"bayesbench profile {study_id}: {trainer.task.describe()} / {trainer.arch}, seeds {trainer.seeds} in one "
        f"ensemble, steps {start_step}..{end_step}, probe every {args.every} ({config['attention']}), "
        f"{args.optimizer} lr {trainer.cfg.lr:g}, {len(checkpoints)} checkpoints")
    t0 = time.perf_counter()
    try:
        with removed_if_stopped(study_id, "profile", args.db):
            profiler.start()
            result = trainer.fit(progress=not args.no_progress and sys.stderr.isatty())
            profiler.finish()
    except Exception as err:
        register_study(study_id, "profile", config, run_id=trainer.run_id,
                       status=f"failed: {type(err).__name__}: {err}"[:500], path=args.db)
        raise
    # every measurement is stored: the report below can be rebuilt from them (`plot --dynamics`)
    register_study(study_id, "profile", config, run_id=trainer.run_id, status="trained", path=args.db)
    wall = time.perf_counter() - t0
    out_dir = os.path.join(report_dir(args.db), study_id)
    os.makedirs(out_dir, exist_ok=True)
    torch.save({"steps": sorted(profiler.maps), "layers": profiler.layers, "seeds": trainer.seeds,
                "maps": torch.stack([profiler.maps[s].cpu() for s in sorted(profiler.maps)])},
               os.path.join(out_dir, "maps.pt"))
    from .plots import plot_profile
    from .report import write_profile_report
    from .summary import summarize_profile

    summary = summarize_profile(study_id, args.db)
    summary["timing"] = {"wall_s": wall, "train_s": result.wall_s, "hooks_s": profiler.hook_s,
                         "profiled_steps": profiler.profiled_steps, "law_checks": profiler.law_steps,
                         "records": profiler.records_written, "steps": end_step - start_step}
    figures = plot_profile(study_id, args.db, out_dir, summary)
    report = write_profile_report(study_id, config, summary, figures, args.db)
    summary["report"], summary["figures"] = report, figures
    register_study(study_id, "profile", config, run_id=trainer.run_id, summary=summary, status="ok", path=args.db)
    if args.json:
        print(json.dumps({"study_id": study_id, "run_id": trainer.run_id, "config": config, "summary": summary},
                         indent=2, default=str))
    else:
        say(f"done in {wall:.0f} s ({profiler.records_written} records). Report: {report}")
    return 0


def plot_study(study_id: str, db: str | None, out_dir: str) -> list[str]:
    """`bayesbench plot --dynamics STUDY`: redraw a profile study's figures from the store into
    `out_dir`, and rebuild its report (and stored summary) beside the store from the records
    alone. Returns the figures and, last, the report's path."""
    from ..cut_short import require_finished
    from ..report import report_dir
    from ..store import read_study, register_study
    from .plots import plot_profile
    from .report import write_profile_report
    from .summary import summarize_profile

    study = read_study(study_id, db)
    if study is None:
        raise ValueError(f"--dynamics {study_id!r}: unknown study (see the `studies` table of the store)")
    require_finished(study)
    summary = summarize_profile(study_id, db)
    summary["timing"] = (study.get("summary") or {}).get("timing", {})
    figures = plot_profile(study_id, db, out_dir, summary)
    config = study["config"]
    report_figures = plot_profile(study_id, db, os.path.join(report_dir(db), study_id), summary)
    report = write_profile_report(study_id, config, summary, report_figures, db)
    summary["report"], summary["figures"] = report, report_figures
    register_study(study_id, "profile", config, run_id=study.get("run_id"), summary=summary, status="ok", path=db)
    return figures + [report]
