"""The routing-law statistics against their shuffle null on synthetic inputs with known answers,
and the split of the predicted change into the head's own W_Q/W_K part and the rest."""

from __future__ import annotations

import pytest
import torch

from bayesbench.dynamics.profile.law import LAW_NAMES, NULLED, law_statistics, own_qk_tangent
from bayesbench.dynamics.profile.routing import masked_softmax, predicted_change, transformer_scores
from bayesbench.models import get_model
from bayesbench.models.attention import causal_mask
from bayesbench.stats import t_interval
from bayesbench.tasks import get_task


def _advantage(alpha: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """A random advantage with the identity's structure: A = E_alpha[b] - b on visible keys."""
    keep = causal_mask(alpha.shape[-1], alpha.device)
    b = torch.where(keep, torch.randn(alpha.shape, generator=gen, dtype=alpha.dtype), 0.0)
    return torch.where(keep, (alpha * b).sum(-1, keepdim=True) - b, 0.0)


def _inputs(E=8, steps=12, B=8, H=2, T=9, coupled=0.0, seed=0):
    """[steps, E, B, H, T, T] alpha, A and Delta s: independent of A, plus `coupled` * alpha A."""
    gen = torch.Generator().manual_seed(seed)
    shape = (steps, E, B, H, T, T)
    alpha = masked_softmax(torch.randn(shape, generator=gen, dtype=torch.float64) * 2)
    adv = _advantage(alpha, gen)
    ds = torch.randn(shape, generator=gen, dtype=torch.float64) * 0.01 + coupled * alpha * adv
    return ds, alpha, adv


def _per_seed_excess(stats: torch.Tensor, name: str) -> list[float]:
    """stats [names, steps, E, H] -> per-seed mean over steps and heads of statistic - null."""
    x = stats[LAW_NAMES.index(name)] - stats[LAW_NAMES.index(name + "_null")]
    return x.mean((0, 2)).tolist()


def test_independent_changes_give_an_excess_whose_interval_holds_zero():
    ds, alpha, adv = _inputs()
    stats = law_statistics(ds, ds, ds, adv, alpha, 0.1)
    for name in ("law_sign_alpha", "law_sign_abs", "law_cosine", "law_query_test", "law_kappa"):
        ci = t_interval(_per_seed_excess(stats, name))
        assert ci["n"] == 8 and ci["ci_low"] < 0 < ci["ci_high"], (name, ci)
    # the null of an independent change sits at chance: sign agreement 1/2, cosine 0
    assert stats[LAW_NAMES.index("law_sign_alpha_null")].mean().item() == pytest.approx(0.5, abs=0.01)
    assert stats[LAW_NAMES.index("law_cosine_null")].mean().item() == pytest.approx(0.0, abs=0.01)


def test_a_change_along_alpha_a_gives_an_excess_above_zero():
    ds, alpha, adv = _inputs(coupled=0.05)
    stats = law_statistics(ds, ds, ds, adv, alpha, 0.1)
    for name in ("law_sign_alpha", "law_sign_abs", "law_cosine", "law_query_test", "law_kappa"):
        ci = t_interval(_per_seed_excess(stats, name))
        assert ci["ci_low"] > 0, (name, ci)


def test_the_null_pairs_each_sequence_with_the_others():
    """B = 2: the null is the statistic with the two sequences' alpha and A swapped."""
    ds, alpha, adv = _inputs(E=1, steps=1, B=2, coupled=0.03, seed=3)
    got = law_statistics(ds, ds, ds, adv, alpha, 0.1)
    swapped = law_statistics(ds, ds, ds, adv.flip(-4), alpha.flip(-4), 0.1)
    for k, name in enumerate(NULLED):
        # swapping alpha also changes the rows' Delta alpha, so compare the statistics that pair only
        if name == "law_query_test":
            continue
        torch.testing.assert_close(got[LAW_NAMES.index(name + "_null")], swapped[k], msg=name, equal_nan=True)


def test_own_part_plus_rest_is_the_whole_prediction_and_own_is_only_the_qk_rows():
    task = get_task("bijection", V=5)
    model = get_model("transformer", task, seeds=[0, 1], n_layer=2, n_head=2, d_model=12, d_ffn=20).double().eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.3)
    tokens = task.sample(3, torch.Generator().manual_seed(2)).tokens.unsqueeze(0).expand(2, 3, -1)
    params = [p.detach().clone() for p in model.parameters()]
    delta = [torch.randn(p.shape, generator=g, dtype=p.dtype) * 1e-3 for p in params]
    _, whole = predicted_change(model, params, delta, tokens)
    for layer in (0, 1):
        own_delta = own_qk_tangent(model, delta, layer)
        _, own = predicted_change(model, params, own_delta, tokens)
        rest_delta = [d - o for d, o in zip(delta, own_delta)]
        _, rest = predicted_change(model, params, rest_delta, tokens)
        torch.testing.assert_close(own[layer] + rest[layer], whole[layer])
        if layer == 1:  # layer 1's own rows do not reach layer 0's scores
            assert own[0].abs().max() == 0
        # the own JVP is the derivative along those rows: a small step moves the scores by it
        with torch.no_grad():
            for p, p0, d in zip(model.parameters(), params, own_delta):
                p.copy_(p0 + 0.1 * d)
            moved = transformer_scores(model, tokens)
            for p, p0 in zip(model.parameters(), params):
                p.copy_(p0)
            s0 = transformer_scores(model, tokens)
        keep = causal_mask(tokens.shape[-1], tokens.device)
        first = torch.where(keep, 0.1 * own[layer], 0.0)
        err = torch.where(keep, moved[layer] - s0[layer], 0.0) - first
        assert float(err.abs().max()) < 1e-3 * float(first.abs().max())


