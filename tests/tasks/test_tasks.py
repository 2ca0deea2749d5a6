"""Wind tunnels: structure, determinism, devices, and that samples agree with the posterior."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from scipy import stats

from bayesbench.oracle import bijection_posterior, hmm_filter, markov_predictive, sticky_predictive
from bayesbench.scoring.metrics import entropy_bits
from bayesbench.tasks import IGNORE_INDEX, get_task, list_tasks
from bayesbench.tasks._random import beta, dirichlet, gamma
from bayesbench.tasks.hmm import discretise_rows
from bayesbench.tasks.registry import _TASKS, registered_tasks, unregister_task

CONFIGS = [
    ("bijection", {"V": 6}),
    ("bijection", {"V": 6, "variant": "code", "L": 9}),
    ("bijection", {"V": 5, "variant": "code", "L": 7, "supervise": "query"}),
    ("hmm", {"K": 12}),
    ("hmm", {"K": 8, "encoding": "tokens"}),
    ("hmm", {"S": 3, "V": 4, "K": 6, "init": "stationary"}),
    ("hmm", {"K": 5, "target": "posterior"}),
    ("sticky", {"V": 5, "L": 20, "a": 2.0, "b": 1.0}),
    ("markov", {"V": 3, "L": 20, "alpha": 0.5}),
]
# Every tunnel the package's files register (BUILTIN) is tested here with no edit: at the
# configurations above, and at its defaults where none is above.
BUILTIN = sorted(name for name in list_tasks() if _TASKS[name].__module__.rsplit(".", 1)[0] == "bayesbench.tasks")
# The tests of a categorical posterior run on the categorical tunnels; the continuous ones (issue 41:
# a real y, a predictive density) have their own in tests/tasks/test_continuous.py.
CATEGORICAL = [name for name in BUILTIN if get_task(name).head == "categorical"]
CONFIGS += [(name, {}) for name in CATEGORICAL if name not in {n for n, _ in CONFIGS}]
IDS = [f"{n}-{'-'.join(f'{k}{v}' for k, v in c.items())}" for n, c in CONFIGS]
# soft targets equal the posterior by construction (checked in test_batch_structure)
HARD = [(c, i) for c, i in zip(CONFIGS, IDS) if c[1].get("target") != "posterior"]


def test_registry():
    assert {"bijection", "hmm", "markov", "sticky"} <= set(list_tasks())  # every tunnel file of the package
    assert "outside" not in list_tasks()  # the wrapper of outside tunnels is no tunnel of its own
    assert get_task("hmm", K=30).K == 30
    with pytest.raises(ValueError, match="unknown task 'hmmm'; available: bijection, (.*, )?hmm"):
        get_task("hmmm")
    with pytest.raises(ValueError, match="'states' is not a setting of task 'hmm'; its settings: S, V, K"):
        get_task("hmm", states=4)


@pytest.mark.parametrize("name,config", CONFIGS, ids=IDS)
def test_batch_structure(name, config):
    task = get_task(name, **config)
    batch = task.sample(7, torch.Generator().manual_seed(0))
    B, L, C = 7, task.seq_len, task.num_classes
    assert batch.tokens.shape == (B, L) and batch.tokens.dtype == torch.long
    assert 0 <= batch.tokens.min() and batch.tokens.max() < task.vocab_size
    assert batch.mask.shape == (B, L) and batch.mask.any(1).all()
    assert batch.posterior.shape == (B, L, C)
    sums = batch.posterior.sum(-1)
    torch.testing.assert_close(sums[batch.mask], torch.ones(int(batch.mask.sum())))
    assert (sums[~batch.mask] == 0).all()
    if batch.soft_targets:
        torch.testing.assert_close(batch.targets, batch.posterior)
    else:
        assert (batch.targets[~batch.mask] == IGNORE_INDEX).all()
        assert ((batch.targets[batch.mask] >= 0) & (batch.targets[batch.mask] < C)).all()
    if task.header_len:
        assert batch.header.shape == (B, task.header_len, task.header_dim)
    else:
        assert batch.header is None


@pytest.mark.parametrize("name,config", CONFIGS, ids=IDS)
def test_same_seed_same_batch_other_seed_other_batch(name, config):
    task = get_task(name, **config)
    a = task.sample(5, torch.Generator().manual_seed(42))
    b = task.sample(5, torch.Generator().manual_seed(42))
    c = task.sample(5, torch.Generator().manual_seed(43))
    for field in ("tokens", "mask", "targets", "posterior"):
        assert torch.equal(getattr(a, field), getattr(b, field))
    assert a.latents.keys() == b.latents.keys()
    assert all(torch.equal(a.latents[k], b.latents[k]) for k in a.latents)
    assert not torch.equal(a.tokens, c.tokens)


def recompute_posterior(task, batch):
    """The exact posterior at the supervised positions, from the latents, on the CPU."""
    lat = {k: v.cpu() for k, v in batch.latents.items()}
    if task.name == "bijection":
        return bijection_posterior(lat["keys"], lat["values"], task.V, dtype=torch.float64)
    if task.name == "hmm":
        return hmm_filter(lat["trans"].double(), lat["emit"].double(), lat["obs"], lat["init"].double())
    seq = batch.tokens.cpu()
    if task.name == "sticky":
        return sticky_predictive(seq, task.V, task.a, task.b, dtype=torch.float64)[:, :-1]
    if task.name == "markov":
        return markov_predictive(seq, task.V, task.alpha, dtype=torch.float64)[:, :-1]
    brute_force = getattr(task, "brute_force_posterior", None)  # a tunnel's own enumeration (tasks/check.py)
    if brute_force is None:
        pytest.fail(f"no exact posterior to recompute for tunnel {task.name!r}: give it a brute_force_posterior "
                    "(tasks/check.py) or add its oracle here")
    return brute_force(batch.to("cpu")).double()[batch.mask.cpu()].reshape(len(seq), -1, task.num_classes)


@pytest.mark.parametrize("name,config", CONFIGS, ids=IDS)
def test_posterior_on_any_device_matches_the_cpu_oracle(name, config, device):
    task = get_task(name, **config)
    batch = task.sample(9, torch.Generator(device=device).manual_seed(1))
    assert batch.tokens.device.type == device.type
    want = recompute_posterior(task, batch)
    got = batch.posterior.cpu().double()[batch.mask.cpu()].reshape(9, -1, task.num_classes)
    if task.name == "bijection":
        keep = torch.zeros(want.shape[1], dtype=torch.bool)
        keep[: task.L] = task.supervise in ("values", "both")
        if task.query:
            keep[task.L] = task.supervise in ("query", "both")
        want = want[:, keep]
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("name,config", [c for c, _ in HARD], ids=[i for _, i in HARD])
def test_samples_are_distributed_as_the_posterior_says(name, config):
    """Calibration: E[onehot(target) | context] = posterior, and E[-log p(target)] = E[H(p)].

    Both hold only if the sampler and the oracle describe the same generative process.
    Tolerance: 5 standard errors (per position and class), over 20000 sequences.
    """
    task = get_task(name, **config)
    batch = task.sample(20000, torch.Generator().manual_seed(123), dtype=torch.float64)
    m = batch.mask
    p = batch.posterior
    y = torch.nn.functional.one_hot(batch.targets.clamp(min=0), task.num_classes).double()
    resid = torch.where(m.unsqueeze(-1), y - p, 0.0)
    n = m.sum(0).clamp(min=1).double()
    mean = resid.sum(0) / n.unsqueeze(-1)
    sd = torch.sqrt(torch.where(m.unsqueeze(-1), p * (1 - p), 0.0).sum(0)) / n.unsqueeze(-1)
    z = (mean.abs() / sd.clamp(min=1e-12))[m.any(0)]
    assert z.max() < 5.0, f"max z = {z.max():.2f}"
    nll = -torch.log(p.gather(-1, batch.targets.clamp(min=0).unsqueeze(-1)).squeeze(-1))[m] / math.log(2)
    h = entropy_bits(p)[m]
    diff = nll - h
    assert abs(diff.mean()) < 5 * diff.std() / math.sqrt(diff.numel()) + 1e-9


def test_paper_bijection_entropy_curve_is_log2_of_remaining():
    task = get_task("bijection", V=20)
    batch = task.sample(64, torch.Generator().manual_seed(0))
    assert task.seq_len == 40
    assert batch.mask[0].nonzero().squeeze(1).tolist() == list(range(0, 40, 2))
    h = entropy_bits(batch.posterior)[batch.mask].reshape(64, 20)
    torch.testing.assert_close(h, torch.log2(torch.arange(20, 0, -1, dtype=torch.float64)).expand(64, 20))
    keys, values = batch.tokens[:, 0::2], batch.tokens[:, 1::2]
    assert (keys < 20).all() and (values >= 20).all()
    assert (keys.sort(1).values == torch.arange(20)).all()  # a permutation of the keys
    assert torch.equal(values - 20, batch.latents["perm"].gather(1, keys))


def test_code_bijection_query_is_a_context_key_with_a_point_mass():
    task = get_task("bijection", V=20, variant="code")
    assert (task.L, task.keys, task.query, task.supervise) == (19, "replacement", True, "both")
    batch = task.sample(256, torch.Generator().manual_seed(0))
    assert task.seq_len == 39
    q = batch.tokens[:, -1]
    assert (batch.tokens[:, 0:38:2] == q.unsqueeze(1)).any(1).all()
    assert (entropy_bits(batch.posterior[:, -1]) == 0).all()
    assert torch.equal(batch.targets[:, -1], batch.latents["perm"].gather(1, q.unsqueeze(1)).squeeze(1))


def test_hmm_tokens_encoding_decodes_to_the_rounded_matrices():
    task = get_task("hmm", encoding="tokens")
    assert task.prefix_len == 53 and task.header_len == 0 and task.seq_len == 93
    batch = task.sample(300, torch.Generator().manual_seed(2), dtype=torch.float64)
    t, e = batch.latents["trans"], batch.latents["emit"]
    hundredths = torch.cat([t, e], 1) * 100
    assert torch.allclose(hundredths, hundredths.round(), atol=1e-9)
    assert (hundredths.round() >= 5).all()
    assert (hundredths.round().sum(-1) == 100).all()
    decode = lambda tok: (tok - task.V + 5).double() / 100  # noqa: E731
    torch.testing.assert_close(decode(batch.tokens[:, 1:26]).reshape(300, 5, 5), t)
    torch.testing.assert_close(decode(batch.tokens[:, 27:52]).reshape(300, 5, 5), e)
    specials = task._specials
    assert (batch.tokens[:, 0] == specials["TRANS"]).all() and (batch.tokens[:, 26] == specials["EMIT"]).all()
    assert (batch.tokens[:, 52] == specials["SEP"]).all() and (batch.tokens[:, 53::2] == specials["OBS"]).all()
    assert torch.equal(batch.tokens[:, 54::2], batch.latents["obs"])


def test_discretise_rows_repairs_small_entries():
    p = torch.tensor([[0.9, 0.1, 0.0, 0.0, 0.0], [0.2, 0.2, 0.2, 0.2, 0.2], [0.96, 0.01, 0.01, 0.01, 0.01]])
    h = discretise_rows(p)
    assert (h.sum(-1) == 100).all() and (h >= 5).all()
    assert h[1].tolist() == [20, 20, 20, 20, 20]
    big = discretise_rows(dirichlet(0.2, (5000, 8), torch.Generator().manual_seed(0)))
    assert (big.sum(-1) == 100).all() and (big >= 5).all()


def test_hmm_rows_header_holds_the_matrices():
    task = get_task("hmm", S=3, V=4, K=5)
    batch = task.sample(4, torch.Generator().manual_seed(0))
    assert batch.header.shape == (4, 6, 4)
    torch.testing.assert_close(batch.header[:, :3, :3], batch.latents["trans"])
    torch.testing.assert_close(batch.header[:, 3:, :4], batch.latents["emit"])
    assert (batch.header[:, :3, 3] == 0).all()
    assert batch.tokens[0, :6].tolist() == [4, 5, 6, 7, 8, 9]
    assert torch.equal(batch.tokens[:, 6:], batch.latents["obs"])


@pytest.mark.parametrize(
    "name,config,message",
    [
        ("bijection", {"V": 1}, "V must be an integer >= 2"),
        ("bijection", {"V": 5, "L": 6}, "L must be <= V when keys='permutation'"),
        ("bijection", {"variant": "mine"}, "variant must be one of"),
        ("bijection", {"supervise": "query"}, "supervise='query' needs query=True"),
        ("hmm", {"S": 1}, "S must be an integer >= 2"),
        ("hmm", {"K": 0}, "K must be a positive integer"),
        ("hmm", {"encoding": "tokens", "S": 21}, "encoding='tokens' needs S, V <= 20"),
        ("hmm", {"init": "random"}, "init must be one of \\('uniform', 'stationary'\\)"),
        ("hmm", {"target": "soft"}, "target must be one of \\('state', 'posterior'\\)"),
        ("sticky", {"a": 0}, "a must be a positive finite number"),
        ("sticky", {"b": float("inf")}, "b must be a positive finite number"),
        ("markov", {"alpha": float("nan")}, "alpha must be a positive finite number"),
        ("hmm", {"concentration": -1.0}, "concentration must be a positive finite number"),
        ("markov", {"L": 1}, "L must be an integer >= 2"),
    ],
)
def test_bad_configuration_raises(name, config, message):
    with pytest.raises(ValueError, match=message):
        get_task(name, **config)


# Issue 29, section 2: every field of every built-in tunnel checked for type and range where it is
# defined (a bool or a string passed for a number, or a number for a switch, was accepted).
FIELD_RULES = {
    "bijection": {"V": [1, 0, 2.5, True, "8"], "variant": ["mine", 3], "L": [0, -1, 1.5, True],
                  "keys": ["sorted", 1], "query": [1, 0, "yes"], "supervise": ["all", 2]},
    "hmm": {"S": [1, 0, 2.0, True], "V": [0, -1, 1.5], "K": [0, 2.5, True],
            "concentration": [0, -1.0, math.nan, math.inf, True, "1.5"], "init": ["random", None],
            "encoding": ["bits"], "target": ["soft"], "rounding": ["up"], "rows_rounded": [1, "no"]},
    "sticky": {"V": [1, 2.0, True], "L": [1, 0, 3.5], "a": [0, -1, math.nan, math.inf, True, "1.5"],
               "b": [0.0, -math.inf, True, "2"]},
    "markov": {"V": [1, True], "L": [1, 2.5], "alpha": [0, math.nan, math.inf, True, "1"]},
}


def test_the_field_rules_cover_every_field_of_every_tunnel_they_name():
    assert set(FIELD_RULES) <= set(BUILTIN), set(FIELD_RULES) - set(BUILTIN)  # rules for a tunnel that is gone
    for name, rules in FIELD_RULES.items():
        assert set(rules) == {f.name for f in dataclasses.fields(_TASKS[name])}, name


@pytest.mark.parametrize("name", BUILTIN)
def test_every_field_of_every_tunnel_refuses_a_value_of_no_type_naming_it(name):
    """The check every tunnel gets, whether FIELD_RULES names it or not (a new tunnel file is
    checked with no edit here): each field refuses a value of no field's type, naming it."""
    from bayesbench.checks import SettingError

    for field in dataclasses.fields(_TASKS[name]):
        if field.init:
            with pytest.raises(SettingError) as err:
                get_task(name, **{field.name: "not a value of any setting"})
            assert field.name in err.value.fields, (name, field.name, str(err.value))


