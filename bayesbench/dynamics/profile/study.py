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
import os
import sys
import time
import uuid
from dataclasses import dataclass

from ... import trust
from ..config import FieldError, check_choice, check_int, check_positive_number

SPACING_DEFAULT = "quadratic"
# 8 seeds by default: with 4 a t-interval has 3 degrees of freedom (t = 3.18) and a sign test
# cannot go below p = 0.125, so no claim over seeds can be carried (issue 32)
DEFAULT_SEEDS = tuple(range(8))


@dataclass(frozen=True)
class ProfileStudyConfig:
    """Everything `bayesbench profile` is asked to do, checked (`cli/profile.py` builds it from the
    command line; docs/dynamics.md says what each does). A bad value raises `FieldError` naming
    the field. None means "the preset's" (steps, lr, batch_size, schedule, device) or "every seed
    of the run" (seeds with `run`)."""

    task: str = "bijection"
    task_args: dict | None = None  # the task's fields over the preset's
    arch: str = "transformer"
    preset: str = "quick"
    seeds: tuple[int, ...] | None = None  # default DEFAULT_SEEDS; with `run`: the run's seeds
    steps: int | None = None  # with `run`: steps added to it (default 500)
    every: int = 10
    law_every: int = 1
    law_sequences: int = 8
    flush_every: int = 200
    checkpoints: int = 21
    checkpoint_spacing: str = SPACING_DEFAULT
    head_ablation: bool = False
    probe_sequences: int = 16
    eval_sequences: int = 512
    replicas: int = 2  # the jitter floor: continuations of each checkpoint with other data orders
    replica_every: int = 1
    late_maps: int = 3  # the late map (drift reference) and robust endpoint: the last K checkpoints (<= all but 1)
    heldout_sequences: int = 8  # the law check also on this many fixed held-out sequences (0: off)
    replica_to_end: bool = False  # replicas run on through the late window (the floor of any jitter process)
    sets: str = "per-seed"  # probe, evaluation and held-out sets: each seed's own, or "shared" (dynamics.sets)
    attention: str | None = None  # probe path; default triton on a GPU, eager on CPU
    optimizer: str = "adamw"
    lr: float | None = None
    batch_size: int | None = None
    schedule: str | None = None
    run: str | None = None  # continue this stored run (run_id, run directory or checkpoint file)
    device: str | None = None
    runs_dir: str = "runs"
    threads: int | None = None
    progress: bool = True
    as_json: bool = False
    db: str | None = None

    def __post_init__(self) -> None:
        from ...models.transformer import PROBE_BACKENDS
        from ...training.config import SCHEDULES
        from ...training.optim import FlatMemberAdamW
        from ..sets import SETS
        from .frames import SPACINGS

        check_int("every", self.every, 1, "probe every k-th step")
        check_int("law_every", self.law_every, 0)
        check_int("checkpoints", self.checkpoints, 2, "the drift is measured against the late checkpoints")
        check_int("flush_every", self.flush_every, 1)
        check_int("probe_sequences", self.probe_sequences, 1)
        check_int("eval_sequences", self.eval_sequences, 1)
        check_int("replicas", self.replicas, 0)
        check_int("replica_every", self.replica_every, 1)
        check_int("late_maps", self.late_maps, 1)
        if self.law_every:
            check_int("law_sequences", self.law_sequences, 2, "the shuffle null pairs each sequence with another")
        check_int("heldout_sequences", self.heldout_sequences, 0)
        if self.heldout_sequences == 1:
            raise FieldError("heldout_sequences", "must be 0 (off) or >= 2: the shuffle null pairs each sequence "
                                                  "with another")
        for name in ("steps", "batch_size", "threads"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), 1)
        if self.lr is not None:
            check_positive_number("lr", self.lr)
        check_choice("checkpoint_spacing", self.checkpoint_spacing, SPACINGS)
        check_choice("sets", self.sets, SETS)
        check_choice("optimizer", self.optimizer, FlatMemberAdamW.ALGORITHMS)
        if self.schedule is not None:
            check_choice("schedule", self.schedule, SCHEDULES)
        if self.attention is not None:
            check_choice("attention", self.attention, PROBE_BACKENDS)
        if self.run and self.batch_size is not None:
            raise FieldError("batch_size", "cannot change a stored run's batch (run continues its data streams)")
        if self.seeds is not None:
            object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))


