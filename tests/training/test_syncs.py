"""A training step never waits for the device: no host read of any tensor value inside it.

`no_host_sync()` turns every `.item()`, `.tolist()`, `.cpu()`, `.numpy()`, `bool(t)`, ... and
device-to-host copy into an error; on a CPU these cost nothing, on a GPU each one stalls the
pipeline. That includes the steps that sample a new prefetch chunk: the suite's own samplers
call the oracles without their input checks, and the data streams check nothing (the data is
right by construction). The learning curve's evaluation reads nothing either: its values wait
on the device for the trainer's sync.
"""

from __future__ import annotations

import pytest
import torch
from opcount import HostSyncError, count_ops, no_host_sync

from bayesbench.tasks import get_task
from bayesbench.training.config import TrainConfig
from bayesbench.training.trainer import Trainer

SMALL = dict(n_layer=2, n_head=2, d_model=32, d_ffn=64)


@pytest.mark.parametrize("arch,cfg", [("transformer", SMALL), ("mlp", dict(depth=2, width=32)),
                                      ("lstm", dict(d_model=16, n_layer=1))])
def test_train_step_reads_nothing_back(arch, cfg):
    task = get_task("bijection", V=6)
    trainer = Trainer(task, arch, [0, 1, 2], TrainConfig(steps=100, batch_size=8, prefetch=16), model_cfg=cfg)
    trainer.train_step()  # samples the first chunk (one token-range read, where the data is made)
    with no_host_sync():
        for _ in range(5):
            trainer.train_step()
    trainer.step = 6
    trainer.sync()
    assert len(trainer.losses) == 6 and all(torch.isfinite(row).all() for row in trainer.losses)


@pytest.mark.parametrize("name,kw", [("bijection", dict(V=6, variant="code", L=5)), ("bijection", dict(V=6)),
                                     ("sticky", dict(V=5, L=12)), ("markov", dict(V=4, L=12)), ("hmm", dict(K=6))])
def test_steps_that_sample_a_new_chunk_read_nothing_back(name, kw):
    """From the first step on, across several prefetch chunks (each member samples one every 3
    steps here), with the learning curve measured at its steps: no host read at all."""
    task = get_task(name, **kw)
    trainer = Trainer(task, "mlp", [0, 1], TrainConfig(steps=100, batch_size=4, prefetch=3),
                      model_cfg=dict(depth=1, width=16))
    measured = 0
    with no_host_sync():
        for _ in range(9):  # chunks sampled at steps 0, 3, 6
            trainer.train_step()
            trainer.step += 1
            if trainer.step in trainer._curve_at:
                trainer.curve_point()
                measured += 1
    assert measured == 6  # steps 1, 2, 3, 4, 6, 7 of the log-spaced cadence
    trainer.sync()
    assert len(trainer.losses) == 9 and trainer.curve.steps == [1, 2, 3, 4, 6, 7]
    refill = count_ops(trainer.train_step)  # step 9: both members sample their next chunk
    assert refill.host_reads == 0 and trainer.streams[0]._offset == 1


def test_the_oracles_keep_their_checks_for_callers():
    """Skipping the checks is the samplers' choice only: called directly, the oracles still refuse bad input."""
    from bayesbench.oracle import bijection_posterior, hmm_filter, markov_predictive, sticky_predictive

    keys = torch.tensor([[0, 0]])
    with pytest.raises(ValueError, match="contradict a bijection"):
        bijection_posterior(keys, torch.tensor([[1, 2]]), 3)
    with pytest.raises(ValueError, match="must lie in"):
        sticky_predictive(torch.tensor([[0, 9]]), 3)
    with pytest.raises(ValueError, match="must lie in"):
        markov_predictive(torch.tensor([[0, 9]]), 3)
    trans = torch.full((1, 2, 2), 0.5)
    with pytest.raises(ValueError, match="impossible"):
        hmm_filter(trans, torch.tensor([[[1.0, 0.0], [1.0, 0.0]]]), torch.tensor([[1]]))


def test_no_host_sync_catches_reads():
    x = torch.ones(3)
    for read in (lambda: x.sum().item(), lambda: x.tolist(), lambda: bool(x[0] > 0), lambda: float(x[0]),
                 lambda: x.numpy()):
        with pytest.raises(HostSyncError), no_host_sync():
            read()
    assert x.sum().item() == 3.0  # restored afterwards


def test_count_ops_separates_kernels_from_views():
    x = torch.randn(4, 5)
    counted = count_ops(lambda: (x.view(20) * 2).sum())
    assert counted.ops["aten.view"] == 1 and counted.ops["aten.mul"] == 1 and counted.ops["aten.sum"] == 1
    assert counted.kernels == 2 and counted.total == 3


def test_precision_option_bf16_trains_and_evaluation_stays_float32():
    """precision='bf16' autocasts the training forward; `predict` runs without autocast."""
    from bayesbench.scoring.evaluate import predict

    task = get_task("bijection", V=6)
    trainer = Trainer(task, "transformer", [0, 1], TrainConfig(steps=4, batch_size=8, precision="bf16"),
                      model_cfg=SMALL)
    result = trainer.fit(progress=False)
    assert torch.isfinite(result.losses).all()
    batch = task.sample(4, torch.Generator().manual_seed(3))
    with torch.autocast("cpu", dtype=torch.bfloat16):  # a caller's autocast does not leak into scoring
        log_q = predict(trainer.model, batch)
    trainer.model.eval()
    with torch.no_grad():
        exact = torch.log_softmax(trainer.model(batch.tokens.expand(2, *batch.tokens.shape)).double(), -1)
    torch.testing.assert_close(log_q, exact, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="precision"):
        TrainConfig(steps=1, precision="fp8")
