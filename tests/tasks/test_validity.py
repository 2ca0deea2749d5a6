"""The validity check of a tunnel (tasks/check.py, `check_validity`): the posterior at the first
scored position is the prior predictive given what is shown there, and it changes with the
context. Every built-in tunnel passes; tunnels broken on purpose fail, naming the rule."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from bayesbench.cli import main
from bayesbench.models.heads import is_continuous, split_layout
from bayesbench.tasks import IGNORE_INDEX, Batch, Task, get_task, list_tasks
from bayesbench.tasks.check import check_task, check_validity, first_scored_rule, is_categorical
from bayesbench.tasks.registry import _TASKS

BUILTIN = sorted(name for name in list_tasks() if _TASKS[name].__module__.rsplit(".", 1)[0] == "bayesbench.tasks")
CONFIGS = [(name, {}) for name in BUILTIN] + [
    ("bijection", {"variant": "code"}),
    ("hmm", {"encoding": "tokens", "K": 6}),
    ("hmm", {"target": "posterior", "K": 6}),
    ("markov-k", {"order": 1}),
    ("vomc", {"depth": 0}),
    ("vomc", {"V": 3, "depth": 1, "L": 12}),
]


@pytest.mark.parametrize("name,config", CONFIGS, ids=[f"{n}-{c}" for n, c in CONFIGS])
def test_every_builtin_tunnel_passes(name, config):
    """Every built-in tunnel passes: a categorical one in the form of its rule, a continuous one
    (linreg, mixreg, kalman: a Gaussian or mixture predictive) against its prior predictive."""
    task = get_task(name, **config)
    continuous = is_continuous(task.head)
    assert continuous or is_categorical(task.sample(4, torch.Generator().manual_seed(0)))
    lines = check_validity(task, sequences=256 if continuous else 1024)
    assert [line[:3] for line in lines] == ["(a)", "(b)"]
    if continuous:
        assert "posterior = the prior predictive given what is shown there" in lines[0]


def test_the_continuous_tunnels_are_checked_not_refused():
    assert {"linreg", "mixreg", "kalman"} <= set(BUILTIN)


def test_kalmans_first_prediction_is_the_filters_prior_predictive_given_its_header():
    """kalman's first scored position predicts y_1 from the C its header shows and the settings'
    initial state prior N(0, p0^2 I) and R = r^2: N(0, C P_1 C' + R) with P_1 = p0^2 I, written
    here from the sampled latents, not from the tunnel's floor."""
    task = get_task("kalman")
    batch = task.sample(64, torch.Generator().manual_seed(3), dtype=torch.float64)
    t0 = int(batch.mask.long().argmax(1)[0])
    assert bool((batch.mask.long().argmax(1) == t0).all())
    C = batch.latents["C"].double()
    var = task.p0**2 * (C @ C.transpose(-1, -2)).squeeze(-1).squeeze(-1) + task.r**2
    _, mean, v = split_layout(batch.posterior[:, t0])
    torch.testing.assert_close(mean[:, 0], torch.zeros(64, dtype=torch.float64))
    torch.testing.assert_close(v[:, 0], var)


def test_a_continuous_posterior_that_never_leaves_the_prior_fails_the_change_rule():
    task = get_task("linreg", d=2, n=6)

    @dataclass(frozen=True)
    class Fixed(type(task)):  # type: ignore[misc]
        def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32):
            b = super().sample(batch_size, generator, dtype=dtype)
            return Batch(b.tokens, b.mask, b.targets, self.floor_predictives(b)["prior"].to(dtype), b.latents,
                         b.header)

    with pytest.raises(ValueError, match=r"the posterior does not change with the context: its mean KL"):
        check_validity(Fixed(d=2, n=6), sequences=128)


