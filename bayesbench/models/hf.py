"""Hugging Face `transformers` architectures as outside models: `hf:gpt2`, `hf:llama`, `hf:mamba`.

An optional extra (`pip install bayesbench[hf]`). Each factory builds a RANDOMLY INITIALISED
backbone from a config (`GPT2Model(config)` etc.: no weights, no tokenizer, nothing
downloaded) sized like the preset's transformer (layers, width, heads, FFN width), with
dropout off, eager attention (written-out softmax: it vmaps, where torch's CPU flash kernel
has no batching rule), the task's vocabulary and the spec's max_len as its position range, and wraps it:
tokens go through the backbone's own token embedding, the HMM's header rows (when the task has
them) are projected and added at positions 0..H-1 as in the zoo's `InputEmbedding`, the
embeddings enter the backbone as `inputs_embeds`, and a linear head maps its final hidden
states to the task's classes. The backbone's initialisation is its own (`post_init`), drawn
from torch's global RNG, which the adapter seeds per member.

Mamba has no heads and no FFN: it gets the layers and width (and `d_state`, default 16, expand
2); its parameter count differs from the transformer's and the run reports the ratio.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Callable

import torch
from torch import Tensor, nn

from ..checks import positive_int
from .base import TaskShape

if TYPE_CHECKING:  # an optional extra: imported when a factory runs (_transformers)
    from transformers import PreTrainedModel

KINDS = ("gpt2", "llama", "mamba")


def _transformers():
    try:
        import transformers
    except ImportError:
        raise ValueError("the hf: models need the 'transformers' package: pip install 'bayesbench[hf]'") from None
    return transformers


class HFSequenceModel(nn.Module):
    """tokens [B, L] (+ header [B, H, D]) -> logits [B, L, C] through a transformers backbone."""

    def __init__(self, backbone: PreTrainedModel, spec: TaskShape, d_model: int) -> None:
        super().__init__()
        self.backbone = backbone
        self.header = nn.Linear(spec.header_dim, d_model, bias=False) if spec.header_dim > 0 else None
        self.head = nn.Linear(d_model, spec.num_classes)

    def forward(self, tokens: Tensor, header: Tensor | None = None) -> Tensor:
        x = self.backbone.get_input_embeddings()(tokens)
        if self.header is not None:
            if header is None:
                raise ValueError("header must be given: this model was built for a task with a continuous header")
            h = self.header(header.to(x.dtype))
            x = torch.cat([x[:, : h.shape[1]] + h, x[:, h.shape[1]:]], dim=1)
        hidden = self.backbone(inputs_embeds=x, use_cache=False).last_hidden_state
        return self.head(hidden)


def _sizes(**sizes) -> dict[str, int]:
    return {k: positive_int(k, v) for k, v in sizes.items()}


def build_gpt2(spec: TaskShape, n_layer: int = 2, n_head: int = 2, d_model: int = 64,
               d_ffn: int = 256) -> HFSequenceModel:
    """GPT-2 (learned positions, pre-norm, GELU FFN) of the given sizes."""
    t = _transformers()
    z = _sizes(n_layer=n_layer, n_head=n_head, d_model=d_model, d_ffn=d_ffn)
    cfg = t.GPT2Config(vocab_size=spec.vocab_size, n_positions=spec.max_len, n_embd=z["d_model"],
                       n_layer=z["n_layer"], n_head=z["n_head"], n_inner=z["d_ffn"], resid_pdrop=0.0,
                       embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=None, eos_token_id=None, use_cache=False,
                       attn_implementation="eager")
    return HFSequenceModel(t.GPT2Model(cfg), spec, d_model)


def build_llama(spec: TaskShape, n_layer: int = 2, n_head: int = 2, d_model: int = 64,
                d_ffn: int = 256) -> HFSequenceModel:
    """Llama (rotary positions, RMSNorm, SwiGLU FFN) of the given sizes."""
    t = _transformers()
    z = _sizes(n_layer=n_layer, n_head=n_head, d_model=d_model, d_ffn=d_ffn)
    cfg = t.LlamaConfig(vocab_size=spec.vocab_size, max_position_embeddings=spec.max_len, hidden_size=z["d_model"],
                        intermediate_size=z["d_ffn"], num_hidden_layers=z["n_layer"], num_attention_heads=z["n_head"],
                        num_key_value_heads=z["n_head"], attention_dropout=0.0, bos_token_id=None,
                        eos_token_id=None, pad_token_id=None, use_cache=False, attn_implementation="eager")
    return HFSequenceModel(t.LlamaModel(cfg), spec, d_model)


def build_mamba(spec: TaskShape, n_layer: int = 2, d_model: int = 64, d_state: int = 16) -> HFSequenceModel:
    """Mamba (selective state space, no attention) with the given layers and width."""
    t = _transformers()
    z = _sizes(n_layer=n_layer, d_model=d_model, d_state=d_state)
    cfg = t.MambaConfig(vocab_size=spec.vocab_size, hidden_size=z["d_model"], num_hidden_layers=z["n_layer"],
                        state_size=z["d_state"], expand=2, bos_token_id=None, eos_token_id=None, pad_token_id=None,
                        use_cache=False)
    return HFSequenceModel(t.MambaModel(cfg), spec, d_model)


_BUILDERS: dict[str, Callable[..., HFSequenceModel]] = {"gpt2": build_gpt2, "llama": build_llama, "mamba": build_mamba}


def hf_factory(kind: str) -> Callable[..., HFSequenceModel]:
    """The factory of `hf:<kind>`; checks that transformers is importable."""
    if kind not in _BUILDERS:
        raise ValueError(f"model 'hf:{kind}': unknown Hugging Face architecture; available: "
                         + ", ".join(f"hf:{k}" for k in KINDS))
    _transformers()
    return _BUILDERS[kind]


def hf_sizes(kind: str, transformer_cfg: dict, d_state: int | None = None) -> dict:
    """The sizes `hf:<kind>` takes from a preset's transformer config (its named preset resolved):
    layers, heads, width and FFN width; Mamba takes layers, width and `d_state`."""
    from .transformer import transformer_config

    cfg = transformer_config(**{k: v for k, v in transformer_cfg.items() if k != "attention"})
    if kind == "mamba":
        return {"n_layer": cfg.n_layer, "d_model": cfg.d_model, **({"d_state": d_state} if d_state else {})}
    return {"n_layer": cfg.n_layer, "n_head": cfg.n_head, "d_model": cfg.d_model, "d_ffn": cfg.d_ffn}


def preset_sizes(kind: str, models: Mapping[str, dict]) -> dict:
    """The sizes `hf:<kind>` takes from a preset's model table (arch -> config): those of its
    transformer (`hf_sizes`), and for Mamba the table's Mamba `d_state` when it sets one."""
    if "transformer" not in models:
        raise ValueError(f"model 'hf:{kind}' takes its sizes from the preset's transformer, which this task does not "
                         f"configure; configured: {', '.join(sorted(models))}")
    return hf_sizes(kind, models["transformer"], models.get("mamba", {}).get("d_state"))
