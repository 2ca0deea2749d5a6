"""`bayesbench models`: the architectures, and their parameter counts at a preset's sizes."""

from __future__ import annotations


def add_parser(sub) -> None:
    p = sub.add_parser("models", help="list the architectures and their parameter counts at a preset's sizes")
    from ..presets import PRESETS

    p.add_argument("--preset", default="quick", choices=sorted(PRESETS),
                   help="preset whose sizes to count (default quick, as every other command)")
    p.set_defaults(handler=cmd_models)


def cmd_models(args) -> int:
    from ..models import list_models
    from ..presets import get_preset
    from ..sweep.jobs import make_jobs

    print("Architectures:")
    for name, desc in list_models().items():
        print(f"  {name:17s} {desc}")

    preset = get_preset(args.preset)
    jobs = [job for key, setup in preset.tasks.items()
            for job in make_jobs(args.preset, tasks=[key], archs=[a for a in list_models() if a in setup.models],
                                 device="cpu")]
    print(f"\nParameters per ensemble member at preset {args.preset!r} (every tensor counted once: embeddings, "
          "position table sized for the longest eval length, biases, LayerNorms, head):")
    for job in jobs:
        print(f"  {job.setup.label:16s} {job.arch:17s} {job.params:>12,}  {job.model}")
    return 0
