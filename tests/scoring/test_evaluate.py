"""Evaluation: fixed cached eval sets, scores per member, HMM length generalisation and the
label-permutation check."""

from __future__ import annotations

import pytest
import torch

from bayesbench.models import EnsembleModel, TaskShape, get_model
from bayesbench.scoring.evaluate import eval_set, evaluate, evaluate_members, max_eval_len, permute_hmm_labels, predict
from bayesbench.scoring.metrics import entropy_bits
from bayesbench.tasks import get_task
from bayesbench.training.seeds import data_seed, eval_seed


class Uniform(EnsembleModel):
    """A model that always predicts the uniform distribution (its scores are known in closed form)."""

    def __init__(self, shape: TaskShape, ensemble: int = 2) -> None:
        super().__init__(shape, ensemble)
        self.dummy = torch.nn.Parameter(torch.zeros(ensemble, 1))

    def forward(self, tokens, header=None):
        E, B, L = tokens.shape
        return self.dummy.view(E, 1, 1, 1).expand(E, B, L, self.shape.num_classes)


def test_eval_set_is_fixed_cached_and_apart_from_training(tmp_path):
    task = get_task("bijection", V=5)
    a = eval_set(task, 64)
    assert eval_set(task, 64) is a  # cached in memory
    disk = eval_set(task, 32, cache_dir=str(tmp_path))
    assert list(tmp_path.iterdir())
    from bayesbench.scoring import evaluate as ev

    ev._cache.clear()
    again = eval_set(task, 32, cache_dir=str(tmp_path))
    assert torch.equal(again.tokens, disk.tokens) and torch.equal(again.posterior, disk.posterior)
    assert eval_seed(task) >= 2**61 > max(data_seed(s) for s in range(100))
    assert eval_seed(task) != eval_seed(get_task("bijection", V=6))


def test_uniform_model_scores_in_closed_form():
    task = get_task("bijection", V=5)
    batch = eval_set(task, 128)
    model = Uniform(TaskShape.from_task(task))
    log_q = predict(model, batch, chunk=50)
    assert log_q.shape == (2, 128, task.seq_len, 5)
    scores = evaluate_members(model, batch)
    h_p = entropy_bits(batch.posterior)
    expected = (torch.log2(torch.tensor(5.0, dtype=torch.float64)) - h_p).abs()[batch.mask].mean()
    assert scores[0].entropy_mae.mean == pytest.approx(float(expected), rel=1e-9)
    assert scores[0].kl.mean == pytest.approx(float(expected), rel=1e-6)  # KL(p || uniform) = log C - H(p)
    assert len(scores[0].curves.entropy_mae) == 5  # the 5 value positions
    assert scores[0].curves.bayes_entropy[0] == pytest.approx(2.321928, rel=1e-5)