def _make_optimizer(trainer, name: str):
    """The trainer's flat per-member optimiser, switched to plain SGD for optimizer 'sgd' (same
    per-member clipping and divergence guard; no momentum, no weight decay)."""
    trainer.optimizer.set_algorithm(name)
    return trainer.optimizer


def build(cfg: ProfileStudyConfig, study_id: str, hold: contextlib.ExitStack):
    """Everything the profile needs, validated before the store is touched: (trainer, config dict).
    The trainer's run directory stays locked until `hold` closes."""
    import torch

    from ...sweep.jobs import make_jobs, resolve_device
    from ..runs import find_checkpoint
    from .probes import attention_layers, profiled_transformer
    from .resume import load_run_state, open_from_state, select_seeds

    run_dir = os.path.join(cfg.runs_dir, "profile", study_id)
    seeds = list(cfg.seeds) if cfg.seeds is not None else None
    if cfg.run:
        device = resolve_device(cfg.device or "cpu")
        ckpt = find_checkpoint(cfg.run, cfg.db)
        state = load_run_state(ckpt, device)
        seeds = select_seeds(state, seeds)
        extra = cfg.steps or 500
        with trust.source(ckpt):  # outside code the checkpoint names: imported only when trusted
            trainer = hold.enter_context(open_from_state(state, seeds, extra, device=device, run_dir=run_dir,
                                                         meta={"profile_of": ckpt}))
        source = {"run": cfg.run, "checkpoint": ckpt, "from_step": trainer.step}
    else:
        seeds = seeds or list(DEFAULT_SEEDS)
        job = make_jobs(cfg.preset, tasks=[cfg.task], archs=[cfg.arch], seeds=seeds, steps=cfg.steps,
                        device=cfg.device, task_args=cfg.task_args)[0]
        device = job.device
        if cfg.batch_size is not None:
            job = dataclasses.replace(job, train=dataclasses.replace(job.train, batch_size=cfg.batch_size))
        trainer = hold.enter_context(job.open_trainer(run_dir, meta={"preset": cfg.preset,
                                                                     "label": job.setup.label}))
        source = {"preset": cfg.preset, "task": cfg.task, "task_set": dict(cfg.task_args or {})}
    layers = attention_layers(trainer.model)  # a clear error for an architecture without attention
    attention = cfg.attention or ("triton" if torch.device(device).type == "cuda" else "eager")
    if attention == "triton":
        from bayesbench.kernels import triton_available

        if not triton_available():
            raise FieldError("attention", "triton needs the triton package and a CUDA GPU (or TRITON_INTERPRET=1); "
                                          "use eager or reference on CPU")
    dropout = profiled_transformer(trainer.model).cfg.dropout
    if dropout > 0:
        raise ValueError(f"profiling needs dropout 0 (the probed backwards have no attention dropout); "
                         f"this model has dropout {dropout}")
    if cfg.lr is not None:
        trainer.cfg = dataclasses.replace(trainer.cfg, lr=cfg.lr)
    if cfg.schedule is not None and cfg.schedule != trainer.cfg.schedule:
        # the preset's warm-up carries over to a decaying schedule; a constant one has none
        warmup = trainer.cfg.warmup_steps if cfg.schedule != "constant" else 0
        trainer.cfg = dataclasses.replace(trainer.cfg, schedule=cfg.schedule, warmup_steps=warmup)
    trainer.optimizer = _make_optimizer(trainer, cfg.optimizer)
    config = {**source, "arch": trainer.arch, "task_config": trainer.task.config(), "seeds": trainer.seeds,
              "model": trainer.model_cfg, "train": dataclasses.asdict(trainer.cfg), "optimizer": cfg.optimizer,
              "attention": attention, "every": cfg.every, "law_every": cfg.law_every,
              "flush_every": cfg.flush_every, "law_sequences": cfg.law_sequences, "device": str(device),
              "layers": layers, "checkpoint_spacing": cfg.checkpoint_spacing, "head_ablation": cfg.head_ablation,
              "probe_sequences": cfg.probe_sequences, "eval_sequences": cfg.eval_sequences,
              "replicas": cfg.replicas, "replica_every": cfg.replica_every, "late_maps": cfg.late_maps,
              "heldout_sequences": cfg.heldout_sequences if cfg.law_every else 0,
              "replica_to_end": cfg.replica_to_end, "sets": cfg.sets,
              "run_dir": run_dir, "threads": torch.get_num_threads()}
    return trainer, config