def test_scores_of_a_rope_model_are_its_attention_scores():
    """transformer_scores applies the rotary embedding the model's attention applies: softmax of
    the scores is the alpha its probed backward sees."""
    from bayesbench.dynamics.profile.probes import ProbeSet
    from bayesbench.training.numerics import member_losses

    task = get_task("bijection", V=5)
    model = get_model("transformer", task, seeds=[0], n_layer=2, n_head=2, d_model=12, d_ffn=20,
                      position="rope").double()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel()), dtype=p.dtype))
    b = task.sample(3, torch.Generator().manual_seed(0))
    tokens, targets, mask = (t.unsqueeze(0) for t in (b.tokens, b.targets, b.mask))
    probes = ProbeSet(model, "reference")
    probes.attach("full")
    member_losses(model(tokens), targets, mask).sum().backward()
    alpha = masked_softmax(transformer_scores(model, tokens).detach())
    for li, p in enumerate(probes.probes):
        torch.testing.assert_close(alpha[li, 0], p.alpha.reshape(1, -1, *p.alpha.shape[1:])[0], rtol=1e-9, atol=1e-12)
    probes.detach()


def test_the_bounded_law_checks_keep_their_intervals_in_range():
    """Probe case 122: with 2 seeds the row-shift share (in [0, 1]) was reported as 0.493
    [-0.593, 1.579]; it and R^2 (at most 1) get intervals inside the values' range."""
    from bayesbench.dynamics.profile.summary import law_summary
    from bayesbench.dynamics.store import Measurement

    values = {"law_row_shift_share": (0.05, 0.95), "law_linearity_r2": (0.90, 0.997), "law_own_share": (0.4, 1.3)}
    records = [Measurement(seed, step, 0, head, name, v[seed] + 0.001 * step)
               for name, v in values.items() for seed in (0, 1) for step in (1, 2) for head in (0, 1)]
    row = law_summary(records)[0]
    shift, r2, own = row["row_shift_share"]["mean"], row["linearity_r2"]["mean"], row["own_share"]["mean"]
    assert 0.0 <= shift["ci_low"] <= shift["mean"] <= shift["ci_high"] <= 1.0
    assert r2["ci_high"] <= 1.0
    assert own["ci_low"] < 0.0 and own["method"] == "t"  # unbounded: its t-interval may leave [0, 1]


