"""Every dynamics number the docs quote from a measured study equals the number its study's summary
keeps in the repository (docs/data/*.json), as tests/test_docs_numbers.py does for the leaderboard.

Issue 44: the dynamics pages quoted numbers from summaries kept only in /tmp stores, so a re-run
could change a page's number with nothing to notice. Each entry of QUOTED is (doc, template,
summary file, key path, format): the doc must contain `template` with "{}" replaced by the value at
`key path` of the summary (keys separated by "/", list indices as integers) formatted by `format`.
The list is generic: a page, a summary or a number is one more entry."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "docs" / "data"

Entry = tuple[str, str, str, str, str]  # (doc, template with "{}", summary under docs/data, key path, format)

_EM = "docs/em_vs_sgd.md"
_CONF = "emsgd_grid_seeds11-18.json"  # the confirmatory grid run, seeds 11-18
_REPRO = "emsgd_reproduction.json"  # the authors' five seeds, sgd and em

# The grid table of em_vs_sgd.md: one entry per row (family, validation score, steps to 50% of the
# gap, test loss at the validation-chosen step), the row's point named in its template.
_GRID_ROWS = ("sgd0.3", "sgd", "sgd3", "sgd10", "sgd30", "v1-o0.3", "v3-o0.3", "v3-o1", "v10-o0.3", "em", "v10-o3",
              "v30-o0.3", "v30-o1", "v30-o3", "v30-o10", "v1-o3", "v1-o10", "v3-o10")
_FAMILY = {"equal": "equal rate", "value_faster": "W_V faster", None: "W_V slower (neither)"}


def _grid_rows(summary_file: str) -> list[Entry]:
    s = json.loads((DATA / summary_file).read_text())
    family = {n: f for f, names in s["grid"]["families"].items() for n in names}
    out = []
    for n in _GRID_ROWS:
        f = family.get(n)
        chosen = " (chosen)" if f and s["grid"]["chosen"][f] == n else ""
        score = f"{{0[grid][scores][{f}][{n}]:.4f}}" if f else "-"
        out.append((_EM, f"| `{n}`{chosen} | {_FAMILY[f]} | {{}} |", summary_file, ".",
                    score + f" | {{0[gap][{n}][median_steps][1]:.0f}} ({{0[gap][{n}][reached][1]}}/{{0[seeds]}}) | "
                            f"{{0[held_out][{n}][early_stopped][mean]:.4f}}"))
    return out


def _row(doc: str, label: str, cells: list[tuple[str, str]]) -> list[Entry]:
    """One entry per cell of a table row whose columns come from different summaries: each entry
    holds the whole row as the page writes it, the other cells rendered from their own summaries and
    this one left as "{}" (so every cell is checked against its summary and the row against the page).
    `cells`: (summary file, format) per column."""
    rendered = [fmt.format(json.loads((DATA / f).read_text())) for f, fmt in cells]
    return [(doc, f"| {label} | " + " | ".join(rendered[:k] + ["{}"] + rendered[k + 1:]) + " |\n", f, ".", fmt)
            for k, (f, fmt) in enumerate(cells)]


# The grid in the other settings (em_vs_sgd.md): one column per run, rows the primary claims 1-3 as
# the confirmatory table writes them, then the routing control `wqk10` and the ties.
_EM_RUNS = ("emsgd_grid_means_per_seed_seeds11-18.json",  # paper variant, T = 300, each seed its own means
            "emsgd_grid_beta_seeds11-18.json",  # Beta-sticky, 40 sequences of 50 per seed
            "emsgd_grid_T2000_seeds4.json")  # the authors' T = 2000, their first 4 seeds
_EM_CELLS = (
    ("1. EM-like reaches SGD's final training loss sooner (per-seed speed-up)",
     '{0[verdicts][0][number]}, {0[speedup_per_seed][reached]}/{0[seeds]} seeds (pooled'
     ' {0[speedup_pooled][value]:.2f}x); Holm {0[verdicts][0][p_adj]:.2g}: **{0[verdicts][0][verdict]}**'),
    ("2. two timescales beat one at a tuned rate (paired speed-up at 50% of the gap)",
     '{0[verdicts][1][number]} (`{0[grid][chosen][value_faster]}` over `{0[grid][chosen][equal]}`,'
     ' {0[grid][speedup][50%][n]} seeds); Holm {0[verdicts][1][p_adj]:.2g}: **{0[verdicts][1][verdict]}**'),
    ("3. the tuned W_V-faster point learns the chain better (test loss difference, nats)",
     '{0[verdicts][2][number]}; Holm {0[verdicts][2][p_adj]:.2g}: **{0[verdicts][2][verdict]}**'),
    ("claim 2 against the points validation cannot tell from the chosen ones (robust to ties)",
     '{ties} (`robust_to_ties`: {0[grid][robust_to_ties]})'),
    ("secondary: EM-like against `wqk10` (10x on W_Q, W_K alone) at 50% of the gap",
     '{0[against][wqk10][gap_speedup][50%][mean]:.2f}x [{0[against][wqk10][gap_speedup][50%][ci_low]:.2f},'
     ' {0[against][wqk10][gap_speedup][50%][ci_high]:.2f}] ({0[against][wqk10][gap_speedup][50%][n]} seeds)'),
)


def _ties(s: dict) -> str:
    """Claim 2's comparison against each tied point, as the page writes it ("none" without ties)."""
    parts = []
    for fam in ("value_faster", "equal"):
        for name, r in s["grid"]["against_ties"][fam].items():
            other = f"`{s['grid']['chosen']['value_faster']}` over `{name}`" if fam == "equal" else \
                f"`{name}` over `{s['grid']['chosen']['equal']}`"
            parts.append(f"{other} {r['mean']:.2f}x")
    return "; ".join(parts) or "none"


