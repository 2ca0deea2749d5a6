"""`bayesbench geometry`: each quantity on a constructed model or input whose answer is known, the
instrumented forward against the model's own, the command end to end, and bad inputs."""

from __future__ import annotations

import json
import math
import os

import pytest
import torch
from rundirs import run_dirs

from bayesbench.cli import main
from bayesbench.dynamics import read_dynamics, read_study
from bayesbench.dynamics.geometry.measure import (
    Trace,
    attention_entropy,
    instrumented_forward,
    measure,
    offdiag_abs_cos,
    qk_cosine,
    random_abs_cos,
    spearman,
    static_keys,
    token_keys,
    value_pca,
)
from bayesbench.models import get_model
from bayesbench.scoring.evaluate import eval_set
from bayesbench.tasks import BijectionTask


def _model(seeds=(3, 4), **cfg):
    task = BijectionTask(V=5)
    cfg = {"n_layer": 3, "n_head": 3, "d_model": 24, "d_ffn": 40, **cfg}
    return task, get_model("transformer", task, seeds=list(seeds), **cfg)


def _inputs(task, model, n=37):
    batch = eval_set(task, n)
    return batch, batch.tokens.unsqueeze(0).expand(model.ensemble, *batch.tokens.shape)


def test_instrumented_forward_equals_the_model():
    task, model = _model()
    with torch.no_grad():  # give LayerNorms and biases non-trivial values
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    model.eval()
    batch, tokens = _inputs(task, model)
    trace = instrumented_forward(model, tokens)
    assert torch.allclose(trace.logits, model(tokens), atol=1e-5)
    assert sorted(trace.alpha) == [0, 1, 2] and trace.alpha[0].shape == (2, 37, 3, task.seq_len, task.seq_len)
    assert torch.allclose(trace.alpha[1].sum(-1), torch.ones(2, 37, 3, task.seq_len), atol=1e-6)


