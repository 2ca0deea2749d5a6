"""The quick bijection transformer off its plateau: the recipe search (docs/reproducing.md,
"The quick bijection's recipe").

The quick transformer (2 layers, 2 heads, d 64) on the quick bijection (V = 8, 7 pairs, keys with
replacement, values and query supervised), seeds 0, 1, 2 as one ensemble per job, scored as the
quick leaderboard scores it (positional entropy MAE at the value positions, 4096 sequences).
Levers: learning rate, batch size, steps, schedule; the preset's recipe (2000 x 32, lr 1e-3
constant) first, as the control. Each job stores its three rows under group
`sweep-bijection-recipe`:

    bayesbench sweep sweeps/bijection_recipe.py --dry-run
    nice -n 10 bayesbench sweep sweeps/bijection_recipe.py --jobs 1 --db /tmp/recipe.sqlite \\
        --runs-dir /tmp/recipe_runs
    bayesbench cases /tmp/recipe_runs/sweep/*      # each member's error by case and the pairs it uses

A TOML grid has one learning-rate axis; the batch size is a second axis here, so the jobs are
listed (as zoology's configs do).
"""

NAME = "bijection-recipe"
SEEDS = [0, 1, 2]


def job(batch: int, lr: float, steps: int, **train) -> dict:
    return dict(task="bijection", arch="transformer", seeds=SEEDS, lr=lr, steps=steps,
                train={"batch_size": batch, **train})


JOBS = [
    job(32, 1e-3, 2000),  # the quick preset's recipe until this sweep
    job(32, 1e-3, 6000),  # three times the steps
    job(64, 1e-3, 6000),  # six times the sequences
    job(32, 5e-4, 6000),  # half the learning rate
    job(64, 5e-4, 6000),
    job(64, 2.5e-4, 6000),
    job(128, 5e-4, 3000),
    job(64, 5e-4, 6000, schedule="cosine", warmup_steps=300),
]
