"""Issue 43's measured answer: every architecture of the registry tuned on the quick bijection and
sticky chain, with its state size, from one store.

    bayesbench run --preset quick --tune --tune-args selection_seeds=1 --jobs 2 --db zoo.db \\
        --tasks sticky --archs <architectures>          # and --tasks bijection
    python scripts/zoo_answer.py --db zoo.db --fixed docs/numbers/zoo_sticky_2026-12-06.json \\
        --measured 2026-12-07 --out docs/data/zoo_quick_2026-12-07.json --figures docs/img \\
        [--keep docs/data/zoo_quick_2026-12-07.json]

Reads the store's tuned rows through the public leaderboard (`bayesbench.leaderboard`, entropy
MAE, the primary evaluation: the bijection's value positions, the sticky chain's every position)
and writes, per task and architecture: the search (each rate's selection score, the chosen rate,
the edge and floor flags), the reported seeds' entropy MAE with its 95% interval over seeds, the KL,
params, FLOPs per training step, the recurrent state one member carries at the scored length
(`models/state.py`) and whether it still grows there (counted again one position earlier from the
run's own checkpoint, so the fixed-state families are told apart from the caches that grow), and
the re-training's wall time, and when and by which version it was measured.

With `--keep` (an earlier summary of this script, made with the same command), the rows of that
summary for the (task, architecture) pairs the store does not hold are kept as they were written
(their measured date and version with them), provided each task's evaluation, set size, floors and
rate grid are the store's; the ordering, the state lines and the pairing with `--fixed` are then
computed again over every row. A store that was lost need not be run again whole: a new one holds
what is added, the summary what was measured before. The figures are drawn from the summary (the
package's own drawing, `report/state_plot.draw_state` and `report/tuning.draw_search`), for the
tasks the store holds rows of; a task only kept keeps its figures.

With `--fixed` (a `scripts/docs_numbers.py` summary of the same task at the fixed recipe, seeds 0,
1, 2: the same initialisation and training sequences as the tuned re-training), each tuned row is
paired with its fixed-recipe row seed by seed: the change with its 95% t-interval, the p-value of
no change, Holm-adjusted over the rows whose rate changed (a row that kept the fixed rate must
reproduce the fixed row: checked, and the script stops if it does not).

The answers, each fixed here before the numbers were read:
- each row reads "every seed below 0.1" (every reported seed's entropy MAE under 0.1 bits, the
  leaderboard's learning-curve threshold), "at the floor" (the leaderboard's at-floor flag),
  "a seed diverged" (a seed without a finite score) or "neither";
- the ordering: means sorted, "<" between neighbours whose intervals over seeds do not overlap, "~"
  where they do (cannot tell);
- the state question, as zoology asks it (Arora et al. 2024, arXiv 2402.18668, Fig. 2): Spearman's
  rho between the state floats and the mean entropy MAE over the architectures whose state no longer
  grows at the scored length and is not empty (the recurrent families), with a two-sided permutation
  p-value; and over every architecture for the record.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import torch

from bayesbench.report.summary import permutation_p, rounded, seed_ci, spearman

TASKS = ("sticky", "bijection")
NEAR_BAYES_BITS = 0.1


def state_at(path: str, length: int) -> tuple[int, int]:
    """The state floats of a run's model (its checkpoint) after `length` and `length - 1` positions."""
    from bayesbench.models.state import state_floats
    from bayesbench.training.checkpoint import load_result

    model = load_result(path).model
    return state_floats(model, length), state_floats(model, length - 1) if length > 1 else 0


