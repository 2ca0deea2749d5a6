"""The papers' settings (docs/reproducing.md): the authors' HMM rounding and header worked out by
hand, the paper-setting samplers against brute-force posteriors, and the floors of the papers'
tables (uniform predictor: 1.849 bits on the bijection, 0.42 on the HMM at K = 20)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from bayesbench.presets import get_preset
from bayesbench.scoring.floors import floor_scores, marginal_log_q, uniform_log_q
from bayesbench.scoring.metrics import entropy_bits
from bayesbench.tasks import get_task
from bayesbench.tasks._random import dirichlet
from bayesbench.tasks.hmm import discretise_rows, round_rows_authors


def test_authors_rounding_on_rows_worked_by_hand():
    # [0.9, 0.1, 0, 0, 0] -> clip at 0.05 -> /1.15 -> 78.26 8.70 4.35 4.35 4.35 hundredths
    # -> nearest [78, 9, 4, 4, 4] -> raised to 5: [78, 9, 5, 5, 5] = 102 -> two off the largest
    # entries in turn (78, then 9): [77, 8, 5, 5, 5].
    # Largest remainder gives [78, 9, 5, 4, 4] -> repairs from the largest: [76, 9, 5, 5, 5].
    row = torch.tensor([[0.9, 0.1, 0.0, 0.0, 0.0]])
    assert round_rows_authors(row).tolist() == [[77, 8, 5, 5, 5]]
    assert discretise_rows(row).tolist() == [[76, 9, 5, 5, 5]]
    # [0.234 x4, 0.064] -> nearest [23, 23, 23, 23, 6] = 98 -> two onto the smallest entries in
    # turn (6, then the first 23): [24, 23, 23, 23, 7].
    row = torch.tensor([[0.234, 0.234, 0.234, 0.234, 0.064]])
    assert round_rows_authors(row).tolist() == [[24, 23, 23, 23, 7]]
    # Already on the grid: unchanged.
    assert round_rows_authors(torch.tensor([[0.2] * 5, [0.05, 0.05, 0.05, 0.05, 0.8]])).tolist() == \
        [[20] * 5, [5, 5, 5, 5, 80]]


def _authors_rounding_loop(row: list[float]) -> list[int]:
    """The same rule in plain Python, one row at a time (the readable reference)."""
    q = [max(x, 0.05) for x in row]
    q = [x / sum(q) for x in q]
    cents = [max(int(round(100 * x)), 5) for x in q]  # round(): ties to even, as torch.round
    diff = 100 - sum(cents)
    order = sorted(range(len(cents)), key=lambda i: (cents[i], i)) if diff > 0 else \
        sorted(range(len(cents)), key=lambda i: (-cents[i], i))
    i = 0
    while diff != 0:
        j = order[i % len(cents)]
        if diff > 0 and cents[j] < 100:
            cents[j] += 1
            diff -= 1
        elif diff < 0 and cents[j] > 5:
            cents[j] -= 1
            diff += 1
        i += 1
    return cents


@pytest.mark.parametrize("n", [2, 5, 7])
def test_authors_rounding_matches_the_plain_loop(n):
    rows = dirichlet(1.0, (3000, n), torch.Generator().manual_seed(n), dtype=torch.float64)
    got = round_rows_authors(rows)
    assert (got.sum(-1) == 100).all() and (got >= 5).all()
    want = torch.tensor([_authors_rounding_loop(r) for r in rows.tolist()])
    assert torch.equal(got, want)
    if n == 5:  # the two rules really differ (about 29% of Dirichlet(1) rows of 5)
        differ = (discretise_rows(rows) != got).any(-1).double().mean().item()
        assert 0.2 < differ < 0.4


def test_hmm_tokens_header_worked_by_hand():
    # S = V = 2, K = 2. Token ids: observations 0..1, probability hundredth h -> V + h - 5,
    # [TRANS] [EMIT] [SEP] [OBS] = V + 96 .. V + 99 = 98, 99, 100, 101.
    task = get_task("hmm", S=2, V=2, K=2, encoding="tokens", rounding="authors")
    trans = torch.tensor([[[0.70, 0.30], [0.05, 0.95]]], dtype=torch.float64)
    emit = torch.tensor([[[0.60, 0.40], [0.20, 0.80]]], dtype=torch.float64)
    init = torch.full((1, 2), 0.5, dtype=torch.float64)
    obs = torch.tensor([[1, 0]])
    from bayesbench.oracle import hmm_filter

    batch = task.assemble(trans, emit, init, torch.tensor([[1, 0]]), obs, hmm_filter(trans, emit, obs, init))
    assert batch.tokens[0].tolist() == [98, 67, 27, 2, 92, 99, 57, 37, 17, 77, 100, 101, 1, 101, 0]
    assert batch.mask[0].nonzero().flatten().tolist() == [12, 14]
    # p(s_1 | o_1 = 1) ~ (0.5 * 0.4, 0.5 * 0.8) = (1/3, 2/3); then predict (1/3, 2/3) T =
    # (4/15, 11/15), times E[:, 0] = (0.6, 0.2): (4/25, 11/75) ~ (12/23, 11/23).
    torch.testing.assert_close(batch.posterior[0, 12], torch.tensor([1 / 3, 2 / 3], dtype=torch.float64))
    torch.testing.assert_close(batch.posterior[0, 14], torch.tensor([12 / 23, 11 / 23], dtype=torch.float64))


def test_paper_hmm_header_is_53_tokens_and_decodes_to_authors_rows():
    task = get_task("hmm", K=20, encoding="tokens", rounding="authors", target="posterior")
    assert task.prefix_len == 53 and task.seq_len == 93
    batch = task.sample(200, torch.Generator().manual_seed(4), dtype=torch.float64)
    decode = lambda tok: (tok - task.V + 5).double() / 100  # noqa: E731
    t = decode(batch.tokens[:, 1:26]).reshape(200, 5, 5)
    torch.testing.assert_close(t, batch.latents["trans"])
    # The decoded rows are fixed points of the authors' rounding (already on the grid).
    assert torch.equal(round_rows_authors(t), (t * 100).round().long())


def _brute_bijection(keys: list[int], values: list[int], V: int) -> torch.Tensor:
    """p(pi(x_k) = y | pairs 1..k-1) for k = 1..L, by enumerating every bijection of V symbols."""
    perms = list(itertools.permutations(range(V)))
    out = torch.zeros(len(keys), V, dtype=torch.float64)
    for k in range(len(keys)):
        for perm in perms:
            if all(perm[keys[i]] == values[i] for i in range(k)):
                out[k, perm[keys[k]]] += 1
        out[k] /= out[k].sum()
    return out


@pytest.mark.parametrize("supervise", ["values", "both"])
def test_paper_bijection_sampler_against_brute_force(supervise):
    task = get_task("bijection", V=5, variant="code", L=6, supervise=supervise)
    assert task.keys == "replacement" and task.query
    batch = task.sample(40, torch.Generator().manual_seed(9), dtype=torch.float64)
    repeats = 0
    for n in range(40):
        keys = batch.tokens[n, 0:12:2].tolist() + [batch.tokens[n, 12].item()]
        values = (batch.tokens[n, 1:12:2] - 5).tolist()
        values.append(values[keys[:-1].index(keys[-1])])  # the query's answer
        want = _brute_bijection(keys, values, 5)
        positions = list(range(0, 12, 2)) + ([12] if supervise == "both" else [])
        assert batch.mask[n].nonzero().flatten().tolist() == positions
        torch.testing.assert_close(batch.posterior[n, positions], want[: len(positions)])
        repeats += len(set(keys[:-1])) < 6
    assert repeats > 0  # keys drawn with replacement: repeats occur


def _brute_hmm(trans, emit, init, obs) -> torch.Tensor:
    """p(s_t | o_1..t) by summing over every hidden path."""
    S, K = trans.shape[0], len(obs)
    out = torch.zeros(K, S, dtype=torch.float64)
    for t in range(K):
        for path in itertools.product(range(S), repeat=t + 1):
            w = init[path[0]] * emit[path[0], obs[0]]
            for i in range(1, t + 1):
                w = w * trans[path[i - 1], path[i]] * emit[path[i], obs[i]]
            out[t, path[-1]] += w
        out[t] /= out[t].sum()
    return out


def test_paper_hmm_sampler_against_brute_force():
    task = get_task("hmm", S=3, V=4, K=5, encoding="tokens", rounding="authors", target="posterior")
    batch = task.sample(12, torch.Generator().manual_seed(3), dtype=torch.float64)
    decode = lambda tok: (tok - task.V + 5).double() / 100  # noqa: E731
    for n in range(12):  # the matrices read back from the header tokens, as the model sees them
        trans = decode(batch.tokens[n, 1:10]).reshape(3, 3)
        emit = decode(batch.tokens[n, 11:23]).reshape(3, 4)
        obs = batch.tokens[n, task.obs_positions()].tolist()
        want = _brute_hmm(trans, emit, torch.full((3,), 1 / 3, dtype=torch.float64), obs)
        torch.testing.assert_close(batch.posterior[n, task.obs_positions()], want)
        torch.testing.assert_close(batch.targets[n, task.obs_positions()], want)


def _uniform_floor(task, n: int = 4096, seed: int = 0) -> dict:
    batch = task.sample(n, torch.Generator().manual_seed(seed), dtype=torch.float64)
    ref = task.sample(n, torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
    return floor_scores(batch, ref)


def test_uniform_floors_of_the_paper_settings_are_the_papers_mlp_rows():
    """Paper I Table 1: MLP 1.85 bits (bijection), 0.40 (HMM K = 20); a predictor that outputs
    the uniform distribution scores 1.849 and 0.42 on the authors' settings."""
    preset = get_preset("paper")
    cfg = dict(preset.tasks["bijection"].task)
    cfg.pop("task")
    bij = get_task("bijection", **{**cfg, "supervise": "values"})
    f = _uniform_floor(bij)
    for metric in ("entropy_mae", "entropy_mae_positional", "kl"):  # equal for the uniform predictor
        assert f["uniform"][metric].mean == pytest.approx(1.849, abs=0.01)
    # the exact value: E[log2 20 - H_t] with keys drawn with replacement, by enumeration of the
    # number of distinct keys seen before t (a repeat has H = 0)
    V, L = 20, 19
    exact = 0.0
    dist = [1.0] + [0.0] * V  # P(d distinct keys among the first t - 1)
    for _ in range(L):
        exact += sum(dist[d] * (math.log2(V) - (d / V) * 0 - (1 - d / V) * math.log2(V - d)) for d in range(V))
        dist = [dist[d] * d / V + (dist[d - 1] * (V - d + 1) / V if d else 0.0) for d in range(V + 1)]
    assert f["uniform"]["entropy_mae"].mean == pytest.approx(exact / L, abs=0.01)
    assert exact / L == pytest.approx(1.849, abs=0.001)

    cfg = dict(preset.tasks["hmm"].task)
    cfg.pop("task")
    hmm = get_task("hmm", **cfg)
    assert (hmm.K, hmm.encoding, hmm.rounding, hmm.target) == (20, "tokens", "authors", "posterior")
    f = _uniform_floor(hmm, n=16384)  # per-sequence values spread widely (32768 sequences: 0.4148 +- 0.0013)
    for metric in ("entropy_mae", "entropy_mae_positional", "kl"):
        assert f["uniform"][metric].mean == pytest.approx(0.42, abs=0.01)
    assert f["uniform"]["kl"].ci_high - f["uniform"]["kl"].ci_low < 0.01  # 95% interval
    # the default `rows` prior (unclipped rows) is a different data set: 0.51
    rows = _uniform_floor(get_task("hmm", K=20))
    assert rows["uniform"]["kl"].mean == pytest.approx(0.51, abs=0.01)


