"""A pretrained Hugging Face causal language model scored against the exact posterior (`bayesbench llm`).

The question of the authors' third paper ("Geometric Scaling of Bayesian Inference in LLMs",
Misra et al., arXiv 2512.23752, Sec. 3: Hugging Face causal LMs probed with a Bayes posterior per
prompt) asked of any wind tunnel, position by position and in bits: a tunnel's evaluation
sequences are written as text through a verbaliser (`Verbaliser`: how a symbol becomes a word),
the model reads each prompt once, and at every scored position its next-token distribution is
read on the candidate classes' words only, renormalised over them, and scored like every other
model. The mass the model puts on anything that is not a candidate is its own number
(`LMReading.outside`), stored with the row (`config["llm"]`), never folded into the metrics.

Why here (`scoring/`, layer 5) and not a new package or `data/`: the row is made by the scorer
every model goes through (`rows.score_run` on `trained_elsewhere.scored_spec`/`scored_result`,
the path of `bayesbench score --predictions`), and the LM stands where a model stands through
`predictions.GivenPredictions` (`LMPredictions` computes its log-probabilities on the set
`evaluate` asks for instead of reading them from a file). Nothing here needs the layers above.

Why a command of its own (`bayesbench llm`, cli/llm.py) and not `--model hf-lm:PATH` of `score`
or `run`: the engine (`sweep/request.py: RunRequest`, `sweep/engine.py`) plans jobs that train an
ensemble and score it; `score --model` loads a factory's module from a checkpoint and reads class
logits. An LM is neither: it is not trained here, has no checkpoint of ours, and needs settings no
other command has (the verbaliser, the prompt format, its dtype and batch size). It shares what
matters, the evaluation sets, metrics, floors, intervals and store.

The prompt format (`PROMPT_FORMAT`, stored with every row): the tokenizer's BOS token when it has
one, then the sequence's symbols as words joined by single spaces (`"3 11 5 8 ..."`). Each word
is tokenised on its own with the space before it (`" 11"`; the first without), so the prompt's
token ids are the concatenation of the words' pieces, exactly as a BPE tokenizer that splits
before spaces (GPT-2, Llama, Pythia) reads the joined text. At a scored position t (after the
word of symbol t) the candidates are the words of the C classes with their space; a candidate of
several tokens is scored by its full sequence probability, the product of its tokens'
conditional probabilities. Candidates must be told apart: no two symbols may have the same
tokens, and no candidate's tokens may start another's (the shorter's probability would hold the
longer's).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import random
import string
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from ..tasks import Batch, Task
from .predictions import GivenPredictions

#: The prompt format every row states (module doc); a change is a new name.
PROMPT_FORMAT = {"name": "words-v1", "bos": "the tokenizer's BOS token first when it has one",
                 "separator": " ", "piece": "each word tokenised alone with the separator before it (none first)"}
VERBALISERS = ("integers", "letters", "words")
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack")
WEIGHT_FILES = ("config.json", "generation_config.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
                   "vocab.txt", "tokenizer.model", "added_tokens.json", "spiece.model")
WORD_LETTERS = 5  # letters of an opaque random word


# ---------------------------------------------------------------- verbalisers

@dataclasses.dataclass(frozen=True)
class Verbaliser:
    """How symbol (token id) i of a tunnel becomes the word `words[i]`; `kind` and `source` say
    how the words were made (stored with the row: the words themselves are part of its key)."""

    kind: str
    words: tuple[str, ...]
    source: str = ""

    def describe(self) -> dict:
        return {"kind": self.kind, "source": self.source, "words": list(self.words)}


def letters(i: int) -> str:
    """0 -> 'A', 25 -> 'Z', 26 -> 'AA' (bijective base 26, as spreadsheet columns)."""
    out = ""
    i += 1
    while i > 0:
        i, r = divmod(i - 1, 26)
        out = string.ascii_uppercase[r] + out
    return out


def random_words(n: int, seed: int) -> list[str]:
    """n distinct opaque lowercase words of WORD_LETTERS letters drawn from `seed`: symbols with no
    meaning the model could have learnt (the authors' opaque tokens, arXiv 2512.22471 Sec. 3)."""
    rng = random.Random(seed)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        w = "".join(rng.choice(string.ascii_lowercase) for _ in range(WORD_LETTERS))
        if w not in seen:
            seen.add(w)
            out.append(w)
    return out


def make_verbaliser(spec: str, vocab_size: int, seed: int = 0, *, permute: bool = False) -> Verbaliser:
    """`integers`, `letters`, `words` (opaque random words from `seed`) or the path of a JSON file
    (a list of words, or an object {"0": word, ...}) read as data; `vocab_size` words, distinct,
    non-empty, without whitespace.

    `permute` (a prompt seed of `--prompt-seeds`): a verbaliser whose words are fixed (integers,
    letters, a file) gives its words to the symbols in the order of a permutation drawn from
    `seed` (seed 0: the identity), so that several seeds are several renderings of the same
    sequences; `words` draws its words from `seed` either way."""
    if spec == "integers":
        v = Verbaliser("integers", tuple(str(i) for i in range(vocab_size)))
    elif spec == "letters":
        v = Verbaliser("letters", tuple(letters(i) for i in range(vocab_size)))
    elif spec == "words":
        v = Verbaliser("words", tuple(random_words(vocab_size, seed)), f"seed {seed}")
    elif spec.endswith(".json") or os.sep in spec:
        v = Verbaliser("file", tuple(_words_of_file(spec, vocab_size)), os.path.basename(spec))
    else:
        raise ValueError(f"--verbaliser must be one of {', '.join(VERBALISERS)} or a JSON file of words, got {spec!r}")
    if permute and v.kind != "words" and seed != 0:
        order = list(range(len(v.words)))
        random.Random(seed).shuffle(order)
        source = " ".join(x for x in (v.source, f"permuted by seed {seed}") if x)
        v = Verbaliser(v.kind, tuple(v.words[j] for j in order), source)
    if len(v.words) != vocab_size:
        raise ValueError(f"--verbaliser {spec}: {len(v.words)} words for {vocab_size} symbols "
                         "(rule: one word per symbol)")
    for i, w in enumerate(v.words):
        if not isinstance(w, str) or not w or any(c.isspace() for c in w):
            raise ValueError(f"--verbaliser {spec}: symbol {i}'s word {w!r} is empty or holds whitespace (rule: a word "
                             "is a non-empty string without spaces: the prompt joins words by spaces)")
    first: dict[str, int] = {}
    for i, w in enumerate(v.words):
        if w in first:
            raise ValueError(f"--verbaliser {spec}: symbols {first[w]} and {i} are both {w!r} (rule: one word per "
                             "symbol, never two symbols to one string)")
        first[w] = i
    return v


def _words_of_file(path: str, vocab_size: int) -> list[str]:
    if not os.path.isfile(path):
        raise ValueError(f"--verbaliser: no such file {path}")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as err:
        raise ValueError(f"--verbaliser {path}: not a JSON file ({err})") from None
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        missing = [i for i in range(vocab_size) if str(i) not in data]
        if missing:
            raise ValueError(f"--verbaliser {path}: no word for symbol(s) {missing[:5]} (rule: an object maps every "
                             f"symbol 0..{vocab_size - 1}, as a string key, to its word)")
        return [data[str(i)] for i in range(vocab_size)]
    raise ValueError(f"--verbaliser {path}: a list of words or an object {{\"0\": word, ...}}, "
                     f"got {type(data).__name__}")


def class_symbols(task: Task) -> list[int]:
    """The symbol (token id) whose word stands for each class: the bijection's class c is its value
    token V + c; a tunnel whose classes are its tokens (vocab_size == num_classes) reads them
    as they are. Tunnels that feed continuous vectors (the HMM's `rows` header) cannot be text."""
    if task.header_len:
        raise ValueError(f"--task {task.name}: it feeds {task.header_len} continuous header vectors (rule: only "
                         "tunnels "
                         "whose input is symbols can be written as text)")
    if task.name == "bijection":
        V = int(getattr(task, "V"))
        return [V + c for c in range(task.num_classes)]
    tokens = getattr(task, "class_tokens", None)  # a tunnel naming its classes' symbols (sula's two labels)
    if tokens is not None:
        return [int(s) for s in tokens]
    if task.vocab_size == task.num_classes:
        return list(range(task.num_classes))
    raise ValueError(f"--task {task.name}: its {task.num_classes} classes are not its {task.vocab_size} symbols "
                     "(rule: the LM path reads tunnels whose classes are symbols it can write: the bijection, a "
                     "tunnel naming them in class_tokens, or one with vocab_size == num_classes)")


# ---------------------------------------------------------------- the model and its files

def resolve_folder(path: str) -> str:
    """A local model folder, or a name found in the Hugging Face cache (never downloaded)."""
    if os.path.isdir(path):
        return path
    if os.path.exists(path):
        raise ValueError(f"--model {path} is a file (rule: a folder holding config.json, the weights and the "
                         "tokenizer)")
    try:
        from huggingface_hub import snapshot_download

        return str(snapshot_download(path, local_files_only=True))
    except Exception:  # any failure of the cache look-up: not there
        raise ValueError(f"--model {path}: no such folder, and not in the Hugging Face cache (rule: a local folder, "
                         "or a model already downloaded; nothing is downloaded here)") from None


def files_hash(folder: str, names: Callable[[str], bool]) -> str:
    """SHA-256 (first 16 hex characters) of the named files' names and bytes, in name order."""
    digest = hashlib.sha256()
    found = sorted(f for f in os.listdir(folder) if names(f) and os.path.isfile(os.path.join(folder, f)))
    if not found:
        return "none"
    for name in found:
        digest.update(name.encode() + b"\0")
        with open(os.path.join(folder, name), "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


def weights_hash(folder: str) -> str:
    """The model's identity: its config and weight files' bytes (safetensors, bin, ...)."""
    return files_hash(folder, lambda f: f.endswith(WEIGHT_SUFFIXES) or f in WEIGHT_FILES)


def tokenizer_hash(folder: str) -> str:
    """The tokenizer's identity: its files' bytes."""
    return files_hash(folder, lambda f: f in TOKENIZER_FILES)


def check_device_dtype(device: str, dtype: str) -> torch.dtype:
    """The torch dtype named `dtype`, refused in one line where `device` cannot compute in it."""
    if dtype not in DTYPES:
        raise ValueError(f"--dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise ValueError(f"--device {device!r} is not a device (cpu, cuda, cuda:1, mps)") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {device}: CUDA is not available here")
    if dev.type == "cuda" and DTYPES[dtype] is torch.bfloat16 and not torch.cuda.is_bf16_supported():
        raise ValueError(f"--dtype bfloat16: {torch.cuda.get_device_name(dev)} has no bfloat16 (rule: a dtype the "
                         "device computes in; float16 or float32)")
    try:
        a = torch.ones(2, 2, dtype=DTYPES[dtype], device=dev)
        (a @ a).softmax(-1)
    except Exception as err:  # any failure of a tiny matmul: the device lacks the dtype
        raise ValueError(f"--dtype {dtype}: {dev} cannot compute in it ({type(err).__name__}) (rule: a dtype the "
                         "device computes in)") from None
    return DTYPES[dtype]


def load_lm(folder: str, device: str = "cpu", dtype: str = "float32"):
    """(model, tokenizer) from `folder`, local files only; one-line refusals for what is missing."""
    torch_dtype = check_device_dtype(device, dtype)
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the command prints its own progress

    if not os.path.isfile(os.path.join(folder, "config.json")):
        raise ValueError(f"--model {folder}: no config.json (rule: a folder save_pretrained wrote: config.json and "
                         "the weights)")
    if not any(os.path.isfile(os.path.join(folder, f)) for f in TOKENIZER_FILES):
        raise ValueError(f"--model {folder}: no tokenizer files ({', '.join(TOKENIZER_FILES[:2])}, ...) (rule: "
                         "the folder "
                         "holds the tokenizer, as tokenizer.save_pretrained writes it)")
    try:
        tok = AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    except Exception as err:  # any failure of the tokenizer's load: named in one line
        raise ValueError(f"--model {folder}: no tokenizer could be loaded ({type(err).__name__}: "
                         f"{str(err).strip().splitlines()[0] if str(err).strip() else ''}) (rule: the folder holds "
                         "the tokenizer's files, as tokenizer.save_pretrained writes them)") from None
    try:
        # safetensors only: a .bin checkpoint is a pickle, and a handed file never runs code here;
        # no remote code either (a config naming its own modeling file is refused)
        lm = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=torch_dtype,
                                                  use_safetensors=True, trust_remote_code=False)
    except Exception as err:  # any failure of the model's load: named in one line
        raise ValueError(f"--model {folder}: no causal LM could be loaded ({type(err).__name__}: "
                         f"{str(err).strip().splitlines()[0] if str(err).strip() else ''}) (rule: weights as "
                         "safetensors, which save_pretrained writes; a .bin file is a pickle and is never "
                         "loaded)") from None
    lm.eval()
    return torch.nn.Module.to(lm, torch.device(device)), tok


def context_length(lm) -> int | None:
    """The longest input the model takes (positions it has), None when its config does not say."""
    cfg = lm.config
    for name in ("n_positions", "max_position_embeddings", "n_ctx", "seq_length"):
        value = getattr(cfg, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


# ---------------------------------------------------------------- reading the LM

@dataclasses.dataclass
class Pieces:
    """The token ids of every symbol's word: `first[i]` at the prompt's start, `later[i]` after a
    space; `bos` the ids put first."""

    first: list[list[int]]
    later: list[list[int]]
    bos: list[int]


def tokenise(tok, verbaliser: Verbaliser, classes: Sequence[int]) -> Pieces:
    """Every word's pieces, refused in one line when two symbols have the same tokens, a word has
    none, or a candidate's tokens start another candidate's."""
    def ids(text: str) -> list[int]:
        return list(tok(text, add_special_tokens=False)["input_ids"])

    first = [ids(w) for w in verbaliser.words]
    later = [ids(PROMPT_FORMAT["separator"] + w) for w in verbaliser.words]
    where = f"--verbaliser {verbaliser.kind}"
    for i, p in enumerate(later):
        if not p or not first[i]:
            raise ValueError(f"{where}: the word {verbaliser.words[i]!r} has no tokens in this tokenizer (rule: every "
                             "word is at least one token)")
    seen: dict[tuple[int, ...], int] = {}
    for i, p in enumerate(later):
        if tuple(p) in seen:
            j = seen[tuple(p)]
            raise ValueError(f"{where}: the words {verbaliser.words[j]!r} and {verbaliser.words[i]!r} are the same "
                             "tokens "
                             f"{p} after tokenisation (rule: two symbols must be two token sequences; pick another "
                             "verbaliser for this tokenizer)")
        seen[tuple(p)] = i
    cands = [later[s] for s in classes]
    for a, pa in enumerate(cands):
        for b, pb in enumerate(cands):
            if a != b and len(pa) < len(pb) and pb[: len(pa)] == pa:
                raise ValueError(f"{where}: the candidate {verbaliser.words[classes[a]]!r} is tokens {pa}, the start "
                                 "of "
                                 f"{verbaliser.words[classes[b]]!r} {pb} (rule: no candidate's tokens start another's: "
                                 "its probability would hold the other's)")
    bos = [] if tok.bos_token_id is None else [int(tok.bos_token_id)]
    return Pieces(first, later, bos)


@dataclasses.dataclass
class LMReading:
    """What the LM said on a batch: `log_p` [N, L, C] float64 the candidates' full-sequence
    log-probabilities (not renormalised), `outside` [N, L] the mass on no candidate (1 - sum p),
    both at the scored positions (`mask`; elsewhere log_p is -log C and outside 0)."""

    log_p: Tensor
    outside: Tensor
    mask: Tensor

    def renormalised(self) -> Tensor:
        """[N, L, C] log-probabilities renormalised over the candidates (uniform where not scored)."""
        out = self.log_p - torch.logsumexp(self.log_p, -1, keepdim=True)
        C = self.log_p.shape[-1]
        return torch.where(self.mask.unsqueeze(-1), out, torch.full_like(out, -math.log(C)))


def _prompt(tokens: list[int], pieces: Pieces) -> tuple[list[int], list[int]]:
    """(ids, ends): the prompt's ids and, for each symbol t, the index just after its last piece."""
    ids = list(pieces.bos)
    ends = []
    for t, s in enumerate(tokens):
        ids += pieces.first[s] if t == 0 else pieces.later[s]
        ends.append(len(ids))
    return ids, ends


def _forward(lm, rows: list[list[int]], device) -> Tensor:
    """float64 log-softmax [B, T, V] of right-padded `rows` (causal: padding after a row is never read)."""
    T = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), T, dtype=torch.long)
    att = torch.zeros(len(rows), T, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        att[i, : len(r)] = 1
    with torch.no_grad():
        logits = lm(input_ids=ids.to(device), attention_mask=att.to(device)).logits
    return torch.log_softmax(logits.double(), -1).cpu()


def read_batch(lm, pieces: Pieces, classes: Sequence[int], batch: Batch, *, batch_size: int = 8,
               progress: Callable[[int, int], None] | None = None) -> LMReading:
    """The LM's candidate log-probabilities at every scored position of `batch` (module doc): one
    forward pass per prompt for every candidate's first token; one more per (position,
    candidate) of several tokens, for the rest of them."""
    N, L = batch.tokens.shape
    C = len(classes)
    device = next(lm.parameters()).device
    limit = context_length(lm)
    longest = max(len(p) for p in (pieces.later[s] for s in classes))
    log_p = torch.full((N, L, C), -math.log(C), dtype=torch.float64)
    outside = torch.zeros(N, L, dtype=torch.float64)
    mask = batch.mask.cpu()
    prompts = [_prompt(batch.tokens[i].tolist(), pieces) for i in range(N)]
    need = max(len(ids) for ids, _ in prompts) + longest - 1
    if limit is not None and need > limit:
        raise ValueError(f"--model: a prompt of this set is {need} tokens, longer than the model's context of {limit} "
                         "(rule: every prompt with its longest candidate fits the model's positions; fewer or "
                         "shorter words: another --verbaliser)")
    first_ids = torch.tensor([pieces.later[s][0] for s in classes])
    multi = [c for c, s in enumerate(classes) if len(pieces.later[s]) > 1]
    for start in range(0, N, batch_size):
        rows = list(range(start, min(N, start + batch_size)))
        lp = _forward(lm, [prompts[i][0] for i in rows], device)
        extra: list[tuple[int, int, int]] = []  # (sequence, position, class) needing the tokens after the first
        for k, i in enumerate(rows):
            ends = prompts[i][1]
            for t in mask[i].nonzero().flatten().tolist():
                log_p[i, t] = lp[k, ends[t] - 1, first_ids]
                extra += [(i, t, c) for c in multi]
        for e in range(0, len(extra), batch_size):
            chunk = extra[e : e + batch_size]
            inputs = []
            for i, t, c in chunk:
                ids, ends = prompts[i]
                inputs.append(ids[: ends[t]] + pieces.later[classes[c]][:-1])
            lq = _forward(lm, inputs, device)
            for k, (i, t, c) in enumerate(chunk):
                ends = prompts[i][1]
                cand = pieces.later[classes[c]]
                at = torch.arange(ends[t] - 1, ends[t] - 1 + len(cand))
                log_p[i, t, c] = lq[k, at, torch.tensor(cand)].sum()
        if progress is not None:
            progress(rows[-1] + 1, N)
    scored = mask.unsqueeze(-1).expand_as(log_p)
    total = torch.logsumexp(torch.where(scored, log_p, torch.full_like(log_p, -math.inf)), -1).exp()
    outside = torch.where(mask, (1.0 - total).clamp_min(0.0), outside)
    return LMReading(log_p, outside, mask)


class LMPredictions(GivenPredictions):
    """A causal LM standing where a model stands in `evaluate` and `rows.score_run`: its
    log-probabilities on each evaluation set are read off the LM through the verbaliser
    (`read_batch`, renormalised over the candidates) when `evaluate` asks, once per set; the
    outside mass of each set is kept in `outside` for the row."""

    holds_model = True  # a model (not predictions made elsewhere), whose state models.state cannot count

    def __init__(self, lm, tok, verbaliser: Verbaliser, task: Task, *, seed: int = 0, batch_size: int = 8,
                 progress: Callable[[str], None] | None = None, label: str = "") -> None:
        self.lm, self.tok, self.verbaliser, self.label = lm, tok, verbaliser, label
        self.classes = class_symbols(task)
        self.pieces = tokenise(tok, verbaliser, self.classes)
        self.batch_size = batch_size
        self.progress = progress
        self.sets = []
        self.seeds = [int(seed)]
        self.params = int(sum(p.numel() for p in lm.parameters()))
        self.outside: list[dict] = []

    def log_probs(self, batch: Batch) -> Tensor:
        for given, log_q in self.sets:
            if _same(given, batch):
                return log_q.unsqueeze(0)
        n = len(self.sets) + 1

        def tell(done: int, total: int) -> None:  # about ten lines a set, whatever its size
            step = max(1, total // 10)
            if self.progress is not None and (done == total or (done // step) != ((done - self.batch_size) // step)):
                self.progress(f"{self.label}set {n}: {done}/{total} prompts")

        reading = read_batch(self.lm, self.pieces, self.classes, batch, batch_size=self.batch_size, progress=tell)
        out = reading.outside[reading.mask]
        self.outside.append({"sequences": batch.batch_size, "length": batch.seq_len,
                             "scored_positions": int(reading.mask.sum()),
                             "outside_mass_mean": float(out.mean()) if out.numel() else 0.0,
                             "outside_mass_max": float(out.max()) if out.numel() else 0.0})
        log_q = reading.renormalised()
        self.sets.append((batch, log_q))
        return log_q.unsqueeze(0)


def _same(a: Batch, b: Batch) -> bool:
    return a.tokens.shape == b.tokens.shape and torch.equal(a.tokens, b.tokens) and torch.equal(a.mask, b.mask)


# ---------------------------------------------------------------- a row

def lm_identity(weights: str, tokenizer: str, dtype: str, **rendering) -> dict:
    """What an LM row is keyed by: the weights' and tokenizer's hashes (`weights_hash`,
    `tokenizer_hash`: read once per call of `score_lm`, whatever the number of rows), the rendering
    (`verbaliser=` its words; or `verbalisers=` and `prompt_seeds=`; or `units=`), the prompt
    format and the dtype."""
    return {"weights": weights, "tokenizer": tokenizer, **rendering, "prompt_format": dict(PROMPT_FORMAT),
            "dtype": dtype}


class UnitPredictions(GivenPredictions):
    """Several renderings of the same evaluation sequences, one per (verbaliser, prompt seed)
    unit, standing as the members of one ensemble: `rows.score_run` writes one record per unit
    (its `seed` the unit's prompt seed, or its index in a pooled row), and the leaderboard pools
    a row's records with its interval over them (`report.rows.seed_interval`), as it pools the
    seeds of a trained model. Each unit's readings are its `LMPredictions`' (read once, shared
    by the per-verbaliser rows and the pooled one)."""

    holds_model = LMPredictions.holds_model  # a language model's readings: its rows never say 'no model'

    def __init__(self, units: Sequence[LMPredictions], seeds: Sequence[int]) -> None:
        self.units = list(units)
        self.ensemble = len(self.units)
        self.seeds = [int(s) for s in seeds]
        self.params = self.units[0].params
        self.sets = []

    def log_probs(self, batch: Batch) -> Tensor:
        return torch.cat([u.log_probs(batch) for u in self.units], 0)


def resolve_lm_task(task, preset: str):
    """`trained_elsewhere.resolve_task`, and a registered tunnel the preset does not name (sula)
    by name at its defaults, with the preset's setup for such tunnels (`presets.registered_setup`),
    as `bayesbench run --tasks NAME` runs it."""
    from ..presets import get_preset, registered_setup
    from ..tasks import get_task, list_tasks, task_from_config
    from .trained_elsewhere import resolve_task

    p = get_preset(preset)
    if isinstance(task, str) and task not in p.tasks and task in list_tasks():
        setup = registered_setup(p, get_task(task))
        return (task_from_config(setup.task), setup.label, tuple(setup.eval_lengths), setup.eval_sequences,
                tuple(setup.eval_scored))
    return resolve_task(task, preset)


def _units_of(specs: Sequence[str], vocab_size: int, verbaliser_seed: int,
              prompt_seeds: Sequence[int] | None) -> list[list[Verbaliser]]:
    """Per verbaliser spec, its verbaliser for each prompt seed (`make_verbaliser`; without
    --prompt-seeds one each, `words` drawn from `verbaliser_seed`)."""
    if len(set(specs)) != len(specs):
        raise ValueError(f"--verbaliser {' '.join(specs)}: a verbaliser named twice (rule: each at most once)")
    if prompt_seeds is not None:
        if not prompt_seeds or len(set(prompt_seeds)) != len(prompt_seeds) or any(
                isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in prompt_seeds):
            raise ValueError(f"--prompt-seeds {list(prompt_seeds)}: distinct integers >= 0 (rule: one rendering "
                             "per seed)")
        return [[make_verbaliser(v, vocab_size, s, permute=True) for s in prompt_seeds] for v in specs]
    return [[make_verbaliser(v, vocab_size, verbaliser_seed)] for v in specs]


def _row_names(base: str, name: str | None, specs: Sequence[str], verbs: Sequence[Verbaliser]) -> list[str]:
    """One leaderboard name per verbaliser: `name` for a single one, else `<name or lm-base>-<kind>`
    (a file's stem after it where two kinds are equal)."""
    if len(specs) == 1:
        return [name or f"lm-{base}-{verbs[0].kind}"]
    kinds = [v.kind for v in verbs]
    out = []
    for spec, v in zip(specs, verbs):
        kind = v.kind
        if kinds.count(kind) > 1:
            kind += "-" + "".join(c if c.isalnum() or c in "-_." else "-" for c in os.path.splitext(
                os.path.basename(spec))[0])
        out.append(f"{name or f'lm-{base}'}-{kind}")
    return out


def score_lm(model: str, task="bijection", *, verbaliser: str | Sequence[str] = "integers", verbaliser_seed: int = 0,
             prompt_seeds: Sequence[int] | None = None, name: str | None = None, preset: str = "quick",
             device: str = "cpu", dtype: str = "float32", batch_size: int = 8, sequences: int | None = None,
             db: str | None = None, store: bool = True, progress: Callable[[str], None] | None = None) -> list:
    """Score the causal LM in folder `model` on `task` (a preset task key, a registered tunnel's
    name or a Task) through each verbaliser and store its rows (module doc); returns the rows'
    records. A row's run id is a hash of `lm_identity`, the task's label, the sequences and the
    name: the same LM, tokenizer, verbaliser and prompt format scored again replaces its row.

    Several verbalisers, or `prompt_seeds` (renderings: `make_verbaliser(permute=True)`), make
    units (verbaliser x prompt seed): each verbaliser's row has its prompt seeds as its seeds
    (its interval is over them where there are two or more), and with two verbalisers or more a
    pooled row `<name>-pooled` has every unit as a seed: its interval is over the units."""
    from ..checks import positive_int
    from .trained_elsewhere import check_name

    positive_int("--batch-size", batch_size, "prompts per forward pass")
    if sequences is not None:
        positive_int("--sequences", sequences, "evaluation sequences; default: the preset's")
    specs = [verbaliser] if isinstance(verbaliser, str) else list(verbaliser)
    if not specs:
        raise ValueError("--verbaliser: at least one (rule: integers, letters, words or a JSON file)")
    folder = resolve_folder(model)
    t = resolve_lm_task(task, preset)[0]
    class_symbols(t)  # refused before the model loads
    units = _units_of(specs, t.vocab_size, verbaliser_seed, prompt_seeds)
    base = "-".join(os.path.basename(os.path.normpath(folder)).split())  # a leaderboard name has no spaces
    names = _row_names(base, name, specs, [u[0] for u in units])
    pooled_name = f"{name or f'lm-{base}'}-pooled"
    for n in names + ([pooled_name] if len(specs) > 1 else []):
        check_name(n)
    lm, tok = load_lm(folder, device, dtype)
    for verbs in units:  # every rendering tokenised (and refused) before anything is read
        for v in verbs:
            tokenise(tok, v, class_symbols(t))
    seeds = list(prompt_seeds) if prompt_seeds is not None else [0]
    w, k = weights_hash(folder), tokenizer_hash(folder)
    extra = {"folder": os.path.abspath(folder)}
    readers: list[list[LMPredictions]] = []
    records: list = []
    many = len(specs) > 1 or len(seeds) > 1
    for verbs, row_name in zip(units, names):
        given = [LMPredictions(lm, tok, v, t, seed=s, batch_size=batch_size, progress=progress,
                               label=f"{v.kind} seed {s}: " if many else "") for v, s in zip(verbs, seeds)]
        readers.append(given)
        if len(given) == 1:
            records += score_given(given[0], task, lm_identity(w, k, dtype, verbaliser=verbs[0].describe()),
                                   name=row_name, preset=preset, device=device, sequences=sequences, db=db,
                                   store=store, extra=extra)
        else:
            ident = lm_identity(w, k, dtype, verbalisers=[v.describe() for v in verbs], prompt_seeds=seeds)
            records += score_given(UnitPredictions(given, seeds), task, ident, name=row_name, preset=preset,
                                   device=device, sequences=sequences, db=db, store=store, extra=extra)
    if len(specs) > 1:
        every = [g for given in readers for g in given]
        unit_list = [{"verbaliser": g.verbaliser.describe(), "prompt_seed": s} for given in readers
                     for g, s in zip(given, seeds)]
        ident = lm_identity(w, k, dtype, units=unit_list)
        records += score_given(UnitPredictions(every, range(len(every))), task, ident, name=pooled_name, preset=preset,
                               device=device, sequences=sequences, db=db, store=store, extra=extra)
    return records


def score_given(given: GivenPredictions, task, ident: dict, *, name: str, preset: str = "quick",
                device: str = "cpu", sequences: int | None = None, db: str | None = None, store: bool = True,
                extra: dict | None = None) -> list:
    """The row of an LM already wrapped (`score_lm` after loading; a test's fake LM): scored by
    `rows.score_run` on the task's evaluation sets, keyed by `ident` (`lm_identity`), the outside
    mass per set in `config["llm"]` (a `UnitPredictions`: each record its own unit's); stored
    unless `store` is False."""
    from ..store.database import read_records, write_records
    from .evaluate import max_eval_len
    from .rows import score_run
    from .trained_elsewhere import scored_result, scored_spec

    t, label, lengths, n_seq, scored = resolve_lm_task(task, preset)
    n = sequences or n_seq
    run_id = "llm-" + hashlib.sha256(json.dumps([ident, label, n, name], sort_keys=True).encode()).hexdigest()[:12]
    code = {"task": t.code(), "model": {"contents": f"weights {ident['weights']} tokenizer {ident['tokenizer']}"}}
    spec = scored_spec(t, label, lengths, scored, n, arch=name, model=ident, max_len=max_eval_len(t, lengths, scored),
                       device_type=torch.device(device).type, code=code)
    result = scored_result(spec, run_id, given, list(given.seeds), 0, preset=preset, name=name)
    records = score_run(result, db=db, device=device, write=False)
    members = given.units if isinstance(given, UnitPredictions) else [given]
    # the records may share one config dict: each gets its own, with its own unit's outside mass
    records = [dataclasses.replace(r, config={**r.config, "llm": {
        **ident, "outside_mass": getattr(members[r.member], "outside", []), **(extra or {})}}) for r in records]
    if store:
        write_records(records, db)
        return read_records(db, where="run_id = ?", params=(run_id,))
    return records


# ---------------------------------------------------------------- a bayesbench hf:gpt2 model as a causal LM

def export_gpt2(model, task: Task, folder: str) -> str:
    """Save an `hf:gpt2` model of bayesbench (`models.hf.HFSequenceModel` on a GPT-2 backbone) as a
    Hugging Face causal LM in `folder` that `bayesbench llm --verbaliser integers` reads back: the
    round trip that checks the text path reads the right positions (its score equals the direct one).

    The tokenizer is a WordLevel one whose id i is the word "i" (symbol i), with no BOS, so the
    prompt's ids are the tunnel's tokens. The LM head's row of class c's symbol (`class_symbols`) is
    the class head's row c; other rows are zero. GPT-2's LM head has no bias: the class head's bias b
    is folded into the final LayerNorm's bias beta (logits W(g*n + beta') = W(g*n + beta) + b with
    beta' = beta + pinv(W) b, exact when W's C rows are independent, C <= width), refused otherwise."""
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    from ..models.hf import HFSequenceModel

    if not isinstance(model, HFSequenceModel) or type(model.backbone).__name__ != "GPT2Model":
        raise ValueError(f"export: an hf:gpt2 model of bayesbench (models/hf.py), got {type(model).__name__} (rule: "
                         "the GPT-2 backbone's LM head is what a causal LM has)")
    if model.header is not None:
        raise ValueError("export: the model reads a continuous header (rule: only tunnels of symbols become text)")
    classes = class_symbols(task)
    W = model.head.weight.detach().double()
    b = model.head.bias.detach().double()
    shift = torch.linalg.pinv(W) @ b
    if not torch.allclose(W @ shift, b, atol=1e-6):
        raise ValueError("export: the class head's bias cannot be folded into the final LayerNorm (rule: its C rows "
                         "are independent)")
    cfg = GPT2Config.from_dict(model.backbone.config.to_dict())
    cfg.tie_word_embeddings = False
    lm = GPT2LMHeadModel(cfg)
    lm.transformer.load_state_dict(model.backbone.state_dict())
    with torch.no_grad():
        lm.transformer.ln_f.bias.copy_((lm.transformer.ln_f.bias.double() + shift).float())
        lm.lm_head.weight.zero_()
        lm.lm_head.weight[classes] = model.head.weight.detach().float()
    os.makedirs(folder, exist_ok=True)
    lm.save_pretrained(folder)
    from tokenizers import Tokenizer, models, pre_tokenizers

    core = Tokenizer(models.WordLevel(vocab={str(i): i for i in range(task.vocab_size)}, unk_token="0"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=core).save_pretrained(folder)
    return folder
