"""bayesbench.dynamics: every probe quantity against plain autograd, the routing-law check, the
frame-precision curve code, the profile command and its errors."""

from __future__ import annotations

import json
import math
import os

import pytest
import torch
import torch.nn.functional as F

from bayesbench.cli import main
from bayesbench.dynamics import list_studies, read_dynamics, read_study
from bayesbench.dynamics.profile.frames import checkpoint_steps, gain_after, tv_to_final
from bayesbench.dynamics.profile.law import LAW_NAMES, law_statistics
from bayesbench.dynamics.profile.probes import PROBE_NAMES, ProbeSet, attention_layers
from bayesbench.dynamics.profile.routing import masked_softmax, predicted_change, transformer_scores
from bayesbench.kernels import AttentionProbe, attention
from bayesbench.models import get_model
from bayesbench.models.attention import causal_mask
from bayesbench.running.runlock import LOCK_NAME
from bayesbench.tasks import get_task
from bayesbench.training.config import TrainConfig
from bayesbench.training.numerics import member_losses
from bayesbench.training.trainer import Trainer

TINY = dict(n_layer=2, n_head=2, d_model=12, d_ffn=20)


@pytest.fixture
def bij():
    return get_task("bijection", V=5)


def _batch(task, E, B, seed=0):
    b = task.sample(B, torch.Generator().manual_seed(seed))
    ex = lambda t: t.unsqueeze(0).expand(E, *t.shape)  # noqa: E731
    return ex(b.tokens), ex(b.targets), ex(b.mask)


def _model(task, seeds=(0, 1), std=None, **cfg):
    model = get_model("transformer", task, seeds=list(seeds), **{**TINY, **cfg}).double()
    if std is not None:  # unit-scale weights (the default init is 0.02)
        g = torch.Generator().manual_seed(7)
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * std)
    return model


