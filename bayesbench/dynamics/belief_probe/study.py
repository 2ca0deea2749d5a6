"""`bayesbench belief-probe RUN`: the belief-geometry probe of a trained run (Shai et al. 2024,
"Transformers represent belief state geometry in their residual stream", arXiv 2405.15943),
for any architecture; stored, drawn and reported (docs/belief_probe.md).

    bayesbench train --task mess3 --arch transformer --seeds 0,1,2
    bayesbench belief-probe RUN_ID_OR_DIR [--sequences 2048] [--test-fraction 0.25] [--json]

RUN is a run directory (holding checkpoint.pt), a checkpoint file, or a run_id of the results
store. The study takes a `BeliefProbeConfig` (cli/belief.py builds it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ...stats import t_interval
from ..config import FieldError, check_choice, check_int
from ..cut_short import removed_if_stopped
from ..report import report_dir, write_report
from ..store import delete_study, register_study, write_dynamics
from .measure import ProbeResult, member_targets, probe, residual_streams


@dataclass(frozen=True)
class BeliefProbeConfig:
    """What `bayesbench belief-probe` is asked to measure, checked (a bad value: `FieldError`)."""

    run: str
    sequences: int = 2048
    test_fraction: float = 0.25
    split_seed: int = 0
    sets: str = "per-seed"  # each seed's own sequences, or "shared" (one set for all: dynamics.sets)
    db: str | None = None
    as_json: bool = False

    def __post_init__(self) -> None:
        from ..sets import SETS

        check_choice("sets", self.sets, SETS)
        check_int("sequences", self.sequences, 8, "a held-out split needs sequences on both sides")
        tf = self.test_fraction
        if isinstance(tf, bool) or not isinstance(tf, (int, float)) or not 0 < tf < 1:
            raise FieldError("test_fraction", f"must be a number in (0, 1) (the share of sequences held out), "
                                              f"got {tf!r}")
        check_int("split_seed", self.split_seed, 0)


def summarize(res: ProbeResult, task: str, sequences: int) -> dict:
    """Per stream: the held-out R^2 and the shuffle control's, each a mean over seeds with its
    t-interval (bayesbench.stats), their paired difference tested against 0, and the paired gain
    over the `embed` stream (what the current token and position alone explain)."""
    streams: dict[str, dict] = {}
    for name in res.streams:
        diff = [a - b for a, b in zip(res.r2[name], res.r2_shuffled[name])]
        streams[name] = {"r2": t_interval(res.r2[name]), "r2_shuffled": t_interval(res.r2_shuffled[name]),
                         "excess": t_interval(diff, null=0.0), "per_seed": res.r2[name],
                         "per_seed_shuffled": res.r2_shuffled[name]}
        if "embed" in res.r2:  # the last-token control: what the current token and its position explain
            streams[name]["over_embed"] = t_interval([a - b for a, b in zip(res.r2[name], res.r2["embed"])], null=0.0)
    best = max(res.streams, key=lambda s: streams[s]["r2"]["mean"])
    b: dict[str, dict] = streams[best]
    gain = f", {_fmt(b['over_embed'])} over the embed stream" if "over_embed" in b and best != "embed" else ""
    head = (f"best stream {best}: held-out R^2 {_fmt(b['r2'])} vs shuffle control {_fmt(b['r2_shuffled'])}{gain} "
            f"({len(res.seeds)} seeds, {sequences} sequences of {task})")
    return {"task": task, "sequences": sequences, "seeds": res.seeds, "streams": streams, "best_stream": best,
            "headline": [head]}


def _fmt(iv: dict) -> str:
    if iv["n"] >= 2 and iv["ci_low"] == iv["ci_low"]:
        return f"{iv['mean']:.3f} [{iv['ci_low']:.3f}, {iv['ci_high']:.3f}]"
    return f"{iv['mean']:.3f}"


def table(summary: dict) -> str:
    lines = ["| stream | held-out R^2 | shuffle control | R^2 - control (p) | R^2 - embed stream's (p) |",
             "|---|---|---|---|---|"]
    for name, s in summary["streams"].items():
        gain = s.get("over_embed")
        lines.append(f"| {name} | {_fmt(s['r2'])} | {_fmt(s['r2_shuffled'])} | {_fmt(s['excess'])} "
                     f"({s['excess']['p']:.2g}) | "
                     + ("-" if gain is None or name == "embed" else f"{_fmt(gain)} ({gain['p']:.2g})") + " |")
    return "\n".join(lines)


def run_belief_probe(cfg: BeliefProbeConfig) -> dict:
    """Probe every residual stream of the run `cfg.run` for its tunnel's exact belief state;
    store the R^2 per seed, draw the simplex figure, write the report; returns the summary."""
    from ...training.checkpoint import load_result
    from ...training.result import task_of
    from ..runs import find_checkpoint
    from ..sets import member_sets
    from .plots import simplex_figure

    result = load_result(find_checkpoint(cfg.run, cfg.db, "run"))
    task = task_of(result)
    # each seed's own sequences (an evaluation seed derived from it), or one set for all (--sets shared)
    batches = member_sets(task, cfg.sequences, "belief-probe", list(result.seeds), cfg.sets)
    positions, beliefs = member_targets(task, batches)
    streams = residual_streams(result.model, batches)
    res = probe(streams, positions, beliefs, result.seeds, test_fraction=cfg.test_fraction, seed=cfg.split_seed)
    ident = result.identity
    study_id = f"belief-probe-{result.run_id}"
    config = {"run": os.path.abspath(cfg.run) if os.path.exists(cfg.run) else cfg.run, "run_id": result.run_id,
              "task": task.describe(), "arch": ident["arch"], "seeds": result.seeds, "steps": result.steps,
              "sequences": cfg.sequences, "test_fraction": cfg.test_fraction, "split_seed": cfg.split_seed,
              "sets": cfg.sets}
    delete_study(study_id, path=cfg.db)
    summary = summarize(res, task.describe(), cfg.sequences)
    best = summary["best_stream"]
    setting = (f"{ident['arch']} on {task.describe()}, {result.steps} steps, seed {result.seeds[0]}; "
               f"{cfg.sequences} sequences, {cfg.test_fraction:g} held out")
    fig = simplex_figure(os.path.join(report_dir(cfg.db), study_id, "simplex.png"), res.test_beliefs,
                         res.test_predictions[best][0], best, res.r2[best][0], res.r2_shuffled[best][0], setting)
    register_study(study_id, "belief_probe", config, run_id=result.run_id, path=cfg.db)
    rows = []
    for layer, name in enumerate(res.streams):
        for e, s in enumerate(res.seeds):
            rows += [(s, -1, layer, -1, "belief_r2", res.r2[name][e]),
                     (s, -1, layer, -1, "belief_r2_shuffled", res.r2_shuffled[name][e])]
    with removed_if_stopped(study_id, "belief_probe", cfg.db):
        write_dynamics(study_id, rows, path=cfg.db)
    intro = (f"Run {result.run_id}: {ident['arch']} on {task.describe()}, {result.steps} steps, seeds {result.seeds}. "
             f"A linear map (least squares with an intercept, standardised inputs) from each residual stream to the "
             f"exact belief state, fitted on {1 - cfg.test_fraction:.0%} of {cfg.sequences} sequences "
             f"({'each seed its own' if cfg.sets == 'per-seed' else 'one set shared by every seed'}) and scored on "
             f"the rest; the shuffle control fits beliefs permuted across the training sequences at each position. "
             f"Every number: the mean over the {len(result.seeds)} seeds with its 95% t-interval (stream index = "
             f"the `layer` of the stored rows).")
    report = write_report(os.path.join(report_dir(cfg.db), f"{study_id}.md"),
                          f"Belief-geometry probe of run {result.run_id} ({ident['arch']} on {task.describe()})",
                          [("Setting", intro), ("R^2 by stream", table(summary))], [fig])
    summary.update({"study_id": study_id, "report": report, "config": config, "figure": fig})
    register_study(study_id, "belief_probe", config, run_id=result.run_id, summary=summary, status="done",
                   path=cfg.db)
    return summary
