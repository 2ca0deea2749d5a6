"""Stopping hopeless candidates of a learning-rate search early (`TuneSpec.prune`), by Optuna's
pruners rather than a hand-written scheduler: "median" (`optuna.pruners.MedianPruner`: a
candidate whose curve is worse than the median of the candidates before it at the same step)
or "halving" (`optuna.pruners.SuccessiveHalvingPruner`: asynchronous successive halving).

Each candidate is its own job (`packed=False`: stopping a job saves its compute; a member of a
packed ensemble would still be computed) and one Optuna trial; the trials of one search share a
study in a journal file under the runs directory (`<runs>/tune/<study>.journal`), so the
candidates running in other processes of the pool (or on other Ray nodes sharing the runs
directory) see each other. At every learning-curve point a candidate reports its selection
score (the mean over its selection seeds of the curve metric on the selection set); a pruned
candidate's members stop there (frozen, as `--until` stops them), its rows are stored with their
curves up to that step and it is never chosen (`store.tuning.candidate_score`).

The default is a plain grid (no pruning): the easiest to read and to reproduce. A pruned search
depends on the order the candidates ran in; its rows say so (`stop_reason`).
"""

from __future__ import annotations

import os

PRUNERS = {"median": "MedianPruner", "halving": "SuccessiveHalvingPruner"}


def check_optuna() -> None:
    """Pruning needs Optuna (the `tune` extra): a clear error before anything runs."""
    import importlib.util

    if importlib.util.find_spec("optuna") is None:
        raise ValueError("--tune-args prune needs the optuna package (pip install 'bayesbench[tune]'); or leave "
                         "prune=none, a plain grid")


def make_pruner(name: str):
    import optuna

    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0)
    return optuna.pruners.SuccessiveHalvingPruner()


class Pruning:
    """A trainer hook (`Trainer.hooks`): reports each new curve point of the candidate to its
    Optuna trial and stops every member when the trial is pruned."""

    def __init__(self, runs_dir: str, study: str, key: str, pruner: str, metric: str) -> None:
        import optuna
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        folder = os.path.join(runs_dir, "tune")
        os.makedirs(folder, exist_ok=True)
        storage = JournalStorage(JournalFileBackend(os.path.join(folder, f"{study}.journal")))
        self.study = optuna.create_study(study_name=study, storage=storage, direction="minimize",
                                         pruner=make_pruner(pruner), load_if_exists=True)
        self.metric, self.pruner, self.key = metric, pruner, key
        mine = [t for t in self.study.get_trials(deepcopy=False) if t.user_attrs.get("key") == key]
        if mine:  # a resumed job: its own trial again
            self.trial = optuna.trial.Trial(self.study, mine[0]._trial_id)
            self.reported = set(mine[0].intermediate_values)
        else:
            self.trial = self.study.ask()
            self.trial.set_user_attr("key", key)
            self.reported = set()

    def after_sync(self, trainer) -> None:
        curve = trainer.curve
        if curve is None or any(e in trainer.stopped for e in range(trainer.ensemble)):
            return
        members = [e for e in range(trainer.ensemble) if trainer.alive[e]]
        for k, step in enumerate(curve.steps):
            if step in self.reported:
                continue
            self.reported.add(step)
            values = [curve.member(e, self.metric)[k] for e in members]
            if not values:
                return
            self.trial.report(sum(values) / len(values), step)
            if self.trial.should_prune():
                why = (f"pruned at step {step} by Optuna's {PRUNERS[self.pruner]} (its selection score was worse "
                       "than the other candidates' at that step)")
                for e in range(trainer.ensemble):
                    trainer.stopped[e] = (step, "pruned", why)
                trainer._go = trainer._go_mask()
                return

    def finish(self, trainer) -> None:
        """Tell the study how the trial ended: pruned, or complete with its last reported score."""
        import optuna

        if self.trial.number in {t.number for t in self.study.get_trials(deepcopy=False, states=(
                optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED))}:
            return
        if trainer.stopped:
            self.study.tell(self.trial, state=optuna.trial.TrialState.PRUNED)
            return
        curve = trainer.curve
        members = [e for e in range(trainer.ensemble) if trainer.alive[e]]
        value = (sum(curve.member(e, self.metric)[-1] for e in members) / len(members)
                 if curve is not None and curve.steps and members else float("inf"))
        self.study.tell(self.trial, value)