def test_marginal_floor_is_the_mean_posterior_per_position():
    task = get_task("sticky", V=4, L=10)
    batch = task.sample(64, torch.Generator().manual_seed(0), dtype=torch.float64)
    ref = task.sample(300, torch.Generator().manual_seed(1), dtype=torch.float64)
    log_q = marginal_log_q(batch, ref)
    t = int(ref.mask[0].nonzero()[3])
    want = ref.posterior[ref.mask[:, t], t].mean(0)
    torch.testing.assert_close(log_q[5, t].exp(), want)
    assert torch.equal(uniform_log_q(batch).exp()[0, t], torch.full((4,), 0.25, dtype=torch.float64))
    # the marginal never loses to the uniform predictor in KL by more than sampling noise
    f = floor_scores(batch, ref)
    assert f["marginal"]["kl"].mean <= f["uniform"]["kl"].mean + 0.02
    with pytest.raises(ValueError, match="reference batch must have"):
        marginal_log_q(batch, get_task("sticky", V=4, L=11).sample(3, torch.Generator().manual_seed(0)))


def test_rows_rounded_draws_the_authors_prior_into_a_rows_header():
    """rows_rounded: the rows header carries the tokens header's matrices (clipped at 0.05,
    rounded by the authors' rule) for the same draws; hence the same posteriors and floors."""
    rows = get_task("hmm", K=20, encoding="rows", rows_rounded=True, rounding="authors", target="posterior")
    tokens = get_task("hmm", K=20, encoding="tokens", rounding="authors", target="posterior")
    a = rows.sample(300, torch.Generator().manual_seed(9), dtype=torch.float64)
    b = tokens.sample(300, torch.Generator().manual_seed(9), dtype=torch.float64)
    for key in ("trans", "emit"):
        torch.testing.assert_close(a.latents[key], b.latents[key])
        hundredths = a.latents[key] * 100
        assert float((hundredths - hundredths.round()).abs().max()) < 1e-9  # on the grid of hundredths
        assert bool((a.latents[key] >= 0.05 - 1e-12).all())
    torch.testing.assert_close(a.header[:, :5, :5], a.latents["trans"])
    torch.testing.assert_close(a.header[:, 5:, :5], a.latents["emit"])
    torch.testing.assert_close(a.posterior[a.mask], b.posterior[b.mask])
    f = _uniform_floor(rows, n=16384)
    assert f["uniform"]["kl"].mean == pytest.approx(0.42, abs=0.01)  # the tokens header's floor, not 0.51
    unclipped = get_task("hmm", K=20).sample(300, torch.Generator().manual_seed(9), dtype=torch.float64)
    assert bool((unclipped.latents["trans"] < 0.05).any())  # the default rows prior is not clipped
    with pytest.raises(ValueError, match="rows_rounded applies to encoding='rows'"):
        get_task("hmm", encoding="tokens", rows_rounded=True)
    with pytest.raises(ValueError, match="rows_rounded must be true or false"):
        get_task("hmm", rows_rounded="yes")


