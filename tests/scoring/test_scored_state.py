"""The state column for every kind of scored row (issue 43; `scoring.rows.scored_state`): a model
scored here (trained here, or a checkpoint scored by `eval` / `score --model`) has its state counted
from its layers' recurrent references; predictions made elsewhere (`score --predictions`) have no
model, said as such ('no model', floats None) rather than a number; a module with no recurrent
reference, and a language model read through a verbaliser, have no count (None)."""

from __future__ import annotations

import torch

from bayesbench.models import from_module, get_model
from bayesbench.models.state import NO_MODEL, state_record
from bayesbench.scoring.llm import LMPredictions
from bayesbench.scoring.predictions import GivenPredictions
from bayesbench.scoring.rows import scored_state
from bayesbench.tasks import get_task

TASK = get_task("bijection", V=4)


def test_a_model_scored_here_has_its_state_counted():
    model = get_model("gru", TASK, seeds=[0, 1], n_layer=2, d_model=6)
    assert scored_state(model, TASK.seq_len) == state_record(model, TASK.seq_len)
    assert scored_state(model, TASK.seq_len)["floats"] == 2 * 6  # h of each layer


def test_predictions_made_elsewhere_say_no_model_and_give_no_number():
    batch = TASK.sample(2, torch.Generator().manual_seed(0))
    given = GivenPredictions([(batch, torch.log(batch.posterior))])
    state = scored_state(given, TASK.seq_len)
    assert state == {"floats": None, "length": TASK.seq_len, "counted": NO_MODEL, "no_model": True}


def test_what_cannot_be_counted_has_no_state():
    def build(spec):
        return torch.nn.Sequential(torch.nn.Embedding(spec.vocab_size, 4), torch.nn.Linear(4, spec.num_classes))

    assert scored_state(from_module(build, TASK, seeds=[0, 1]), TASK.seq_len) is None
    assert LMPredictions.holds_model and not issubclass(LMPredictions, torch.nn.Module)  # a model, not countable
