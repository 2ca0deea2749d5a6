"""A tiny causal LM and tokenizer built here, saved with save_pretrained (no download): the
fixtures of tests/scoring/test_llm.py."""

from __future__ import annotations

import os

import torch


def word_tokenizer(words: list[str], folder: str, *, bos: bool = True):
    """A WordLevel tokenizer over `words` (plus [UNK], and <s> as BOS when `bos`), split on
    whitespace, saved into `folder`; returns it."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["[UNK]"] + (["<s>"] if bos else [])
    vocab = {w: i for i, w in enumerate(specials + list(words))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]", bos_token="<s>" if bos else None)
    tok.save_pretrained(folder)
    return tok


def tiny_gpt2(folder: str, vocab_size: int, *, seed: int = 0, n_positions: int = 128):
    """A randomly initialised one-layer GPT-2 saved into `folder` (safetensors); returns it."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=vocab_size, n_positions=n_positions,
                     bos_token_id=0, eos_token_id=0)
    lm = GPT2LMHeadModel(cfg)
    os.makedirs(folder, exist_ok=True)
    lm.save_pretrained(folder)
    return lm