def measure(db: str, *, say=print) -> dict:
    """Every tuned reported row of `TASKS` in `db` (module docstring), per task and architecture."""
    import bayesbench
    from bayesbench.dynamics.runs import find_checkpoint
    from bayesbench.report.selection import select_rows

    configs = {r.run_id: r.config or {} for r in select_rows(db)}
    tasks: dict[str, dict] = {}
    for row in bayesbench.leaderboard(db, metric="entropy_mae"):
        tuning = row["settings"].get("tuning")
        name = row["settings"]["task"]["task"]
        if not (row["primary"] and tuning and name in TASKS):
            continue
        if row["n_runs"] != 1:
            raise SystemExit(f"zoo_answer.py: {row['task']} / {row['arch']} pools {row['n_runs']} runs; "
                             "keep one tuned run per architecture in the store")
        entry = tasks.setdefault(name, {"label": row["settings"]["label"], "eval": row["eval"],
                                        "n_sequences": row["n_sequences"], "floors": row["floors_bits"],
                                        "archs": {}})
        if row["arch"] in entry["archs"]:
            raise SystemExit(f"zoo_answer.py: two tuned rows of {row['arch']} on {entry['label']}")
        run_id = row["run_ids"][0]
        per_seed = row["per_seed_bits"]
        a = entry["archs"][row["arch"]] = {
            "run_id": run_id, "params": row["params"], "steps": row["steps"],
            "flops_per_step": (configs[run_id].get("flops") or {}).get("per_step"),
            "wall_s": row["wall_s"], "seeds": row["seeds"], "entropy_mae": per_seed,
            "entropy_mae_mean": row["entropy_mae_bits"], "entropy_mae_ci": seed_ci(per_seed),
            "kl_mean": row["kl_bits"], "kl_ci": row["intervals_bits"]["kl"], "at_floor": row["at_floor"],
            "lr": tuning["chosen"]["lr"], "lrs": tuning["lrs"], "edge": tuning.get("edge"),
            "search_at_floor": tuning.get("at_floor"), "selection_uniform": tuning.get("uniform"),
            "search_flops": tuning.get("selection_flops"),
            "selection": [[c["lr"], c["mean"]] for c in tuning["candidates"]]}
        finite = all(v is not None and math.isfinite(v) for v in per_seed)
        a["verdict"] = ("a seed diverged" if not finite else "at the floor" if row["at_floor"] else
                        f"every seed below {NEAR_BAYES_BITS:g}" if max(per_seed) < NEAR_BAYES_BITS else "neither")
        a.update(state_floats=None, state_grows=None, state_length=None)
        if row["state_floats"] is not None:
            length = int(configs[run_id]["state"]["length"])
            here, before = state_at(find_checkpoint(run_id, db), length)
            if here != row["state_floats"]:
                raise SystemExit(f"zoo_answer.py: {row['arch']} on {entry['label']}: the checkpoint's model holds "
                                 f"{here} floats, the store says {row['state_floats']}")
            a.update(state_floats=here, state_grows=here > before, state_length=length)
        say(f"{entry['label']} / {row['arch']}: lr {a['lr']:g}, entropy MAE {a['entropy_mae_mean']:.4f}, "
            f"state {a['state_floats']}")
    for entry in tasks.values():
        archs = entry["archs"]
        if "transformer" in archs and archs["transformer"]["wall_s"]:
            for a in archs.values():
                a["wall_vs_transformer"] = a["wall_s"] / archs["transformer"]["wall_s"]
        entry["ordering"] = ordering(archs)
        entry["state_question"] = state_question(archs)
    return tasks


def ordering(archs: dict) -> list[list]:
    """[[arch, mean, relation to the next]]: sorted by mean, '<' where the two neighbours'
    intervals over seeds do not overlap, '~' where they do (cannot tell)."""
    names = sorted(archs, key=lambda n: archs[n]["entropy_mae_mean"])
    out = []
    for i, n in enumerate(names):
        rel = ""
        if i + 1 < len(names):
            nxt = archs[names[i + 1]]
            rel = "<" if archs[n]["entropy_mae_ci"][1] < nxt["entropy_mae_ci"][0] else "~"
        out.append([n, archs[n]["entropy_mae_mean"], rel])
    return out


def state_question(archs: dict) -> dict:
    """Spearman's rho of state floats against the mean entropy MAE: over the fixed-state
    architectures that carry something (the recurrent families), and over every one with a count."""
    out = {}
    for which, keep in (("recurrent", lambda a: a["state_grows"] is False and a["state_floats"] > 0),
                        ("every", lambda a: a["state_floats"] is not None)):
        names = sorted(n for n, a in archs.items() if keep(a))
        x = [float(archs[n]["state_floats"]) for n in names]
        y = [archs[n]["entropy_mae_mean"] for n in names]
        out[which] = ({"archs": names, "spearman": spearman(x, y), "p": permutation_p(x, y)} if len(names) >= 3
                      else {"archs": names})
    return out