def test_permuted_hmm_has_the_permuted_posterior():
    task = get_task("hmm", K=9)
    batch = task.sample(16, torch.Generator().manual_seed(0))
    perm = permute_hmm_labels(task, batch, torch.Generator().manual_seed(1))
    lat, plat = batch.latents, perm.latents
    assert torch.equal(perm.tokens, batch.tokens)  # observations and slot ids unchanged
    # recover sigma from the relabelled states and check T', E' and the posterior
    sigma = torch.full((16, 5), -1)
    sigma.scatter_(1, lat["states"], plat["states"])
    pos = task.obs_positions()
    for b in range(16):
        s = sigma[b]
        if (s < 0).any():
            continue
        torch.testing.assert_close(plat["trans"][b][s][:, s], lat["trans"][b])
        torch.testing.assert_close(plat["emit"][b][s], lat["emit"][b])
        torch.testing.assert_close(perm.posterior[b, pos][:, s], batch.posterior[b, pos], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(entropy_bits(perm.posterior), entropy_bits(batch.posterior), rtol=1e-5, atol=1e-6)
    assert not torch.equal(perm.header, batch.header)


def test_hmm_evaluation_lengths_and_permutation_check():
    task = get_task("hmm", K=6)
    lengths = (6, 9)
    max_len = max_eval_len(task, lengths)
    assert max_len == 10 + 9
    model = get_model("transformer", task, seeds=[0, 1], max_len=max_len, n_layer=1, n_head=2, d_model=8, d_ffn=8)
    out = evaluate(model, task, lengths=lengths, n_sequences=64)
    assert len(out) == 2 and out[0].primary == "K=6"
    assert set(out[0].evals) == {"K=6", "K=9"} and out[0].evals["K=9"].entropy_mae.n_sequences == 64
    assert len(out[0].curves["K=9"].entropy_mae) == 9
    p = out[1].permutation
    assert p.difference.mean == pytest.approx(p.entropy_mae - p.entropy_mae_permuted, abs=1e-12)
    assert p.difference.ci_low <= p.difference.mean <= p.difference.ci_high
    uniform = evaluate(Uniform(TaskShape.from_task(task, max_len)), task, lengths=lengths, n_sequences=64)
    assert uniform[0].permutation.difference.mean == pytest.approx(0.0, abs=1e-6)  # invariant model
    # The trained length is always scored, first, and counted in the position table it needs.
    assert max_eval_len(task, (4,)) == 10 + 6
    shorter = evaluate(Uniform(TaskShape.from_task(task, 16)), task, lengths=(4,), n_sequences=16)
    assert shorter[0].primary == "K=6" and list(shorter[0].evals) == ["K=6", "K=4"]
    short = get_model("mlp", task, depth=1, width=8)  # position table only for K = 6
    with pytest.raises(ValueError, match="max_len"):
        evaluate(short, task, lengths=lengths, n_sequences=16)
    with pytest.raises(ValueError, match="hmm"):
        evaluate(Uniform(TaskShape.from_task(get_task("bijection", V=4))), get_task("bijection", V=4), lengths=(3,))


class OneDiverged(Uniform):
    """Member 1 outputs NaN logits (a diverged member frozen by the trainer); member 0 is uniform."""

    def forward(self, tokens, header=None):
        out = super().forward(tokens, header).clone()
        out[1] = float("nan")
        return out


def test_a_diverged_member_gets_no_score_and_its_siblings_keep_theirs():
    task = get_task("hmm", K=6)
    model = OneDiverged(TaskShape.from_task(task))
    model.train()
    out = evaluate(model, task, n_sequences=64)
    assert model.training  # predict restores the mode it found
    good, bad = out[0].evals["standard"], out[1].evals["standard"]
    assert 0 < good.entropy_mae.mean < 3 and good.kl.ci_low <= good.kl.mean
    assert bad.entropy_mae.mean != bad.entropy_mae.mean  # NaN: no score
    assert out[0].permutation.difference.mean == pytest.approx(0.0, abs=1e-6)  # float32 posteriors
    assert out[1].permutation.difference.mean != out[1].permutation.difference.mean


def test_permutation_check_is_for_the_hmm_only():
    task = get_task("bijection", V=5)
    with pytest.raises(ValueError, match="permutation_check applies to the hmm task only"):
        evaluate(Uniform(TaskShape.from_task(task)), task, n_sequences=16, permutation_check=True)


def test_bijection_scored_sets_hold_three_metrics_and_the_floors():
    task = get_task("bijection", V=6, variant="code", L=5)  # trained on values + query
    scored = ("values", "values+query")
    model = Uniform(TaskShape.from_task(task, max_eval_len(task, scored=scored)))
    out = evaluate(model, task, scored=scored, n_sequences=128)
    assert out[0].primary == "values" and list(out[0].evals) == ["values", "values+query"]
    for name, ev in out[1].evals.items():
        # the model is the uniform predictor: its three numbers are the uniform floor's, and for a
        # predictor whose entropy is >= every posterior's, the two entropy errors coincide
        for metric in ("entropy_mae", "entropy_mae_positional", "kl"):
            assert getattr(ev, metric).mean == pytest.approx(ev.floors["uniform"][metric].mean, rel=1e-9), \
                (name, metric)
        assert ev.entropy_mae_positional.mean == pytest.approx(ev.entropy_mae.mean, rel=1e-9)
        assert ev.floors["marginal"]["kl"].mean >= 0
    values, both = out[0].evals["values"], out[0].evals["values+query"]
    assert values.entropy_mae.n_positions == 128 * 5 and both.entropy_mae.n_positions == 128 * 6
    assert "final query" in both.positions and "final query" not in values.positions
    with pytest.raises(ValueError, match="scored sets must be among"):
        evaluate(model, task, scored=("keys",), n_sequences=16)
    with pytest.raises(ValueError, match="bijection task only"):
        evaluate(Uniform(TaskShape.from_task(get_task("hmm", K=4))), get_task("hmm", K=4), scored=("values",))
