"""A continuous wind tunnel from outside the package (tests/outside_continuous_tunnel.py, a
Gaussian predictive): `bayesbench tasks --check` runs the continuous checks on it
(tasks/check_continuous.py and check_validity's continuous form), a broken one is refused naming
the rule, and `bayesbench run --tasks ./file.py:build` trains and stores it end to end."""

from __future__ import annotations

import os

import pytest
import torch

from bayesbench.cli import main
from bayesbench.tasks import outside_task
from bayesbench.tasks.check import check_task, check_validity

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILE = os.path.join(HERE, "outside_continuous_tunnel.py") + ":build"


def test_the_wrapper_passes_on_what_a_continuous_tunnel_declares():
    task = outside_task(FILE, {"L": 5})
    assert task.head == "gaussian" and task.header_every_position and task.header_len == 5
    batch = task.sample(3, torch.Generator().manual_seed(0))
    assert set(task.floor_predictives(batch)) == {"prior"}
    assert check_task(task, sequences=128)[0].startswith("head gaussian: 2 outputs per position")


def test_tasks_check_passes_on_it(capsys):
    assert main(["tasks", "--check", FILE, "--task-args", "L=6", "--sequences", "64"]) == 0
    out = capsys.readouterr().out
    assert "ok: the posterior against the sampler" in out and "ok: (a) first scored position" in out
    assert "ok: (b) the posterior changes with the context" in out and "prior floor: entropy MAE" in out


def test_a_negative_variance_is_refused_naming_the_rule(capsys):
    assert main(["tasks", "--check", FILE, "--task-args", "L=6", "broken=true"]) == 2
    err = capsys.readouterr().err
    assert "posterior's variances must be > 0 at every supervised position" in err
    assert len(err.strip().splitlines()) == 1


def test_a_posterior_that_reads_the_latent_fails_the_validity_check():
    task = outside_task(FILE, {"L": 6, "peek": True})
    with pytest.raises(ValueError, match=r"differs from the prior predictive \(floor_predictives 'prior'\) by KL"):
        check_validity(task, sequences=256)


def test_a_three_step_run_stores_a_row(tmp_path, capsys):
    from bayesbench.store.database import read_records

    db = str(tmp_path / "r.sqlite")
    assert main(["run", "--tasks", FILE, "--archs", "mlp", "--steps", "3", "--seeds", "1", "--eval-sequences", "32",
                 "--no-curves", "--db", db, "--runs-dir", str(tmp_path / "runs"), "--no-progress"]) == 0
    (record,) = read_records(db)
    assert record.task_label.startswith("gaussian-mean(") and record.arch == "mlp"
    (ev,) = record.evals.values()
    assert set(ev.floors or {}) == {"prior"}
    out = capsys.readouterr().out
    assert "the floor is the prior predictive, 'prior'" in out  # the leaderboard's floors note (report/notes.py)


def test_the_floors_note_and_the_at_floor_mark_use_the_prior_predictive(tmp_path):
    """report/notes.py: the continuous sentence only where a continuous tunnel's rows are (the
    discrete tables' notes stay as they were, tests/report golden files); report/rows.py:
    '(at floor)' against 'prior' where a row has no uniform floor."""
    import dataclasses

    from bayesbench.report.notes import CONTINUOUS_FLOORS, has_continuous, site_notes
    from bayesbench.report.rows import aggregate, at_floor
    from bayesbench.store.database import read_records

    db = str(tmp_path / "r.sqlite")
    assert main(["run", "--tasks", FILE, "--archs", "mlp", "--steps", "2", "--seeds", "1", "--eval-sequences", "16",
                 "--no-curves", "--db", db, "--runs-dir", str(tmp_path / "runs"), "--no-progress"]) == 0
    (row,) = aggregate(read_records(db))
    assert has_continuous([row]) and not has_continuous([dataclasses.replace(row, floors={"uniform": {}})])
    prior_kl = row.floors["prior"]["kl"].mean
    assert at_floor(dataclasses.replace(row, means={**row.means, "kl": prior_kl}), "kl")
    assert not at_floor(dataclasses.replace(row, means={**row.means, "kl": 0.5 * prior_kl}), "kl")
    assert any(CONTINUOUS_FLOORS in note for note in site_notes("entropy_mae", 0.1, continuous=True))
    assert not any(CONTINUOUS_FLOORS in note for note in site_notes("entropy_mae", 0.1))