# -- the self-term (issue 44): a step aligns with its own batch's pushes by construction

def _self_term_run(B: int, seed: int = 0, E: int = 8, steps: int = 4, T: int = 6, P: int = 48):
    """A synthetic model whose law holds only through the self-term: each sequence's scores and
    values are fixed random linear maps J_b of the parameters, every push (alpha A, -dL/dv) is
    independent of every map, and one plain gradient step on the mean loss moves the parameters
    along sum_b J_b^T push_b / B. A training sequence's change then carries J_b J_b^T push_b / B
    (positive semidefinite: aligned with its own push); a held-out sequence's carries nothing of
    its own push. Returns per-seed excesses of law_cosine and value_cosine (train, held-out)."""
    from bayesbench.dynamics.profile.law import VALUE_NAMES, value_push, value_statistics

    gen = torch.Generator().manual_seed(seed)
    out = {}
    for split in ("train", "heldout"):
        alpha = masked_softmax(torch.randn(steps, E, B, 1, T, T, generator=gen, dtype=torch.float64) * 2)
        adv = _advantage(alpha, gen)
        u = torch.randn(steps, E, B, 1, T, 4, generator=gen, dtype=torch.float64)
        out[split] = (alpha, adv, u, torch.randn(steps, E, B, T * T, P, generator=gen, dtype=torch.float64),
                      torch.randn(steps, E, B, T * 4, P, generator=gen, dtype=torch.float64))
    alpha, adv, u, js, jv = out["train"]
    push_s = (alpha * adv).reshape(steps, E, B, -1)
    push_v = value_push(alpha, u).reshape(steps, E, B, -1)
    dtheta_s = torch.einsum("seBkp,seBk->sep", js, push_s) / B  # the step's parameter change, scores' part
    dtheta_v = torch.einsum("seBkp,seBk->sep", jv, push_v) / B
    excess = {}
    for split, (alpha, adv, u, js, jv) in out.items():
        ds = torch.einsum("seBkp,sep->seBk", js, dtheta_s).reshape(alpha.shape)
        dv = torch.einsum("seBkp,sep->seBk", jv, dtheta_v).reshape(u.shape)
        law = law_statistics(ds, ds, ds, adv, alpha, 0.1)
        value = value_statistics(dv, alpha, u, 0.1)
        v_excess = (value[VALUE_NAMES.index("value_cosine")] - value[VALUE_NAMES.index("value_cosine_null")])
        excess[split] = (_per_seed_excess(law, "law_cosine"), v_excess.mean((0, 2)).tolist())
    return excess


def test_the_self_term_shows_in_batch_and_not_on_held_out_sequences():
    """Issue 44's test of the instrument: alignment that is all self-term is 'held' in-batch and
    at chance on held-out sequences, for the routing law and the value law."""
    excess = _self_term_run(B=8)
    for k, law in enumerate(("routing", "value")):
        inb, held = t_interval(excess["train"][k]), t_interval(excess["heldout"][k])
        assert inb["ci_low"] > 0.05, (law, inb)  # in-batch: far beyond the shuffle null
        assert held["ci_low"] < 0 < held["ci_high"] and abs(held["mean"]) < 0.02, (law, held)


def test_the_self_term_falls_with_the_batch():
    """The self-term is one of B terms: the in-batch excess falls as the batch grows (about as
    1 / sqrt(B) for a cosine once the other sequences' terms dominate the change's norm)."""
    small, large = (_self_term_run(B=b, seed=1)["train"][0] for b in (4, 16))
    ratio = (sum(small) / len(small)) / (sum(large) / len(large))
    assert 1.5 < ratio < 4.5, ratio
