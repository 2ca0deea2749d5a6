"""Sweeps and the learning-curve fields: `train.until` as a sweep key, identities that name the
curve and criterion fields only where a job sets them, and a worker that ends a job whose members
all stopped early."""

from __future__ import annotations

from bayesbench.sweep.expand import expand, job_key
from bayesbench.sweep.one_job import train_and_score
from bayesbench.sweep.sweep_file import load_sweep


def _sweep(tmp_path, extra: str = "") -> str:
    path = tmp_path / "s.toml"
    path.write_text('name = "u"\ntasks = ["bijection"]\narchs = ["mlp"]\nseeds = [0, 1]\nsteps = 40\n'
                    f"checkpoint_every = 5\neval_sequences = 32\n{extra}")
    return str(path)


def test_until_is_a_sweep_key_and_the_identity_names_it_only_where_set(tmp_path):
    (plain,) = expand(load_sweep(_sweep(tmp_path)))
    assert plain.key == job_key(plain.job)
    train = plain.job.identity["train"]
    assert not {"until", "until_metric", "curves", "curve_every", "curve_sequences", "compile"} & set(train)
    assert not {"checkpoint_every", "sync_every"} & set(train)  # they change no number
    (until,) = expand(load_sweep(_sweep(tmp_path, 'train = {until = "plateau", until_metric = "kl"}\n')))
    assert until.job.train.until == "plateau" and until.job.train.until_metric == "kl"
    assert until.job.identity["train"]["until"] == "plateau" and until.key != plain.key
    (threshold,) = expand(load_sweep(_sweep(tmp_path, "train = {until = 1.3, curve_sequences = 32}\n")))
    assert threshold.job.train.until == 1.3 and threshold.key not in (plain.key, until.key)
    (synced,) = expand(load_sweep(_sweep(tmp_path, "train = {sync_every = 3}\n")))
    assert synced.job.train.sync_every == 3 and synced.key == plain.key  # a read-back interval: the same numbers


def test_a_worker_ends_a_job_whose_members_all_stopped(tmp_path):
    """1.5 bits is above the uniform floor: both members stop at step 1, and the worker's loop of
    checkpointed fits (every 5 steps) ends there instead of waiting for step 40."""
    (sj,) = expand(load_sweep(_sweep(tmp_path, "train = {until = 1.5, curve_sequences = 32}\n")))
    out = train_and_score(sj, str(tmp_path / "runs"), threads=1)
    assert [(r.stop_step, r.stop_kind, r.steps) for r in out.records] == [(1, "threshold", 1)] * 2
