"""Named experiment presets as data: which tasks, architectures, sizes, steps and evaluations.

`paper` is the papers' setting (Paper I, "The Bayesian Geometry of Transformer Attention",
arXiv 2512.22471, Sec. 3 and Table 1, as the authors' code runs it; docs/reproducing.md): the
bijection with V = 20, 19 pairs, keys drawn with replacement and a final retrieval query,
scored at the value positions (and, as a second evaluation, with the query too); the HMM with
the 53-token header, the authors' clipped and rounded prior, soft targets, dropout 0.1, trained
at K = 20 and scored at K = 20, 30 and 50. For a GPU.

`quick` is the same settings scaled down for a 2-core CPU (the whole `bayesbench run --preset
quick` in about 15 minutes), so its numbers are the same kind of number as `paper`'s: smaller
V and models, fewer steps, fewer architectures on the HMM, whose header is given as 10 rows
(`rows_rounded`: the same clipped and rounded matrices, posteriors and floors) instead of 53
tokens, a third of the sequence length.

Architectures named here get the model config given; an entry with `match` (the MLPs, LSTM,
GRU, Mamba) gets its widths chosen so its parameter count is within 1% of the named model's on
the same task (each architecture's `match_params`). Every other registered architecture runs on
every task of every preset by name (not by default) as `{"match": MATCHED_TO}`
(`TaskSetup.model`): capacity-matched to that task's transformer, at its builder's defaults
otherwise. Every registered tunnel a preset does not name runs by name too (`registered_setup`):
the task at its own defaults, trained and scored as the preset's outside tunnels are.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: The architecture every other is capacity-matched to where a preset names no config for it
#: (`TaskSetup.model`); every task of every preset names its config.
MATCHED_TO = "transformer"


@dataclass(frozen=True)
class TaskSetup:
    """One task of a preset: the task, its training, its models and its evaluation."""

    label: str  # e.g. "bijection V=8": the leaderboard's task column
    task: dict  # task_from_config(task): {"task": name, **fields}, as Task.config() gives
    train: dict  # TrainConfig fields
    models: dict[str, dict]  # arch -> model config
    seeds: int = 3  # ensemble members, seeds 0..seeds-1
    eval_lengths: tuple[int, ...] = ()  # HMM: K values scored (the trained K first)
    eval_scored: tuple[str, ...] = ()  # bijection: scored position sets, e.g. ("values", "values+query")
    eval_sequences: int = 4096
    archs: tuple[str, ...] | None = None  # architectures run by default on this task (None: the preset's)
    # `--tune`'s search on this task (`sweep/tune.py` `TuneSpec.of`): a log-spaced grid of at least
    # 5 rates over at least 30x, the selection seeds; None: not tunable here
    tune: dict | None = None

    def model(self, arch: str) -> dict:
        """The model config of architecture `arch` on this task: the one named here, else the
        capacity match to this task's transformer, `{"match": MATCHED_TO}` (a new architecture
        runs on every task of every preset with no entry here)."""
        if arch in self.models:
            return dict(self.models[arch])
        if arch == MATCHED_TO:
            raise ValueError(f"task {self.label!r} names no {MATCHED_TO} config: the other architectures match it")
        return {"match": MATCHED_TO}


def log_rates(low: float, high: float, n: int = 5) -> tuple[float, ...]:
    """n learning rates log-spaced from low to high, to two significant digits (a tuning grid)."""
    return tuple(float(f"{low * (high / low) ** (k / (n - 1)):.2g}") for k in range(n))


# `--tune` grids (sweep/tune.py): 5 rates over 100x around each task's fixed recipe, 2 selection
# seeds per rate; the rates of one task train as one ensemble (per-member rates).
_QUICK_TUNE_BIJECTION = {"lrs": log_rates(1e-4, 1e-2), "selection_seeds": 2}
_QUICK_TUNE_SHORT = {"lrs": log_rates(2e-4, 2e-2), "selection_seeds": 2}  # the sticky chain's and the HMM's 2e-3
# The papers' scale on a GPU: 5 rates over 30x around the papers' rate, 2 selection seeds: one
# ensemble of 10 members per architecture (the whole grid one step), the 3 reported seeds after.
_PAPER_TUNE_BIJECTION = {"lrs": log_rates(2e-4, 6e-3), "selection_seeds": 2}
_PAPER_TUNE_HMM = {"lrs": log_rates(5e-5, 1.5e-3), "selection_seeds": 2}


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    tasks: dict[str, TaskSetup]
    archs: tuple[str, ...]  # run by default
    device: str = "auto"
    checkpoint_every: int = 0
    # how an outside tunnel (`--task ./mine.py:build`), or a registered tunnel not in `tasks`, is
    # trained and scored in this preset: its label and task are filled in by `outside_setup`
    # (`registered_setup`)
    outside: TaskSetup | None = None
    # setups of registered tunnels run by name only, never by default (`bayesbench run --tasks
    # linreg`): `registered_setup` gives them in place of the `outside` template (the continuous
    # tunnels, issue 41)
    named: dict[str, TaskSetup] = field(default_factory=dict)


_QUICK_TRANSFORMER = {"n_layer": 2, "n_head": 2, "d_model": 64, "d_ffn": 128}
# Every other architecture is capacity-matched to the quick transformer (within 1%) on each task.
# Linear attention has the transformer's exact count at the same shape; its quadratic form is the
# same function as the cumulative-sum form and faster for these short sequences. Mamba keeps two
# blocks and d_state 8 (paper: 16) to fit the CPU budget: its pure-PyTorch scan materialises the
# [B, L, d_inner, d_state] state.
_QUICK_MODELS: dict[str, dict] = {
    "transformer": _QUICK_TRANSFORMER,
    "mlp": {"match": "transformer", "depth": 4},
    "mlp-prefix": {"match": "transformer", "depth": 4, "prefix_dim": 16},
    "lstm": {"match": "transformer", "n_layer": 2},
    "gru": {"match": "transformer", "n_layer": 2},
    "mamba": {"match": "transformer", "n_layer": 2, "d_state": 8},
    "linear-attention": {**_QUICK_TRANSFORMER, "form": "quadratic"},
}
ZOO = ("transformer", "mlp", "mlp-prefix", "lstm", "gru", "mamba", "linear-attention")

# The quick HMM (docs/reproducing.md, "Sizing the quick HMM"): the papers' HMM (the authors'
# clipped and rounded prior, soft targets, dropout 0.1, K = 20 scored at 20/30/50) with the header
# as 10 rows instead of 53 tokens: the same posteriors and floors on 30-position sequences instead
# of 93, a third of the cost per step. Measured on this CPU (one thread, 3000 steps of 64): the
# 2-layer d=64 transformer reaches KL 0.047-0.058 bits at K = 20 (about 3 minutes per seed); a
# 4-layer d=96 one 0.051 (about 12 minutes per seed). The papers' <= 0.02 regime is out of
# `make run`'s budget on 2 cores. The LSTM is the papers' contrast run by default; the matched MLP
# (which stays at the uniform floor, 2 x 2000 steps in 250 s) runs by name: --archs mlp.
_QUICK_HMM_TRANSFORMER = {"n_layer": 2, "n_head": 2, "d_model": 64, "d_ffn": 256, "dropout": 0.1}
_QUICK_HMM_MODELS: dict[str, dict] = {
    "transformer": _QUICK_HMM_TRANSFORMER,
    "lstm": {"match": "transformer", "n_layer": 2},
    "mlp": {"match": "transformer", "depth": 4},
}
_QUICK_HMM_STEPS = 2000
_QUICK_HMM_SEEDS = 2

# The papers' bijection as the authors' code draws it: keys with replacement, L = V - 1 pairs,
# a final query drawn from the context keys. Training supervises the values and the query (the
# authors' script supervises the query by default and the value positions with a flag; their
# published entropy numbers are measured at the value positions, so those must be trained).
_BIJECTION_EVALS = ("values", "values+query")
# The papers' HMM: 53-token header, the authors' prior and rounding, soft targets.
_HMM_PAPER_TASK = {"task": "hmm", "K": 20, "encoding": "tokens", "rounding": "authors", "target": "posterior"}
_HMM_QUICK_TASK = {**_HMM_PAPER_TASK, "encoding": "rows", "rows_rounded": True}

# The continuous tunnels (issue 41; docs/tasks.md, "Continuous tunnels"), run by name only
# (`bayesbench run --tasks linreg`): never in `make run`'s default list. Quick: d = 2 and 8 pairs
# (16 positions), the Kalman filter with a 2-dimensional state at K = 20, scored at 30 and 50;
# the quick transformer against a matched LSTM by default (in 2000 steps the transformer learns
# kalman but not linreg's mean; the LSTM learns all three: docs/leaderboard.md). Paper: Garg et
# al.'s d = 20 and 40 pairs (arXiv 2208.01066) with noise sigma = 0.25 and their 12-layer 256-wide
# GPT-2 shape, the Kalman filter with a 4-dimensional state at K = 40, scored at 1.5x and 2.5x.
_QUICK_CONTINUOUS_TRAIN = {"steps": 2000, "batch_size": 64, "lr": 3e-3, "schedule": "cosine", "warmup_steps": 40}
_QUICK_CONTINUOUS = {
    "linreg": TaskSetup(label="linreg d=2 n=8", task={"task": "linreg", "d": 2, "n": 8, "tau": 1.0, "sigma": 0.25},
                        train=_QUICK_CONTINUOUS_TRAIN, models=_QUICK_MODELS, seeds=2, archs=("transformer", "lstm"),
                        tune=_QUICK_TUNE_SHORT),
    "mixreg": TaskSetup(label="mixreg d=2 n=8", task={"task": "mixreg", "d": 2, "n": 8, "tau": 1.0, "sigma": 0.25,
                                                      "dense_weight": 0.5, "sparsity": 1},
                        train=_QUICK_CONTINUOUS_TRAIN, models=_QUICK_MODELS, seeds=2, archs=("transformer", "lstm"),
                        tune=_QUICK_TUNE_SHORT),
    "kalman": TaskSetup(label="kalman m=2 K=20", task={"task": "kalman", "m": 2, "K": 20},
                        train=_QUICK_CONTINUOUS_TRAIN, models=_QUICK_MODELS, seeds=2, eval_lengths=(20, 30, 50),
                        archs=("transformer", "lstm"), tune=_QUICK_TUNE_SHORT),
}
# The discrete tunnels of issue 42 (docs/science.md: "Order-k and variable-order Markov chains",
# "Belief-state processes", "Mixture of HMMs (GINC)", "Modular-recurrence mixture"), run by name
# only (`bayesbench run --tasks vomc`): never in `make run`'s default list. Quick sizes, for a
# 2-core CPU at a few minutes per seed: every tunnel is a sequence of at most 32 tokens, the
# length of the quick HMM's rows encoding (30 positions), whose 2-layer d=64 transformer trains
# 3000 steps of 64 in about 3 minutes per seed on one thread; so 2000 steps of 64 stay near 2
# minutes per seed and member, and the LSTM, Mamba and MLP are matched to that transformer. The
# tasks are the tunnels' own defaults, chosen so that the context carries information in that
# length: the order-2 chain over V = 3 has 9 contexts, about 3 transitions each in 32 tokens
# (its Bayes predictive is then well away from the unigram floor); the depth-2 binary context
# tree has at most 4 leaves, 7-8 symbols each; Mess3 at Shai et al.'s x = 0.05, alpha = 0.85
# with 16 tokens; 4 HMMs of 3 states over 5 symbols with sparse rows (concentration 0.3), told
# apart in 16 tokens; the recurrence at the authors' own setting (p = 17, pi = 0.5, L = 16,
# integer tokens), 16 tokens. The rate and schedule are the quick HMM's and sticky chain's
# (2e-3, cosine, 1% warm-up; --tune searches 2e-4..2e-2 around it); two seeds, as the HMM. The
# transformer, LSTM, Mamba and MLP by default: the four the issue compares. Measured here
# (2026-12-07, one seed of the quick transformer, one torch thread, the 2 cores shared with other
# jobs; 1024 evaluation sequences): vomc 2000 steps in 217 s, KL(Bayes || model) 0.010 bits
# (uniform and marginal floors 0.359); markov-k 222 s, 0.0023 bits (floors 0.130); recurrence
# 138 s, 1.02 bits (floors 1.68: learning, far from the authors' 150,000-step 6-layer run);
# Mamba ran at about half the transformer's steps per second (markov-k, 200 steps).
_QUICK_DISCRETE_TRAIN = {"steps": 2000, "batch_size": 64, "lr": 2e-3, "schedule": "cosine", "warmup_steps": 20}
_QUICK_DISCRETE_ARCHS = ("transformer", "lstm", "mamba", "mlp")


def _quick_discrete(label: str, task: dict) -> TaskSetup:
    return TaskSetup(label=label, task=task, train=_QUICK_DISCRETE_TRAIN, models=_QUICK_MODELS, seeds=2,
                     archs=_QUICK_DISCRETE_ARCHS, tune=_QUICK_TUNE_SHORT)


_QUICK_DISCRETE = {
    "markov-k": _quick_discrete("markov-k V=3 order=2 L=32", {"task": "markov-k", "V": 3, "order": 2, "L": 32}),
    "vomc": _quick_discrete("vomc V=2 depth=2 L=32", {"task": "vomc", "V": 2, "depth": 2, "L": 32}),
    "mess3": _quick_discrete("mess3 L=16", {"task": "mess3", "L": 16}),
    "hmm_mixture": _quick_discrete("hmm_mixture M=4 S=3 V=5 L=16",
                                   {"task": "hmm_mixture", "M": 4, "S": 3, "V": 5, "L": 16}),
    "recurrence": _quick_discrete("recurrence p=17 L=16 tokens=integer",
                                  {"task": "recurrence", "p": 17, "L": 16, "pi": 0.5, "tokens": "integer"}),
}
QUICK = Preset(
    name="quick",
    description="2-core CPU, about 15 minutes: the papers' settings scaled down; a 2-layer d=64 transformer "
                "against a capacity-matched MLP, LSTM and Mamba on the bijection (GRU, the prefix MLP and "
                "linear attention by name), against all of them on the sticky chain, and against a matched "
                "LSTM on the HMM (MLP by name)",
    tasks={
        # V = 8 with 7 pairs as the papers' 20 with 19. One recipe for every architecture, from
        # sweeps/bijection_recipe.py (docs/reproducing.md, "The quick bijection's recipe"): constant
        # lr 5e-4 (the papers' 1e-3 keeps the small transformer on plateaus that use only the first
        # pairs of the context), 6000 steps of 64. Paper I's bijection architectures run by default
        # (the others by name, same recipe) so that `make run` stays near 15 minutes on 2 cores.
        "bijection": TaskSetup(
            label="bijection V=8 L=7 repl",
            task={"task": "bijection", "V": 8, "variant": "code", "L": 7},
            train={"steps": 6000, "batch_size": 64, "lr": 5e-4, "schedule": "constant"},
            models=_QUICK_MODELS,
            seeds=3,
            eval_scored=_BIJECTION_EVALS,
            archs=("transformer", "mamba", "lstm", "mlp"),
            tune=_QUICK_TUNE_BIJECTION,
        ),
        # The papers' HMM setting at K = 20 (header as rows) with a smaller transformer (dropout
        # 0.1 as the authors'), warm-up + cosine. Soft targets as the authors train.
        "hmm": TaskSetup(
            label="hmm S=5 K=20 rows",
            task=_HMM_QUICK_TASK,
            train={"steps": _QUICK_HMM_STEPS, "batch_size": 64, "lr": 2e-3, "schedule": "cosine",
                   "warmup_steps": _QUICK_HMM_STEPS // 100},
            models=_QUICK_HMM_MODELS,
            seeds=_QUICK_HMM_SEEDS,
            eval_lengths=(20, 30, 50),
            archs=("transformer", "lstm"),
            tune=_QUICK_TUNE_SHORT,
        ),
        # Sticky chain with rho ~ Beta(1, 1) over 8 symbols, 32 tokens: the model must count stays.
        "sticky": TaskSetup(
            label="sticky V=8 L=32",
            task={"task": "sticky", "V": 8, "L": 32},
            train={"steps": 800, "batch_size": 32, "lr": 2e-3, "schedule": "cosine", "warmup_steps": 8},
            models=_QUICK_MODELS,
            seeds=3,
            tune=_QUICK_TUNE_SHORT,
        ),
    },
    archs=ZOO,
    device="cpu",
    named={**_QUICK_CONTINUOUS, **_QUICK_DISCRETE},
    # an outside tunnel: the sticky chain's training (a short cosine run), the quick models, three
    # seeds, the transformer against a matched LSTM and MLP by default (any arch by name)
    outside=TaskSetup(label="", task={}, train={"steps": 800, "batch_size": 32, "lr": 2e-3, "schedule": "cosine",
                                                "warmup_steps": 8},
                      models=_QUICK_MODELS, seeds=3, archs=("transformer", "lstm", "mlp")),
)

_PAPER_RECURRENT: dict[str, dict] = {"lstm": {"match": "transformer", "n_layer": 2},
                                     "gru": {"match": "transformer", "n_layer": 2}}

_PAPER_CONTINUOUS_TRAIN = {"steps": 100_000, "batch_size": 64, "lr": 1e-4, "schedule": "cosine", "warmup_steps": 1000}
_PAPER_CONTINUOUS_MODELS: dict[str, dict] = {
    "transformer": {"n_layer": 12, "n_head": 8, "d_model": 256, "d_ffn": 1024},  # Garg et al.'s GPT-2 shape
    "mlp": {"match": "transformer"}, "mlp-prefix": {"match": "transformer"}, **_PAPER_RECURRENT,
    "mamba": {"match": "transformer", "n_layer": 12},
    "linear-attention": {"n_layer": 12, "n_head": 8, "d_model": 256, "d_ffn": 1024}}
_PAPER_CONTINUOUS = {
    "linreg": TaskSetup(label="linreg d=20 n=40", task={"task": "linreg", "d": 20, "n": 40, "tau": 1.0, "sigma": 0.25},
                        train=_PAPER_CONTINUOUS_TRAIN, models=_PAPER_CONTINUOUS_MODELS, seeds=3),
    "mixreg": TaskSetup(label="mixreg d=20 n=40", task={"task": "mixreg", "d": 20, "n": 40, "tau": 1.0, "sigma": 0.25,
                                                        "dense_weight": 0.5, "sparsity": 4},
                        train=_PAPER_CONTINUOUS_TRAIN, models=_PAPER_CONTINUOUS_MODELS, seeds=3),
    "kalman": TaskSetup(label="kalman m=4 K=40", task={"task": "kalman", "m": 4, "K": 40},
                        train=_PAPER_CONTINUOUS_TRAIN, models=_PAPER_CONTINUOUS_MODELS, seeds=3,
                        eval_lengths=(40, 60, 100)),
}

# The discrete tunnels of issue 42 at the paper preset's GPU scale, by name only. The recurrence
# is the authors' own run (recurrence_bwt.py, `vishalmisra/bayesian-wind-tunnel`: p = 17,
# pi = 0.5, 16 tokens; a 6-layer transformer, d_model 192, 6 heads, d_ff 768, dropout 0.1; AdamW
# lr 3e-4, weight decay 0.01, cosine to 0 with no warm-up, batch 64, 150,000 steps), so that
# our number sits beside theirs (docs/science.md, "Modular-recurrence mixture"). The others take
# Paper I's bijection transformer (the same shape) and the paper HMM's recipe (lr 3e-4, cosine,
# 1000 warm-up steps, batch 128, 100,000 steps) on longer sequences than quick's, where the
# context says more: 128 tokens for the chains (about 14 transitions per order-2 context, 32
# symbols per leaf of a depth-2 binary tree), 64 for Mess3, and 8 HMMs of 5 states over 10
# symbols on 64 tokens. These are this suite's choices at that scale, not the cited papers'
# settings, which the tunnels' docs name where they differ.
_PAPER_DISCRETE_MODELS: dict[str, dict] = {
    "transformer": {"size": "paper-bijection"}, "mlp": {"match": "transformer"},
    "mlp-prefix": {"match": "transformer"}, **_PAPER_RECURRENT, "mamba": {"match": "transformer", "n_layer": 12},
    "linear-attention": {"n_layer": 6, "n_head": 6, "d_model": 192, "d_ffn": 768}}
_PAPER_DISCRETE_TRAIN = {"steps": 100_000, "batch_size": 128, "lr": 3e-4, "schedule": "cosine", "warmup_steps": 1000}


def _paper_discrete(label: str, task: dict) -> TaskSetup:
    return TaskSetup(label=label, task=task, train=_PAPER_DISCRETE_TRAIN, models=_PAPER_DISCRETE_MODELS, seeds=3,
                     tune=_PAPER_TUNE_HMM)


_PAPER_DISCRETE = {
    "markov-k": _paper_discrete("markov-k V=3 order=2 L=128", {"task": "markov-k", "V": 3, "order": 2, "L": 128}),
    "vomc": _paper_discrete("vomc V=2 depth=2 L=128", {"task": "vomc", "V": 2, "depth": 2, "L": 128}),
    "mess3": _paper_discrete("mess3 L=64", {"task": "mess3", "L": 64}),
    "hmm_mixture": _paper_discrete("hmm_mixture M=8 S=5 V=10 L=64",
                                   {"task": "hmm_mixture", "M": 8, "S": 5, "V": 10, "L": 64}),
    "recurrence": TaskSetup(
        label="recurrence p=17 L=16 tokens=integer",
        task={"task": "recurrence", "p": 17, "L": 16, "pi": 0.5, "tokens": "integer"},
        train={"steps": 150_000, "batch_size": 64, "lr": 3e-4, "schedule": "cosine", "warmup_steps": 0},
        models={**_PAPER_DISCRETE_MODELS, "transformer": {"size": "paper-bijection", "dropout": 0.1}},
        seeds=3, tune=_PAPER_TUNE_HMM),
}

PAPER = Preset(
    name="paper",
    description="the papers' settings on a GPU (Paper I, arXiv 2512.22471): 2.69M/7.13M-parameter transformers, "
                "100k steps, every other architecture capacity-matched to them",
    tasks={
        "bijection": TaskSetup(
            label="bijection V=20 L=19 repl",
            task={"task": "bijection", "V": 20, "variant": "code"},
            train={"steps": 100_000, "batch_size": 128, "lr": 1e-3, "schedule": "constant"},
            models={"transformer": {"size": "paper-bijection"},
                    "mlp": {"match": "transformer"},
                    "mlp-prefix": {"match": "transformer"},
                    **_PAPER_RECURRENT,
                    "mamba": {"match": "transformer", "n_layer": 12},
                    "linear-attention": {"n_layer": 6, "n_head": 6, "d_model": 192, "d_ffn": 768}},
            seeds=3,
            eval_scored=_BIJECTION_EVALS,
            tune=_PAPER_TUNE_BIJECTION,
        ),
        "hmm": TaskSetup(
            label="hmm S=5 K=20 tokens",
            task=_HMM_PAPER_TASK,
            train={"steps": 100_000, "batch_size": 128, "lr": 3e-4, "schedule": "cosine", "warmup_steps": 1000},
            models={"transformer": {"size": "paper-hmm", "dropout": 0.1},
                    # Paper I's ablation (attention off in the top two blocks); run it by name
                    "transformer-no-late-attention": {"size": "paper-hmm", "dropout": 0.1},
                    "mlp": {"match": "transformer"},
                    "mlp-prefix": {"match": "transformer"},
                    **_PAPER_RECURRENT,
                    "mamba": {"match": "transformer", "n_layer": 18},
                    "linear-attention": {"n_layer": 9, "n_head": 8, "d_model": 256, "d_ffn": 1024}},
            seeds=5,
            eval_lengths=(20, 30, 50),
            tune=_PAPER_TUNE_HMM,
        ),
    },
    archs=ZOO,
    device="auto",
    checkpoint_every=5000,
    named={**_PAPER_CONTINUOUS, **_PAPER_DISCRETE},
    outside=TaskSetup(label="", task={}, train={"steps": 100_000, "batch_size": 128, "lr": 1e-3,
                                                "schedule": "constant"},
                      models={"transformer": {"size": "paper-bijection"}, "mlp": {"match": "transformer"},
                              **_PAPER_RECURRENT},
                      seeds=3, archs=("transformer", "lstm", "mlp")),
)

PRESETS = {p.name: p for p in (QUICK, PAPER)}


def outside_setup(preset: Preset, task) -> TaskSetup:
    """The TaskSetup an outside tunnel gets in `preset`: the preset's `outside` template with the
    task's config and its description as the label (scored at its supervised positions)."""
    from dataclasses import replace

    if preset.outside is None:
        raise ValueError(f"preset {preset.name!r} has no settings for outside tunnels")
    return replace(preset.outside, label=task.describe(), task=task.config())