def paired_with_fixed(tasks: dict, fixed_path: str) -> None:
    """Each tuned row against the fixed-recipe row of the same task and seeds (module docstring)."""
    from bayesbench.stats import holm, t_interval

    with open(fixed_path) as f:
        fixed = json.load(f)
    rows = fixed["boards"]["entropy_mae"]
    changed = []
    for name, entry in tasks.items():
        for arch, a in entry["archs"].items():
            match = [r for r in rows if r["settings"]["task"]["task"] == name and r["arch"] == arch
                     and r["eval"] == entry["eval"]]
            if not match:
                continue
            r = match[0]
            if r["seeds"] != a["seeds"]:
                raise SystemExit(f"zoo_answer.py: {arch} on {name}: fixed seeds {r['seeds']}, tuned {a['seeds']}")
            lr = r["settings"]["train"]["lr"]
            diff = [t - f for t, f in zip(a["entropy_mae"], r["per_seed_bits"])]
            p = {"lr": lr, "entropy_mae": r["per_seed_bits"], "entropy_mae_mean": r["entropy_mae_bits"],
                 "entropy_mae_ci": seed_ci(r["per_seed_bits"]), "state_floats": r.get("state_floats"),
                 "same_rate": abs(lr - a["lr"]) <= 1e-12 * lr}
            if p["same_rate"]:
                if max(abs(d) for d in diff) > 1e-7:  # both summaries hold 8 significant digits
                    raise SystemExit(f"zoo_answer.py: {arch} on {name} kept the fixed rate {lr:g} but does not "
                                     f"reproduce the fixed row (changes {diff})")
            else:
                t = t_interval(diff, null=0.0)
                p.update(change=t["mean"], change_ci=[t["ci_low"], t["ci_high"]], p=t["p"],
                         lower_on=sum(d < 0 for d in diff), of=len(diff))
                changed.append(p)
            a["fixed"] = p
    adjusted = holm([c["p"] if math.isfinite(c["p"]) else 1.0 for c in changed])  # untestable: p = 1, kept
    for c, q in zip(changed, adjusted):
        c["p_holm"] = q
        c["holm_family"] = len(changed)


# ---------------------------------------------------------------- the tables

def _b(x) -> str:
    from bayesbench.report.leaderboard import fmt_bits

    return fmt_bits(x)


def _ci(mean: float, ci: list) -> str:
    return f"{_b(mean)} [{_b(ci[0])}, {_b(ci[1])}]"


def _sci(x: float) -> str:
    mantissa, exponent = f"{x:.2e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _rate(x: float) -> str:
    from bayesbench.store.tuning import short

    return short(x)


