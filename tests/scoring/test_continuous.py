"""Continuous scores (issue 41): the exact predictive scores 0 on every metric, the prior
predictive scores the floor, the mixture KL's quadrature is within its stated error, and the
evaluation of a model on a continuous tunnel gives the table's scores and the named floors."""

from __future__ import annotations

import math

import pytest
import torch

from bayesbench.metric_table import METRICS
from bayesbench.models import get_model
from bayesbench.models.heads import gaussian_layout, split_layout
from bayesbench.oracle.gaussian_bits import mixture_logpdf
from bayesbench.scoring.continuous import ContinuousValues, score_continuous
from bayesbench.scoring.evaluate import evaluate, max_eval_len
from bayesbench.scoring.floors import floor_scores
from bayesbench.tasks import get_task
from bayesbench.training.curves import CurveSet

TINY = {"linreg": {"d": 3, "n": 6}, "mixreg": {"d": 3, "n": 6}, "kalman": {"m": 2, "K": 6}}


@pytest.mark.parametrize("name", sorted(TINY))
def test_the_exact_predictive_scores_zero_on_every_metric(name):
    task = get_task(name, **TINY[name])
    b = task.sample(64, torch.Generator().manual_seed(0))
    p = b.posterior.double()
    v = ContinuousValues.of(p, p, b.targets, b.mask, task.error_dim)
    for metric in METRICS.values():
        if metric.continuous is not None:
            assert float(metric.continuous(v).abs().max()) < 1e-9, metric.name
    s = score_continuous(p, b.mask, p, b.targets, dim=task.error_dim, task=name)
    assert set(s.metrics) == {"entropy_mae", "kl", "entropy_mae_positional"}
    assert all(abs(x.mean) < 1e-9 for x in s.metrics.values())


@pytest.mark.parametrize("name", sorted(TINY))
def test_the_prior_predictive_scores_the_floor(name):
    task = get_task(name, **TINY[name])
    b = task.sample(64, torch.Generator().manual_seed(1))
    prior = task.floor_predictives(b)["prior"]
    floors = floor_scores(b, b, task=task)
    assert next(iter(floors)) == "prior"
    s = score_continuous(b.posterior.double(), b.mask, prior, b.targets, dim=task.error_dim, task=name)
    for metric, summary in floors["prior"].items():
        assert summary.mean == pytest.approx(s.metrics[metric].mean, rel=1e-12)
    assert floors["prior"]["kl"].mean > 0.05  # the context is worth bits


def test_the_gaussian_kl_is_the_closed_form_and_the_nll_regret_estimates_it():
    task = get_task("linreg", d=2, n=8)
    b = task.sample(4000, torch.Generator().manual_seed(2))
    p = b.posterior.double()
    _, m, var = split_layout(p)
    q = gaussian_layout(m[..., 0] + 0.3, var[..., 0] * 2.0)
    v = ContinuousValues.of(p, q, b.targets, b.mask, task.error_dim)
    kl = 0.5 * (0.5 - 1 - math.log(0.5) + 0.09 / (2 * var[..., 0])) / math.log(2)
    torch.testing.assert_close(v.kl[b.mask], kl[b.mask])
    regret = (v.nll_model - v.nll_bayes)[b.mask]
    assert abs(float(regret.mean() - v.kl[b.mask].mean())) < 4 * float(regret.std()) / regret.numel() ** 0.5
    torch.testing.assert_close(v.excess_sq[b.mask], torch.full_like(v.kl[b.mask], 0.09 / 2))


def test_the_mixture_kl_quadrature_is_within_its_stated_error():
    """mixreg's exact two-component predictive against a model's two-component mixture: the
    quadrature's KL (`oracle.gaussian_bits._integrate`) against a Monte Carlo estimate from
    200,000 draws per row (its own standard error below 0.01 bits): within 4 standard errors,
    where the two Gauss-Hermite rules it replaced were 0.012 and 0.0016 bits off on these rows
    (docs/science.md, "The mixture quadrature")."""
    task = get_task("mixreg", d=3, n=6)
    b = task.sample(8, torch.Generator().manual_seed(3))
    p = b.posterior.double()[b.mask][:10]
    bw, bm, bv = split_layout(p)
    q = torch.cat([bw.flip(-1) * 0.5 + 0.25, bm + 0.2, bv * 1.5], -1)
    qw, qm, qv = split_layout(q)
    everywhere = torch.ones(1, 10, dtype=torch.bool)
    kl = ContinuousValues.of(p.unsqueeze(0), q.unsqueeze(0), torch.zeros(1, 10), everywhere).kl[0]
    g = torch.Generator().manual_seed(4)
    n = 200_000
    comp = torch.multinomial(bw, n, replacement=True, generator=g)  # [10, n]
    y = bm.gather(1, comp) + bv.gather(1, comp).sqrt() * torch.randn(10, n, generator=g, dtype=torch.float64)
    lp = mixture_logpdf(y, bw.unsqueeze(1), bm.unsqueeze(1), bv.unsqueeze(1))
    lq = mixture_logpdf(y, qw.unsqueeze(1), qm.unsqueeze(1), qv.unsqueeze(1))
    d = (lp - lq) / math.log(2)
    se = d.std(1) / n**0.5
    assert bool((se < 0.01).all())
    assert bool(((kl - d.mean(1)).abs() < 4 * se).all()), (kl, d.mean(1), se)
    print(f"mixture KL, quadrature - Monte Carlo: worst {float((kl - d.mean(1)).abs().max()):.1e} bits, "
          f"Monte Carlo standard error <= {float(se.max()):.1e}")


@pytest.mark.parametrize("name", ["linreg", "kalman"])
def test_a_model_is_evaluated_and_curved_on_a_continuous_tunnel(name):
    task = get_task(name, **TINY[name])
    lengths = (8,) if name == "kalman" else ()
    model = get_model("transformer", task, seeds=[0, 1], n_layer=1, n_head=2, d_model=16, d_ffn=32,
                      max_len=max_eval_len(task, lengths))
    ev = evaluate(model, task, n_sequences=64, lengths=lengths)
    assert len(ev) == 2
    first = ev[0].evals[ev[0].primary]
    assert set(first.metrics()) == {"entropy_mae", "kl", "entropy_mae_positional"}
    assert all(math.isfinite(s.mean) and s.mean >= 0 for s in first.metrics().values())
    assert set(first.floors) == ({"prior", "least_squares", "ridge"} if name == "linreg" else {"prior"})
    if name == "kalman":
        assert set(ev[0].evals) == {"K=6", "K=8"}
    curve = CurveSet(task, 32)
    values = curve.score(model)
    assert values.shape[1] == 2
    kept = set(curve.uniform())
    assert {"kl", "entropy_mae", "nll_regret", "excess_sq"} <= kept and "kl:repeated" not in kept


def test_a_discrete_curve_keeps_the_metrics_it_kept_before():
    curve = CurveSet(get_task("sticky", V=3, L=8), 16)
    assert set(curve.uniform()) == {"entropy_mae", "entropy_mae_positional", "kl"}