@pytest.mark.parametrize("name", BUILTIN)
def test_every_tunnel_passes_the_checks_of_an_outside_one(name):
    """What `bayesbench run --task ./mine.py:build` checks before training (tasks/check.py): sizes,
    normalisation, determinism, the posterior against the sampler; every built-in tunnel at its defaults
    (a continuous one by tasks/check_continuous.py, which check_task calls for it)."""
    from bayesbench.tasks.check import check_task

    assert check_task(get_task(name))


def test_a_registered_tunnel_can_be_unregistered_and_registering_is_undone():
    from bayesbench.tasks import register_task

    before = list_tasks()
    with registered_tasks():
        register_task("throwaway")(type(get_task("sticky")))
        assert "throwaway" in list_tasks()
    assert list_tasks() == before
    with pytest.raises(ValueError, match="unknown task 'throwaway': nothing to unregister"):
        unregister_task("throwaway")


@pytest.mark.parametrize("name", sorted(FIELD_RULES))
def test_every_field_refuses_values_outside_its_rule_naming_the_field(name):
    from bayesbench.checks import SettingError

    for field, values in FIELD_RULES[name].items():
        for value in values:
            with pytest.raises(SettingError, match=f"^{field} must") as err:
                get_task(name, **{field: value})
            assert field in err.value.fields, (name, field, value)