def _em_rows() -> list[Entry]:
    """em_vs_sgd.md's table of the other settings, a row per claim, a column per run."""
    out = []
    for label, fmt in _EM_CELLS:
        out += _row(_EM, label, [(f, fmt.replace("{ties}", _ties(json.loads((DATA / f).read_text()))))
                                 for f in _EM_RUNS])
    return out


_DYN = "docs/dynamics.md"
_CONFIRM = "dynamics_confirmatory_sticky_constant_seeds8-15.json"  # seeds 8-15, per-seed sets
_EXPLORE = "dynamics_issue44_sticky_constant.json"  # the same command on seeds 0-5, one shared set
# The confirmatory table of dynamics.md: (claim cell, layer cell, index of the primary verdict)
_CONFIRM_ROWS = (("routing law, held-out alignment", "0", 0), ("", "1", 2), ("value law, held-out alignment", "0", 1),
                 ("", "1", 3), ("proportionality, Delta s = eta alpha A", "both", 4),
                 ("the maps freeze (step 125)", "0", 6), ("", "1", 9), ("the freeze is a dissociation", "0", 7),
                 ("", "1", 10), ("the frame settles before the precision (one-interval floor: not read)", "0", 5),
                 ("", "1", 8))


def _verdict(summary_file: str, i: int) -> str:
    """The format of primary verdict i as the table writes it: number, verdict, Holm p where tested."""
    v = json.loads((DATA / summary_file).read_text())["verdicts"][i]
    holm = f" (Holm p {{0[verdicts][{i}][p_adj]:.4g}})" if v["p_adj"] is not None else ""
    return f"{{0[verdicts][{i}][number]}}: **{{0[verdicts][{i}][verdict]}}**" + holm


def _confirm_rows() -> list[Entry]:
    out = []
    for claim, layer, i in _CONFIRM_ROWS:
        out.append((_DYN, f"| {claim} | {layer} | {{}} |", _EXPLORE, ".", _verdict(_EXPLORE, i)))
        out.append((_DYN, " | {} |\n", _CONFIRM, ".", _verdict(_CONFIRM, i)))  # the row's last cell
    return out


# a profile summary's calibration as the confirmatory sections write it: first -> last, both metrics
_CALIBRATION = ("{0[calibration][entropy_mae][first]} -> {0[calibration][entropy_mae][last]} bits, KL"
                " {0[calibration][kl][first]} -> {0[calibration][kl][last]}")
_FULL_COS = "dynamics_confirmatory_sticky_cosine_full_seeds8-15.json"  # seeds 8-15, 800 steps, cosine
_FULL_CONST = "dynamics_confirmatory_sticky_constant_full_seeds8-15.json"  # the same at a constant rate
_REL = "dynamics_confirmatory_bijection_relevance_seeds8-15.json"  # the relevance instrument, seeds 8-15


