"""scoring/llm.py and `bayesbench llm`: a Hugging Face causal LM scored through a verbaliser.

No download: a one-layer GPT-2 and a WordLevel tokenizer are built here and saved with
save_pretrained (tests/scoring/llm_fixtures.py)."""

from __future__ import annotations

import json
import math

import pytest
import torch
from torch import nn

from bayesbench.presets import get_preset
from bayesbench.scoring import llm
from bayesbench.tasks import task_from_config
from tests.scoring.llm_fixtures import tiny_gpt2, word_tokenizer

V = 8  # the quick preset's bijection: V=8, keys with replacement, a final query; 16 symbols
INTEGERS = [str(i) for i in range(2 * V)]
KEYS = [f"k{i}" for i in range(V)]  # a file verbaliser: single-token keys, three-token values "v . 3"
VALUES = [f"v.{i}" for i in range(V)]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A tiny GPT-2 whose tokenizer knows the integers and the pieces of KEYS and VALUES."""
    d = tmp_path_factory.mktemp("lm")
    from tokenizers import pre_tokenizers

    tok = word_tokenizer(INTEGERS + KEYS + ["v", "."], str(d))
    tok.backend_tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()  # "v.3" -> "v", ".", "3"
    tok.save_pretrained(str(d))
    tiny_gpt2(str(d), len(tok))
    return str(d)


@pytest.fixture(scope="module")
def task():
    return task_from_config(get_preset("quick").tasks["bijection"].task)


@pytest.fixture(scope="module")
def loaded(folder):
    return llm.load_lm(folder)


def mapping_file(tmp_path, words) -> str:
    path = tmp_path / "words.json"
    path.write_text(json.dumps({str(i): w for i, w in enumerate(words)}))
    return str(path)


def test_candidates_renormalised_and_outside_mass(loaded, task):
    lm, tok = loaded
    verb = llm.make_verbaliser("integers", task.vocab_size)
    classes = llm.class_symbols(task)
    pieces = llm.tokenise(tok, verb, classes)
    batch = task.sample(5, torch.Generator().manual_seed(1))
    reading = llm.read_batch(lm, pieces, classes, batch, batch_size=2)
    m = batch.mask
    q = reading.renormalised().exp()
    assert torch.allclose(q[m].sum(-1), torch.ones(int(m.sum()), dtype=torch.float64), atol=1e-12)
    mass = reading.log_p.exp().sum(-1)
    assert torch.allclose(reading.outside[m], 1 - mass[m], atol=1e-12)
    assert float(reading.outside[m].min()) > 0.1  # a random LM over 29 tokens puts most of its mass elsewhere


def test_multi_token_candidate_is_the_product_of_its_tokens(tmp_path, loaded, task):
    lm, tok = loaded
    verb = llm.make_verbaliser(mapping_file(tmp_path, KEYS + VALUES), task.vocab_size)
    classes = llm.class_symbols(task)
    pieces = llm.tokenise(tok, verb, classes)
    assert all(len(pieces.later[s]) == 3 for s in classes)  # " v.3" -> v . 3
    batch = task.sample(3, torch.Generator().manual_seed(2))
    reading = llm.read_batch(lm, pieces, classes, batch, batch_size=4)
    i, t = 1, int(batch.mask[1].nonzero()[2])
    text = " ".join(verb.words[s] for s in batch.tokens[i, : t + 1].tolist())
    prompt = [tok.bos_token_id] + tok(text, add_special_tokens=False)["input_ids"]
    for c in (0, 5):
        cand = tok(" " + VALUES[c], add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            probs = torch.softmax(lm(input_ids=torch.tensor([prompt + cand])).logits[0].double(), -1)
        by_hand = math.prod(float(probs[len(prompt) - 1 + j, cand[j]]) for j in range(len(cand)))
        assert math.isclose(float(reading.log_p[i, t, c].exp()), by_hand, rel_tol=1e-5)


class BayesLM(nn.Module):
    """A fake LM whose next-token distribution after a key is the bijection's exact posterior on the
    candidates' tokens (computed here by elimination, independently of the oracle), or uniform
    over the whole vocabulary (`uniform`), or the posterior with half its mass moved outside."""

    def __init__(self, tok, vocab: int, *, mode: str = "bayes") -> None:
        super().__init__()
        self.tok, self.vocab, self.mode = tok, vocab, mode
        self.dummy = nn.Parameter(torch.zeros(1))
        self.config = type("Config", (), {"n_positions": 1024})()
        self.value_ids = [tok.convert_tokens_to_ids(str(V + c)) for c in range(V)]
        self.outside_id = tok.convert_tokens_to_ids("k0")

    def forward(self, input_ids, attention_mask=None):
        B, T = input_ids.shape
        logits = torch.zeros(B, T, self.vocab)
        if self.mode == "uniform":
            return type("Out", (), {"logits": logits})()
        for b in range(B):
            n = int(attention_mask[b].sum()) if attention_mask is not None else T
            symbols = [int(self.tok.convert_ids_to_tokens(int(i))) for i in input_ids[b, 1:n]]
            pairs: dict[int, int] = {}
            for k in range(0, len(symbols), 2):  # keys at even symbol positions, their values after them
                x = symbols[k]
                if x in pairs:
                    post = torch.zeros(V)
                    post[pairs[x]] = 1.0
                else:
                    free = [v for v in range(V) if v not in pairs.values()]
                    post = torch.zeros(V)
                    post[free] = 1.0 / len(free)
                row = torch.full((self.vocab,), -1e4)
                if self.mode == "outside":
                    post = torch.cat([post / 2, torch.tensor([0.5])])
                    row[self.value_ids + [self.outside_id]] = post.clamp_min(1e-300).log().float()
                else:
                    row[self.value_ids] = post.clamp_min(1e-300).log().float()
                logits[b, k + 1] = row
                if k + 1 < len(symbols) and symbols[k + 1] >= V:
                    pairs[x] = symbols[k + 1] - V
        return type("Out", (), {"logits": logits})()


@pytest.mark.parametrize("mode", ["bayes", "uniform", "outside"])
def test_fake_lms_score_zero_the_floor_and_report_outside_mass(loaded, task, mode):
    _, tok = loaded
    verb = llm.make_verbaliser("integers", task.vocab_size)
    given = llm.LMPredictions(BayesLM(tok, len(tok), mode=mode), tok, verb, task, batch_size=16)
    ident = {"weights": mode, "tokenizer": "t", "verbaliser": verb.describe(), "prompt_format": llm.PROMPT_FORMAT,
             "dtype": "float32"}
    (rec,) = llm.score_given(given, "bijection", ident, name=f"fake-{mode}", sequences=32, store=False)
    ev = rec.evaluation.evals[rec.evaluation.primary]
    outside = rec.config["llm"]["outside_mass"][0]["outside_mass_mean"]
    if mode == "uniform":
        assert ev.kl.mean == pytest.approx(ev.floors["uniform"]["kl"].mean, abs=1e-9)
        assert outside == pytest.approx(1 - V / len(tok), abs=1e-9)
    else:
        assert ev.kl.mean < 1e-6 and ev.entropy_mae.mean < 1e-6
        assert outside == pytest.approx(0.5 if mode == "outside" else 0.0, abs=1e-6)


def test_key_changes_with_weights_and_verbaliser(tmp_path, folder, task):
    db = str(tmp_path / "x.sqlite")
    first = llm.score_lm(folder, "bijection", sequences=8, db=db, name="tiny")[0]
    assert first.config["llm"]["weights"] == llm.weights_hash(folder)
    again = llm.score_lm(folder, "bijection", sequences=8, db=db, name="tiny")[0]
    assert again.run_id == first.run_id  # the same LM, tokenizer, verbaliser and format: the same row
    other = tmp_path / "other"
    import shutil

    shutil.copytree(folder, other)
    tiny_gpt2(str(other), 2 + len(INTEGERS) + len(KEYS) + 2, seed=1)  # other weights, same tokenizer
    changed = llm.score_lm(str(other), "bijection", sequences=8, db=db, name="tiny", store=False)[0]
    assert changed.run_id != first.run_id
    assert changed.config["identity_key"] != first.config["identity_key"]
    assert changed.config["llm"]["tokenizer"] == first.config["llm"]["tokenizer"]
    words = mapping_file(tmp_path, KEYS + VALUES)
    verb_changed = llm.score_lm(folder, "bijection", sequences=8, db=db, name="tiny", verbaliser=words,
                                store=False)[0]
    assert verb_changed.run_id != first.run_id
    assert verb_changed.config["identity_key"] != first.config["identity_key"]


def test_verbalisers():
    assert llm.letters(0) == "A" and llm.letters(25) == "Z" and llm.letters(26) == "AA"
    words = llm.make_verbaliser("words", 40, seed=3).words
    assert len(set(words)) == 40 and words == llm.make_verbaliser("words", 40, seed=3).words
    assert words != llm.make_verbaliser("words", 40, seed=4).words


def test_bad_input_is_one_line(tmp_path, folder, loaded, task):
    def refused(match, fn, *a, **k):
        with pytest.raises(ValueError, match=match) as err:
            fn(*a, **k)
        assert "\n" not in str(err.value)

    refused("no such folder", llm.score_lm, str(tmp_path / "none"), "bijection", store=False)
    empty = tmp_path / "no-tokenizer"
    tiny_gpt2(str(empty), 30)
    refused("no tokenizer", llm.load_lm, str(empty))
    refused("--dtype must be one of", llm.load_lm, folder, dtype="float64")
    if not torch.cuda.is_available():
        refused("CUDA is not available", llm.load_lm, folder, device="cuda")
    refused("symbols 0 and 1 are both", llm.make_verbaliser, mapping_file(tmp_path, ["a", "a"] + INTEGERS[2:]), 16)
    lm, tok = loaded
    # letters are not in this tokenizer's vocabulary: every word is [UNK], one token for all
    refused("same tokens", llm.tokenise, tok, llm.make_verbaliser("letters", 16), llm.class_symbols(task))
    prefixed = mapping_file(tmp_path, KEYS + ["v"] + VALUES[1:])  # "v" starts "v.1"
    refused("start of", llm.tokenise, tok, llm.make_verbaliser(prefixed, 16), llm.class_symbols(task))
    short = tmp_path / "short"
    import shutil

    shutil.copytree(folder, short)
    tiny_gpt2(str(short), len(tok), n_positions=8)
    refused("longer than the model's context", llm.score_lm, str(short), "bijection", sequences=4, store=False)
    refused("continuous header", llm.class_symbols, task_from_config(get_preset("quick").tasks["hmm"].task))


def test_command(tmp_path, folder, capsys):
    from bayesbench.cli import main

    db = str(tmp_path / "x.sqlite")
    assert main(["llm", "--model", folder, "--task", "bijection", "--sequences", "8", "--batch-size", "4",
                 "--db", db, "--json"]) == 0
    out = capsys.readouterr()
    runs = json.loads(out.out)["runs"]
    assert runs and all(r["arch"].startswith("lm-") for r in runs)
    assert "mass outside the candidates" in out.err
    assert main(["llm", "--model", str(tmp_path / "none"), "--db", db]) != 0
    err = capsys.readouterr().err
    assert "no such folder" in err and "Traceback" not in err


def test_round_trip_equals_the_direct_score(tmp_path, task):
    """An hf:gpt2 model of bayesbench (random weights and a random class-head bias, not trained)
    exported as a causal LM and scored through the text path scores as it does directly."""
    from bayesbench.models.hf import build_gpt2
    from bayesbench.scoring.trained_elsewhere import evaluate_model, model_spec

    torch.manual_seed(3)
    model = build_gpt2(model_spec("bijection"), n_layer=1, n_head=2, d_model=16, d_ffn=32)
    with torch.no_grad():
        model.head.bias.normal_(0, 1.0)
    (direct,) = evaluate_model(model, "bijection", name="direct", eval_sequences=16, store=False)
    folder = llm.export_gpt2(model, task, str(tmp_path / "exported"))
    (text,) = llm.score_lm(folder, "bijection", sequences=16, store=False, name="text")
    for set_name, ev in direct.evaluation.evals.items():
        other = text.evaluation.evals[set_name]
        for metric in ("entropy_mae", "kl"):
            assert other.scores[metric].mean == pytest.approx(ev.scores[metric].mean, abs=1e-6), (set_name, metric)
    assert text.config["llm"]["outside_mass"][0]["outside_mass_mean"] > 0  # the symbols that are not classes


def test_pickled_weights_are_never_loaded(tmp_path, folder):
    """A folder whose weights are a .bin (a pickle) is refused in one line naming the rule: a handed
    file never runs code (safetensors only)."""
    import shutil

    from transformers import GPT2LMHeadModel

    d = tmp_path / "pickled"
    shutil.copytree(folder, d)
    lm = GPT2LMHeadModel.from_pretrained(folder, local_files_only=True)
    (d / "model.safetensors").unlink()
    torch.save(lm.state_dict(), d / "pytorch_model.bin")  # the pickled format older save_pretrained wrote
    assert (d / "pytorch_model.bin").is_file() and not (d / "model.safetensors").exists()
    with pytest.raises(ValueError, match="safetensors") as err:
        llm.load_lm(str(d))
    assert "\n" not in str(err.value)


def test_sula_and_units_over_verbalisers_and_prompt_seeds(tmp_path, folder):
    """`--task sula` (a registered tunnel the preset does not name) read through two verbalisers
    and two prompt seeds: a row per verbaliser with its seeds, and a pooled row whose members are
    the four (verbaliser x prompt seed) units, each unit's numbers the same as in its own row."""
    from bayesbench.report.rows import aggregate, seed_interval

    words = mapping_file(tmp_path, KEYS[:6])
    records = llm.score_lm(folder, "sula", verbaliser=["integers", words], prompt_seeds=[0, 1], sequences=6,
                           store=False, name="tiny")
    by_arch: dict[str, list] = {}
    for r in records:
        by_arch.setdefault(r.arch, []).append(r)
    assert set(by_arch) == {"tiny-integers", "tiny-file", "tiny-pooled"}
    assert [r.seed for r in by_arch["tiny-integers"]] == [0, 1] and [r.seed for r in by_arch["tiny-pooled"]] == [0, 1,
                                                                                                                2, 3]
    assert records[0].task_config["task"] == "sula"

    def mae(r):
        return r.evaluation.evals[r.evaluation.primary].scores["entropy_mae"].mean

    units = [mae(r) for r in by_arch["tiny-integers"] + by_arch["tiny-file"]]
    pooled = [mae(r) for r in by_arch["tiny-pooled"]]
    assert pooled == pytest.approx(units, abs=1e-12)
    assert units[0] != units[1]  # seed 1 gives the integers to the symbols in another order
    (row,) = [r for r in aggregate(records) if r.arch == "tiny-pooled" and r.eval == "standard"]
    assert row.seeds == [0, 1, 2, 3] and row.ci == pytest.approx(seed_interval(pooled))  # over the four units
    assert len({r.config["identity_key"] for r in records}) == 3
    cfg = by_arch["tiny-pooled"][2].config["llm"]
    assert [u["prompt_seed"] for u in cfg["units"]] == [0, 1, 0, 1] and cfg["outside_mass"]
    assert by_arch["tiny-integers"][1].config["llm"]["verbalisers"][1]["source"] == "permuted by seed 1"
    assert all(r.config.get("state") is None for r in records)  # a language model: no count, never 'no model'


def test_bad_units_and_folders_are_one_line(tmp_path, folder):
    def refused(match, fn, *a, **k):
        with pytest.raises(ValueError, match=match) as err:
            fn(*a, **k)
        assert "\n" not in str(err.value)

    refused("named twice", llm.score_lm, folder, "bijection", verbaliser=["integers", "integers"], store=False)
    refused("distinct integers >= 0", llm.score_lm, folder, "bijection", prompt_seeds=[1, 1], store=False)
    refused("distinct integers >= 0", llm.score_lm, folder, "bijection", prompt_seeds=[-1], store=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    refused("no config.json", llm.load_lm, str(empty))  # a folder with no model in it
    import shutil

    no_weights = tmp_path / "no-weights"
    shutil.copytree(folder, no_weights)
    (no_weights / "model.safetensors").unlink()
    refused("no causal LM could be loaded", llm.load_lm, str(no_weights))