def registered_setup(preset: Preset, task) -> TaskSetup:
    """The TaskSetup a registered tunnel that `preset` does not name gets (`sweep.jobs.preset_setup`
    looks it up): its setup in `preset.named` (a continuous tunnel's quick or paper setup, at the
    preset's size), else the preset's `outside`
    template with the task's config (at its own defaults),
    labelled by its name and settings ('coin V=2 L=12', so that `labelled` says changed settings
    as for the preset's own tasks)."""
    from dataclasses import asdict, replace

    if task.name in preset.named:
        return preset.named[task.name]
    if preset.outside is None:
        raise ValueError(f"preset {preset.name!r} has no settings for tunnels it does not name")
    label = " ".join([task.name, *(f"{k}={v}" for k, v in asdict(task).items())])
    return replace(preset.outside, label=label, task=task.config())


# Words of a preset's task label that stand for a task setting not written as name=value: where
# the setting that ran differs, the word goes and the setting is said in brackets.
LABEL_WORDS = {"repl": "keys", "rows": "encoding", "tokens": "encoding"}


def labelled(label: str, base: dict, ran: dict) -> str:
    """The label of the task that ran (`ran`: its `Task.config()`, every setting resolved) in place
    of the preset's task labelled `label` (`base`: that task's `Task.config()`). It says what ran:
    each setting that differs replaces its `name=value` in the label, a word standing for one
    (`LABEL_WORDS`) goes, and every other one is said in brackets, sorted by name:

    - V=20 L=19 over 'bijection V=8 L=7 repl': 'bijection V=20 L=19 repl';
    - L=12 over 'sticky V=8 L=32': 'sticky V=8 L=12';
    - supervise=authors over 'bijection V=8 L=7 repl': 'bijection V=8 L=7 repl [supervise=authors]'.

    A setting equal to the preset's changes nothing (the label is the preset's). Its rows rank
    apart from the preset's: they ran another task, and their label says which."""
    changed = {k: v for k, v in ran.items() if k != "task" and base.get(k) != v}
    words = []
    for word in label.split(" "):
        name = word.split("=", 1)[0] if "=" in word else LABEL_WORDS.get(word)
        if name in changed and "=" in word:
            words.append(f"{name}={changed.pop(name)}")
        elif name in changed:
            continue  # the word's setting changed: said in brackets below
        else:
            words.append(word)
    extra = " ".join(f"{k}={v}" for k, v in sorted(changed.items()))
    return " ".join(words) + (f" [{extra}]" if extra else "")