def _full_rows() -> list[Entry]:
    """The full-size confirmatory table of dynamics.md: one row per primary verdict, its claim as the
    summaries name it (the two runs' families are the same, in the same order), then the cosine
    run's cell and the constant run's."""
    cos, const = (json.loads((DATA / f).read_text())["verdicts"] for f in (_FULL_COS, _FULL_CONST))
    assert [v["claim"] for v in cos] == [v["claim"] for v in const]
    out = []
    for i, v in enumerate(cos):
        out += _row(_DYN, v["claim"], [(f, _verdict(f, i)) for f in (_FULL_COS, _FULL_CONST)])
    return out


# The confirmatory table of the other settings (dynamics.md): one column per setting, each from
# its own summary; a row per primary claim of the sticky family (relevance has its own table).
_OTHER = ("dynamics_confirmatory_sticky_sgd_full_seeds8-15.json",  # plain SGD 0.05, cosine, 800 steps
          "dynamics_confirmatory_sticky_step_full_seeds8-15.json",  # AdamW 2e-3, step schedule
          "dynamics_confirmatory_bijection_paper_full_seeds8-15.json",  # paper-text bijection, 2000 steps
          _REL)  # bijection with repeated keys, 6000 steps (one-interval floor)


def _claim_label(claim: str) -> str:
    """A primary claim without what varies between settings: the freeze's step (the last checkpoint
    before the late window) and the order test's name (sign test where the floor spans the late
    window, the entropy MAE against the one-interval floor where it does not)."""
    claim = re.sub(r" left at step \d+\)", ")", claim)
    return claim.replace(": seeds where the frame settled first (censored leads by sign)", "")


def _other_rows() -> list[Entry]:
    """dynamics.md's table of the other settings, a row per primary claim, a column per setting. The
    families share their first 11 members in one order (the relevance run adds 2, in their own
    table)."""
    families = [json.loads((DATA / f).read_text())["verdicts"] for f in _OTHER]
    out = []
    for i, v in enumerate(families[0]):
        label = _claim_label(v["claim"])
        assert all(_claim_label(fam[i]["claim"]) == label for fam in families), label
        out += _row(_DYN, label, [(f, _verdict(f, i)) for f in _OTHER])
    return out


_GEO = "docs/geometry.md"
_GEO_CONFIRM = "geometry_confirmatory_seeds8-15.json"  # `bayesbench geometry --json` on the four seeds-8-15 runs


def _geometry_rows() -> list[Entry]:
    """geometry.md's confirmatory table: per primary claim (its number, a pipe escaped), the cells of
    the sticky chain, the bijection with repeated keys, the paper-text bijection and the HMM, each
    rendered from the summary (pipes inside a number escaped for the table; no Holm p where the
    claim is not tested)."""
    runs = json.loads((DATA / _GEO_CONFIRM).read_text())["runs"]
    out = []
    for i, v in enumerate(runs["sticky_cosine"]["verdicts"]):
        if v["family"] != "primary":
            continue
        cells = []
        for r in ("sticky_cosine", "bijection_repeats", "bijection_paper", "hmm"):
            w = runs[r]["verdicts"][i]
            holm = f" (Holm p {w['p_adj']:.2g})" if w["p_adj"] is not None else ""
            cells.append(f"{w['number']}: **{w['verdict']}**{holm}".replace("|", "\\|"))
        claim = v["claim"].replace("|", "\\|")
        out.append((_GEO, f"| {i + 1}. {claim} | {{}} |\n", _GEO_CONFIRM, ".", " | ".join(cells)))
    return out


