"""EM-like vs SGD (`bayesbench emsgd`): the authors' data construction, the exact floors, the
batched ensemble against solo runs and a plain per-member reference, the speed-up statistic,
EM ahead at reduced steps, the study end to end, and bad inputs."""

from __future__ import annotations

import itertools
import json
import math
import os
from pathlib import Path

import pytest
import torch

from bayesbench.cli import main
from bayesbench.dynamics import read_dynamics, read_study
from bayesbench.dynamics.emsgd.chain import (
    beta_sticky_data,
    conditional_entropy,
    filter_predictive,
    paper_data,
    symbol_means,
    transition_matrix,
)
from bayesbench.dynamics.emsgd.controls import gap_share, gap_thresholds, paired_speedup, steps_to_gap
from bayesbench.dynamics.emsgd.deep import DeepConfig, train_deep
from bayesbench.dynamics.emsgd.speedup import speedup, speedup_text, steps_to_reach
from bayesbench.dynamics.emsgd.study import default_seeds, run_study
from bayesbench.dynamics.emsgd.toy import ToyShape, init_weights, member_losses, toy_forward, train_toy

# ---------------------------------------------------------------- data and floors

def test_transition_matrix_is_the_authors_normalisation():
    P = transition_matrix(8, 0.3).double()
    assert torch.allclose(P.sum(1), torch.ones(8, dtype=torch.float64), atol=1e-6)
    inv_dist = sum(1 / min(j, 8 - j) for j in range(1, 8))  # 1 + 1/2 + 1/3 + 1/4 + 1/3 + 1/2 + 1
    expected_stay = 0.3 + 0.7 * 0.3 / (0.3 + inv_dist)
    assert P[3, 3].item() == pytest.approx(expected_stay, abs=1e-6) and abs(P[0, 0].item() - 0.3) > 0.04
    assert P[0, 1].item() == pytest.approx(0.7 * 1 / (0.3 + inv_dist), abs=1e-6)
    assert P[0, 4].item() == pytest.approx(0.7 * 0.25 / (0.3 + inv_dist), abs=1e-6)
    assert torch.allclose(P.roll(1, 0).roll(1, 1), P)  # circulant
    H = conditional_entropy(P)
    assert H == pytest.approx(float(-(P[0] * P[0].log()).sum()), abs=1e-6)


def test_paper_data_shapes_and_inputs_are_noisy_means_of_the_previous_symbol():
    d = paper_data(42, T=400)
    assert d.inputs.shape == (1, 399, 20) and d.targets.shape == (1, 399)
    mu = symbol_means()
    # the nearest mean to x_t is usually mu_{y_(t-1)}, and y_(t-1) = target at t-1
    nearest = torch.cdist(d.inputs[0], mu).argmin(1)
    assert (nearest[1:] == d.targets[0, :-1]).float().mean() > 0.9
    assert torch.equal(paper_data(42, T=400).inputs, d.inputs)  # a seed gives the same data
    assert not torch.equal(paper_data(43, T=400).inputs, d.inputs)


def test_filter_predictive_matches_brute_force_enumeration():
    gen = torch.Generator().manual_seed(0)
    V, d, N = 3, 2, 4
    P = torch.rand(V, V, generator=gen, dtype=torch.float64) + 0.1
    P = P / P.sum(1, keepdim=True)
    mu = torch.randn(V, d, generator=gen, dtype=torch.float64)
    x = torch.randn(N, d, generator=gen, dtype=torch.float64)
    got = filter_predictive(x, P, mu)
    for t in range(N):  # p(y_(t+1) | x_1..x_(t+1)): sum over hidden z_1..z_(t+1) = y_0..y_t
        weights = torch.zeros(V, dtype=torch.float64)
        for zs in itertools.product(range(V), repeat=t + 1):
            w = 1.0 / V
            for s, z in enumerate(zs):
                if s > 0:
                    w *= P[zs[s - 1], z]
                w *= math.exp(-0.5 * float((x[s] - mu[z]).pow(2).sum()))
            weights += w * P[zs[-1]]
        assert torch.allclose(got[t], weights / weights.sum(), atol=1e-10)


