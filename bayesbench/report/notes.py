"""What the leaderboard's numbers mean, written once: the notes under `bayesbench leaderboard`'s
Markdown table (`table_notes`) and the footer of every page of `bayesbench site`
(`report/site.py`) are built from the definitions here, and every number they state (the
at-floor margin, the threshold, the still-improving drop) is read from its constant, so the
two cannot drift apart (the site's footer used to say "within 1%" where the table read
`AT_FLOOR`).

The table and the site word their notes for their own layout (a Markdown list under one
table; a footer under several sortable ones); what a definition says is one string or one
function of this module, used by both.
"""

from __future__ import annotations

from ..metric_table import AT_FLOOR, final_metrics
from .curve_stats import IMPROVING_REL
from .rows import AUC, Row, described, short

# what '(trained)' after an evaluation's name means: said under the Markdown table and on every site page
TRAINED_NOTE = ("'(trained)' after an evaluation's name: the evaluation set of the task and positions the row was "
                "trained on, the one its learning curves measure; the run's other evaluations score the same trained "
                "models on sets they were not trained for (other lengths K, other scored positions)")
# the two floors every evaluation set shows below its rows
FLOORS = "uniform = 1/C for every class; marginal = the best predictor that ignores the context"
# the floors of a continuous tunnel (issue 41: a Gaussian or mixture predictive, where no 1/C exists),
# said after FLOORS only where a table (or the site) holds such a tunnel's rows
CONTINUOUS_FLOORS = ("on a continuous tunnel (a Gaussian or mixture predictive: linreg, mixreg, kalman, a tunnel of "
                     "your own) the floor is the prior predictive, 'prior' (the predictive that ignores the context: "
                     "linreg's N(0, tau^2 |x|^2 + sigma^2), or with pool=M the uniform mixture over the pool's M "
                     "vectors; mixreg's mixture over its prior's components, kalman's "
                     "filter before any observation), with the tunnel's named reference predictors beside it "
                     "(linreg: 'least_squares' and 'ridge', a ridge with too strong a prior); uniform and marginal "
                     "do not exist there, and '(at floor)' is measured against 'prior'")
# what a row at a floor means (a "model" in the table, a "row" on the site)
AT_A_FLOOR = "at a floor has learned nothing usable from the context"
# the still-improving column, as both name it
STILL_IMPROVING = "'still improving' = how many seeds' curves still fall over their last fifth"
FLOPS_NOTE = ("- FLOPs per step = one training step (forward and backward, the row's batch) of one member, measured "
              "by torch.utils.flop_counter (matrix products, convolutions and attention; element-wise work such as "
              "a recurrent scan's gates, and the optimiser, not counted: an undercount for Mamba's scan and the "
              "LSTM's and GRU's gates); training FLOPs = that x the steps one member trained; a tuned row's search "
              "adds its selection runs' FLOPs (its note, 'search ...')")
STATE_NOTE = ("- state = the floats one member holds per sequence from one position to the next after the scored "
              "length (the primary evaluation's), counted by running each sequence-mixing layer's recurrent "
              "reference (models/state.py): an attention layer's K and V cache (it grows with the length), a "
              "convolution's input history, a recurrent layer's fixed state; parameters and integer counters not "
              "counted (docs/leaderboard.md#state-size)")

NO_MODEL_NOTE = ("- state 'no model' = a row scored from predictions made elsewhere (bayesbench score): there are no "
                 "layers whose state could be counted, so no number is given (--json: state_floats null)")


def has_continuous(agg: list[Row]) -> bool:
    """Whether any row is a continuous tunnel's (its floors are the prior predictive's, not uniform's)."""
    return any(row.floors and "prior" in row.floors and "uniform" not in row.floors for row in agg)


def near_floor() -> str:
    """How close to the uniform floor '(at floor)' marks a mean (`AT_FLOOR`)."""
    return f"within {AT_FLOOR:.0%} of the uniform floor"


def threshold_bits(threshold: float) -> str:
    """A 'steps to' threshold as both write it: '0.1 bits'."""
    return f"{threshold:g} bits"


def metric_definitions() -> list[tuple[str, str, str]]:
    """(metric, its short label, what it is) for every final metric of the metric table, in its order."""
    return [(m, short(m), described(m)) for m in final_metrics()]


def ranked_label(metric: str, curve_metric: str) -> str:
    """How the ranked column is named: the metric's label, or the AUC of the curve metric."""
    return short(metric) if metric != AUC else f"AUC of {short(curve_metric)} over log step"