def test_offdiag_cos_is_zero_for_an_orthonormal_basis_and_one_for_parallel_keys():
    Q, _ = torch.linalg.qr(torch.randn(7, 7, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
    cos, off = offdiag_abs_cos(Q[:5] * torch.tensor([[1.0], [2.0], [0.5], [3.0], [1.5]], dtype=torch.float64))
    assert off.item() == pytest.approx(0.0, abs=1e-12)
    assert torch.allclose(cos.diagonal(), torch.ones(5, dtype=torch.float64))
    v = torch.randn(6)
    assert offdiag_abs_cos(torch.stack([v, -2 * v, 3 * v]))[1].item() == pytest.approx(1.0, abs=1e-6)


def test_token_keys_average_each_tokens_occurrences():
    E, B, L, D = 1, 2, 4, 3  # one head
    tokens = torch.tensor([[[7, 8, 7, 9], [9, 8, 1, 1]]])
    basis = {7: torch.tensor([1.0, 0, 0]), 8: torch.tensor([0, 2.0, 0]), 9: torch.tensor([0, 0, 5.0]), 1: torch.ones(3)}
    k = torch.stack([basis[int(t)] for t in tokens.flatten()]).view(E, B, L, D).unsqueeze(2)  # [E, B, H, L, D]
    trace = Trace(logits=torch.empty(0), k={0: k})
    keys = token_keys(trace, tokens, [7, 8, 9])
    assert keys.shape == (1, 1, 3, 3) and torch.allclose(keys[0, 0], torch.diag(torch.tensor([1.0, 2.0, 5.0])))
    assert offdiag_abs_cos(keys)[1].item() == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="never occurs"):
        token_keys(trace, tokens, [7, 3])


def test_static_keys_follow_the_key_projection():
    task, model = _model(seeds=(1,), n_layer=1, n_head=2, d_model=8)
    att = model.blocks[0].attn
    with torch.no_grad():
        att.qkv.weight.zero_()
        att.qkv.bias.zero_()
        att.qkv.bias[0, 8:16] = torch.arange(8.0) + 1  # every key = the same bias vector
    assert offdiag_abs_cos(static_keys(model, list(range(5, 10))))[1].min().item() == pytest.approx(1.0, abs=1e-6)


def test_attention_entropy_of_uniform_and_one_hot_attention():
    L = 6
    uniform = torch.tril(torch.ones(L, L, dtype=torch.float64)) / torch.arange(1, L + 1).view(-1, 1)
    # head 0 uniform, head 1 one-hot
    alpha = torch.stack([uniform, torch.eye(L, dtype=torch.float64)]).view(1, 1, 2, L, L)
    mask = torch.ones(1, L, dtype=torch.bool)
    ent, ratio = attention_entropy(alpha, mask)
    expected = sum(math.log2(i + 1) for i in range(L)) / L
    assert ent[0, 0].item() == pytest.approx(expected, abs=1e-9) and ent[0, 1].item() == pytest.approx(0.0, abs=1e-9)
    assert ratio[0, 0].item() == pytest.approx(1.0, abs=1e-9) and ratio[0, 1].item() == pytest.approx(0.0, abs=1e-9)


def test_value_pca_on_a_curve_parameterised_by_entropy():
    gen = torch.Generator().manual_seed(0)
    h = torch.rand(4, 9, generator=gen, dtype=torch.float64) * 3
    direction = torch.randn(5, generator=gen, dtype=torch.float64)
    g = h.unsqueeze(-1) * direction + 1e-4 * torch.randn(4, 9, 5, generator=gen, dtype=torch.float64)
    mask = torch.ones(4, 9, dtype=torch.bool)
    mask[:, 0] = False
    res = value_pca(g, mask, h)
    assert res["spearman"] == pytest.approx(1.0, abs=1e-9) and res["var"][0] > 0.999
    flipped = value_pca(-g, mask, h)  # the sign of a principal axis is arbitrary: aligned, it does not matter
    assert flipped["spearman"] == pytest.approx(1.0, abs=1e-9) and torch.allclose(flipped["pc1"], res["pc1"])
    assert res["spearman_null"] < 0.5  # the same aligned |rho| against shuffled entropies
    # standardised: a large-scale feature unrelated to the entropy does not take PC1
    noisy = torch.cat([g, 1e3 * torch.randn(4, 9, 1, generator=gen, dtype=torch.float64)], -1)
    assert value_pca(noisy, mask, h)["spearman"] > 0.9 and value_pca(noisy, mask, h)["var_raw"][0] > 0.99
    # tie-averaged ranks by hand
    assert spearman(torch.tensor([1.0, 2, 2, 3]), torch.tensor([10.0, 20, 20, 5])) == pytest.approx(-1 / 3, abs=1e-9)
    assert res["partial"] == pytest.approx(1.0, abs=1e-9)  # within each position PC1 still follows h


def test_a_value_pca_that_tracks_position_has_no_within_position_correlation():
    """Issue 32: when the posterior entropy varies with the position, a PC1 that only tracks the
    position correlates with it (an untrained model's: 0.75-0.80 on the paper-text bijection);
    within positions it does not, and that is what the partial correlation reads."""
    gen = torch.Generator().manual_seed(0)
    B, L = 200, 12
    pos = torch.arange(L, dtype=torch.float64).expand(B, L)
    g = pos.unsqueeze(-1) * torch.randn(6, generator=gen, dtype=torch.float64) \
        + 0.05 * torch.randn(B, L, 6, generator=gen, dtype=torch.float64)  # position, and noise
    h = 3 - 0.2 * pos + 0.3 * torch.rand(B, L, generator=gen, dtype=torch.float64)  # falls with position, varies within
    mask = torch.ones(B, L, dtype=torch.bool)
    res = value_pca(g, mask, h)
    n = int(mask.sum())
    assert res["spearman"] > 0.9 and res["position"] > 0.99  # the raw correlation is position's
    assert res["partial"] < 4 / math.sqrt(n) and res["partial_null"] < 4 / math.sqrt(n)
    tracks = g + 2.0 * (h - h.mean()).unsqueeze(-1) * torch.randn(6, generator=gen, dtype=torch.float64)
    assert value_pca(tracks, mask, h)["partial"] > 0.3  # a PC1 that also follows h within positions
    constant = 3 - 0.2 * pos  # a function of the position (the paper-text bijection): nothing to read
    assert math.isnan(value_pca(g, mask, constant)["partial"])
    # the oracle's float rounding (1e-16, here made to follow PC1) is not within-position variation
    rounding = constant + 1e-15 * g[..., 0] / g[..., 0].abs().max()
    assert math.isnan(value_pca(g, mask, rounding)["partial"])


def test_the_within_position_test_reads_the_residuals_pc1_not_the_global_one():
    """Issue 44: position dominates the global PC1, so an entropy coded along another direction,
    within positions, is invisible to it. The within-position test reads PC1 of the
    within-position residuals, and finds it; the global PC1 (the authors' number) stays position's."""
    from bayesbench.dynamics.geometry.measure import within_position, within_position_pc1

    gen = torch.Generator().manual_seed(3)
    B, L = 150, 10
    pos = torch.arange(L, dtype=torch.float64).expand(B, L)
    h = torch.rand(B, L, generator=gen, dtype=torch.float64)
    coded = torch.tensor([5.0, 3.0, 4.0], dtype=torch.float64)  # position on three features, the entropy on one
    g = torch.cat([pos.unsqueeze(-1) * coded, h.unsqueeze(-1)], -1) \
        + 0.02 * torch.randn(B, L, 4, generator=gen, dtype=torch.float64)
    mask = torch.ones(B, L, dtype=torch.bool)
    res = value_pca(g, mask, h)
    position = pos.long()[mask]
    global_partial, _ = within_position(res["pc1"], h[mask], position)
    assert res["position"] > 0.99 and global_partial < 0.2  # the global PC1 is the position's axis
    assert res["partial"] > 0.95 and res["partial_null"] < 0.1  # the residuals' PC1 follows h within positions
    assert res["var_within"] > 0.5
    pc1, share = within_position_pc1(torch.zeros(4, 3, dtype=torch.float64), torch.tensor([0, 0, 1, 1]))
    assert math.isnan(share) and torch.equal(pc1, torch.zeros(4, dtype=torch.float64))


def test_an_untrained_transformer_on_the_repeated_key_bijection_reads_position_not_entropy():
    """The quick transformer at initialisation, on the bijection with repeated keys (whose posterior
    entropy varies within a position): PC1 tracks the position and the raw |rho| with the entropy
    is large, but the within-position correlation sits at its within-position null."""
    task = BijectionTask(V=8, variant="code")
    model = get_model("transformer", task, seeds=[0, 1, 2], n_layer=2, n_head=2, d_model=64, d_ffn=128)
    g = measure(model, eval_set(task, 256), task)
    for layer in (0, 1):
        assert sum(g.value_position[layer]) / 3 > 0.5 and sum(g.value_spearman[layer]) / 3 > 0.3
        for partial, null in zip(g.value_partial[layer], g.value_partial_null[layer]):
            assert partial < 0.12 and abs(partial - null) < 0.1


def test_ablations_zeroed_head_with_zero_output_projection_and_an_empty_block_change_nothing():
    task, model = _model()
    batch = eval_set(task, 64)
    Dh = 24 // 3
    with torch.no_grad():
        model.blocks[1].attn.proj.weight[:, 2 * Dh:3 * Dh] = 0.0  # head 2 of layer 1 writes nothing
        model.blocks[2].attn.proj.weight.zero_()  # block 2 adds nothing
        model.blocks[2].attn.proj.bias.zero_()
        model.blocks[2].mlp.proj.weight.zero_()
        model.blocks[2].mlp.proj.bias.zero_()
    g = measure(model, batch, task)
    assert torch.equal(g.head_mae[(1, 2)], g.intact_mae)
    assert not torch.equal(g.head_mae[(0, 0)], g.intact_mae)
    assert torch.allclose(g.layer_mae[2], g.intact_mae, atol=1e-12)
    assert not torch.allclose(g.layer_mae[0], g.intact_mae)
    assert set(g.head_mae) == {(i, h) for i in range(3) for h in range(3)} and g.keys[0].offdiag.shape == (2, 3)
    assert g.intact_mae.shape == (2, 2)  # both entropy errors, per member
    assert (g.intact_mae[1] <= g.intact_mae[0] + 1e-12).all()  # positional MAE <= per-sequence MAE
    assert [k.name for k in g.keys] == ["value tokens", "key tokens"] and g.d_head == 8
    assert all(abs(r) <= 1 for r in g.value_spearman[2])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("geo")
    db, runs = str(tmp / "r.sqlite"), str(tmp / "runs")
    out = {"db": db}
    for arch in ("transformer", "mlp"):
        argv = ["train", "--task", "bijection", "--arch", arch, "--preset", "quick", "--seeds", "0,1", "--steps", "3",
                "--eval-sequences", "32", "--db", db, "--runs-dir", runs, "--no-progress"]
        assert main(argv) == 0
        (out[arch],) = run_dirs(argv)
    return out


def test_geometry_command_stores_and_reports(trained, capsys):
    capsys.readouterr()
    assert main(["geometry", trained["transformer"], "--sequences", "64", "--db", trained["db"], "--json",
                 "--min-seeds", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["seeds"] == [0, 1] and set(out["ablation"]["entropy_mae"]["layers"]) == {"L0", "L1"}
    assert set(out["ablation"]) == {"entropy_mae", "entropy_mae_positional"}
    ranked = out["ablation"]["entropy_mae"]["ranked"]
    assert set(ranked) == {"L0", "L1"} and all(v["top_over_second"]["mean"] >= 1 for v in ranked.values())
    assert all("top_over_second_cross" in v for v in ranked.values())  # ranked on one half, measured on the other
    q = out["quantities"]
    for name in ("attention_entropy_ratio/0", "keys/value tokens/centred", "value_pc1_partial/1"):
        assert {"trained", "init", "change"} <= set(q[name])  # every quantity beside its value at initialisation
    primary = [v for v in out["verdicts"] if v["family"] == "primary"]
    assert len(primary) == 5 and all(v["verdict"] in ("held", "did not hold", "cannot tell", "not tested")
                                     for v in primary)
    assert 0 <= out["keys"]["value tokens"]["offdiag"]["mean"] <= 1 and "key tokens" in out["keys"]
    assert out["d_head"] == 32 and out["random_abs_cos"] == pytest.approx(random_abs_cos(32))
    for v in out["attention_entropy_ratio"].values():  # bounded: the interval stays in [0, 1]
        assert 0 <= v["ci_low"] <= v["ci_high"] <= 1
    for v in out["value_pc1_spearman"].values():
        assert -1 < v["ci_low"] <= v["ci_high"] < 1
    study = read_study(out["study_id"], path=trained["db"])
    assert study["kind"] == "geometry" and study["status"] == "done"
    rows = read_dynamics(out["study_id"], names=["entropy_mae_head_zeroed"], path=trained["db"])
    assert len(rows) == 2 * 2 * 2  # seeds x layers x heads
    text = open(out["report"]).read()
    assert "Head ablation" in text and "Layer ablation" in text and "key_cosines.png" in text


def test_geometry_takes_a_run_id_as_profile_does(trained, capsys):
    """`bayesbench geometry RUN_ID`: the run id a stored row names (the job's key) finds its
    checkpoint; the study is that of the run directory (same id, same numbers)."""
    capsys.readouterr()
    run_id = os.path.basename(trained["transformer"])[-16:]
    assert main(["geometry", run_id, "--sequences", "64", "--min-seeds", "2", "--db", trained["db"], "--json"]) == 0
    by_id = json.loads(capsys.readouterr().out)
    assert by_id["config"]["run_id"] == run_id and by_id["study_id"] == f"geometry-{run_id}"
    assert by_id["config"]["checkpoint"] == os.path.join(trained["transformer"], "checkpoint.pt")
    assert main(["geometry", trained["transformer"], "--sequences", "64", "--min-seeds", "2", "--db", trained["db"],
                 "--json"]) == 0
    by_dir = json.loads(capsys.readouterr().out)
    assert by_dir["keys"] == by_id["keys"] and by_dir["study_id"] == by_id["study_id"]


def test_geometry_bad_inputs(trained, tmp_path, capsys):
    cases = ((str(tmp_path / "nowhere"), "RUN '" + str(tmp_path / "nowhere") + "': unknown run"),
             (str(tmp_path), "the directory holds no checkpoint.pt"),
             (trained["mlp"], "geometry needs a transformer"))
    for run, words in cases:
        capsys.readouterr()
        assert main(["geometry", run, "--db", trained["db"]]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0]
    assert main(["geometry", trained["transformer"], "--sequences", "1", "--db", trained["db"]]) == 2
    assert "--sequences must be an integer >= 2" in capsys.readouterr().err
    assert main(["geometry", trained["transformer"], "--db", trained["db"]]) == 2  # 2 seeds, default minimum 5
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--min-seeds is 5 and the run has 2 seeds" in err[0]


def test_hmm_with_header_rows_instrumented_forward_and_hypothesis_tokens():
    from bayesbench.tasks import get_task

    task = get_task("hmm", K=6)
    model = get_model("transformer", task, seeds=[0, 1], n_layer=2, n_head=2, d_model=16, d_ffn=32).eval()
    batch = eval_set(task, 16)
    tokens = batch.tokens.unsqueeze(0).expand(2, *batch.tokens.shape)
    header = batch.header.unsqueeze(0).expand(2, *batch.header.shape)
    with torch.no_grad():
        assert torch.allclose(instrumented_forward(model, tokens, header).logits, model(tokens, header), atol=1e-5)
    g = measure(model, batch, task)
    assert g.keys[0].tokens == list(range(task.V, task.V + task.S)) and g.keys[0].offdiag.shape == (2, 2)


def test_random_baseline_matches_random_vectors_of_known_dimension():
    g = torch.Generator().manual_seed(0)
    for d in (4, 8, 32):
        v = torch.randn(20000, 2, d, generator=g, dtype=torch.float64)
        mc = torch.nn.functional.cosine_similarity(v[:, 0], v[:, 1], dim=-1).abs().mean().item()
        assert random_abs_cos(d) == pytest.approx(mc, abs=0.01)
    assert random_abs_cos(32) == pytest.approx(math.sqrt(2 / (math.pi * 32)), rel=0.02)
    assert random_abs_cos(2) == pytest.approx(2 / math.pi)  # E|cos(theta)|, theta uniform
    with pytest.raises(ValueError, match="d must be an integer >= 2"):
        random_abs_cos(1)


def test_qk_cosine_on_constructed_queries_and_keys():
    L, D = 5, 3
    k = torch.zeros(1, 1, 1, L, D, dtype=torch.float64)
    k[..., 0, 0], k[..., 2, 1], k[..., 4, 2] = 1.0, 1.0, 1.0  # keys at positions 0, 2, 4 along the axes
    q = torch.zeros_like(k)
    q[..., 4, 0] = 1.0  # the query at 4 points at the key of position 0
    mask = torch.tensor([[False, False, False, False, True]])
    mean, contrast = qk_cosine(q, k, mask, torch.tensor([True, False, True, False, True]))
    # earlier marked positions of query 4: 0 (cos 1) and 2 (cos 0)
    assert mean.item() == pytest.approx(0.5) and contrast.item() == pytest.approx(0.5)


def test_rope_model_instrumented_forward_equals_the_model():
    task, model = _model(position="rope")
    model.eval()
    batch, tokens = _inputs(task, model, n=5)
    with torch.no_grad():
        assert torch.allclose(instrumented_forward(model, tokens).logits, model(tokens), atol=1e-5)


def test_the_cross_validated_head_quotient_is_one_for_equally_destructive_heads():
    """Issue 32: ranked and measured on the same sequences, top / second is >= 1 by construction
    even for two equally destructive heads (here about 1.1 from noise alone); ranked on one half
    of the sequences and measured on the other it sits at 1, and it still finds a head that is
    truly twice as destructive."""
    from types import SimpleNamespace

    from bayesbench.dynamics.geometry.study import _cross_values, _ranked_heads

    gen = torch.Generator().manual_seed(0)
    E = 16

    def geometry(scale_h1: float) -> SimpleNamespace:
        intact_halves = torch.ones(2, 2, E)
        # each half's damage ratio: the head's own level times independent noise per half and seed
        halves = {(0, h): (3.0 * (scale_h1 if h == 1 else 1.0))
                  * torch.exp(0.1 * torch.randn(2, 2, E, generator=gen)) for h in (0, 1)}
        return SimpleNamespace(intact_mae=torch.ones(2, E), intact_halves=intact_halves, head_halves=halves,
                               head_mae={k: v.mean(0) for k, v in halves.items()})

    equal = geometry(1.0)
    ranked = _ranked_heads(equal, 0)["L0"]
    assert ranked["top_over_second"]["ci_low"] > 1.02  # in-sample: above 1 with nothing to find
    cross = ranked["top_over_second_cross"]
    assert cross["ci_low"] < 1.0 < cross["ci_high"] and abs(math.log(cross["mean"])) < 0.05
    twice = geometry(2.0)
    assert sum(_cross_values(twice, 0)) / E == pytest.approx(2.0, rel=0.1)