def run_profile(cfg: ProfileStudyConfig) -> int:
    """The `bayesbench profile` command's work (`cli/profile.py` builds `cfg`)."""
    import torch

    torch.set_num_threads(cfg.threads or 1)
    study_id = f"profile-{uuid.uuid4().hex[:10]}"
    with contextlib.ExitStack() as hold:  # the run directory stays locked until the study is stored
        trainer, config = build(cfg, study_id, hold)
        return _profile(cfg, study_id, trainer, config)


def _profile(cfg: ProfileStudyConfig, study_id: str, trainer, config: dict) -> int:
    """Train with the probe, store the dynamics, draw the figures, write the report."""
    import torch

    from ...scoring.evaluate import eval_seed, scored_positions
    from ...store.database import cache_dir_for
    from ..cut_short import removed_if_stopped
    from ..report import report_dir
    from ..sets import member_sets
    from ..store import register_study
    from .frames import checkpoint_steps
    from .profiler import ProfileConfig, Profiler

    db = cfg.db
    say = (lambda m: print(m, file=sys.stderr, flush=True)) if cfg.as_json else (lambda m: print(m, flush=True))
    start_step, end_step = trainer.step, trainer.cfg.steps
    checkpoints = checkpoint_steps(end_step - start_step, cfg.checkpoints, start=start_step,
                                   spacing=cfg.checkpoint_spacing)
    pcfg = ProfileConfig(every=cfg.every, law_every=cfg.law_every, flush_every=cfg.flush_every,
                         backend=config["attention"], checkpoints=tuple(checkpoints),
                         law_sequences=cfg.law_sequences, head_ablation=cfg.head_ablation, replicas=cfg.replicas,
                         replica_every=cfg.replica_every, late_maps=min(cfg.late_maps, len(checkpoints) - 1),
                         heldout_sequences=config["heldout_sequences"], replica_to_end=cfg.replica_to_end)
    # every set from an evaluation seed (a domain no training stream draws from): each seed's own
    # (dynamics.sets.member_set_seed), or with --sets shared one for all, as before issue 44
    task, seeds = trainer.task, trainer.seeds
    eval_batch = member_sets(task, cfg.eval_sequences, "profile-eval", seeds, cfg.sets, cache_dir=cache_dir_for(db))
    probe_batch = member_sets(task, cfg.probe_sequences, "profile-probe", seeds, cfg.sets,
                              shared_seed=eval_seed(task, "profile-probe"))
    config.update(checkpoint_steps=checkpoints, scored_positions=scored_positions(trainer.task))
    # the held-out law batch: fixed through the run
    heldout = (member_sets(task, pcfg.heldout_sequences, "profile-heldout-law", seeds, cfg.sets,
                           shared_seed=eval_seed(task, "profile-heldout-law"))
               if pcfg.heldout_sequences else None)
    profiler = Profiler(trainer, study_id, pcfg, probe_batch=probe_batch, eval_batch=eval_batch, db=db,
                        heldout_batch=heldout)
    trainer.hooks.append(profiler)
    register_study(study_id, "profile", config, run_id=trainer.run_id, status="running", path=db)
    replicas = (f", {cfg.replicas} replicas per checkpoint interval"
                f"{' (on through the late window)' if cfg.replica_to_end else ''}" if cfg.replicas else "")
    say(f"bayesbench profile {study_id}: {trainer.task.describe()} / {trainer.arch}, seeds {trainer.seeds} in one "
        f"ensemble, steps {start_step}..{end_step}, probe every {cfg.every} ({config['attention']}), "
        f"{cfg.optimizer} lr {trainer.cfg.lr:g} ({trainer.cfg.schedule}), {len(checkpoints)} checkpoints{replicas}")
    if profiler.continuous:
        from .profiler import CONTINUOUS_NOTE

        say(f"bayesbench profile {study_id}: {CONTINUOUS_NOTE}")
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        with removed_if_stopped(study_id, "profile", db):
            profiler.start()
            result = trainer.fit(progress=cfg.progress and sys.stderr.isatty())
            profiler.finish()
    except Exception as err:
        register_study(study_id, "profile", config, run_id=trainer.run_id,
                       status=f"failed: {type(err).__name__}: {err}"[:500], path=db)
        raise
    # every measurement is stored: the report below can be rebuilt from them (`plot --dynamics`)
    register_study(study_id, "profile", config, run_id=trainer.run_id, status="trained", path=db)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    out_dir = os.path.join(report_dir(db), study_id)
    os.makedirs(out_dir, exist_ok=True)
    torch.save({"steps": sorted(profiler.maps), "layers": profiler.layers, "seeds": trainer.seeds,
                "maps": torch.stack([profiler.maps[s].cpu() for s in sorted(profiler.maps)])},
               os.path.join(out_dir, "maps.pt"))
    if profiler.replica_maps:  # each replica's maps at the checkpoint it ran to: [C', R, L, E, B, H, T, T]
        torch.save({"steps": sorted(profiler.replica_maps), "layers": profiler.layers, "seeds": trainer.seeds,
                    "maps": torch.stack([profiler.replica_maps[s] for s in sorted(profiler.replica_maps)])},
                   os.path.join(out_dir, "replica_maps.pt"))
    from .plots import plot_profile
    from .report import write_profile_report
    from .summary import summarize_profile

    summary = summarize_profile(study_id, db)
    summary["timing"] = {"wall_s": wall, "cpu_s": cpu, "train_s": result.wall_s, "hooks_s": profiler.hook_s,
                         "replicas_s": profiler.replica_s, "replicas_cpu_s": profiler.replica_cpu_s,
                         "replica_steps": profiler.replica_steps, "profiled_steps": profiler.profiled_steps,
                         "law_checks": profiler.law_steps, "records": profiler.records_written,
                         "steps": end_step - start_step}
    figures = plot_profile(study_id, db, out_dir, summary)
    report = write_profile_report(study_id, config, summary, figures, db)
    summary["report"], summary["figures"] = report, figures
    register_study(study_id, "profile", config, run_id=trainer.run_id, summary=summary, status="ok", path=db)
    if cfg.as_json:
        print(json.dumps({"study_id": study_id, "run_id": trainer.run_id, "config": config, "summary": summary},
                         indent=2, default=str))
    else:
        for line in summary.get("headline", []):
            say(line)
        say(f"done in {wall:.0f} s ({cpu:.0f} s of CPU, {profiler.replica_cpu_s:.0f} s of it in the replicas; "
            f"{profiler.records_written} records). Report: {report}")
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
        raise ValueError(f"study {study_id!r}: unknown study (see the `studies` table of the store)")
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
