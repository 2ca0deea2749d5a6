"""Training: the ensemble trainer, its optimiser, checkpoints and seeds."""