def _autograd_quantities(model, tokens, targets, mask):
    """The transformer's forward written out with retained gradients: per layer s, alpha, v, g."""
    x = model.embed(tokens)
    E, B, T, d = x.shape
    keep = causal_mask(T, x.device)
    kept = []
    for block in model.blocks:
        H = block.attn.n_head
        qkv = block.attn.qkv(block.ln_1(x)).view(E, B, T, 3, H, d // H).permute(3, 0, 1, 4, 2, 5)
        q, k, v = qkv[0], qkv[1], qkv[2]
        v.retain_grad()
        s = q @ k.transpose(-1, -2) / math.sqrt(d // H)
        s.retain_grad()
        alpha = torch.softmax(s.masked_fill(~keep, float("-inf")), -1)
        alpha.retain_grad()
        g = alpha @ v
        g.retain_grad()
        x = x + block.attn.proj(g.transpose(2, 3).reshape(E, B, T, d))
        x = x + block.mlp(block.ln_2(x))
        kept.append((s, alpha, v, g))
    member_losses(model.head(model.ln_f(x)), targets, mask).sum().backward()
    out = []
    for s, alpha, v, g in kept:
        a = alpha.detach()
        b = torch.where(keep, alpha.grad, 0.0)  # dL/dalpha_ij = u_i . v_j
        adv = torch.where(keep, (a * b).sum(-1, keepdim=True) - b, 0.0)
        counts = keep.sum(-1).to(a)
        ent = -torch.special.xlogy(a, a).sum(-1) / math.log(2)
        vnorm = v.grad.norm(dim=-1)
        out.append({"attn_entropy": ent.mean((1, 3)), "adv_abs_mean": (adv.abs().sum(-1) / counts).mean((1, 3)),
                    "adv_abs_max": adv.abs().amax((1, 3, 4)), "ds_norm": s.grad.pow(2).sum((1, 3, 4)).sqrt(),
                    "value_update_mean": vnorm.mean((1, 3)), "value_update_max": vnorm.amax((1, 3)),
                    "advantage": adv, "ds": s.grad, "alpha": a})
    return out


@pytest.mark.parametrize("backend", ["reference", "eager"])
def test_every_probe_quantity_equals_autograd(bij, backend):
    model = _model(bij)
    tokens, targets, mask = _batch(bij, 2, 3)
    direct = _autograd_quantities(model, tokens, targets, mask)
    model.zero_grad()
    probes = ProbeSet(model, backend)
    probes.attach("full")
    member_losses(model(tokens), targets, mask).sum().backward()
    got, adv = probes.summaries(), probes.advantages()
    probes.detach()
    assert got.shape == (len(PROBE_NAMES), 2, 2, 2)  # names, E, L, H
    assert model.blocks[0].attn.probe is None and model.blocks[0].attn.backend == "sdpa"
    for li, d in enumerate(direct):
        for n, name in enumerate(PROBE_NAMES):
            torch.testing.assert_close(got[n, :, li], d[name].to(got), rtol=1e-9, atol=1e-12, msg=name)
        torch.testing.assert_close(adv[li], d["advantage"], rtol=1e-9, atol=1e-12)
        # the identity itself: dL/ds = -alpha * A
        torch.testing.assert_close(d["ds"], -d["alpha"] * d["advantage"], rtol=1e-9, atol=1e-12)
    assert got[PROBE_NAMES.index("adv_abs_max")].min() > 0


def test_triton_stats_probe_matches_reference(bij):
    pytest.importorskip("triton")
    from bayesbench.kernels import triton_available

    if not triton_available():
        pytest.skip("triton present but neither CUDA nor TRITON_INTERPRET=1")
    tokens, targets, mask = _batch(bij, 2, 3, seed=2)
    got = {}
    for backend in ("reference", "triton"):
        model = get_model("transformer", bij, seeds=[0, 1], **TINY)
        probes = ProbeSet(model, backend)
        probes.attach("stats")
        member_losses(model(tokens), targets, mask).sum().backward()
        got[backend] = probes.summaries()
        for p in probes.probes:  # stats mode: O(B H T) per layer, no T x T tensor kept
            assert p.tensors() and all(t.shape == (2 * 3, 2, bij.seq_len) for t in p.tensors().values())
        probes.detach()
    torch.testing.assert_close(got["triton"], got["reference"], rtol=2e-3, atol=1e-7)


def test_transformer_scores_are_the_forward_scores(bij):
    """softmax(transformer_scores) is the alpha of the probed backward: ds = -alpha * A."""
    model = _model(bij)
    tokens, targets, mask = _batch(bij, 2, 4, seed=1)
    probes = ProbeSet(model, "reference")
    probes.attach("full")
    member_losses(model(tokens), targets, mask).sum().backward()
    alpha = masked_softmax(transformer_scores(model, tokens).detach())
    for li, p in enumerate(probes.probes):
        E = 2
        ds = p.ds.reshape(E, -1, *p.ds.shape[1:])
        adv = p.advantage.reshape(E, -1, *p.advantage.shape[1:])
        torch.testing.assert_close(ds, -alpha[li] * adv, rtol=1e-9, atol=1e-14)


def _sgd_step(model, tokens, targets, mask, lr):
    probes = ProbeSet(model, "reference")
    probes.attach("full")
    member_losses(model(tokens), targets, mask).sum().backward()
    adv = probes.advantages()
    probes.detach()
    params = list(model.parameters())
    p0 = [p.detach().clone() for p in params]
    with torch.no_grad():
        for p in params:
            p -= lr * p.grad
    delta = [p.detach() - q for p, q in zip(params, p0)]
    s0, pred = predicted_change(model, p0, delta, tokens)
    with torch.no_grad():
        s1 = transformer_scores(model, tokens)
    return s1 - s0, pred, adv, masked_softmax(s0)


def test_first_order_prediction_at_tiny_lr(bij):
    """float64, SGD lr 1e-6: the JVP prediction matches the actual score change to 1e-6 relative;
    the error is second order (10x smaller lr: 10x smaller relative error)."""
    tokens, targets, mask = _batch(bij, 2, 3)
    rel = {}
    for lr in (1e-6, 1e-7):
        model = _model(bij, std=0.3)
        ds, pred, adv, alpha = _sgd_step(model, tokens, targets, mask, lr)
        keep = causal_mask(ds.shape[-1], ds.device)
        rel[lr] = float(((ds - pred) * keep).norm() / (ds * keep).norm())
        stats = law_statistics(ds, pred, pred, adv, alpha, lr)
        assert stats.shape == (len(LAW_NAMES), 2, 2, 2)
        assert stats[LAW_NAMES.index("law_linearity_r2")].min() > 1 - 1e-9
    assert rel[1e-6] < 1e-6
    assert 5 < rel[1e-6] / rel[1e-7] < 20


def test_free_scores_move_by_lr_alpha_advantage():
    """Paper II's toy with free scores: s = q (k = identity, scale 1), one SGD step on q gives
    Delta s = eta * alpha * A exactly; cosine, kappa, sign agreements, the query test and the
    linearity check are then exactly 1."""
    g = torch.Generator().manual_seed(0)
    B, H, T = 3, 2, 7
    q = torch.randn(B, H, T, T, generator=g, dtype=torch.float64, requires_grad=True)
    k = torch.eye(T, dtype=torch.float64).expand(B, H, T, T)
    v = torch.randn(B, H, T, T, generator=g, dtype=torch.float64)  # the interface wants D equal for q, k, v
    w = torch.randn(T, 4, generator=g, dtype=torch.float64)
    y = torch.randint(0, 4, (B, H, T), generator=g)
    probe = AttentionProbe("full")
    out = attention(q, k, v, causal=True, scale=1.0, probe=probe, backend="reference")
    F.cross_entropy((out @ w).reshape(-1, 4), y.reshape(-1)).backward()
    eta = 0.5
    s0 = q.detach().clone()
    with torch.no_grad():
        q -= eta * q.grad
    keep = causal_mask(T, q.device)
    alpha = masked_softmax(s0)
    delta_s = torch.where(keep, q.detach() - s0, 0.0)
    torch.testing.assert_close(delta_s, eta * alpha * probe.advantage, rtol=1e-12, atol=1e-15)

    class Free(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.s = torch.nn.Parameter(s0.clone())

    free = Free()
    _, pred = predicted_change(free, [s0], [q.detach() - s0], None,
                               score_fn=lambda m, tokens, header: m.s.unsqueeze(0).unsqueeze(0))
    stats = law_statistics(delta_s[None, None], pred, pred, probe.advantage[None, None], alpha[None, None], eta)
    one = torch.ones(1, 1, H, dtype=torch.float64)
    for name in ("law_sign_alpha", "law_sign_abs", "law_query_test"):
        assert torch.equal(stats[LAW_NAMES.index(name)], one), name
    for name in ("law_cosine", "law_kappa", "law_linearity_r2", "law_own_cosine", "law_own_share"):
        torch.testing.assert_close(stats[LAW_NAMES.index(name)], one, msg=name)
    half = law_statistics(delta_s[None, None], pred, pred, probe.advantage[None, None], alpha[None, None], 2 * eta)
    torch.testing.assert_close(half[LAW_NAMES.index("law_kappa")], one / 2)  # kappa is per unit of eta


def test_law_statistics_known_values():
    """One head, one sequence per member, T = 3, worked by hand."""
    T = 3
    keep = causal_mask(T, torch.device("cpu"))
    alpha = torch.where(keep, torch.tensor([[1.0, 0, 0], [0.25, 0.75, 0], [0.5, 0.25, 0.25]]), 0.0)
    adv = torch.tensor([[0.0, 0, 0], [3.0, -1.0, 0], [1.0, -1.0, -1.0]])  # sum_j alpha A = 0 in each row
    ds = torch.tensor([[5.0, 9, 9], [2.0, 0.0, 9], [3.0, 1.0, 2.0]])  # above-diagonal ignored
    inputs = [x[None, None, None].double() for x in (ds, ds, ds * 0.25, adv, alpha)]
    stats = law_statistics(*inputs, 0.5)
    get = {n: stats[i].item() for i, n in enumerate(LAW_NAMES)}
    # row-centred: row 1 -> [1, -1], row 2 -> [1, -1, 0]; rows 1 and 2 are reached by the loss
    # A != 0: (1,0) +/+ agree w .25, (1,1) -/- agree w .75, (2,0) agree .5, (2,1) agree .25, (2,2) sign 0 vs -1 no
    assert get["law_sign_alpha"] == pytest.approx(1.75 / 2.0)
    push = torch.tensor([0.75, -0.75, 0.5, -0.25, -0.25], dtype=torch.float64)  # alpha * A on rows 1, 2
    dsc = torch.tensor([1.0, -1.0, 1.0, -1.0, 0.0], dtype=torch.float64)
    assert get["law_sign_abs"] == pytest.approx((0.75 + 0.75 + 0.5 + 0.25) / push.abs().sum().item())
    assert get["law_cosine"] == pytest.approx(float(dsc @ push / (dsc.norm() * push.norm())))
    assert get["law_kappa"] == pytest.approx(float(dsc @ push / (0.5 * push.pow(2).sum())))
    assert get["law_linearity_r2"] == pytest.approx(1.0)  # prediction = actual
    assert get["law_own_share"] == pytest.approx(0.25)  # own = a quarter of the prediction
    assert get["law_own_cosine"] == pytest.approx(get["law_cosine"])
    raw = torch.tensor([5.0, 2.0, 0.0, 3.0, 1.0, 2.0], dtype=torch.float64)  # the visible Delta s
    assert get["law_row_shift_share"] == pytest.approx(1 - float(dsc.pow(2).sum() / raw.pow(2).sum()))
    # query test: Delta alpha from softmax(s + Delta s); sum_j A_ij Delta alpha_ij by hand per row
    a1 = torch.softmax((alpha.log() + ds).masked_fill(~keep, float("-inf")).double(), -1)
    gains = (adv.double() * (a1 - alpha.double())).sum(-1)[1:]
    assert get["law_query_test"] == pytest.approx(float((gains > 0).double().mean()))
    assert math.isnan(get["law_cosine_null"])  # one sequence: no other to pair with
    with pytest.raises(ValueError, match="must share one shape"):
        law_statistics(inputs[0], inputs[1][..., :2], *inputs[2:], 0.5)
    with pytest.raises(ValueError, match="lr must be > 0"):
        law_statistics(*inputs, 0.0)


def test_drift_freeze_and_gain_on_synthetic_maps():
    g = torch.Generator().manual_seed(0)
    m0 = torch.softmax(torch.randn(2, 5, 6, 6, generator=g), -1)
    mf = torch.softmax(torch.randn(2, 5, 6, 6, generator=g), -1)
    w = torch.tensor([0.0, 0.5, 0.85, 0.95, 1.0])
    maps = torch.stack([(1 - x) * m0 + x * mf for x in w])  # moves linearly towards the final map
    drift = tv_to_final(maps)  # [C, 2, 5]
    tv0 = 0.5 * (m0 - mf).abs().sum(-1).mean(-1)
    for c, x in enumerate(w):
        torch.testing.assert_close(drift[c], (1 - x) * tv0)
    steps = [0, 10, 40, 90, 160]
    mae = [1.0, 0.5, 0.3, 0.2, 0.1]
    got = gain_after(steps, mae, 90)
    assert got["mae_at_freeze"] == 0.2 and got["gained_after"] == pytest.approx(0.1)
    assert got["share_after"] == pytest.approx(0.1 / 0.9)
    assert checkpoint_steps(100, 5) == [0, 6, 25, 56, 100]
    assert checkpoint_steps(10, 3, start=20) == [20, 22, 30]
    assert checkpoint_steps(100, 5, spacing="even") == [0, 25, 50, 75, 100]
    with pytest.raises(ValueError, match="spacing must be one of"):
        checkpoint_steps(100, 5, spacing="log")
    with pytest.raises(ValueError, match="not one of the checkpoint steps"):
        gain_after(steps, mae, 11)


def test_attention_layers_refuses_models_without_attention(bij):
    with pytest.raises(ValueError, match="needs a softmax-attention transformer"):
        attention_layers(get_model("lstm", bij, seeds=[0], n_layer=1, d_model=8))
    none = get_model("transformer", bij, seeds=[0], attn_off_top=2, **TINY)
    with pytest.raises(ValueError, match="attention in no layer"):
        attention_layers(none)


BASE = ["profile", "--steps", "12", "--every", "4", "--checkpoints", "3", "--eval-sequences", "32",
        "--probe-sequences", "4", "--no-progress", "--threads", "1"]
PROFILE = BASE + ["--seeds", "0,1"]


def test_profile_command_end_to_end(tmp_path, capsys):
    db = str(tmp_path / "store.sqlite")
    rc = main(PROFILE + ["--db", db, "--runs-dir", str(tmp_path / "runs"), "--optimizer", "sgd", "--lr", "1e-3",
                         "--batch-size", "16", "--json"])  # the quick preset's bijection V=8 transformer
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["config"]["train"]["batch_size"] == 16 and out["config"]["train"]["lr"] == 1e-3
    study = out["study_id"]
    assert [s["study_id"] for s in list_studies("profile", db)] == [study]
    records = read_dynamics(study, path=db)
    names = {r.name for r in records}
    assert set(PROBE_NAMES) | set(LAW_NAMES) | {"entropy_mae", "kl", "map_drift", "map_velocity"} <= names
    probed = sorted({r.step for r in records if r.name == "attn_entropy"})
    assert probed == [0, 4, 8]
    assert {r.seed for r in records} == {0, 1} and {r.layer for r in records if r.name == "ds_norm"} == {0, 1}
    law = out["summary"]["law"]
    assert all(v["linearity_r2"]["mean"]["mean"] > 0.95 for v in law.values())  # plain SGD at lr 1e-3
    assert all(v["cosine"]["excess"]["n"] == 2 for v in law.values())  # an interval over the two seeds
    assert out["summary"]["timing"]["profiled_steps"] == 3
    # issue 44: the laws' primary statistic is the held-out excess, the in-batch one its reference;
    # without replicas through the late window the frame-precision order is not read
    primary = [v for v in out["summary"]["verdicts"] if v["family"] == "primary"]
    laws = [v for v in primary if "law," in v["claim"]]
    assert len(laws) == 4 and all("on held-out sequences" in v["claim"] for v in laws)
    assert all("(self-influence reference)" in v["number"] for v in laws)
    order = [v for v in primary if "settles before the precision" in v["claim"]]
    assert order and all(v["verdict"] == "cannot tell" and "not measured" in v["control"] for v in order)
    assert {r.name for r in records} >= {"heldout_law_cosine", "heldout_value_cosine", "pred_drift_sq"}
    assert os.path.exists(out["summary"]["report"])
    text = open(out["summary"]["report"]).read()
    assert "Routing and value laws against their shuffle nulls" in text and "Frame vs precision" in text
    assert "Relevant key" in text  # the quick bijection has repeated keys
    for f in out["summary"]["figures"]:
        assert os.path.getsize(f) > 1000
    # calibration and drift records against a direct computation from the saved model and maps
    from bayesbench.dynamics.sets import member_sets
    from bayesbench.scoring.evaluate import evaluate_members
    from bayesbench.training.checkpoint import load_result
    from bayesbench.training.result import task_of

    result = load_result(os.path.join(out["config"]["run_dir"], "checkpoint.pt"))
    assert out["config"]["sets"] == "per-seed"  # each seed scored on its own evaluation set
    own = member_sets(task_of(result), 32, "profile-eval", [0, 1])  # the quick preset's bijection
    last = max(r.step for r in records if r.name == "entropy_mae")
    assert last == 12
    for e, seed in enumerate((0, 1)):
        stored = [r.value for r in records if r.name == "entropy_mae" and r.step == last and r.seed == seed]
        assert stored == [pytest.approx(evaluate_members(result.model, own[e])[e].entropy_mae.mean, rel=1e-6)]
    saved = torch.load(os.path.join(os.path.dirname(out["summary"]["figures"][0]), "maps.pt"))
    assert saved["steps"] == out["config"]["checkpoint_steps"] == [0, 3, 12]
    tv = tv_to_final(saved["maps"].float())  # [C, L, E, B, H]
    for r in records:
        if r.name == "map_drift" and r.head >= 0:
            c, e = saved["steps"].index(r.step), saved["seeds"].index(r.seed)
            assert r.value == pytest.approx(float(tv[c, r.layer, e, :, r.head].mean()), rel=1e-5, abs=1e-7)
    assert main(["plot", "--dynamics", study, "--db", db, "--out", str(tmp_path / "plots")]) == 0
    assert len(os.listdir(tmp_path / "plots")) == len(out["summary"]["figures"])
    assert open(out["summary"]["report"]).read() == text  # the report rebuilt from the store alone


def _tiny_run(tmp_path, seeds=(0, 1), steps=3):
    task = get_task("bijection", V=8)
    cfg = TrainConfig(steps=steps, batch_size=4)
    trainer = Trainer(task, "transformer", list(seeds), cfg, model_cfg={"n_layer": 2, "n_head": 2, "d_model": 64,
                                                                         "d_ffn": 128}, run_dir=str(tmp_path / "run"))
    return trainer.fit(progress=False)


def test_profile_continues_a_run_exactly(tmp_path):
    """Seed 1 of a 2-seed run, continued for 2 steps, is member 1 of the run trained 2 steps more."""
    from bayesbench.dynamics.profile.resume import load_run_state, open_from_state

    result = _tiny_run(tmp_path)
    state = load_run_state(result.checkpoint, "cpu")
    with open_from_state(state, [1], 2, device="cpu", run_dir=str(tmp_path / "profile")) as alone:
        assert alone.step == 3 and alone.cfg.steps == 5
        assert os.path.exists(tmp_path / "profile" / LOCK_NAME)  # held while the trainer is in use
        alone.fit(progress=False)
    assert not os.path.exists(tmp_path / "profile" / LOCK_NAME)
    both = Trainer(get_task("bijection", V=8), "transformer", [0, 1],
                   TrainConfig(steps=5, batch_size=4),
                   model_cfg={"n_layer": 2, "n_head": 2, "d_model": 64, "d_ffn": 128})
    both.fit(progress=False)
    for p, q in zip(alone.model.parameters(), both.model.parameters()):
        torch.testing.assert_close(p[0], q[1], rtol=1e-4, atol=1e-5)  # fused AdamW tails round apart


def _store_untouched(db):
    return not os.path.exists(db) or (list_studies(path=db) == [] and read_dynamics("x", path=db) == [])


@pytest.mark.parametrize("extra,message", [
    (["--run", "no-such-run"], "unknown run"),
    (["--arch", "lstm"], "needs a softmax-attention transformer"),
    (["--every", "0"], "--every must be a positive integer"),
    (["--checkpoints", "1"], "--checkpoints must be an integer >= 2"),
    (["--lr", "-1"], "--lr must be a positive number"),
    (["--task", "nope"], "task 'nope' is not in preset"),
    (["--law-sequences", "1"], "--law-sequences must be an integer >= 2"),
    (["--task-set", "nope=1"], "'nope' is not a setting of task 'bijection'; its settings: V, variant"),
    (["--task-set", "variant=other"], "variant must be one of"),
    (["--run", "x", "--batch-size", "8"], "--batch-size cannot change a stored run's batch"),
    (["--task-args", "nope=1"], "'nope' is not a setting of task 'bijection'; its settings: V, variant"),
    (["--task-args", "L=3", "--task-set", "L=4"], "--task-args/--task-set: L given twice (3 and 4)"),
    (["--sets", "mixed"], "--sets must be one of ('per-seed', 'shared')"),
])
def test_profile_bad_inputs(tmp_path, capsys, extra, message):
    db = str(tmp_path / "store.sqlite")
    assert main(PROFILE + ["--db", db] + extra) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert _store_untouched(db)


def test_profile_more_seeds_than_the_run_has(tmp_path, capsys):
    result = _tiny_run(tmp_path)
    db = str(tmp_path / "store.sqlite")
    assert main(BASE + ["--run", os.path.dirname(result.checkpoint), "--seeds", "0,1,2", "--db", db]) == 2
    assert "names 3 seeds but the run has only 2" in capsys.readouterr().err
    assert main(BASE + ["--run", result.checkpoint, "--seeds", "5", "--db", db]) == 2
    assert "--seeds [5] are not seeds of the run" in capsys.readouterr().err
    assert _store_untouched(db)
    assert main(["plot", "--dynamics", "nope", "--db", db]) == 2
    assert f"no store at {db} (--db" in capsys.readouterr().err  # the refused profile made none
    open(db, "w").close()
    assert main(["plot", "--dynamics", "nope", "--db", db]) == 2
    assert "unknown study" in capsys.readouterr().err


def test_profile_takes_task_args_as_train_does(tmp_path, capsys):
    """Probe case 118: `profile --task-args L=8`, the flag train, run and tasks use, was 'unrecognized
    arguments' from the top-level parser (profile only knew --task-set)."""
    db = str(tmp_path / "store.sqlite")
    argv = ["--task-args", "variant=paper", "L=4", "--db", db, "--runs-dir", str(tmp_path / "runs")]
    assert main(PROFILE + argv) == 0
    capsys.readouterr()
    (study,) = list_studies(path=db)
    config = read_study(study["study_id"], path=db)["config"]
    assert config["task_set"] == {"variant": "paper", "L": 4}
    assert config["scored_positions"] == "the 4 value predictions (pi(x_k) at each key x_k, k = 1..4)"


def test_the_issue_44_numbers_of_dynamics_md_are_those_of_their_summaries():
    """Every decimal number of docs/dynamics.md's issue-44 section is one its summary files
    (docs/data/dynamics_issue44_sticky_{cosine,constant}.json, dynamics_self_term_batch.json, and the
    confirmatory dynamics_confirmatory_sticky_constant_seeds8-15.json and the full-size
    dynamics_confirmatory_sticky_{cosine,constant}_full_seeds8-15.json, and the other settings' full-size
    summaries: sticky_{sgd,step}, bijection_paper, bijection_relevance) hold, as a
    value or inside a verdict's number: a re-run refreshed with scripts/dynamics_numbers.py
    either leaves the page true or fails here."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    text = (root / "docs" / "dynamics.md").read_text()
    section = text[text.index("## Issue 44:"):text.index("## What is recorded, in plain words")]
    held: set[float] = set()
    # "0.049-0.068" is a range of two, not 0.049 and -0.068; "2.198e-05" one number, not 2.198
    number = r"(?<![\w.])[-+]?\d+\.\d+(?:e[-+]?\d+)?"

    def walk(x) -> None:
        if isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        elif isinstance(x, str):
            held.update(float(t) for t in re.findall(number, x))
        elif isinstance(x, (int, float)) and not isinstance(x, bool):
            held.add(float(x))

    for name in ("dynamics_issue44_sticky_cosine.json", "dynamics_issue44_sticky_constant.json",
                 "dynamics_self_term_batch.json", "dynamics_confirmatory_sticky_constant_seeds8-15.json",
                 "dynamics_confirmatory_sticky_cosine_full_seeds8-15.json",
                 "dynamics_confirmatory_sticky_constant_full_seeds8-15.json",
                 "dynamics_confirmatory_sticky_sgd_full_seeds8-15.json",
                 "dynamics_confirmatory_sticky_step_full_seeds8-15.json",
                 "dynamics_confirmatory_bijection_paper_full_seeds8-15.json",
                 "dynamics_confirmatory_bijection_relevance_seeds8-15.json"):
        walk(json.loads((root / "docs" / "data" / name).read_text()))
    quoted = re.findall(number, section)
    assert len(quoted) > 50
    missing = sorted({q for q in quoted if float(q) not in held})
    assert not missing, f"docs/dynamics.md quotes numbers its summaries do not hold: {missing}"