def test_a_name_that_is_not_a_setting_is_said_so_with_the_settings():
    """Issue 29, section 3: `--task-args name=foo` gave Python's "got multiple values for argument 'name'"."""
    for key in ("name", "VV", "sample"):
        with pytest.raises(ValueError, match=f"{key!r} is not a setting of task 'bijection'.*its settings: V, variant, "
                                             "L, keys, query, supervise"):
            get_task("bijection", **{key: 1})
    with pytest.raises(ValueError, match=r"'VV' is not a setting of task 'bijection' \(did you mean 'V'\?\)"):
        get_task("bijection", VV=3)


def test_bad_batch_size_and_device_mismatch():
    task = get_task("sticky")
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        task.sample(0)
    with pytest.raises(ValueError, match="does not match the generator's device"):
        task.sample(2, torch.Generator().manual_seed(0), device="meta")


def test_stationary_init_is_stationary():
    task = get_task("hmm", init="stationary")
    trans, _, init = task.sample_hmms(50, torch.Generator().manual_seed(0), dtype=torch.float64)
    torch.testing.assert_close(torch.bmm(init.unsqueeze(1), trans).squeeze(1), init)


@pytest.mark.parametrize("concentration", [0.3, 1.0, 2.5])
def test_gamma_and_dirichlet_draws_follow_their_laws(concentration):
    g = torch.Generator().manual_seed(0)
    x = gamma(concentration, (40000,), g).numpy()
    assert stats.kstest(x, stats.gamma(concentration).cdf).pvalue > 1e-4
    d = dirichlet(concentration, (40000, 3), g, dtype=torch.float64)
    # marginals of a symmetric Dirichlet are Beta(c, 2c)
    assert stats.kstest(d[:, 0].numpy(), stats.beta(concentration, 2 * concentration).cdf).pvalue > 1e-4
    b = beta(2.0, concentration, (40000,), g, dtype=torch.float64).numpy()
    assert stats.kstest(b, stats.beta(2.0, concentration).cdf).pvalue > 1e-4


