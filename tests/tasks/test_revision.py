"""The two belief-revision tunnels (tasks/revision.py, tasks/revision_hard.py,
oracle/revision.py): against the authors' own generators (a saved fixture; their code is not
needed here), against enumeration, and the soft-evidence beliefs against hmmlearn's filter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bayesbench.oracle.revision import antecedent_predictive, evidence_predictive
from bayesbench.tasks import get_task

# The authors' src/data/belief_revision.py and belief_revision_hard.py (vishalmisra/bayesian-wind-tunnel
# @ 670c6d6), run by a scratch script at their settings; the fixture says the commit and the layout.
AUTHORS = json.loads((Path(__file__).parent / "data" / "revision_authors.json").read_text())


def test_fixture_is_the_authors_at_a_named_commit():
    assert AUTHORS["commit"] == "670c6d61179492d57f13a7d710660f77d7b163e8"
    assert len(AUTHORS["version_a"]["episodes"]) == 8 and len(AUTHORS["hard"]["episodes"]) == 16


def test_emission_matrix_is_the_authors_number_for_number():
    task = get_task("revision_hard", m_filler=4)
    torch.testing.assert_close(task.emission, torch.tensor(AUTHORS["hard"]["emission"], dtype=torch.float64),
                               atol=0, rtol=0)


def test_soft_evidence_posterior_equals_the_authors():
    """Their float32 posterior at the query (to float32 rounding) and their float64 entropy (to
    their +1e-10 inside the logarithms)."""
    task = get_task("revision_hard", m_filler=4)
    eps = AUTHORS["hard"]["episodes"]
    evidence = torch.tensor([e["evidence"] for e in eps])
    # their token sequence is ours up to the token ids: check the layout through the ids
    ours = task.layout(evidence, torch.zeros(len(eps), dtype=torch.long))
    theirs = torch.tensor([e["tokens"] for e in eps])
    sp = task.special
    mapping = {1: sp["INTRO"], 2: sp["FILLER"], 3: sp["PRONOUN"], 4: sp["EVIDENCE"], 5: sp["QUERY"]}
    mapped = theirs.clone().apply_(lambda t: mapping.get(t, t - 10))
    assert torch.equal(ours[:, :-1], mapped)  # ours adds the answer after the query
    belief = evidence_predictive(evidence, task.emission, dtype=torch.float64)[:, -1]
    torch.testing.assert_close(belief, torch.tensor([e["target"] for e in eps], dtype=torch.float64),
                               atol=1e-7, rtol=0)
    h = -(belief * belief.log2()).sum(-1)
    torch.testing.assert_close(h, torch.tensor([e["bayes_entropy"] for e in eps], dtype=torch.float64),
                               atol=1e-7, rtol=0)


def test_delayed_disambiguation_answer_equals_the_authors():
    task = get_task("revision", n_ids=100, m_filler=8, k_filler=8)
    eps = AUTHORS["version_a"]["episodes"]
    ids = torch.tensor([e["ids"] for e in eps])
    cue = torch.tensor([e["tokens"][-2] - 10 for e in eps])
    z = (ids == cue.unsqueeze(1)).long().argmax(1)
    ours = task.layout(ids, z)
    sp = task.special
    mapping = {1: sp["INTRO"], 2: sp["FILLER"], 3: sp["PRONOUN"], 4: sp["CUE"], 5: sp["QUERY"]}
    theirs = torch.tensor([e["tokens"] for e in eps]).apply_(lambda t: mapping.get(t, t - 10))
    assert torch.equal(ours[:, :-1], theirs)
    answer = antecedent_predictive(ids, cue, 100, dtype=torch.float64)[:, -1]
    assert torch.equal(answer, torch.tensor([e["target"] for e in eps], dtype=torch.float64))


@pytest.mark.parametrize("config", [
    {"n_candidates": 2, "n_ids": 2, "m_filler": 0, "k_filler": 0},
    {"n_candidates": 3, "n_ids": 5, "m_filler": 1, "k_filler": 2},
    {"n_candidates": 2, "n_ids": 4, "supervise": "query"},
    {"n_ids": 100, "m_filler": 8, "k_filler": 8},  # the authors' setting: 19,800 latents
])
def test_delayed_disambiguation_equals_enumeration(config):
    task = get_task("revision", **config)
    batch = task.sample(6, torch.Generator().manual_seed(5), dtype=torch.float64)
    torch.testing.assert_close(task.brute_force_posterior(batch), batch.posterior, atol=1e-12, rtol=0)


@pytest.mark.parametrize("config", [
    {"n_candidates": 2, "n_evidence": 1},
    {"n_candidates": 4, "n_evidence": 3, "m_filler": 2, "boost": 0.0, "alpha": 0.1},
    {"supervise": "query"},
])
def test_soft_evidence_equals_the_sum_over_the_referent(config):
    task = get_task("revision_hard", **config)
    batch = task.sample(10, torch.Generator().manual_seed(2), dtype=torch.float64)
    torch.testing.assert_close(task.brute_force_posterior(batch), batch.posterior, atol=1e-12, rtol=0)


def test_the_cue_carries_the_prior_and_the_query_the_revised_belief():
    task = get_task("revision", n_candidates=3, n_ids=10)
    batch = task.sample(50, torch.Generator().manual_seed(0), dtype=torch.float64)
    where = task.positions()
    first = batch.posterior[:, int(where["intro"][0])]
    torch.testing.assert_close(first, torch.full((50, 10), 0.1, dtype=torch.float64))  # the prior predictive
    before = batch.posterior[:, int(where["cue"][0])]
    assert torch.equal((before > 0).sum(-1), torch.full((50,), 3)) and torch.allclose(before.max(-1).values,
                                                                                      torch.tensor(1 / 3).double())
    after = batch.posterior[:, int(where["query"][0])]
    assert torch.equal(after.argmax(-1), batch.latents["ids"].gather(1, batch.latents["antecedent"].unsqueeze(1))[:, 0])


def test_soft_evidence_first_scored_position_is_the_prior_predictive():
    task = get_task("revision_hard")
    batch = task.sample(20, torch.Generator().manual_seed(0), dtype=torch.float64)
    first = batch.posterior[:, task.evidence_start]
    torch.testing.assert_close(first, task.emission.mean(0).expand(20, -1))


def test_enumeration_refuses_a_size_it_cannot_do():
    task = get_task("revision", n_candidates=4, n_ids=100)
    batch = task.sample(1, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="brute force would enumerate 376437600 latents"):
        task.brute_force_posterior(batch)


@pytest.mark.parametrize("name,config,message", [
    ("revision", {"n_candidates": 1}, "n_candidates must be an integer >= 2"),
    ("revision", {"n_ids": 3, "n_candidates": 4}, "n_ids must be >= n_candidates"),
    ("revision", {"m_filler": -1}, "m_filler must be an integer >= 0"),
    ("revision", {"supervise": "all"}, r"supervise must be one of \('ids', 'query'\)"),
    ("revision_hard", {"alpha": 0.0}, "alpha must be a positive finite number"),
    ("revision_hard", {"boost": -1.0}, "boost must be a finite number >= 0"),
    ("revision_hard", {"n_evidence": 0}, "n_evidence must be a positive integer"),
    ("revision_hard", {"emission_seed": -1}, "emission_seed must be an integer >= 0"),
    ("revision_hard", {"supervise": "ids"}, r"supervise must be one of \('all', 'query'\)"),
])
def test_bad_settings_are_refused_naming_the_setting(name, config, message):
    from bayesbench.checks import SettingError

    with pytest.raises(SettingError, match=f"^{message}") as err:
        get_task(name, **config)
    assert next(iter(config)) in err.value.fields
