"""The geometry of a trained transformer (Paper I, arXiv 2512.22471, section 5), per ensemble member.

- Key orthogonality (section 5.1): the layer-0 key of each hypothesis token (averaged over its
  occurrences in the evaluation set), per head; the cosine matrix over those tokens and its mean
  off-diagonal |cos|. 0 is an orthogonal frame; random vectors in d dimensions give about
  sqrt(2 / (pi d)); the same model at initialisation is the baseline. A component shared by
  every key (the key bias, say) shifts all of a query's scores equally and so cannot change
  attention: the *centred* variant subtracts the keys' mean first (n centred vectors of a regular
  simplex, the most separated frame, have cos = -1 / (n - 1)).
- Attention entropy per layer and head (QK sharpening with depth): mean over the scored
  positions of H(alpha_i) = -sum_j alpha_ij log2 alpha_ij (bits), and its ratio to log2(i + 1),
  the entropy of uniform attention over the i + 1 visible keys.
- Value manifold: per layer, PCA of the attention outputs g_i = sum_j alpha_ij v_j (all heads,
  before the output projection) at the scored positions; the variance share of PC1 and the
  Spearman correlation of the PC1 coordinate with the exact posterior entropy at that position.
- Ablations (Paper I figures 3 and 4): entropy MAE (bits) against the exact posterior with one
  head's output zeroed (before the output projection) or one whole block skipped (attention and
  FFN), and its ratio to the intact model's.

`instrumented_forward` re-computes the transformer's forward pass with eager attention and hands
back every layer's q, k, v, alpha and g; with no ablation it equals the model's own forward
(`tests/dynamics/test_geometry.py`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from ...models.attention import attention_weights
from ...models.transformer import Transformer
from ...scoring.metrics import entropy_bits, score


@dataclass
class Trace:
    """Per attention layer: q, k, v [E, B, H, L, Dh], alpha [E, B, H, L, L], g [E, B, L, d]."""

    logits: Tensor
    q: dict[int, Tensor] = field(default_factory=dict)
    k: dict[int, Tensor] = field(default_factory=dict)
    v: dict[int, Tensor] = field(default_factory=dict)
    alpha: dict[int, Tensor] = field(default_factory=dict)
    g: dict[int, Tensor] = field(default_factory=dict)


def check_transformer(model) -> Transformer:
    """The geometry reads attention: refuse models without it, naming what was given."""
    if not isinstance(model, Transformer):
        raise ValueError(f"geometry needs a transformer (an architecture with attention); got "
                         f"{type(model).__name__}, which has no attention heads")
    if all(b.attn is None for b in model.blocks):
        raise ValueError("geometry needs attention: every block of this transformer has attention removed")
    return model


@torch.no_grad()
def instrumented_forward(model: Transformer, tokens: Tensor, header: Tensor | None = None, *,
                         zero_heads: tuple[tuple[int, int], ...] = (), skip_layers: tuple[int, ...] = (),
                         keep: bool = True) -> Trace:
    """The transformer's forward pass written out, keeping every layer's internals (`keep`).

    zero_heads: (layer, head) pairs whose attention output is zeroed before the output projection;
    skip_layers: blocks left out entirely (x passes through unchanged).
    """
    check_transformer(model)
    model.check_inputs(tokens, header)
    E, B, L = tokens.shape
    trace = Trace(logits=torch.empty(0))
    x = model.embed(tokens, header)
    for i, block in enumerate(model.blocks):
        if i in skip_layers:
            continue
        if block.attn is not None:
            att = block.attn
            H, d = att.n_head, att.d_model
            qkv = att.qkv(block.ln_1(x)).view(E, B, L, 3, H, d // H).permute(3, 0, 1, 4, 2, 5)
            q, k, v = qkv[0], qkv[1], qkv[2]  # [E, B, H, L, Dh]
            alpha = attention_weights(q, k, causal=True, scale=1 / math.sqrt(q.shape[-1]))
            y = alpha @ v
            for layer, head in zero_heads:
                if layer == i:
                    y[:, :, head] = 0.0
            g = y.permute(0, 1, 3, 2, 4).reshape(E, B, L, d)
            if keep:
                trace.q[i], trace.k[i], trace.v[i], trace.alpha[i], trace.g[i] = q, k, v, alpha, g
            x = x + att.proj(g)
        x = x + block.mlp(block.ln_2(x))
    trace.logits = model.head(model.ln_f(x))
    return trace


# ---------------------------------------------------------------- the quantities

def offdiag_abs_cos(vectors: Tensor) -> tuple[Tensor, Tensor]:
    """vectors [..., n, d] -> (cosine matrix [..., n, n], mean off-diagonal |cos| [...])."""
    u = F.normalize(vectors.double(), dim=-1)
    cos = u @ u.transpose(-1, -2)
    n = cos.shape[-1]
    off = ~torch.eye(n, dtype=torch.bool, device=cos.device)
    return cos, cos.abs()[..., off].mean(-1)


def token_keys(trace: Trace, tokens: Tensor, hyp: list[int], layer: int = 0) -> Tensor:
    """Mean layer-`layer` key of each hypothesis token over its occurrences: [E, H, n_tokens, Dh]."""
    k = trace.k[layer]  # [E, B, H, L, Dh]
    out = []
    for t in hyp:
        where = (tokens == t)  # [E, B, L]
        if not where.any():
            raise ValueError(f"hypothesis token {t} never occurs in the evaluation sequences")
        w = where.unsqueeze(2).unsqueeze(-1).to(k.dtype)  # [E, B, 1, L, 1]
        out.append((k * w).sum((1, 3)) / where.sum((1, 2)).view(-1, 1, 1).to(k.dtype))
    return torch.stack(out, 2)


@torch.no_grad()
def static_keys(model: Transformer, hyp: list[int], layer: int = 0) -> Tensor:
    """Layer-`layer` keys of the token embeddings alone (no position, no context): [E, H, n, Dh].
    Only defined for the first block, which reads the embeddings directly."""
    att, ln = model.blocks[layer].attn, model.blocks[layer].ln_1
    E, H, d = model.ensemble, att.n_head, att.d_model
    emb = model.embed.tok.weight[:, hyp].unsqueeze(1)  # [E, 1, n, d]
    k = att.qkv(ln(emb))[..., d:2 * d]  # [E, 1, n, d]
    return k.view(E, len(hyp), H, d // H).permute(0, 2, 1, 3)


def attention_entropy(alpha: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """alpha [E, B, H, L, L], mask [B, L] -> (mean entropy bits [E, H], mean ratio to log2(i+1) [E, H]);
    position 0 (one visible key, entropy 0 by force) is left out of the ratio."""
    h = entropy_bits(alpha.double())  # [E, B, H, L]
    m = mask.view(1, mask.shape[0], 1, -1).double()
    L = alpha.shape[-1]
    cap = torch.log2(torch.arange(1, L + 1, dtype=torch.float64))
    mr = m * (cap > 0)
    ratio = torch.where(cap > 0, h / cap.clamp(min=1e-12), torch.zeros_like(h))
    return (h * m).sum((1, 3)) / m.sum((1, 3)), (ratio * mr).sum((1, 3)) / mr.sum((1, 3))


def spearman(a: Tensor, b: Tensor) -> float:
    """Spearman rank correlation (ties get average ranks)."""
    from scipy.stats import spearmanr

    return float(spearmanr(a.double().cpu().numpy(), b.double().cpu().numpy()).statistic)


def value_pca(g: Tensor, mask: Tensor, posterior_entropy: Tensor) -> dict:
    """g [B, L, d] of one member; PCA over the scored positions. Returns the variance shares of
    the first 3 PCs, the PC1 coordinates and Spearman(PC1, posterior entropy)."""
    pts = g[mask].double()
    pts = pts - pts.mean(0)
    _, s, vh = torch.linalg.svd(pts, full_matrices=False)
    var = s.pow(2) / s.pow(2).sum()
    pc1 = pts @ vh[0]
    return {"var": [float(v) for v in var[:3]], "pc1": pc1, "spearman": spearman(pc1, posterior_entropy[mask])}


def entropy_mae(logits: Tensor, posterior: Tensor, mask: Tensor) -> Tensor:
    """Entropy MAE (bits) of each member [E] against the exact posterior on the scored positions."""
    return torch.tensor([score(posterior.double(), mask, logits=logits[e].double(), nonfinite="nan").entropy_mae.mean
                         for e in range(logits.shape[0])])


def hypothesis_tokens(task) -> tuple[list[int], str]:
    """The tokens that name the task's hypotheses, and what they are, in words."""
    if task.name == "bijection":
        return list(range(task.V, 2 * task.V)), f"the {task.V} value tokens (the hypotheses pi(x) = y)"
    if task.name == "hmm" and getattr(task, "encoding", None) == "rows":
        return list(range(task.V, task.V + task.S)), f"the {task.S} transition-row slot tokens (one per hidden state)"
    if task.name in ("sticky", "markov"):
        return list(range(task.V)), f"the {task.V} symbols"
    return list(range(task.vocab_size)), "every token"


