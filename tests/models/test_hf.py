"""Hugging Face architectures (`hf:gpt2`, `hf:llama`, `hf:mamba`): randomly initialised from
tiny configs (nothing downloaded), adapted like any module: shapes, the header, member = solo
run, and sizes taken from the preset. Runs only where `transformers` is installed."""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # configs only: nothing may be fetched
pytest.importorskip("transformers")

from bayesbench.models import get_model  # noqa: E402
from bayesbench.models.hf import hf_sizes  # noqa: E402
from bayesbench.tasks import get_task  # noqa: E402
from bayesbench.training.config import TrainConfig  # noqa: E402
from bayesbench.training.run import train  # noqa: E402

TINY = {"gpt2": dict(n_layer=1, n_head=2, d_model=8, d_ffn=16), "llama": dict(n_layer=1, n_head=2, d_model=8, d_ffn=16),
        "mamba": dict(n_layer=1, d_model=8, d_state=4)}


@pytest.mark.parametrize("kind", ["gpt2", "llama", "mamba"])
def test_hf_models_build_from_configs_and_read_the_header(kind):
    hmm = get_task("hmm", K=5)
    model = get_model(f"hf:{kind}", hmm, seeds=[0, 1], **TINY[kind])
    batch = hmm.sample(3, torch.Generator().manual_seed(1))
    tokens, header = batch.tokens.expand(2, -1, -1), batch.header.expand(2, -1, -1, -1)
    y = model(tokens, header)
    assert y.shape == (2, 3, hmm.seq_len, hmm.num_classes) and torch.isfinite(y).all()
    assert not torch.allclose(y, model(tokens, header.flip(-1)))  # the header rows matter
    assert not torch.allclose(y[0], y[1])  # members differ
    assert model.cfg.spec == f"hf:{kind}" and dict(model.cfg.options) == TINY[kind]


def test_hf_member_equals_solo_run():
    bij = get_task("bijection", V=4)
    cfg = TrainConfig(steps=4, batch_size=4, lr=3e-3, prefetch=2)
    ens = train(bij, "hf:gpt2", [3, 5], cfg, model_cfg=TINY["gpt2"], progress=False)
    solo = train(bij, "hf:gpt2", [5], cfg, model_cfg=TINY["gpt2"], progress=False)
    torch.testing.assert_close(ens.losses[:, 1], solo.losses[:, 0], rtol=1e-5, atol=1e-6)
    for k, v in solo.model.state_dict().items():
        torch.testing.assert_close(ens.model.member_state(1)[k], v, rtol=1e-5, atol=1e-5)


def test_sizes_come_from_the_preset_transformer():
    assert hf_sizes("llama", {"n_layer": 2, "n_head": 2, "d_model": 64, "d_ffn": 128, "attention": "sdpa"}) == \
        {"n_layer": 2, "n_head": 2, "d_model": 64, "d_ffn": 128}
    assert hf_sizes("gpt2", {"size": "paper-bijection"}) == {"n_layer": 6, "n_head": 6, "d_model": 192, "d_ffn": 768}
    assert hf_sizes("mamba", {"n_layer": 2, "n_head": 2, "d_model": 64, "d_ffn": 128}, d_state=8) == \
        {"n_layer": 2, "d_model": 64, "d_state": 8}


def test_outside_options_of_a_preset_come_from_the_models_package():
    """What the jobs layer asks the models package (`models.outside.preset_options`): an hf:
    model takes the preset task's transformer sizes (Mamba also its d_state), then the table's
    own entry for it, which wins; another outside model takes only that entry."""
    from bayesbench.models.outside import preset_options
    from bayesbench.presets import get_preset
    from bayesbench.sweep.jobs import make_jobs, resolve_model

    models = get_preset("quick").tasks["hmm"].models
    assert preset_options("hf:llama", models) == {"n_layer": 2, "n_head": 2, "d_model": 64, "d_ffn": 256}
    assert preset_options("hf:mamba", {**models, "mamba": {"d_state": 8}}) == {"n_layer": 2, "d_model": 64,
                                                                                 "d_state": 8}
    assert preset_options("hf:gpt2", {**models, "hf:gpt2": {"n_layer": 1}})["n_layer"] == 1
    assert preset_options("/abs/mine.py:build", {**models, "/abs/mine.py:build": {"width": 8}}) == {"width": 8}
    with pytest.raises(ValueError, match="takes its sizes from the preset's transformer"):
        preset_options("hf:gpt2", {"mlp": {"depth": 2}})
    (job,) = make_jobs("quick", tasks=["hmm"], archs=["transformer"])
    assert resolve_model(job.setup, "hf:llama", job.task, job.max_len) == preset_options("hf:llama", models)