def test_paper_and_quick_presets_use_the_same_settings():
    """Quick is the paper setting scaled down: the same HMM prior, rounding and targets (its
    header as 10 rows instead of 53 tokens, for the CPU budget), the same bijection variant."""
    paper, quick = get_preset("paper"), get_preset("quick")
    for key in ("bijection", "hmm"):
        p, q = paper.tasks[key].task, quick.tasks[key].task
        same = {k: v for k, v in p.items() if k not in ("V", "L", "encoding")}
        assert {k: q.get(k) for k in same} == same, key
    assert quick.tasks["hmm"].task["encoding"] == "rows" and quick.tasks["hmm"].task["rows_rounded"] is True
    assert paper.tasks["bijection"].eval_scored == quick.tasks["bijection"].eval_scored == ("values", "values+query")
    assert paper.tasks["hmm"].eval_lengths == quick.tasks["hmm"].eval_lengths == (20, 30, 50)
    assert paper.tasks["hmm"].models["transformer"]["dropout"] == 0.1
    assert quick.tasks["hmm"].models["transformer"]["dropout"] == 0.1
    h = get_task("bijection", V=8, variant="code", L=7)
    assert h.L == quick.tasks["bijection"].task["L"] == h.V - 1  # as the papers' 19 pairs of 20
    assert entropy_bits(torch.full((20,), 0.05)).item() == pytest.approx(math.log2(20))