QUOTED: list[Entry] = [
    (_EM, "| 1. EM-like reaches SGD's final training loss sooner (per-seed speed-up) | {} |", _CONF, ".",
     '{0[verdicts][0][number]}, {0[speedup_per_seed][reached]}/{0[seeds]} seeds (pooled'
     ' {0[speedup_pooled][value]:.2f}x); Holm {0[verdicts][0][p_adj]:.2g}:'
     ' **{0[verdicts][0][verdict]}**'),
    (_EM, 'paired speed-up at 50% of the gap | {} |', _CONF, ".",
     '{0[verdicts][1][number]} (`{0[grid][chosen][value_faster]}` over `{0[grid][chosen][equal]}`,'
     ' {0[grid][speedup][50%][n]} seeds); Holm {0[verdicts][1][p_adj]:.2g}:'
     ' **{0[verdicts][1][verdict]}** (read below)'),
    (_EM, "minus the tuned equal-rate point's (nats) | {} |", _CONF, ".",
     '{0[verdicts][2][number]}; Holm {0[verdicts][2][p_adj]:.2g}: **{0[verdicts][2][verdict]}**'),
    (_EM, 'three best validation scores are {} (`sgd3`)', _CONF, ".",
     '{0[grid][scores][equal][sgd3]:.4f}'),
    (_EM, '(`sgd3`), {} (`sgd10`)', _CONF, ".",
     '{0[grid][scores][equal][sgd10]:.4f}'),
    (_EM, '(`sgd10`) and {}\n(`sgd30`)', _CONF, ".",
     '{0[grid][scores][equal][sgd30]:.4f}'),
    (_EM, 'two best are\n{} (`v30-o10`)', _CONF, ".",
     '{0[grid][scores][value_faster][v30-o10]:.4f}'),
    (_EM, '(`v30-o10`) and {} (`v10-o3`)', _CONF, ".",
     '{0[grid][scores][value_faster][v10-o3]:.4f}'),
    (_EM, 'the routing step `wqk10` reaches {} (EM-like', _CONF, ".",
     '{0[held_out][wqk10][early_stopped][mean]:.4f}'),
    (_EM, '(EM-like {})', _CONF, ".",
     '{0[held_out][em][early_stopped][mean]:.4f}'),
    (_EM, '`sgd-emtotal` at 50% of the gap {}', _CONF, ".",
     '{0[against][sgd-emtotal][gap_speedup][50%][mean]:.2f}x'
     ' [{0[against][sgd-emtotal][gap_speedup][50%][ci_low]:.2f},'
     ' {0[against][sgd-emtotal][gap_speedup][50%][ci_high]:.2f}]'),
    (_EM, '`sgd-emnorm` {}', _CONF, ".",
     '{0[against][sgd-emnorm][gap_speedup][50%][mean]:.2f}x'
     ' [{0[against][sgd-emnorm][gap_speedup][50%][ci_low]:.2f},'
     ' {0[against][sgd-emnorm][gap_speedup][50%][ci_high]:.2f}]'),
    (_EM, '`wqk10` {}', _CONF, ".",
     '{0[against][wqk10][gap_speedup][50%][mean]:.2f}x'
     ' [{0[against][wqk10][gap_speedup][50%][ci_low]:.2f},'
     ' {0[against][wqk10][gap_speedup][50%][ci_high]:.2f}]'),
    (_EM, '`wo10` {}', _CONF, ".",
     '{0[against][wo10][gap_speedup][50%][mean]:.2f}x'
     ' [{0[against][wo10][gap_speedup][50%][ci_low]:.2f},'
     ' {0[against][wo10][gap_speedup][50%][ci_high]:.2f}]'),
    (_EM, '`nice -n 5`: {} of wall time.', _CONF, ".",
     '{0[cpu_s]:.0f} s of CPU, {0[wall_s]:.0f} s'),
    (_EM, 'cannot tell the chosen\n`v30-o10` from {}. Against', _CONF, ".",
     '`{0[grid][ties][value_faster][0]}`, `{0[grid][ties][value_faster][1]}`,'
     ' `{0[grid][ties][value_faster][2]}` and `{0[grid][ties][value_faster][3]}`'),
    (_EM, 'those tied points\ngive {}: on one side', _CONF, ".",
     '{0[grid][against_ties][value_faster][v3-o1][mean]:.2f}x'
     ' [{0[grid][against_ties][value_faster][v3-o1][ci_low]:.2f},'
     ' {0[grid][against_ties][value_faster][v3-o1][ci_high]:.2f}] (`v3-o1`),'
     ' {0[grid][against_ties][value_faster][em][mean]:.2f}x'
     ' [{0[grid][against_ties][value_faster][em][ci_low]:.2f},'
     ' {0[grid][against_ties][value_faster][em][ci_high]:.2f}] (`em`),'
     ' {0[grid][against_ties][value_faster][v10-o3][mean]:.2f}x'
     ' [{0[grid][against_ties][value_faster][v10-o3][ci_low]:.2f},'
     ' {0[grid][against_ties][value_faster][v10-o3][ci_high]:.2f}] (`v10-o3`) and'
     ' {0[grid][against_ties][value_faster][v30-o3][mean]:.2f}x'
     ' [{0[grid][against_ties][value_faster][v30-o3][ci_low]:.2f},'
     ' {0[grid][against_ties][value_faster][v30-o3][ci_high]:.2f}] (`v30-o3`)'),
    (_EM, '(`robust_to_ties`: {}; recomputed', _CONF, ".",
     '{0[grid][robust_to_ties]}'),
    (_EM, "gives per-seed steps\n{} and the authors' pooled rule", _REPRO, ".",
     '{0[speedup_per_seed][steps][0]}, {0[speedup_per_seed][steps][1]},'
     ' {0[speedup_per_seed][steps][2]}, {0[speedup_per_seed][steps][3]},'
     ' {0[speedup_per_seed][steps][4]}'),
    (_EM, "the authors' pooled rule {} as the authors'", _REPRO, ".",
     '{0[speedup_pooled][value]:.2f}x,'),
    (_EM, '`docs/data/emsgd_reproduction.json`, {} of CPU)', _REPRO, ".",
     '{0[cpu_s]:.0f} s'),
    (_DYN, "Entropy MAE {} (mean over the 8 seeds)", _CONFIRM, ".",
     _CALIBRATION),
    (_DYN, "--threads 1 --no-progress --json   # {}", _CONFIRM, ".",
     "{0[timing][wall_s_measured]} s wall (load average 8-11), {0[timing][cpu_s]} s CPU"
     " ({0[timing][replicas_cpu_s]} s of it in the replicas)"),
    (_DYN, "Entropy MAE {} and", _FULL_COS, ".",
     "{0[calibration][entropy_mae][first]} -> {0[calibration][entropy_mae][last]} bits under cosine"),
    (_DYN, "bits under cosine and {} at the constant rate; KL", _FULL_CONST, ".",
     "{0[calibration][entropy_mae][first]} -> {0[calibration][entropy_mae][last]}"),
    (_DYN, "rate; KL\n{} and", _FULL_COS, ".", "{0[calibration][kl][first]} -> {0[calibration][kl][last]}"),
    (_DYN, " and -> {} (mean over the 8 seeds)", _FULL_CONST, ".", "{0[calibration][kl][last]}"),
    (_DYN, "runs_cos                        # {}", _FULL_COS, ".",
     "{0[timing][wall_s_measured]:.0f} s wall, {0[timing][cpu_s]:.0f} s CPU ({0[timing][replicas_cpu_s]:.0f} s of it"
     " in {0[timing][replica_steps]:.0f} replica steps)"),
    (_DYN, "runs_const  # {}", _FULL_CONST, ".",
     "{0[timing][wall_s_measured]:.0f} s wall, {0[timing][cpu_s]:.0f} s CPU ({0[timing][replicas_cpu_s]:.0f} s in the"
     " replicas)"),
    (_DYN, "Entropy MAE {} (mean over the 8 seeds). Numbers:\n[`data/dynamics_confirmatory_bijection", _REL, ".",
     _CALIBRATION),
    (_DYN, "# {} (one core; a test suite ran on the other)", _REL, ".",
     "{0[timing][wall_s_measured]:.0f} s wall, {0[timing][cpu_s]:.0f} s CPU"),
    (_DYN, "share does reach 0.5 before attention's on every seed in both layers ({}: cannot tell)", _REL, ".",
     "{0[verdicts_secondary][30][number]},\nsecondary, Holm p {0[verdicts_secondary][30][p_adj]:.4g}"),
] + [
    (_DYN, f"{anchor}   # {{}}", f, ".",
     "{0[timing][wall_s_measured]:.0f} s wall, {0[timing][cpu_s]:.0f} s CPU ({0[timing][replicas_cpu_s]:.0f} s of it"
     " in {0[timing][replica_steps]:.0f} replica steps)")
    for anchor, f in (("--runs-dir runs_sgd", _OTHER[0]), ("--runs-dir runs_step", _OTHER[1]),
                      ("--runs-dir runs_paper", _OTHER[2]))] + [
    (_DYN, f"{name}{{}}", f, ".", " {0[calibration][entropy_mae][first]} -> {0[calibration][entropy_mae][last]}"
     " (KL {0[calibration][kl][first]} -> {0[calibration][kl][last]})")
    for name, f in (("plain SGD", _OTHER[0]), ("step schedule", _OTHER[1]), ("paper-text bijection", _OTHER[2]))
] + [
    (_EM, "2000 the authors' four seeds take {} EM-like steps", _EM_RUNS[2], ".",
     "{0[speedup_per_seed][steps][0]}, {0[speedup_per_seed][steps][1]}, {0[speedup_per_seed][steps][2]} and"
     " {0[speedup_per_seed][steps][3]}"),
    (_EM, "(4 seeds; exact filtering floor {} nats", _EM_RUNS[2], ".",
     "{0[floors_nats][exact predictive floor (mean over seeds)]:.4f}"),
] + [(_EM, f"{cmd}   # {{}}", f, ".", "{0[cpu_s]:.0f} s of CPU, {0[wall_s]:.0f} s of wall time")
     for cmd, f in (("db='em_means.sqlite')\"", _EM_RUNS[0]), ("db='em_beta.sqlite')\"", _EM_RUNS[1]),
                    ("--no-progress --json", _EM_RUNS[2]))
] + _grid_rows(_CONF) + [e for f in _EM_RUNS for e in _grid_rows(f)] + _em_rows() + _confirm_rows() \
    + _full_rows() + _other_rows() + _geometry_rows() + [
    (_DYN, f"| {v['claim']} | {{}} |", _REL, ".", _verdict(_REL, i))
    for i, v in enumerate(json.loads((DATA / _REL).read_text())["verdicts"]) if "relevant key" in v["claim"]]


