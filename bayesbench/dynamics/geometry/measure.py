"""The geometry of a trained transformer (Paper I, arXiv 2512.22471, section 5), per ensemble member.

- Key orthogonality (section 5.1): the layer-0 key of each token of a group (averaged over its
  occurrences in the evaluation set), per head; the cosine matrix over those tokens and its mean
  off-diagonal |cos|. Groups: the task's hypotheses (the bijection's value tokens) and, on the
  bijection, its key (input) tokens. 0 is an orthogonal frame; random directions in d_head
  dimensions (d_model / n_head of the model) give `random_abs_cos(d_head)`, about
  sqrt(2 / (pi d_head)); the same model at initialisation is the baseline. A component shared by
  every key (the key bias, say) shifts all of a query's scores equally and so cannot change
  attention: the *centred* variant subtracts the keys' mean first (n centred vectors of a regular
  simplex, the most separated frame, have cos = -1 / (n - 1)).
- Attention entropy per layer and head (QK sharpening with depth): mean over the scored
  positions of H(alpha_i) = -sum_j alpha_ij log2 alpha_ij (bits), and its ratio to log2(i + 1),
  the entropy of uniform attention over the i + 1 visible keys; beside it the authors' q-k
  cosine (`qk_cosine`).
- Value manifold: per layer, PCA of the attention outputs g_i = sum_j alpha_ij v_j (all heads,
  before the output projection) at the scored positions, standardised and sign-aligned as the
  authors do (`value_pca`); the variance share of PC1 and Spearman(PC1, exact posterior entropy),
  with its chance level. Position confounds it: where the posterior entropy is a function of the
  position (the paper-text bijection) an untrained model's PC1, which tracks position, already
  correlates with it. So also the *within-position* (partial) correlation of PC1 and the entropy
  (ranks, each position's mean removed; `bayesbench.stats.within_group_correlation`) against its
  null, the entropies permuted among the sequences at each position (which keeps position and
  breaks everything else), and |Spearman(PC1, position)|; NaN where the entropy does not vary
  within positions.
- Ablations (Paper I figures 3 and 4): both entropy errors (bits; per sequence and positional,
  `ablation_errors`) against the exact posterior with one head's output zeroed (before the
  output projection) or one whole block skipped (attention and FFN), and their ratios to the
  intact model's; the head errors also on each half of the evaluation sequences, so that heads
  ranked on one half are compared on the other (the quotient of the top two of one ranking is
  >= 1 by construction; ranked on the other half its null is 1).

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
from ...models.layers import EnsembleLayerNorm
from ...models.transformer import CausalSelfAttention, Transformer
from ...scoring.metrics import entropy_bits, score
from ..qkv import head_qkv


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


def _attention(model: Transformer, layer: int) -> tuple[CausalSelfAttention, EnsembleLayerNorm]:
    """Block `layer`'s attention and the LayerNorm before it; an error when the block has none."""
    block = model.typed_blocks()[layer]
    if block.attn is None or block.ln_1 is None:
        raise ValueError(f"layer {layer} has no attention (attn_off_top={model.cfg.attn_off_top})")
    return block.attn, block.ln_1


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
    for i, block in enumerate(model.typed_blocks()):
        if i in skip_layers:
            continue
        if block.attn is not None and block.ln_1 is not None:  # both or neither
            att = block.attn
            d = att.d_model
            q, k, v = head_qkv(att, block.ln_1(x))  # [E, B, H, L, Dh]
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