def render(doc: dict) -> str:
    """The Markdown tables docs/leaderboard.md quotes (tests/test_docs_numbers.py renders them again)."""
    lines: list[str] = []
    for name in TASKS:
        entry = doc["tasks"].get(name)
        if not entry:
            continue
        archs = entry["archs"]
        order = [o[0] for o in entry["ordering"]]
        u = entry["floors"].get("uniform")
        length = next((a["state_length"] for a in archs.values() if a["state_length"]), None)
        lines += [f"**{entry['label']}, tuned** (eval `{entry['eval']}`, {entry['n_sequences']} sequences; "
                  f"uniform floor {_b(u)} bits):", "",
                  f"| arch | rate chosen | params | state (floats) at L={length} | grows | FLOPs / step "
                  "| entropy MAE, mean [95% CI] "
                  "| per seed | KL (bits) | reads |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for n in order:
            a = archs[n]
            rate = _rate(a["lr"]) + (" (edge)" if a["edge"] else "")
            grows = "-" if a["state_grows"] is None else ("yes" if a["state_grows"] else "no")
            state = "-" if a["state_floats"] is None else f"{a['state_floats']:,}"
            fl = "-" if not a["flops_per_step"] else _sci(a["flops_per_step"])
            lines.append(f"| {n} | {rate} | {a['params']:,} | {state} | {grows} | {fl} | "
                         f"{_ci(a['entropy_mae_mean'], a['entropy_mae_ci'])} | "
                         f"{' '.join(_b(v) for v in a['entropy_mae'])} | {_b(a['kl_mean'])} | {a['verdict']} |")
        lines += ["", "Selection score of each rate (entropy MAE on the 512 selection sequences, one selection seed; "
                  "the chosen rate in bold):", ""]
        lrs = archs[order[0]]["lrs"]
        lines += ["| arch | " + " | ".join(_rate(r) for r in lrs) + " |", "| --- |" + " --- |" * len(lrs)]
        for n in order:
            a = archs[n]
            cells = [f"**{_b(s)}**" if abs(lr - a["lr"]) <= 1e-12 * lr else _b(s) for lr, s in a["selection"]]
            lines.append(f"| {n} | " + " | ".join(cells) + " |")
        if any("fixed" in a for a in archs.values()):
            lines += ["", "Against the fixed recipe (the same seeds, initialisation and training sequences; change "
                      "= tuned - fixed, paired by seed, 95% t-interval; Holm over the rows whose rate changed):", "",
                      "| arch | fixed recipe | tuned | change | verdict |", "| --- | --- | --- | --- | --- |"]
            for n in order:
                f = archs[n].get("fixed")
                if not f:
                    continue
                fx = f"{_ci(f['entropy_mae_mean'], f['entropy_mae_ci'])} at {_rate(f['lr'])}"
                tu = f"{_ci(archs[n]['entropy_mae_mean'], archs[n]['entropy_mae_ci'])} at {_rate(archs[n]['lr'])}"
                if f["same_rate"]:
                    lines.append(f"| {n} | {fx} | the same row | 0 | no change: the same rate |")
                    continue
                held = f["p_holm"] < 0.05
                word = ("lower" if f["change"] < 0 else "higher") if held else "cannot tell"
                lines.append(f"| {n} | {fx} | {tu} | {f['change']:+.4f} [{f['change_ci'][0]:+.4f}, "
                             f"{f['change_ci'][1]:+.4f}], lower on {f['lower_on']} of {f['of']} seeds | "
                             f"{'**held: ' + word + '**' if held else word} (adjusted p {f['p_holm']:.2g}, "
                             f"{f['holm_family']} rows) |")
        rel = " ".join(f"{n} {m:.3f} {r}".rstrip() for n, m, r in entry["ordering"])
        lines += ["", f"Ordering: {rel}", ""]
        sq = entry["state_question"]
        for which, what in (("recurrent", "fixed-state architectures that carry a state"),
                            ("every", "every architecture with a count")):
            s = sq[which]
            if "spearman" in s:
                lines.append(f"- state against entropy MAE, {what} ({len(s['archs'])}): Spearman rho "
                             f"{s['spearman']:+.2f}, permutation p {s['p']:.2g}")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def keep(tasks: dict, path: str, command: str) -> dict:
    """Adds to `tasks` (the store's rows) the rows of the earlier summary at `path` for the (task,
    architecture) pairs `tasks` lacks (module docstring); returns {task: [architectures kept]}."""
    with open(path) as f:
        old = json.load(f)
    where = f"zoo_answer.py: --keep {path}"
    if old.get("written_by") != "scripts/zoo_answer.py" or not isinstance(old.get("tasks"), dict):
        raise SystemExit(f"{where}: not a summary this script wrote")
    if old.get("command") != command:
        raise SystemExit(f"{where}: made with {old.get('command')!r}, this summary with {command!r}; "
                         "rows of different recipes are not put in one table")
    kept: dict[str, list[str]] = {}
    for name, old_entry in old["tasks"].items():
        entry = tasks.get(name)
        if entry is None:
            entry = tasks[name] = {k: old_entry[k] for k in ("label", "eval", "n_sequences", "floors")}
            entry["archs"] = {}
        for k in ("label", "eval", "n_sequences", "floors"):
            if rounded(entry[k]) != rounded(old_entry[k]):  # the summary holds 8 significant digits
                raise SystemExit(f"{where}: {name}'s {k} is {old_entry[k]!r} there and {entry[k]!r} in the store")
        grids = {json.dumps(a["lrs"]) for a in [*entry["archs"].values(), *old_entry["archs"].values()]}
        if len(grids) > 1:
            raise SystemExit(f"{where}: {name} was searched over different rate grids ({sorted(grids)})")
        for arch, row in sorted(old_entry["archs"].items()):
            if arch in entry["archs"]:
                continue
            row = {k: v for k, v in row.items() if k != "fixed"}  # paired again with this run's --fixed
            row.setdefault("measured", old.get("measured"))
            row.setdefault("bayesbench", old.get("bayesbench"))
            entry["archs"][arch] = row
            kept.setdefault(name, []).append(arch)
    for entry in tasks.values():
        entry["ordering"] = ordering(entry["archs"])
        entry["state_question"] = state_question(entry["archs"])
    return kept


_NAN = float("nan")


def _interval(ci: list) -> tuple[float, float]:
    """A summary's [low, high] as a pair of floats (NaN where it holds none)."""
    lo, hi = (_NAN if v is None else float(v) for v in ci)
    return lo, hi


def figures(db: str, doc: dict, out_dir: str, *, say=print) -> list[str]:
    """The state figure and the search figure of each task the store holds rows of, drawn from the
    summary (module docstring), as zoo_state_<task>.png and zoo_tuning_<task>.png."""
    from bayesbench.report.selection import select_rows
    from bayesbench.report.state_plot import StatePoint, draw_state
    from bayesbench.report.tuning import draw_search, selection_scores
    from bayesbench.store.tuning import tuning_of

    out = []
    os.makedirs(out_dir, exist_ok=True)
    for name, entry in doc["tasks"].items():
        stored = [r for r in select_rows(db, task=name) if tuning_of(r)]
        if not stored:
            say(f"{entry['label']}: no row of it in the store; its figures left as they are")
            continue
        archs = entry["archs"]
        points = [StatePoint(n, a["state_floats"], a["entropy_mae_mean"], _interval(a["entropy_mae_ci"]),
                             len(a["seeds"])) for n, a in archs.items() if a["state_floats"] is not None]
        length = next((a["state_length"] for a in archs.values() if a["state_length"]), None)
        lacking = sum(a["state_floats"] is None for a in archs.values())
        dest = os.path.join(out_dir, f"zoo_state_{name}.png")
        out.append(draw_state(dest, entry["label"], entry["eval"], points, "entropy_mae",
                              uniform=entry["floors"].get("uniform"), length=length, lacking=lacking))
        tuning = tuning_of(stored[0])
        assert tuning is not None
        kept = bool(set(archs) - {r.arch for r in stored})  # rows the summary holds and the store does not
        if kept and tuning["selection_seeds"] != 1:
            raise SystemExit(f"zoo_answer.py: {name}: a kept row holds each rate's mean only; with "
                             f"{tuning['selection_seeds']} selection seeds its band cannot be drawn")
        selection = select_rows(db, task=name, selection=True)
        seeds = None if kept or not selection else (min(r.seed for r in selection), max(r.seed for r in selection))
        scores = ({n: {lr: [_NAN if v is None else v] for lr, v in a["selection"]} for n, a in archs.items()} if kept
                  else selection_scores(selection, tuning))  # from the store: every selection seed's score
        floor = next((a["selection_uniform"] for a in archs.values() if a["selection_uniform"] is not None), None)
        dest = os.path.join(out_dir, f"zoo_tuning_{name}.png")
        out.append(draw_search(dest, entry["label"], scores, {n: a["lr"] for n, a in archs.items()}, floor=floor,
                               tuning=tuning, steps=stored[0].steps, seeds=seeds))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--render", default="", help="print the Markdown tables of this summary and stop")
    p.add_argument("--db", help="the store of the tuned runs")
    p.add_argument("--fixed", default="", help="a scripts/docs_numbers.py summary of the fixed recipe to pair with")
    p.add_argument("--measured", help="when the runs were made (YYYY-MM-DD)")
    p.add_argument("--command", default="bayesbench run --preset quick --tune --tune-args selection_seeds=1 "
                   "--jobs 2 --tasks <task> --archs <architectures>")
    p.add_argument("--out", help="the JSON summary to write")
    p.add_argument("--figures", default="", help="folder for zoo_state_<task>.png and zoo_tuning_<task>.png")
    p.add_argument("--keep", default="", help="an earlier summary: the rows the store lacks are kept (docstring)")
    args = p.parse_args(argv)
    if args.render:
        with open(args.render) as f:
            print(render(json.load(f)), end="")
        return 0
    missing = [f"--{n}" for n in ("db", "measured", "out") if not getattr(args, n)]
    if missing:
        p.error(f"{', '.join(missing)} required (or --render SUMMARY)")
    for flag, path in (("--db", args.db), ("--fixed", args.fixed), ("--keep", args.keep)):
        if path and not os.path.isfile(path):
            print(f"zoo_answer.py: {flag} {path}: no such file", file=sys.stderr)
            return 2
    torch.set_num_threads(1)
    import bayesbench

    tasks = measure(args.db, say=lambda s: print(s, file=sys.stderr))
    if not tasks:
        print(f"zoo_answer.py: no tuned reported row of {', '.join(TASKS)} in {args.db}", file=sys.stderr)
        return 2
    for entry in tasks.values():
        for a in entry["archs"].values():
            a.update(measured=args.measured, bayesbench=bayesbench.__version__)
    kept = keep(tasks, args.keep, args.command) if args.keep else {}
    for name, archs in kept.items():
        print(f"{name}: kept from {args.keep}: {', '.join(archs)}", file=sys.stderr)
    if args.fixed:
        paired_with_fixed(tasks, args.fixed)

    doc = rounded({"measured": args.measured, "command": args.command, "written_by": "scripts/zoo_answer.py",
                   "bayesbench": bayesbench.__version__, "near_bayes_bits": NEAR_BAYES_BITS,
                   "fixed": args.fixed or None, "kept": kept or None, "tasks": tasks})
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=0)
        f.write("\n")
    print(f"wrote {args.out}")
    if args.figures:
        for path in figures(args.db, doc, args.figures, say=lambda s: print(s, file=sys.stderr)):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
