"""The selection set of a tuning (`training/curves.py` `selection_batch`): drawn apart from the
evaluation set and the curve set, so no reported sequence chooses a candidate. Checked on tasks
small enough that sequences drawn from independent seeds do collide (the raw draw shares dozens
with the other two sets), so the test fails if the filter goes."""

from __future__ import annotations

import pytest
import torch

from bayesbench.scoring.evaluate import eval_set
from bayesbench.tasks import get_task
from bayesbench.training.curves import CurveSet, _sequence_keys, curve_batch, selection_batch
from bayesbench.training.seeds import eval_seed


@pytest.mark.parametrize("name,cfg", [("sticky", dict(V=2, L=9)), ("bijection", dict(V=4, L=3))])
def test_selection_evaluation_and_curve_sets_share_no_sequence(name, cfg):
    task = get_task(name, **cfg)
    evaluation = _sequence_keys(eval_set(task, 512))
    curve = _sequence_keys(curve_batch(task))
    raw = _sequence_keys(task.sample(128, torch.Generator().manual_seed(eval_seed(task, "selection"))))
    assert raw & (evaluation | curve)  # the task is small enough for independent draws to collide
    batch = selection_batch(task, 128, 512)
    selection = _sequence_keys(batch, as_list=True)
    assert len(selection) == 128 and len(set(selection)) == 128  # no repeats either
    assert not set(selection) & evaluation
    assert not set(selection) & curve
    assert batch.posterior.shape[0] == batch.mask.shape[0] == 128  # every field kept with its sequence
    # a run measuring its curve on the selection set measures it on exactly these sequences
    assert torch.equal(CurveSet(task, 128, split="selection", eval_sequences=512).tokens, batch.tokens)


def test_a_task_too_small_for_a_selection_set_is_refused():
    task = get_task("sticky", V=2, L=4)  # 16 sequences, all in the evaluation set
    with pytest.raises(ValueError, match="cannot draw 64 selection sequences apart"):
        selection_batch(task, 64, 512)
