"""The modular-recurrence tunnel (tasks/recurrence.py): its posterior against the authors' own
functions (a saved fixture; their code is not needed here), its sampler against the recurrence and
against the sum over every program, its settings. The oracle's own checks: tests/oracle/test_recurrence.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from bayesbench.oracle.recurrence import (
    recurrence_class_posterior,
    recurrence_predictive,
)
from bayesbench.tasks import get_task
from bayesbench.tasks.base import Batch

# The authors' bayesian_predictive_recurrence / class_posterior_recurrence / generate_recurrence_sequence
# (vishalmisra/bayesian-wind-tunnel @ 670c6d6, experiments/construction_boundary/recurrence_bwt.py), run on
# these sequences by a scratch script; the fixture says the commit and the layout.
AUTHORS = json.loads((Path(__file__).parent / "data" / "recurrence_authors.json").read_text())


def program(a: int, b: int, x0: int, p: int, L: int) -> list[int]:
    x = [x0]
    for _ in range(L - 1):
        x.append((a * x[-1] + b) % p)
    return x


def test_fixture_is_the_authors_at_a_named_commit():
    assert AUTHORS["commit"] == "670c6d61179492d57f13a7d710660f77d7b163e8"
    kinds = {(c["p"], c["tokens"]) for c in AUTHORS["cases"]}
    assert kinds == {(5, "integer"), (7, "integer"), (17, "integer"), (17, "opaque")}


@pytest.mark.parametrize("case", range(len(AUTHORS["cases"])))
def test_predictive_equals_the_authors(case):
    """Their predictive and class posterior, prefix by prefix, to float64 rounding (they agree)."""
    c = AUTHORS["cases"][case]
    p, pi = c["p"], c["pi"]
    theirs = torch.tensor(c["predictive"], dtype=torch.float64)  # [L-1, p]: x_1..x_{L-1}
    tokens = torch.tensor([c["sequence"]])
    if c["tokens"] == "integer":
        ours = recurrence_predictive(tokens, p, pi, dtype=torch.float64)[0, :-1]
        w = recurrence_class_posterior(tokens, p, pi)[0, :-1]
        torch.testing.assert_close(w, torch.tensor(c["p_program"], dtype=torch.float64), atol=1e-12, rtol=0)
    else:  # their opaque layout is ours: [ORD, r(0..p-1), SEP, p + r(x_0), ...]
        task = get_task("recurrence", p=p, pi=pi, tokens="opaque")
        assert c["header_len"] == task.prefix_len and len(c["sequence"]) == task.seq_len
        H = task.prefix_len
        mask = torch.zeros((1, task.seq_len), dtype=torch.bool)
        mask[:, H:H + task.L - 1] = True
        batch = Batch(tokens, mask, torch.zeros_like(tokens), torch.zeros((1, task.seq_len, p)))
        ours = task.brute_force_posterior(batch)[0, H:H + task.L - 1]
    torch.testing.assert_close(ours, theirs, atol=1e-12, rtol=0)


@pytest.mark.parametrize("tokens", ["integer", "opaque"])
def test_sampler_makes_recurrences_and_uniform_sequences(tokens):
    task = get_task("recurrence", p=5, L=12, pi=0.5, tokens=tokens)  # L > p + 1: see the next test
    batch = task.sample(400, torch.Generator().manual_seed(0), dtype=torch.float64)
    lat = batch.latents
    x = lat["symbols"]
    prog = lat["program"]
    assert 120 < int(prog.sum()) < 280
    want = (lat["a"].unsqueeze(1) * x[:, :-1] + lat["b"].unsqueeze(1)) % 5
    assert (want[prog] == x[prog][:, 1:]).all()
    H = task.prefix_len
    if tokens == "opaque":
        r = lat["relabel"]
        assert (batch.tokens[:, 0] == 10).all() and (batch.tokens[:, H - 1] == 11).all()
        assert torch.equal(batch.tokens[:, 1:H - 1], r)
        assert torch.equal(batch.tokens[:, H:] - 5, r.gather(1, x))
    else:
        assert torch.equal(batch.tokens, x)
    assert batch.mask.sum(1).eq(task.L - 1).all() and batch.mask[:, H:H + task.L - 1].all()
    # the first scored position (x_1 given x_0) is the prior predictive: uniform
    torch.testing.assert_close(batch.posterior[:, H], torch.full((400, 5), 0.2, dtype=torch.float64))
    torch.testing.assert_close(task.brute_force_posterior(batch), batch.posterior, atol=1e-12, rtol=0)


def test_sequences_longer_than_p_plus_one_are_whole():
    """Where we depart: the authors' sampler makes p + 1 symbols of a recurrence, so with
    seq_len > p + 1 their recurrences come out shorter than their uniform sequences (docs)."""
    task = get_task("recurrence", p=3, L=10, pi=1.0)
    batch = task.sample(50, torch.Generator().manual_seed(1), dtype=torch.float64)
    assert batch.tokens.shape == (50, 10)
    assert (batch.posterior[:, 2:9].max(-1).values == 1).all()


@pytest.mark.parametrize("config,message", [
    ({"p": 15}, "p must be a prime"),
    ({"p": 1}, "p must be an integer >= 2"),
    ({"p": 7.0}, "p must be an integer >= 2"),
    ({"pi": 1.5}, r"pi must be a number in \[0, 1\]"),
    ({"pi": -0.1}, r"pi must be a number in \[0, 1\]"),
    ({"pi": math.nan}, r"pi must be a number in \[0, 1\]"),
    ({"L": 1}, "L must be an integer >= 2"),
    ({"tokens": "words"}, r"tokens must be one of \('integer', 'opaque'\)"),
])
def test_bad_settings_are_refused_naming_the_setting(config, message):
    from bayesbench.checks import SettingError

    with pytest.raises(SettingError, match=f"^{message}") as err:
        get_task("recurrence", **config)
    assert next(iter(config)) in err.value.fields