def test_tiny_concentrations_give_proper_draws():
    """Gamma draws of concentration 1e-3 underflow to 0; in log space the Dirichlet and Beta
    draws built from them stay proper distributions (no 0/0)."""
    g = torch.Generator().manual_seed(0)
    d = dirichlet(1e-3, (2000, 4), g, dtype=torch.float64)
    assert torch.isfinite(d).all() and torch.allclose(d.sum(-1), torch.ones(2000, dtype=torch.float64))
    assert (d.max(-1).values > 0.99).float().mean() > 0.9  # nearly all mass on one symbol
    b = beta(1e-3, 1e-3, (2000,), g, dtype=torch.float64)
    assert torch.isfinite(b).all() and ((b < 0.01) | (b > 0.99)).float().mean() > 0.95
    batch = get_task("sticky", a=1e-3, b=1e-3, L=20).sample(500, g)
    assert torch.isfinite(batch.posterior).all() and torch.isfinite(batch.latents["rho"]).all()


def test_sticky_stickiness_follows_its_prior():
    task = get_task("sticky", V=6, L=400, a=2.0, b=3.0)
    batch = task.sample(2000, torch.Generator().manual_seed(0), dtype=torch.float64)
    rho = batch.latents["rho"].numpy()
    assert stats.kstest(rho, stats.beta(2.0, 3.0).cdf).pvalue > 1e-4
    stay_rate = (batch.tokens[:, 1:] == batch.tokens[:, :-1]).double().mean(1).numpy()
    assert np.abs(stay_rate - rho).max() < 0.12  # 399 transitions per sequence