def random_abs_cos(d: int) -> float:
    """E|cos| of two independent uniformly random directions in d dimensions:
    Gamma(d/2) / (sqrt(pi) Gamma((d + 1)/2)), about sqrt(2 / (pi d)) for large d."""
    if isinstance(d, bool) or not isinstance(d, int) or d < 2:
        raise ValueError(f"d must be an integer >= 2, got {d!r}")
    return math.exp(math.lgamma(d / 2) - math.lgamma((d + 1) / 2)) / math.sqrt(math.pi)


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
    att, ln = _attention(model, layer)
    E, H, d = model.ensemble, att.n_head, att.d_model
    emb = model.embed.tok.weight[:, hyp].unsqueeze(1)  # [E, 1, n, d]
    k = att.qkv(ln(emb))[..., d:2 * d]  # [E, 1, n, d]
    return k.view(E, len(hyp), H, d // H).permute(0, 2, 1, 3)


def _member_mask(mask: Tensor) -> Tensor:
    """mask [B, L] (every member's) or [E, B, L] (each member's own) -> [E or 1, B, 1, L]."""
    return (mask.unsqueeze(0) if mask.dim() == 2 else mask).unsqueeze(2)


def attention_entropy(alpha: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """alpha [E, B, H, L, L], mask [B, L] or [E, B, L] -> (mean entropy bits [E, H], mean ratio to
    log2(i+1) [E, H]); position 0 (one visible key, entropy 0 by force) is left out of the ratio."""
    h = entropy_bits(alpha.double())  # [E, B, H, L]
    m = _member_mask(mask).double()
    L = alpha.shape[-1]
    cap = torch.log2(torch.arange(1, L + 1, dtype=torch.float64))
    mr = m * (cap > 0)
    ratio = torch.where(cap > 0, h / cap.clamp(min=1e-12), torch.zeros_like(h))
    return (h * m).sum((1, 3)) / m.sum((1, 3)), (ratio * mr).sum((1, 3)) / mr.sum((1, 3))


def qk_cosine(q: Tensor, k: Tensor, mask: Tensor, prior: Tensor) -> tuple[Tensor, Tensor]:
    """The authors' query-key alignment (their `qk_analysis.py qk-align`, Paper I section 5.1):
    cos(q_i, k_j) for each scored query i and each earlier position j marked in `prior` [L]
    (the bijection: the key positions). q, k [E, B, H, L, Dh], mask [B, L] ->
    (mean cos [E, H], mean over queries of max_j cos - mean_j cos [E, H]: how much one key stands out);
    mask [E, B, L]: each member's own."""
    cos = F.normalize(q.double(), dim=-1) @ F.normalize(k.double(), dim=-1).transpose(-1, -2)  # [E, B, H, L, L]
    L = q.shape[-2]
    pos = torch.arange(L, device=q.device)
    use = (pos.view(1, -1) < pos.view(-1, 1)) & prior.view(1, -1)  # [L, L]: earlier marked positions
    n = use.sum(-1).double()  # [L]
    rows = _member_mask(mask) & (n > 0).view(1, 1, 1, L)  # [1 or E, B, 1, L]
    mean = torch.where(use, cos, 0.0).sum(-1) / n.clamp(min=1)
    peak = torch.where(use, cos, -math.inf).amax(-1)
    w = rows.double()
    total = w.sum((1, 3)).clamp(min=1)
    return (mean * w).sum((1, 3)) / total, (torch.where(rows, peak - mean, 0.0)).sum((1, 3)) / total


def prior_positions(task, L: int) -> Tensor:
    """Positions the q-k cosine compares a query with: the bijection's key positions, else all."""
    pos = torch.arange(L)
    if task.name == "bijection":
        return (pos % 2 == 0) & (pos < 2 * task.L)
    return torch.ones(L, dtype=torch.bool)


def spearman(a: Tensor, b: Tensor) -> float:
    """Spearman rank correlation (ties get average ranks)."""
    from scipy.stats import spearmanr

    return float(spearmanr(a.double().cpu().numpy(), b.double().cpu().numpy()).statistic)


def value_pca(g: Tensor, mask: Tensor, posterior_entropy: Tensor, seed: int = 0) -> dict:
    """PCA of one member's attention outputs g [B, L, d] at the scored positions, as the authors'
    `analyze_value_manifold` does it: every feature standardised (zero mean, unit variance; constant
    features dropped), then PC1's sign chosen so that Spearman(PC1, posterior entropy) >= 0.

    Returns the standardised variance shares of the first 3 PCs ("var"), the unstandardised ones
    ("var_raw"), the aligned PC1 coordinates, the aligned Spearman ("spearman" = |rho|, the
    authors' number), and its chance level "spearman_null": the same aligned |rho| against the
    posterior entropies in a random order (a sign-aligned correlation is never negative).

    The within-position test ("partial", "partial_null") does not read the global PC1: where the
    position moves the outputs most, the global PC1 is the position's axis and what varies within
    a position is left to the later components (issue 44). It reads PC1 of the *within-position
    residuals* (each position's mean output removed from the standardised outputs, then a PCA:
    "pc1_within", its share of the residual variance "var_within"), the direction along which the
    outputs vary most among the sequences at one position."""
    pts = g[mask].double()
    pts = pts - pts.mean(0)
    _, s_raw, _ = torch.linalg.svd(pts, full_matrices=False)
    sd = pts.std(0)
    z = pts[:, sd > 1e-12] / sd[sd > 1e-12]
    _, s, vh = torch.linalg.svd(z, full_matrices=False)
    var = s.pow(2) / s.pow(2).sum()
    h = posterior_entropy[mask]
    pc1 = z @ vh[0]
    rho = spearman(pc1, h)
    if rho < 0:
        pc1, rho = -pc1, -rho
    perm = torch.randperm(h.numel(), generator=torch.Generator().manual_seed(seed))
    null = abs(spearman(pc1, h[perm]))
    position = torch.arange(mask.shape[-1]).expand(mask.shape)[mask]
    pc1_within, var_within = within_position_pc1(z, position)
    # entropies equal to 1e-9 bits are equal: the oracle's float rounding (1e-16) must not rank them
    partial, partial_null = within_position(pc1_within, torch.round(h * 1e9) / 1e9, position, seed)
    return {"var": [float(v) for v in var[:3]], "var_raw": [float(v) for v in (s_raw.pow(2) / s_raw.pow(2).sum())[:3]],
            "pc1": pc1, "spearman": rho, "spearman_null": null, "position": abs(spearman(pc1, position)),
            "partial": partial, "partial_null": partial_null, "pc1_within": pc1_within, "var_within": var_within}


def within_position_pc1(z: Tensor, position: Tensor) -> tuple[Tensor, float]:
    """The direction of PC1 of the within-position residuals of z [n, d] (each position's mean row
    removed), as the coordinates [n] of z itself along it (the within-position correlation then
    removes the positions' means of the ranks, `stats.within_group_correlation`), and its share
    of the residual variance (NaN when nothing varies within a position). Its sign is arbitrary:
    `within_position` reads |correlation|."""
    pos = position.long()
    n_pos = int(pos.max()) + 1 if pos.numel() else 0
    sums = torch.zeros(n_pos, z.shape[1], dtype=z.dtype).index_add_(0, pos, z)
    counts = torch.zeros(n_pos, dtype=z.dtype).index_add_(0, pos, torch.ones_like(pos, dtype=z.dtype))
    resid = z - (sums / counts.clamp(min=1).unsqueeze(1))[pos]
    _, s, vh = torch.linalg.svd(resid, full_matrices=False)
    total = float(s.pow(2).sum())
    if total <= 1e-20:
        return torch.zeros(z.shape[0], dtype=z.dtype), math.nan
    return z @ vh[0], float(s[0].pow(2)) / total


PARTIAL_NULL_DRAWS = 5


def within_position(pc1: Tensor, h: Tensor, position: Tensor, seed: int = 0) -> tuple[float, float]:
    """(|within-position Spearman correlation of pc1 and h|, its null: the mean of the same over
    `PARTIAL_NULL_DRAWS` permutations of h among the items of each position); NaN when h does not
    vary within positions."""
    from ...stats import within_group_correlation, within_group_permutation

    x, y, g = pc1.tolist(), h.tolist(), position.tolist()
    r = within_group_correlation(x, y, g)
    if not math.isfinite(r):
        return math.nan, math.nan
    null = [abs(within_group_correlation(x, within_group_permutation(y, g, seed * 1000 + k), g))
            for k in range(PARTIAL_NULL_DRAWS)]
    return abs(r), sum(null) / len(null)


def entropy_mae(logits: Tensor, posterior: Tensor, mask: Tensor) -> Tensor:
    """Entropy MAE (bits) of each member [E] against the exact posterior on the scored positions."""
    return ablation_errors(logits, posterior, mask)[0]


ERRORS = ("entropy_mae", "entropy_mae_positional")


def ablation_errors(logits: Tensor, posterior: Tensor, mask: Tensor) -> Tensor:
    """[2, E]: each member's entropy MAE per sequence and positional entropy MAE (bits;
    scoring.metrics), against the exact posterior on the scored positions. posterior [B, L, C] and
    mask [B, L] are every member's, or [E, B, L, C] and [E, B, L] each member's own (per-seed sets)."""
    own = posterior.dim() == logits.dim()
    out = []
    for e in range(logits.shape[0]):
        p, m = (posterior[e], mask[e]) if own else (posterior, mask)
        sc = score(p.double(), m, logits=logits[e].double(), nonfinite="nan")
        out.append([sc.entropy_mae.mean, sc.entropy_mae_positional.mean])
    return torch.tensor(out, dtype=torch.float64).T


def hypothesis_tokens(task) -> list[tuple[str, list[int], str]]:
    """Groups of tokens whose layer-0 keys are compared: (name, tokens, what they are, in words).
    The first group names the task's hypotheses; the bijection adds its key (input) tokens, the
    "input tokens" of Paper I section 5.1 (the authors' orthogonality script embeds 0..V-1)."""
    if task.name == "bijection":
        return [("value tokens", list(range(task.V, 2 * task.V)),
                 f"the {task.V} value tokens (the hypotheses pi(x) = y)"),
                ("key tokens", list(range(task.V)), f"the {task.V} key tokens (the inputs x)")]
    if task.name == "hmm" and getattr(task, "encoding", None) == "rows":
        return [("slot tokens", list(range(task.V, task.V + task.S)),
                 f"the {task.S} transition-row slot tokens (one per hidden state)")]
    if task.name in ("sticky", "markov"):
        return [("symbols", list(range(task.V)), f"the {task.V} symbols")]
    return [("all tokens", list(range(task.vocab_size)), "every token")]


@dataclass
class KeyFrame:
    """Layer-0 key orthogonality of one group of tokens, per member e."""

    name: str
    tokens: list[int]
    words: str
    cos: Tensor  # [E, H, n, n]
    offdiag: Tensor  # [E, H]
    concat: Tensor  # [E] all heads' keys concatenated
    init: Tensor  # [E, H] the same at initialisation
    static: Tensor  # [E, H] keys of the token embeddings alone (no position)
    centred: Tensor  # [E, H] keys minus their mean over the group's tokens
    init_centred: Tensor  # [E, H] the centred keys at initialisation


@dataclass
class Geometry:
    """Every quantity, per member (seed) e. Shapes in the comments."""

    seeds: list[int]
    d_head: int
    keys: list[KeyFrame]  # the first: the task's hypotheses
    attn_entropy: dict[int, Tensor]  # layer -> [E, H] bits
    attn_entropy_ratio: dict[int, Tensor]  # layer -> [E, H]
    qk_cos: dict[int, Tensor]  # layer -> [E, H] mean cos(q_i, k_j) over earlier key positions
    qk_contrast: dict[int, Tensor]  # layer -> [E, H] mean of max_j cos - mean_j cos
    value_var: dict[int, list[list[float]]]  # layer -> per member, standardised variance share of PC1..3
    value_var_raw: dict[int, list[list[float]]]  # the same without standardising
    value_spearman: dict[int, list[float]]  # layer -> per member, sign-aligned (>= 0)
    value_spearman_null: dict[int, list[float]]  # layer -> per member, against shuffled entropies
    value_position: dict[int, list[float]]  # layer -> per member, |Spearman(PC1, position)|
    value_partial: dict[int, list[float]]  # layer -> per member, |within-position Spearman(PC1, entropy)|
    value_partial_null: dict[int, list[float]]  # the same against entropies permuted within positions
    value_points: tuple[Tensor, Tensor] | None  # (PC1, posterior entropy) of member 0, last attention layer
    intact_mae: Tensor  # [2, E] (ERRORS)
    head_mae: dict[tuple[int, int], Tensor]  # (layer, head) -> [2, E]
    layer_mae: dict[int, Tensor]  # layer -> [2, E]
    intact_halves: Tensor | None = None  # [2 halves, 2, E]: the first and second half of the sequences
    head_halves: dict[tuple[int, int], Tensor] | None = None  # (layer, head) -> [2 halves, 2, E]


def _key_frames(model, init_model, trace, tokens, header, task, first: int) -> list[KeyFrame]:
    init_trace = None
    if init_model is not None:
        init_model.eval()
        init_trace = instrumented_forward(init_model, tokens, header)
    frames = []
    E = model.ensemble
    for name, hyp, words in hypothesis_tokens(task):
        keys = token_keys(trace, tokens, hyp, first)  # [E, H, n, Dh]
        cos, off = offdiag_abs_cos(keys)
        _, centred = offdiag_abs_cos(keys - keys.mean(2, keepdim=True))
        _, concat = offdiag_abs_cos(keys.permute(0, 2, 1, 3).reshape(E, len(hyp), -1))
        nan = torch.full_like(off, float("nan"))
        init, init_centred = nan, nan
        if init_trace is not None:
            k0 = token_keys(init_trace, tokens, hyp, first)
            init, init_centred = offdiag_abs_cos(k0)[1], offdiag_abs_cos(k0 - k0.mean(2, keepdim=True))[1]
        static = (offdiag_abs_cos(static_keys(model, hyp, first))[1] if first == 0
                  else torch.full_like(off, float("nan")))
        frames.append(KeyFrame(name, hyp, words, cos, off, concat, init, static, centred, init_centred))
    return frames


def measure(model: Transformer, batch, task, init_model: Transformer | None = None) -> Geometry:
    """All of section 5's quantities for every member of `model` on the evaluation `batch`: one
    batch for every member, or a list of one per member (each seed's own, `dynamics.sets`)."""
    from ..sets import is_shared, stack_sets

    check_transformer(model)
    model.eval()
    E = model.ensemble
    batches = [batch] * E if not isinstance(batch, (list, tuple)) else list(batch)
    if len(batches) != E:
        raise ValueError(f"batch must be one batch or one per member ({E}), got {len(batches)}")
    sets = stack_sets(batches)
    tokens, header = sets.tokens, sets.header
    # a shared batch keeps its [B, L] mask (every member's); per-seed sets a [E, B, L] one
    mask, post = (batches[0].mask, batches[0].posterior) if is_shared(batches) else (sets.mask, sets.posterior)
    own = not is_shared(batches)
    trace = instrumented_forward(model, tokens, header)
    attn_layers = sorted(trace.alpha)
    first = attn_layers[0]
    att, _ = _attention(model, first)
    frames = _key_frames(model, init_model, trace, tokens, header, task, first)
    ent, ratio, qk, contrast = {}, {}, {}, {}
    prior = prior_positions(task, tokens.shape[-1])
    for i in attn_layers:
        ent[i], ratio[i] = attention_entropy(trace.alpha[i], mask)
        qk[i], contrast[i] = qk_cosine(trace.q[i], trace.k[i], mask, prior)
    h_post = entropy_bits(post.double())
    var, var_raw, rho, rho_null, points = {}, {}, {}, {}, None
    pos_rho, partial, partial_null = {}, {}, {}
    for i in attn_layers:
        res = [value_pca(trace.g[i][e], mask[e] if own else mask, h_post[e] if own else h_post, seed=e)
               for e in range(E)]
        var[i], var_raw[i] = [r["var"] for r in res], [r["var_raw"] for r in res]
        rho[i], rho_null[i] = [r["spearman"] for r in res], [r["spearman_null"] for r in res]
        pos_rho[i] = [r["position"] for r in res]
        partial[i], partial_null[i] = [r["partial"] for r in res], [r["partial_null"] for r in res]
        if i == attn_layers[-1]:
            points = (res[0]["pc1"], h_post[0][mask[0]] if own else h_post[mask])
    half = tokens.shape[1] // 2
    b = 1 if own else 0  # the sequence axis of mask and post

    def errors(logits: Tensor) -> tuple[Tensor, Tensor]:
        first, second = slice(0, half), slice(half, None)
        both = torch.stack([ablation_errors(logits[:, first], post.narrow(b, 0, half), mask.narrow(b, 0, half)),
                            ablation_errors(logits[:, second], post.narrow(b, half, post.shape[b] - half),
                                            mask.narrow(b, half, mask.shape[b] - half))])
        return ablation_errors(logits, post, mask), both

    intact, intact_halves = errors(trace.logits)
    heads, head_halves = {}, {}
    for i in attn_layers:
        for h in range(_attention(model, i)[0].n_head):
            heads[(i, h)], head_halves[(i, h)] = errors(
                instrumented_forward(model, tokens, header, zero_heads=((i, h),), keep=False).logits)
    layers = {i: ablation_errors(instrumented_forward(model, tokens, header, skip_layers=(i,), keep=False).logits,
                                 post, mask)
              for i in range(len(model.blocks))}
    return Geometry(list(getattr(model, "seeds", [])) or list(range(E)), att.d_model // att.n_head, frames, ent,
                    ratio, qk, contrast, var, var_raw, rho, rho_null, pos_rho, partial, partial_null, points, intact,
                    heads, layers, intact_halves, head_halves)