@dataclass(frozen=True)
class Coin(Task):
    """Flips of a fresh coin per sequence; position t predicts flip t + 1. `mode`:
    - "honest": theta ~ U(0, 1), Laplace's rule on the flips shown (a coin's first flip is one
      position's evidence: the default rule, "tokens");
    - "leak": the first token is 1[theta > 1/2], the latent leaked, and the posterior ignores it
      (Laplace's rule on the flips after it): calibrated on average, so check_task passes it;
    - "peek": honest tokens, but the posterior is theta itself (the oracle reads the latent);
    - "shown": theta in {0.2, 0.8} shown by the first token, posterior theta: exact, but there is
      nothing left to infer;
    - "declared": as "honest" but declaring that its first scored position sees nothing."""

    L: int = 8
    mode: str = "honest"
    name = "validity-coin"

    vocab_size = property(lambda self: 2)
    num_classes = property(lambda self: 2)
    seq_len = property(lambda self: self.L)

    @property
    def first_scored_given(self) -> str:
        return "nothing" if self.mode == "declared" else "tokens"

    def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32) -> Batch:
        B, L = batch_size, self.L
        theta = torch.rand(B, generator=generator, dtype=torch.float64)
        if self.mode == "shown":
            theta = torch.where(theta < 0.5, 0.2, 0.8)
        flips = (torch.rand(B, L + 1, generator=generator, dtype=torch.float64) < theta[:, None]).long()
        tokens, targets = flips[:, :-1].clone(), flips[:, 1:]
        t = torch.arange(L, dtype=torch.float64)
        if self.mode in ("leak", "shown"):
            tokens[:, 0] = (theta > 0.5).long()
        if self.mode in ("peek", "shown"):
            p1 = theta[:, None].expand(B, L)
        elif self.mode == "leak":
            heads = torch.cat([torch.zeros(B, 1), tokens[:, 1:].cumsum(1).double()], 1)
            p1 = (heads + 1) / (t + 2)
        else:
            p1 = (tokens.cumsum(1).double() + 1) / (t + 3)
        mask = torch.ones(B, L, dtype=torch.bool)
        return Batch(tokens, mask, targets.masked_fill(~mask, IGNORE_INDEX), torch.stack([1 - p1, p1], -1).to(dtype))


def test_an_honest_coin_passes_with_its_first_flip_as_evidence():
    assert first_scored_rule(Coin()) == "tokens"
    assert len(check_validity(Coin())) == 2


def test_a_latent_leaked_in_the_first_token_fails_though_check_task_passes_it():
    task = Coin(mode="leak")
    check_task(task, sequences=2048)  # calibrated on average over the leak: the older checks cannot see it
    with pytest.raises(ValueError, match=r"the tokens tell more about the target than the posterior admits"):
        check_validity(task)


def test_a_posterior_that_reads_the_latent_fails():
    with pytest.raises(ValueError, match=r"the posterior at the first scored position differs by .* between sequences "
                                         r"that show the same tokens up to it"):
        check_validity(Coin(mode="peek"))


def test_a_latent_shown_from_the_start_fails_the_change_rule():
    with pytest.raises(ValueError, match=r"the posterior does not change with the context"):
        check_validity(Coin(mode="shown"))


def test_a_false_declaration_fails():
    with pytest.raises(ValueError, match=r"differs by .* between sequences that show nothing"):
        check_validity(Coin(mode="declared"))


def test_a_task_it_cannot_check_is_refused():
    @dataclass(frozen=True)
    class Gaussian(Coin):
        def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32):
            b = super().sample(batch_size, generator, dtype=dtype)
            return Batch(b.tokens, b.mask, b.targets, b.posterior[..., 0])

    with pytest.raises(ValueError, match=r"applies to tunnels with a categorical posterior \[B, L, C\]"):
        check_validity(Gaussian())

    @dataclass(frozen=True)
    class NoPrior(Coin):
        first_scored_given = "prior"  # type: ignore[assignment]

    with pytest.raises(ValueError, match=r"first_scored_given is 'prior' but the task has no first_scored_prior"):
        check_validity(NoPrior())


def test_one_scored_position_per_sequence_fails():
    with pytest.raises(ValueError, match="has one scored position per sequence"):
        check_validity(Coin(L=1))


def test_tasks_check_runs_it_on_a_named_or_outside_tunnel(capsys):
    assert main(["tasks", "--check", "vomc", "--task-args", "depth=1", "L=10", "--sequences", "64"]) == 0
    out = capsys.readouterr().out
    assert "ok: (a) first scored position" in out and "ok: (b) the posterior changes" in out
    assert out.strip().splitlines()[-1].startswith("Train it: bayesbench train --task vomc --task-args depth=1 L=10")
    assert main(["tasks", "--check", "vomc", "--task-args", "depth=-1"]) == 2
    err = capsys.readouterr().err
    assert "depth must be an integer >= 0" in err and len(err.strip().splitlines()) == 1