@dataclass
class Geometry:
    """Every quantity, per member (seed) e. Shapes in the comments."""

    seeds: list[int]
    hyp_tokens: list[int]
    hyp_words: str
    key_cos: Tensor  # [E, H, n, n] layer 0
    key_offdiag: Tensor  # [E, H]
    key_offdiag_concat: Tensor  # [E] all heads' keys concatenated
    key_offdiag_init: Tensor  # [E, H] the same at initialisation
    key_offdiag_static: Tensor  # [E, H] keys of the token embeddings alone (no position)
    key_offdiag_centred: Tensor  # [E, H] keys minus their mean over the hypothesis tokens
    attn_entropy: dict[int, Tensor]  # layer -> [E, H] bits
    attn_entropy_ratio: dict[int, Tensor]  # layer -> [E, H]
    value_var: dict[int, list[list[float]]]  # layer -> per member, variance share of PC1..3
    value_spearman: dict[int, list[float]]  # layer -> per member
    value_points: tuple[Tensor, Tensor] | None  # (PC1, posterior entropy) of member 0, last attention layer
    intact_mae: Tensor  # [E]
    head_mae: dict[tuple[int, int], Tensor]  # (layer, head) -> [E]
    layer_mae: dict[int, Tensor]  # layer -> [E]


def measure(model: Transformer, batch, task, init_model: Transformer | None = None) -> Geometry:
    """All of section 5's quantities for every member of `model` on the evaluation `batch`."""
    check_transformer(model)
    model.eval()
    E = model.ensemble
    tokens = batch.tokens.unsqueeze(0).expand(E, *batch.tokens.shape)
    header = None if batch.header is None else batch.header.unsqueeze(0).expand(E, *batch.header.shape)
    mask, post = batch.mask, batch.posterior
    trace = instrumented_forward(model, tokens, header)
    attn_layers = sorted(trace.alpha)
    first = attn_layers[0]
    hyp, words = hypothesis_tokens(task)
    keys = token_keys(trace, tokens, hyp, first)  # [E, H, n, Dh]
    cos, off = offdiag_abs_cos(keys)
    _, off_centred = offdiag_abs_cos(keys - keys.mean(2, keepdim=True))
    _, off_cat = offdiag_abs_cos(keys.permute(0, 2, 1, 3).reshape(E, len(hyp), -1))
    if init_model is not None:
        init_model.eval()
        _, off_init = offdiag_abs_cos(token_keys(instrumented_forward(init_model, tokens, header), tokens, hyp, first))
    else:
        off_init = torch.full_like(off, float("nan"))
    off_static = (offdiag_abs_cos(static_keys(model, hyp, first))[1] if first == 0
                  else torch.full_like(off, float("nan")))
    ent, ratio = {}, {}
    for i in attn_layers:
        ent[i], ratio[i] = attention_entropy(trace.alpha[i], mask)
    h_post = entropy_bits(post.double())
    var, rho, points = {}, {}, None
    for i in attn_layers:
        res = [value_pca(trace.g[i][e], mask, h_post) for e in range(E)]
        var[i], rho[i] = [r["var"] for r in res], [r["spearman"] for r in res]
        if i == attn_layers[-1]:
            points = (res[0]["pc1"], h_post[mask])
    intact = entropy_mae(trace.logits, post, mask)
    heads = {(i, h): entropy_mae(instrumented_forward(model, tokens, header, zero_heads=((i, h),), keep=False).logits,
                                 post, mask)
             for i in attn_layers for h in range(model.blocks[i].attn.n_head)}
    layers = {i: entropy_mae(instrumented_forward(model, tokens, header, skip_layers=(i,), keep=False).logits,
                             post, mask)
              for i in range(len(model.blocks))}
    return Geometry(list(getattr(model, "seeds", [])) or list(range(E)), hyp, words, cos, off, off_cat, off_init,
                    off_static, off_centred, ent, ratio, var, rho, points, intact, heads, layers)