def test_floors_order_and_beta_floor_is_the_oracles_cross_entropy():
    d = paper_data(7, T=600)
    H = conditional_entropy(transition_matrix())
    assert H < d.floor() < math.log(8)  # noisy inputs cost something; still far below uniform
    b = beta_sticky_data(3, n_sequences=5, L=12)
    assert b.inputs.shape == (5, 12, 20) and (b.targets[:, -1] == -100).all()
    # reference: P(stay at t) = (1 + stays so far) / (2 + t) with a = b = 1, else (1 - P) / 7
    toks = torch.cdist(b.inputs, symbol_means()).argmin(-1)
    total, n = 0.0, 0
    for s in range(5):
        stays = 0
        for t in range(11):
            if t > 0:
                stays += int(toks[s, t] == toks[s, t - 1])
            p_stay = (1 + stays) / (2 + t)
            nxt = int(b.targets[s, t])
            p = p_stay if nxt == int(toks[s, t]) else (1 - p_stay) / 7
            total, n = total - math.log(p), n + 1
    assert b.floor() == pytest.approx(total / n, abs=1e-6)


# ---------------------------------------------------------------- the batched toy

def _reference_losses(W: dict, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Plain per-member, per-sequence reference with 2-D matmuls."""
    out = []
    for m in range(x.shape[0]):
        ces = []
        for b in range(x.shape[1]):
            q, k, v = x[m, b] @ W["W_Q"][m], x[m, b] @ W["W_K"][m], x[m, b] @ W["W_V"][m]
            s = q @ k.T / math.sqrt(q.shape[1])
            s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), float("-inf"))
            logits = torch.softmax(s, -1) @ v @ W["W_O"][m]
            ces.append(torch.nn.functional.cross_entropy(logits, y[m, b], ignore_index=-100, reduction="sum"))
        out.append(torch.stack(ces).sum() / (y[m] != -100).sum())
    return torch.stack(out)


def test_batched_forward_matches_per_member_reference_on_awkward_shapes():
    gen = torch.Generator().manual_seed(1)
    shape = ToyShape(d_x=5, d_k=3, d_v=4, n_classes=6)
    W = init_weights([11, 12, 13], shape)
    x = torch.randn(3, 2, 7, 5, generator=gen)
    y = torch.randint(0, 6, (3, 2, 7), generator=gen)
    y[:, :, -1] = -100
    logits, alpha = toy_forward(W, x)
    assert torch.allclose(member_losses(logits, y), _reference_losses(W, x, y), atol=1e-6)
    assert torch.allclose(alpha.sum(-1), torch.ones(3, 2, 7)) and alpha.triu(1).abs().max() == 0


def test_ensemble_member_equals_solo_run_and_chunking_changes_nothing():
    seeds = default_seeds(16)
    data = [paper_data(s, T=40) for s in seeds]
    mu = symbol_means()
    ens = train_toy(data, seeds, steps=15, means=mu)
    chunked = train_toy(data, seeds, steps=15, means=mu, chunk=5)
    assert torch.allclose(ens.losses, chunked.losses, atol=1e-6, rtol=0)  # float rounding only
    e = 6
    solo = train_toy([data[e]], [seeds[e]], steps=15, means=mu)
    assert torch.allclose(ens.losses[:, e], solo.losses[:, 0], atol=1e-6, rtol=0)
    assert torch.allclose(ens.prototypes[:, e], solo.prototypes[:, 0], atol=1e-6)
    E = len(seeds)
    for w, final in ens.final.items():  # member m = schedule * E + seed index
        for j in range(2):
            assert torch.allclose(final[j * E + e], solo.final[w][j], atol=1e-6)
    # both schedules start from the same weights, and then differ
    assert torch.equal(ens.losses[0, :, 0], ens.losses[1, :, 0])
    assert not torch.equal(ens.losses[0, :, -1], ens.losses[1, :, -1])


def test_em_like_is_ahead_of_sgd_on_most_seeds_at_reduced_steps():
    seeds = default_seeds(16)
    run = train_toy([paper_data(s, T=100) for s in seeds], seeds, steps=60)
    sgd, em = run.losses[0], run.losses[1]
    assert int((em[:, -1] < sgd[:, -1]).sum()) >= 12
    s = speedup(em, sgd, 60)
    assert s.value > 1.0 and s.ci_low <= s.value <= s.ci_high and s.reached >= 12


# ---------------------------------------------------------------- the speed-up statistic

def test_a_speedup_no_seed_reached_says_not_reached_instead_of_1x():
    """EM-like never gets to SGD's final loss: the ratio is n_steps / n_steps = 1.00x [1.00, 1.00],
    a number that would read as "as fast"; the text says "not reached" (issue 24, case 11)."""
    n = 10
    slow = torch.linspace(2.0, 1.0, n + 1).repeat(3, 1)
    fast = torch.full((3, n + 1), 1.5)  # never below 1.0
    s = speedup(fast, slow, n)
    assert s.reached == 0 and s.value == pytest.approx(1.0)
    assert speedup_text(s) == "not reached (0 of 3 seeds within 10 updates)"
    assert speedup_text(s.as_dict(), detail=False) == speedup_text(s)
    fast[0, 4:] = 0.5  # one seed gets there at step 4: a number, with how many seeds reached it
    text = speedup_text(speedup(fast, slow, n))
    assert text.startswith(f"{10 / 8:.2f}x [") and text.endswith("(mean 8 steps; 1 seeds reached it)")


def test_speedup_on_constructed_curves():
    n = 10
    slow = torch.linspace(2.0, 1.0, n + 1).repeat(4, 1)  # final loss 1.0 for every seed
    fast = torch.full((4, n + 1), 2.0)
    for e, k in enumerate((2, 4, 5, 10)):  # seed e drops below 1.0 at step k (10 = never)
        if k < n:
            fast[e, k:] = 0.5
    assert steps_to_reach(fast, torch.ones(4), n).tolist() == [2, 4, 5, 10]
    s = speedup(fast, slow, n)
    assert s.value == pytest.approx(10 / 5.25) and s.reached == 3 and s.steps == [2, 4, 5, 10]
    assert s.ci_low <= s.value <= s.ci_high
    slow2 = slow.clone()
    slow2[:, n] = torch.tensor([0.4, 0.4, 2.0, 2.0])  # pooled threshold 1.2: every drop counts
    pooled = speedup(fast, slow2, n, pooled=True)
    assert pooled.steps == [2, 4, 5, 10] and pooled.threshold == "pooled"
    per = speedup(fast, slow2, n)
    assert per.steps == [10, 10, 5, 10]  # thresholds 0.4, 0.4 never reached; 2.0 is not below 2.0
    assert pooled.method == "bca" and per.method == "t"
    # per seed: n over the t-interval of the mean steps, a monotone map of it
    from bayesbench.stats import t_interval

    ci = t_interval(s.steps, null=n)
    assert s.ci_low == pytest.approx(n / ci["ci_high"]) and s.p == ci["p"]
    assert s.ci_high == (n / ci["ci_low"] if ci["ci_low"] > 0 else math.inf)  # 4 seeds this spread: no upper bound
    with pytest.raises(ValueError, match="at least 2 seeds"):
        speedup(fast[:1], slow[:1], n)
    with pytest.raises(ValueError, match="n_steps"):
        speedup(fast, slow[:, :-1], n)


def test_gap_steps_and_paired_speedup_on_constructed_curves():
    chance = math.log(8)
    floors = torch.tensor([1.0, 1.5])
    thr = gap_thresholds(floors, 8, 0.5)
    assert thr.tolist() == pytest.approx([chance - 0.5 * (chance - 1.0), chance - 0.5 * (chance - 1.5)])
    n = 10
    losses = torch.full((2, n + 1), chance)
    losses[0, 3:] = 1.2  # seed 0: 0.79 of its gap from step 3 on
    losses[1, 6:] = 1.5  # seed 1: the whole gap from step 6 on
    steps = steps_to_gap(losses, floors, 8)
    assert steps.tolist() == [[3, 6], [3, 6], [10, 6]]  # 25%, 50%, 90% (seed 0 never reaches 90%)
    assert gap_share(losses[:, -1], floors, 8).tolist() == pytest.approx([(chance - 1.2) / (chance - 1.0), 1.0])
    fast, slow = torch.tensor([2, 4, 10, 10]), torch.tensor([4, 9, 5, 10])
    got = paired_speedup(fast, slow, 10)
    assert got["mean"] == pytest.approx(math.sqrt(2 * 2.25)) and got["n"] == 2  # seeds 0, 1 both reached
    assert (got["only_fast"], got["only_slow"], got["neither"]) == (0, 1, 1)
    with pytest.raises(ValueError, match="below chance"):
        gap_thresholds(torch.tensor([2.5]), 8, 0.5)


def test_controls_share_data_seeds_and_initial_weights():
    from bayesbench.dynamics.emsgd.toy import ALL_SCHEDULES, GRID

    seeds = [42, 2024]
    data = [paper_data(s, T=40) for s in seeds]
    test = [paper_data(s + 10000, T=40) for s in seeds]
    plain = {n: v for n, v in ALL_SCHEDULES.items() if n != "sgd-emnorm" and n not in GRID}
    run = train_toy(data, seeds, steps=5, schedules=plain, test=test)
    assert run.schedules == ["sgd", "em", "wo10", "wqk10", "sgd-emtotal", "sgd3", "sgd10"]
    assert torch.equal(run.losses[:, :, 0], run.losses[:1, :, 0].expand(7, -1))  # same start for every schedule
    assert run.test_losses.shape == (7, 2, len(run.record_steps))
    solo = train_toy(test, seeds, steps=1, schedules={"sgd": ALL_SCHEDULES["sgd"]})
    torch.testing.assert_close(run.test_losses[0, :, 0], solo.losses[0, :, 0])  # held-out = a plain forward
    # a 10x step on W_O alone moves the loss more than plain SGD in the first update
    assert (run.losses[2, :, 1] < run.losses[0, :, 1]).all()


# ---------------------------------------------------------------- the deep variant

def test_deep_ensemble_member_equals_solo_run():
    cfg = DeepConfig(n_layers=2, n_heads=2, d_model=16)
    seeds = [3, 4, 5]
    train = [paper_data(s, T=25) for s in seeds]
    test = [paper_data(s + 10000, T=25) for s in seeds]
    ens = train_deep(train, test, seeds, steps=6, cfg=cfg)
    solo = train_deep(train[1:2], test[1:2], seeds[1:2], steps=6, cfg=cfg)
    assert torch.allclose(ens.losses[:, 1], solo.losses[:, 0], atol=1e-5, rtol=0)
    assert torch.allclose(ens.test_loss[:, 1], solo.test_loss[:, 0], atol=1e-5, rtol=0)
    assert (ens.losses[:, :, -1] < ens.losses[:, :, 0]).all()  # six AdamW steps lower the loss


# ---------------------------------------------------------------- study, CLI, bad inputs

def test_default_seeds_start_with_the_authors():
    assert default_seeds(7) == [42, 2024, 1337, 7777, 9999, 0, 1]
    assert default_seeds(2) == [42, 2024]
    with pytest.raises(ValueError, match="seeds must be an integer >= 2"):
        default_seeds(1)


def test_study_is_stored_with_report_and_figures(tmp_path):
    db = str(tmp_path / "r.sqlite")
    summary = run_study("paper", [42, 2024], steps=8, length=30, db=db)
    study = read_study(summary["study_id"], path=db)
    assert study["kind"] == "emsgd" and study["status"] == "done"
    assert study["summary"]["speedup_per_seed"]["steps"] == summary["speedup_per_seed"]["steps"]
    from bayesbench.dynamics.emsgd.toy import GRID

    assert summary["schedules"][:7] == ["sgd", "em", "wo10", "wqk10", "sgd-emtotal", "sgd3", "sgd10"]
    assert summary["schedules"][-1] == "sgd-emnorm" and set(GRID) <= set(summary["schedules"])
    assert set(summary["against"]) == {"sgd", "wo10", "wqk10", "sgd-emtotal", "sgd-emnorm", "sgd3", "sgd10"}
    assert summary["best_sgd"] in ("sgd", "sgd3", "sgd10") and set(summary["held_out"]) > {"em", "floor_mean"}
    assert summary["grid"]["chosen"]["equal"] in summary["grid"]["families"]["equal"]
    assert [v["family"] for v in summary["verdicts"]][:4] == ["primary"] * 4
    assert sum(v["family"] == "primary" for v in summary["verdicts"]) == 4
    # section 7.1's toy is not built here: its claim is not tested, whatever the 7.2 head's entropy does
    section71 = summary["verdicts"][3]
    assert section71["claim"].startswith("section 7.1") and section71["verdict"] == "not tested"
    losses = read_dynamics(summary["study_id"], names=["loss_em"], path=db)
    assert len(losses) == 2 * 9 and {r.seed for r in losses} == {42, 2024}
    text = open(summary["report"]).read()
    assert "H(Y_t | Y_(t-1))" in text and "2.3x" in text and "EM-like against matched controls" in text
    assert "The 2-D grid of rates" in text and "unadjusted" in text
    for fig in ("loss.png", "attention_heatmaps.png", "attention_entropy.png", "value_pca.png"):
        assert os.path.getsize(os.path.join(os.path.dirname(summary["report"]), summary["study_id"], fig)) > 1000


def test_cli_json_and_bad_inputs(tmp_path, capsys):
    db = str(tmp_path / "r.sqlite")
    assert main(["emsgd", "--seeds", "2", "--variant", "beta", "--length", "12", "--sequences", "3", "--steps", "5",
                 "--db", db, "--json", "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["variant"] == "beta" and out["seeds"] == 2
    assert 0 < out["floors_nats"]["exact predictive floor (mean over seeds)"] < math.log(8)
    for argv, words in ((["--seeds", "1"],
                         "--seeds must be an integer >= 2 (a speed-up interval needs at least 2), got 1"),
                        (["--steps", "0"], "--steps must be a positive integer"),
                        (["--length", "2"], "--length must be an integer >= 3"),
                        (["--schedules", "sgd,wo10"], "--schedules must include sgd and em"),
                        (["--schedules", "sgd,em,adam"], "--schedules: unknown ['adam']")):
        assert main(["emsgd", *argv, "--db", db]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0]


def test_a_speed_up_no_seed_reached_is_said_not_reached(tmp_path, capsys):
    """Probe case 136: at 20 updates EM-like reaches no seed's final loss of sgd10 (its lr is 10x
    SGD's), and the summary and report printed '1.00x [1.00, 1.00] (0 reached)' for it."""
    db = str(tmp_path / "r.sqlite")
    assert main(["emsgd", "--seeds", "2", "--steps", "20", "--length", "50", "--db", db, "--no-progress"]) == 0
    out = capsys.readouterr().out
    against = next(line for line in out.splitlines() if line.startswith("EM-like against each control"))
    nothing = "not reached (0 of 2 seeds within 20 updates)"
    assert nothing in against.split("sgd10")[1] and "(0 reached)" not in against
    report = Path(out.strip().splitlines()[-1].split("report: ")[-1]).read_text()
    row = next(line for line in report.splitlines() if line.startswith("| sgd10"))
    assert f"{nothing} | {nothing} |" in row and "(0 reached)" not in report


def test_equal_budget_controls_match_em_like_on_summed_rate_and_on_update_norm():
    """Issue 32: the controls were not matched on budget (summed learning rate: EM-like 35.2, SGD x3
    24.6, W_O x10 19). sgd-emtotal has EM-like's summed rate; sgd-emnorm takes EM-like's update norm
    at every step, seed by seed, in the gradient's direction."""
    from bayesbench.dynamics.emsgd.toy import ALL_SCHEDULES, CONTROLS, NORM_MATCHED, concat_runs, total_rate

    assert total_rate(ALL_SCHEDULES["em"]) == pytest.approx(35.2)
    assert total_rate(ALL_SCHEDULES["sgd3"]) == pytest.approx(24.6)
    assert total_rate(ALL_SCHEDULES["wo10"]) == pytest.approx(19)
    assert total_rate(CONTROLS["sgd-emtotal"]) == pytest.approx(35.2)
    assert len(set(CONTROLS["sgd-emtotal"].values())) == 1  # one rate on every matrix
    seeds = [42, 2024]
    data = [paper_data(s, T=40) for s in seeds]
    first = train_toy(data, seeds, steps=6, schedules={n: ALL_SCHEDULES[n] for n in ("sgd", "em")})
    targets = first.update_norms[first.schedules.index(NORM_MATCHED["sgd-emnorm"])]
    second = train_toy(data, seeds, steps=6, schedules={"sgd-emnorm": ALL_SCHEDULES["sgd-emnorm"]},
                       norm_targets=targets)
    torch.testing.assert_close(second.update_norms[0], targets, rtol=1e-5, atol=1e-8)
    run = concat_runs(first, second)
    assert run.schedules == ["sgd", "em", "sgd-emnorm"] and run.losses.shape == (3, 2, 7)
    # the norm-matched step is the plain gradient step rescaled: its first update is SGD's direction
    assert torch.equal(run.losses[:, :, 0], run.losses[:1, :, 0].expand(3, -1))
    assert (targets[:, 0] > first.update_norms[0, :, 0]).all()  # EM-like's first step is longer than plain SGD's
    with pytest.raises(ValueError, match="need norm_targets"):
        train_toy(data, seeds, steps=6, schedules={"sgd-emnorm": ALL_SCHEDULES["sgd-emnorm"]})


def test_symbol_means_per_seed_and_stopping_chosen_on_validation():
    from bayesbench.dynamics.emsgd.chain import MEANS_SEED, means_seed, symbol_means

    assert means_seed(42) == means_seed(7) == MEANS_SEED  # the authors': one draw for every seed
    assert means_seed(42, "per-seed") != means_seed(7, "per-seed")
    assert not torch.equal(symbol_means(seed=means_seed(42, "per-seed")), symbol_means(seed=means_seed(7, "per-seed")))
    a, b = paper_data(42, T=30), paper_data(42, T=30, mu_seed=means_seed(42, "per-seed"))
    assert torch.equal(a.targets, b.targets) and not torch.equal(a.inputs, b.inputs)  # same chain, other means
    with pytest.raises(ValueError, match="means must be one of"):
        means_seed(1, "random")
    summary = run_study("paper", [42, 2024], steps=30, length=40, schedules=["sgd", "em", "sgd10"], means="per-seed")
    held = summary["held_out"]
    assert held["chosen_by"] == "validation" and summary["means"] == "per-seed"
    assert summary["best_sgd"] in ("sgd", "sgd10")
    for n in ("sgd", "em", "sgd10"):
        assert len(held[n]["per_seed"]) == 2 and 0 <= held[n]["stop_step_median"] <= 30