def table_notes(agg: list[Row], metric: str, curve_metric: str, threshold: float, *, flops: bool,
                state: bool = False) -> list[str]:
    """The notes under the Markdown table ranked by `metric` (its rows `agg`, the curve columns of
    `curve_metric` at `threshold`; `flops`, `state`: the table has the FLOPs columns, the state
    column): what every column and mark means. The rows' scored positions, label-permutation checks
    and statuses follow them (`leaderboard.markdown`: they are the rows' data, not definitions)."""
    ranked = described(metric) if metric != AUC else (
        f"the area under the learning curve of {short(curve_metric)} against log(step), divided by the log-step "
        "range: the curve's mean over log(step), on the step range every row of the task and eval covers")
    notes = ["", f"Ranked by **{ranked_label(metric, curve_metric)}** = {ranked}. Every metric in bits (log base 2) "
             "over the task's fixed evaluation set (docs/science.md#metrics):"]
    notes += [f"- {label} = {what}" for _, label, what in metric_definitions()]
    notes += ["- 'per seed' lists each ensemble member in seed order; the interval is a t-interval of the mean over "
              "seeds (clipped at 0); 'x best' = mean / best mean on that task and eval (floors excluded); wall = "
              "training wall time of the whole ensemble (all seeds at once; the mean over runs when a row pools "
              "several); "
              "'seeds' = how many seeds the row pools (every stored run of the same task, arch and configuration; a "
              "seed run twice counts once, its newest run), then which.",
              f"- {TRAINED_NOTE}",
              *curve_notes(agg, curve_metric, threshold),
              *([FLOPS_NOTE] if flops else []),
              *([STATE_NOTE] if state else []),
              *([NO_MODEL_NOTE] if state and any((row.state or {}).get("no_model") for row in agg) else []),
              "- rows are ranked only against rows scored on the same evaluation set (task, evaluation, number of "
              "sequences and the tunnel's code: the set is fixed by these) with the same metric definitions; a table "
              "holding several of one evaluation says what sets each apart ('512 seq'; 'tunnel contents 1a2b..', an "
              "edited tunnel file; 'metric definitions entropy_mae=v2', a changed metric) and gives each its own "
              "floors and 'x best'; rows made by different code (file contents, versions: docs/results.md) are never "
              "pooled, and the settings column names it ('model_code=...') where that is all they differ by",
              f"- '(at floor)': the row's mean is {near_floor()} of its set, or above it; "
              "'(k of n diverged, at step s)': those members' numbers are not results (shown as 'diverged@s' and "
              "left out of the mean and its interval)",
              f"- floor rows (computed, not trained, on the same sequences): {FLOORS} (the mean posterior at each "
              f"position, estimated from an independent sample)"
              + (f"; {CONTINUOUS_FLOORS}" if has_continuous(agg) else "") + f". A model {AT_A_FLOOR}."]
    return notes


def curve_notes(agg: list[Row], metric: str, threshold: float) -> list[str]:
    """What the curve columns are, and on which sequences they were measured."""
    sets = sorted({(row.task, row.eval, c.n_sequences) for row in agg for c in row.curves if c is not None})
    if not sets:
        return ["- learning curves: none stored for these rows (runs stored without curves, or --no-curves): the "
                "curve columns are empty"]
    where = "; ".join(f"{t} {e}: {n} sequences" for t, e, n in sets)
    return [f"- learning curves ({where}; a fixed set drawn apart from the evaluation set, measured at log-spaced "
            "training steps): 'steps to' = the first measured step from which a seed's curve of "
            f"{short(metric)} stays <= {threshold_bits(threshold)} (the crossing lies after the measured step before "
            "it); with every seed there, the geometric mean over seeds with a 95% t-interval of log(steps) and the "
            "sequences it took per member; otherwise the median over all seeds (one that never got there counts as "
            f"later) and how many reached it, no interval; {STILL_IMPROVING} (a least-squares line against log(step) "
            f"falling by more than twice its standard error and by more than {IMPROVING_REL:.0%} of its value there; "
            "docs/leaderboard.md); a member stopped by --until counts up to its stop"]


def site_notes(metric: str, threshold: float, *, continuous: bool = False) -> list[str]:
    """The site's footer notes after its metric definitions, as plain sentences (the site ranks by
    `metric` and counts 'steps to' `threshold` bits of it): how rows pool, the floors and
    '(at floor)' (`continuous`: the site holds a continuous tunnel's rows, whose floor is the prior
    predictive), the curve columns and the tuned tables. `TRAINED_NOTE` closes the footer."""
    label = short(metric)
    return ["A row pools every stored seed of one task, evaluation set, architecture and configuration: the mean "
            "over seeds, with its 95% t-interval over seeds in brackets (clipped at 0); 'per seed' lists each seed's "
            f"value of the {label}. Rows are ranked only against rows of the same evaluation set.",
            f"Floor rows (in italics, under each table) are computed on the same sequences: {FLOORS}"
            + (f"; {CONTINUOUS_FLOORS}" if continuous else "") + ". A row "
            f"{AT_A_FLOOR}; '(at floor)' marks a mean {near_floor()} or above it.",
            "'steps to' = the first measured training step from which a seed's learning curve of "
            f"{label} stays at or below {threshold_bits(threshold)} (over seeds: the geometric mean with its 95% "
            f"interval when every seed got there); {STILL_IMPROVING} (docs/leaderboard.md#learning-curves).",
            "'tuned' tables hold the rows whose configuration records a hyperparameter tuning "
            "(config[\"tuning\"]): shown apart from the untuned rows, never ranked in one table with them."]
