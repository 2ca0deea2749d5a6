"""Rotary position embeddings for the transformer (`position="rope"`): scores depend only on
relative offsets, the model has no position table, and it runs past its training length."""

from __future__ import annotations

import pytest
import torch

from bayesbench.models import get_model
from bayesbench.models.transformer import TransformerConfig, rotary
from bayesbench.tasks import get_task


def test_rotary_scores_depend_on_the_offset_only():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(3, 10, generator=g, dtype=torch.float64)  # one query vector per row
    k = torch.randn(3, 10, generator=g, dtype=torch.float64)
    T = 13
    rq = rotary(q[:, None, :].expand(3, T, 10))  # the same q at every position
    rk = rotary(k[:, None, :].expand(3, T, 10))
    s = rq @ rk.transpose(-1, -2)  # [3, T, T]: s[m, n] = f(m - n)
    for d in range(-T + 1, T):
        diag = torch.diagonal(s, offset=d, dim1=-2, dim2=-1)
        torch.testing.assert_close(diag, diag[:, :1].expand_as(diag), atol=1e-10, rtol=0)
    # position 0 is unrotated; norms are preserved everywhere
    torch.testing.assert_close(rq[:, 0], q)
    torch.testing.assert_close(rq.norm(dim=-1), q.norm(dim=-1)[:, None].expand(3, T))


def test_rotary_equals_a_plain_rotation_per_channel_pair():
    x = torch.randn(2, 5, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    got = rotary(x, base=100.0)
    for t in range(5):
        for i in range(3):
            a = t * 100.0 ** (-i / 3)
            c, s = torch.cos(torch.tensor(a, dtype=torch.float64)), torch.sin(torch.tensor(a, dtype=torch.float64))
            x1, x2 = x[:, t, i], x[:, t, i + 3]
            torch.testing.assert_close(got[:, t, i], x1 * c - x2 * s)
            torch.testing.assert_close(got[:, t, i + 3], x1 * s + x2 * c)


def test_rope_transformer_has_no_position_table_and_matches_across_backends():
    task = get_task("hmm", K=6, encoding="tokens")
    kw = dict(n_layer=2, n_head=2, d_model=16, d_ffn=32, position="rope")
    rope = get_model("transformer", task, seeds=[0, 1], max_len=task.seq_len, **kw)
    learned = get_model("transformer", task, seeds=[0, 1], max_len=task.seq_len, **{**kw, "position": "learned"})
    assert rope.embed.pos is None
    assert learned.num_params() - rope.num_params() == task.seq_len * 16
    batch = task.sample(3, torch.Generator().manual_seed(0))
    tokens = batch.tokens.unsqueeze(0).expand(2, -1, -1)
    rope.eval()
    out = rope(tokens)
    rope.set_attention("eager")
    torch.testing.assert_close(rope(tokens), out, atol=1e-5, rtol=1e-5)
    # causal: a prefix gives the same outputs at its positions
    torch.testing.assert_close(rope(tokens[:, :, :40]), out[:, :, :40], atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="even head dimension"):
        TransformerConfig(n_layer=1, n_head=2, d_model=6, d_ffn=8, position="rope")
    with pytest.raises(ValueError, match="position must be one of"):
        TransformerConfig(position="alibi")