#: The preset tasks' configurations as `Task.config()` resolves them (every setting, defaults
#: filled in), by label: what the store's migration of old labels (`store/migrations.py`, which sits
#: below tasks/) compares a row's task with. tests/sweep/test_jobs.py checks each against
#: `task_from_config(setup.task).config()`.
RESOLVED_TASKS = {
    "bijection V=8 L=7 repl": {"task": "bijection", "V": 8, "variant": "code", "L": 7, "keys": "replacement",
                               "query": True, "supervise": "both"},
    "bijection V=20 L=19 repl": {"task": "bijection", "V": 20, "variant": "code", "L": 19, "keys": "replacement",
                                 "query": True, "supervise": "both"},
    "hmm S=5 K=20 rows": {"task": "hmm", "S": 5, "V": 5, "K": 20, "concentration": 1.0, "init": "uniform",
                          "encoding": "rows", "target": "posterior", "rounding": "authors", "rows_rounded": True},
    "hmm S=5 K=20 tokens": {"task": "hmm", "S": 5, "V": 5, "K": 20, "concentration": 1.0, "init": "uniform",
                            "encoding": "tokens", "target": "posterior", "rounding": "authors", "rows_rounded": False},
    "sticky V=8 L=32": {"task": "sticky", "V": 8, "L": 32, "a": 1.0, "b": 1.0},
}


def options_label(label: str, options: dict) -> str:
    """The label stores of schema version 5 and below gave a task run with options (the preset's
    label, then the options as given, in brackets): 'bijection V=8 L=7 repl [L=8 variant=paper]'.
    Read only to migrate such rows (`store/migrations`) and to replay their run.json."""
    return f"{label} [{' '.join(f'{k}={v}' for k, v in sorted(options.items()))}]"


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise ValueError(f"preset must be one of {tuple(PRESETS)}, got {name!r}")
    return PRESETS[name]
