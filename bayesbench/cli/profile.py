"""`bayesbench profile`: train (or continue a stored run) with the routing-law probe, store the
dynamics, draw the figures and write a one-page report (docs/dynamics.md).

    bayesbench profile --task bijection --arch transformer --preset quick --seeds 0,1,2,3 --every 10
    bayesbench profile --run RUN_ID_OR_DIR --steps 500 --optimizer sgd --lr 1e-3
    bayesbench plot --dynamics STUDY_ID
"""

from __future__ import annotations

from .args import add_db, as_dict, check_folder, key_values, positive, seed_list

# The flag of each ProfileStudyConfig field whose name is not "--" + field with "-" for "_".
FLAGS = {"task_args": "--task-args/--task-set", "as_json": "--json", "progress": "--no-progress"}


def add_parser(sub) -> None:
    from ..presets import PRESETS

    p = sub.add_parser("profile", help="train with the routing-law probe every k-th step; store the dynamics, "
                                       "figures and a report (Paper II)")
    p.add_argument("--task", default="bijection", help="task key of the preset (default bijection)")
    p.add_argument("--task-args", nargs="+", type=key_values("--task-args"), metavar="KEY=VALUE",
                   help="the task's fields over the preset's, as for train and run, e.g. --task-args variant=paper "
                        "L=8 (the bijection without repeated keys)")
    p.add_argument("--task-set", type=key_values("--task-set"), action="append", metavar="FIELD=VALUE",
                   help="the same, one field per --task-set (repeatable; kept for old scripts)")
    p.add_argument("--arch", default="transformer", help="an attention architecture (default transformer)")
    p.add_argument("--preset", default="quick", choices=sorted(PRESETS), help="sizes and training (default quick)")
    p.add_argument("--seeds", type=seed_list, help="comma-separated seeds, all profiled in the same step "
                                                   "(default 0,...,7: 8 seeds; with --run: the run's seeds)")
    p.add_argument("--steps", type=positive, help="training steps (default: the preset's; with --run: steps "
                                                  "added to the run, default 500)")
    p.add_argument("--every", type=int, default=10, help="probe every k-th step (default 10)")
    p.add_argument("--law-every", type=int, default=1, help="check the routing law on every n-th probed step "
                                                            "(default 1: all; 0: never, stats probes only)")
    p.add_argument("--law-sequences", type=positive, default=8, help="sequences of the step's batch per member "
                                                                     "used by the law check (default 8)")
    p.add_argument("--heldout-sequences", type=int, default=8,
                   help="the law check also on this many fixed held-out sequences (an evaluation seed no training "
                        "stream uses): the primary statistic; the in-batch one is the self-influence reference "
                        "(default 8; 0: off)")
    p.add_argument("--flush-every", type=positive, default=200, help="steps between writes to the store (default 200)")
    p.add_argument("--checkpoints", type=int, default=21, help="checkpoints for maps and calibration (default 21)")
    p.add_argument("--checkpoint-spacing", default="quadratic",
                   help="quadratic (dense early, the default) or even (no quantisation of late events)")
    p.add_argument("--replicas", type=int, default=2,
                   help="the jitter floor: continue each checkpoint's state this many more times to the next "
                        "checkpoint with other data orders (default 2; 0: no floor)")
    p.add_argument("--replica-every", type=positive, default=1,
                   help="replicas from every n-th checkpoint only (default 1: all; the floor is interpolated between)")
    p.add_argument("--replicas-to-end", action="store_true",
                   help="run the replicas on through the late window: the drift's floor for any jitter process "
                        "(autocorrelated too); without it the frame-precision order reads 'cannot tell'")
    p.add_argument("--late-maps", type=positive, default=3,
                   help="the last checkpoints whose mean map is the drift's reference and whose mean calibration "
                        "is the endpoint (default 3)")
    p.add_argument("--head-ablation", action="store_true",
                   help="at each checkpoint also score the model with each head zeroed (per-head timing)")
    p.add_argument("--probe-sequences", type=positive, default=16,
                   help="fixed sequences whose maps are kept (default 16)")
    p.add_argument("--eval-sequences", type=positive, default=512,
                   help="evaluation sequences per checkpoint (default 512)")
    p.add_argument("--sets", default="per-seed",
                   help="probe, evaluation and held-out sequences: per-seed (each seed's own, from an evaluation "
                        "seed derived from it: the default) or shared (one set for every seed, as before 2026-12-07)")
    p.add_argument("--attention", help="probe path: triton (GPU stats kernel), eager (autograd hooks) or reference "
                                       "(default: triton on a GPU, eager on CPU)")
    p.add_argument("--optimizer", default="adamw", help="adamw (the preset's) or sgd (plain: no momentum, no weight "
                                                        "decay)")
    p.add_argument("--lr", type=float, help="learning rate (default: the preset's)")
    p.add_argument("--batch-size", type=positive, help="sequences per step and member (default: the preset's; not "
                   "with --run)")
    p.add_argument("--schedule", help="learning-rate schedule: constant, cosine or step (default: the preset's; the "
                                      "preset's warm-up carries over to cosine and step)")
    p.add_argument("--run", help="continue this stored run (run_id, run directory or checkpoint file)")
    p.add_argument("--device", help="cpu, cuda or auto (default: the preset's)")
    p.add_argument("--runs-dir", default="runs", help="where the profiled model's checkpoint goes (default ./runs)")
    p.add_argument("--threads", type=positive, help="torch CPU threads (default 1 on CPU: these models are small, "
                                                    "and one thread per process uses a shared core best)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the study's numbers as JSON")
    add_db(p)
    p.set_defaults(handler=cmd_profile)


def config_from_args(args):
    """The one place the command line becomes the study's typed config (`ProfileStudyConfig`)."""
    from ..dynamics.profile.study import ProfileStudyConfig

    task_args = as_dict("--task-args/--task-set", [*(args.task_args or ()), *(args.task_set or ())]) or None
    return ProfileStudyConfig(
        task=args.task, task_args=task_args, arch=args.arch, preset=args.preset, seeds=args.seeds, steps=args.steps,
        every=args.every, law_every=args.law_every, law_sequences=args.law_sequences, flush_every=args.flush_every,
        checkpoints=args.checkpoints, checkpoint_spacing=args.checkpoint_spacing, head_ablation=args.head_ablation,
        probe_sequences=args.probe_sequences, eval_sequences=args.eval_sequences, replicas=args.replicas,
        replica_every=args.replica_every, late_maps=args.late_maps, attention=args.attention,
        heldout_sequences=args.heldout_sequences, replica_to_end=args.replicas_to_end, sets=args.sets,
        optimizer=args.optimizer, lr=args.lr, batch_size=args.batch_size, schedule=args.schedule, run=args.run,
        device=args.device, runs_dir=args.runs_dir, threads=args.threads, progress=not args.no_progress,
        as_json=args.json, db=args.db)


def cmd_profile(args) -> int:
    from ..dynamics.profile.study import run_profile
    from .study import run_study

    check_folder("--runs-dir", args.runs_dir)
    return run_study(args, config_from_args, run_profile, FLAGS)[1]
