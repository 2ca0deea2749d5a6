"""Sweeps and the learning-curve fields: `train.until` as a sweep key, job keys of sweeps that do
not use the new fields unchanged, and a worker that ends a job whose members all stopped early."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import torch

from bayesbench.sweep.expand import KEY_CHARS, expand, job_key
from bayesbench.sweep.one_job import train_and_score
from bayesbench.sweep.spec import load_sweep
from bayesbench.training.trainer import ADDED_FIELDS


def _sweep(tmp_path, extra: str = "") -> str:
    path = tmp_path / "s.toml"
    path.write_text('name = "u"\ntasks = ["bijection"]\narchs = ["mlp"]\nseeds = [0, 1]\nsteps = 40\n'
                    f"checkpoint_every = 5\neval_sequences = 32\n{extra}")
    return str(path)


def _old_key(job) -> str:
    """The job key as bayesbench computed it before the learning-curve fields existed."""
    train = dataclasses.asdict(job.train)
    for name in ("checkpoint_every", *ADDED_FIELDS):
        train.pop(name)
    ident = {"task": job.task.config(), "label": job.setup.label, "eval_lengths": list(job.setup.eval_lengths),
             "eval_scored": list(job.setup.eval_scored), "eval_sequences": job.setup.eval_sequences,
             "arch": job.arch, "model": job.model, "max_len": job.max_len, "train": train, "seeds": list(job.seeds),
             "device": torch.device(job.device).type}
    return hashlib.sha256(json.dumps(ident, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:KEY_CHARS]


def test_until_is_a_sweep_key_and_other_keys_stay_as_they_were(tmp_path):
    (plain,) = expand(load_sweep(_sweep(tmp_path)))
    assert plain.key == job_key(plain.job) == _old_key(plain.job)  # stored sweeps are still found
    (until,) = expand(load_sweep(_sweep(tmp_path, 'train = {until = "plateau", until_metric = "kl"}\n')))
    assert until.job.train.until == "plateau" and until.job.train.until_metric == "kl"
    assert until.key != plain.key
    (threshold,) = expand(load_sweep(_sweep(tmp_path, "train = {until = 1.3, curve_sequences = 32}\n")))
    assert threshold.job.train.until == 1.3 and threshold.key not in (plain.key, until.key)


def test_a_worker_ends_a_job_whose_members_all_stopped(tmp_path):
    """1.5 bits is above the uniform floor: both members stop at step 1, and the worker's loop of
    checkpointed fits (every 5 steps) ends there instead of waiting for step 40."""
    (sj,) = expand(load_sweep(_sweep(tmp_path, "train = {until = 1.5, curve_sequences = 32}\n")))
    out = train_and_score(sj, str(tmp_path / "runs"), threads=1)
    assert [(r.stop_step, r.stop_kind, r.steps) for r in out["records"]] == [(1, "threshold", 1)] * 2