def value_at(summary: dict, path: str):
    """The value at a "/"-separated key path (an all-digit key indexes a list); "." is the whole
    summary (for a format that reads several of its numbers, e.g. "{0[a][b]:.2f} [{0[a][c]:.2f}]")."""
    if path == ".":
        return summary
    node = summary
    for key in path.split("/"):
        node = node[int(key)] if isinstance(node, list) else node[key]
    return node


def render(entry: Entry) -> str:
    """The text the doc must hold for `entry`."""
    _, template, summary, path, fmt = entry
    value = value_at(json.loads((DATA / summary).read_text()), path)
    text = fmt.format(*value) if isinstance(value, list) and fmt.count("{") > 1 else fmt.format(value)
    return template.replace("{}", text)


def check(entries: list[Entry], docs: dict[str, str] | None = None) -> list[str]:
    """The entries whose rendered text is not in their doc (docs: path -> text, read when absent)."""
    bad = []
    for entry in entries:
        text = (docs or {}).get(entry[0]) or (ROOT / entry[0]).read_text()
        want = render(entry)
        if want not in text:
            bad.append(f"{entry[0]}: {want!r} not found ({entry[2]}: {entry[3]})")
    return bad


@pytest.mark.parametrize("entry", QUOTED, ids=lambda e: f"{Path(e[0]).stem}:{e[3]}")
def test_every_quoted_dynamics_number_is_its_summarys(entry):
    bad = check([entry])
    assert not bad, "a dynamics page quotes a number its summary (docs/data/) does not hold:\n" + "\n".join(bad)


def test_a_changed_number_is_caught():
    """Not vacuous: a quoted number moved by one digit in the page fails its entry."""
    assert QUOTED
    doc, template, *_ = QUOTED[0]
    text = (ROOT / doc).read_text()
    want = render(QUOTED[0])
    digits = [i for i, c in enumerate(want) if c.isdigit()]
    i = digits[-1]
    changed = want[:i] + str((int(want[i]) + 1) % 10) + want[i + 1:]
    assert check([QUOTED[0]], {doc: text.replace(want, changed)})


def test_the_summaries_are_small():
    for path in DATA.glob("*.json"):
        assert path.stat().st_size < 200_000, f"{path.name}: keep the quoted summary small"
