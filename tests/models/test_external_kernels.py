"""The outside kernels option (models/external_kernels.py, issue 43), on a CPU: the refusals (no
package, no CUDA device, a kernel the layer has none of), and the adapter's map of our tensors onto
flash-linear-attention's and mamba-ssm's call signatures and conventions, checked against our own
chunked forms in float64. The kernels themselves are Triton/CUDA: here each is replaced by a plain
PyTorch stand-in written from the package's documented semantics (layout [batch, T, heads, D],
`scale` on q, log decays, fla's RWKV-7 state h [Dk, Dv] with h = diag(exp w) h + b (a^T h) + k v^T,
mamba-ssm's heads grouped over B and C), a step-by-step loop like the packages' own naive
references, so what is tested is the layout, the folding of members and the parameter map, never a
kernel's numbers (those: scripts/external_kernels_check.py on a GPU)."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from bayesbench.checks import SettingError
from bayesbench.models import external_kernels as ek
from bayesbench.models import get_model
from bayesbench.models.deltanet import delta_rule_chunked
from bayesbench.models.gated_recurrence import gated_recurrence_chunked
from bayesbench.models.rwkv7 import chunked_delta_rule
from bayesbench.tasks import get_task

SHAPES = [(1, 1, 1, 1), (2, 3, 5, 2), (3, 1, 9, 1)]  # (E, B, L, H): length 1, L not a multiple of the chunk (4)
CHUNK = 4


# ---------------------------------------------------------------- stand-ins in the packages' conventions

def _scale(q: Tensor, scale: float | None) -> Tensor:
    return q * (q.shape[-1] ** -0.5 if scale is None else scale)


def fla_chunk_gla(q, k, v, g, scale=None, initial_state=None, output_final_state=False, **_):
    """fla.ops.gla.chunk_gla: S_t = diag(exp g_t) S_{t-1} + k_t v_t^T, o_t = S_t^T (scale q_t); [B, T, H, .]."""
    S = q.new_zeros(q.shape[0], q.shape[2], q.shape[3], v.shape[3])
    out = []
    for t in range(q.shape[1]):
        S = torch.exp(g[:, t]).unsqueeze(-1) * S + k[:, t].unsqueeze(-1) * v[:, t].unsqueeze(-2)
        out.append(torch.einsum("bhk,bhkv->bhv", _scale(q[:, t], scale), S))
    return torch.stack(out, 1), (S if output_final_state else None)


def fla_chunk_simple_gla(q, k, v, g=None, g_gamma=None, scale=None, initial_state=None, output_final_state=False, **_):
    """fla.ops.simple_gla.chunk_simple_gla: a scalar decay per head, g [B, T, H] or g_gamma [H]."""
    assert (g is None) != (g_gamma is None)
    B, T, H, _ = q.shape
    gate = g if g is not None else g_gamma.to(q.dtype).expand(B, T, H)
    return fla_chunk_gla(q, k, v, gate.unsqueeze(-1).expand(*q.shape), scale=scale,
                         output_final_state=output_final_state)


def fla_chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False, **_):
    """fla.ops.gated_delta_rule: S *= exp(g_t); S += k_t (beta_t (v_t - S^T k_t))^T; o_t = S^T (scale q_t)."""
    S = q.new_zeros(q.shape[0], q.shape[2], q.shape[3], v.shape[3])
    out = []
    for t in range(q.shape[1]):
        S = torch.exp(g[:, t])[..., None, None] * S
        u = beta[:, t, :, None] * (v[:, t] - torch.einsum("bhk,bhkv->bhv", k[:, t], S))
        S = S + k[:, t].unsqueeze(-1) * u.unsqueeze(-2)
        out.append(torch.einsum("bhk,bhkv->bhv", _scale(q[:, t], scale), S))
    return torch.stack(out, 1), (S if output_final_state else None)


def fla_chunk_delta_rule(q, k, v, beta, scale=None, initial_state=None, output_final_state=False, **_):
    """fla.ops.delta_rule.chunk_delta_rule: the gated rule with no decay."""
    return fla_chunk_gated_delta_rule(q, k, v, torch.zeros_like(beta), beta, scale=scale,
                                      output_final_state=output_final_state)


def fla_chunk_rwkv7(r, w, k, v, a, b, scale=1.0, initial_state=None, output_final_state=False, **_):
    """fla.ops.rwkv7.chunk_rwkv7 (its fused_recurrent kernel's loop): h [K, V] per head,
    h = diag(exp w_t) h + b_t (a_t^T h) + k_t v_t^T, o_t = h^T (scale r_t)."""
    h = r.new_zeros(r.shape[0], r.shape[2], r.shape[3], v.shape[3])
    out = []
    for t in range(r.shape[1]):
        read = torch.einsum("bhk,bhkv->bhv", a[:, t], h)
        h = torch.exp(w[:, t]).unsqueeze(-1) * h + b[:, t].unsqueeze(-1) * read.unsqueeze(-2) \
            + k[:, t].unsqueeze(-1) * v[:, t].unsqueeze(-2)
        out.append(torch.einsum("bhk,bhkv->bhv", scale * r[:, t], h))
    return torch.stack(out, 1), (h if output_final_state else None)


def mamba_chunk_scan_combined(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, dt_softplus=False, **_):
    """mamba_ssm's SSD: per head h (group h // (nheads / ngroups)) a state [P, N],
    state = exp(dt A_h) state + dt x B^T, y = state C (+ D x); x [b, T, nheads, P], B/C [b, T, ngroups, N]."""
    assert D is None and z is None and dt_bias is None and not dt_softplus
    b, T, nh, P = x.shape
    per_group = nh // B.shape[2]
    Bh, Ch = B.repeat_interleave(per_group, 2), C.repeat_interleave(per_group, 2)  # [b, T, nh, N]
    state = x.new_zeros(b, nh, P, B.shape[-1])
    out = []
    for t in range(T):
        state = torch.exp(dt[:, t] * A)[..., None, None] * state \
            + (dt[:, t, :, None] * x[:, t]).unsqueeze(-1) * Bh[:, t].unsqueeze(-2)
        out.append(torch.einsum("bhpn,bhn->bhp", state, Ch[:, t]))
    return torch.stack(out, 1)


STAND_INS = {"gla": fla_chunk_gla, "simple_gla": fla_chunk_simple_gla, "delta_rule": fla_chunk_delta_rule,
             "gated_delta_rule": fla_chunk_gated_delta_rule, "rwkv7": fla_chunk_rwkv7, "ssd": mamba_chunk_scan_combined}


def test_the_stand_ins_stand_for_every_outside_operation():
    assert {op for ops in ek.OPS.values() for op in ops} == set(STAND_INS)


# ---------------------------------------------------------------- the adapter's map, function by function

def rand(*shape, g):
    return torch.randn(*shape, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("E,B,L,H", SHAPES)
def test_gated_recurrence_map(E, B, L, H):
    g = torch.Generator().manual_seed(L)
    q, k, v = rand(E, B, H, L, 3, g=g), rand(E, B, H, L, 3, g=g), rand(E, B, H, L, 2, g=g)
    vector = -torch.rand(E, B, H, L, 3, generator=g, dtype=torch.float64)
    scalar = vector[..., :1]
    for decay, op in ((vector, fla_chunk_gla), (scalar, fla_chunk_simple_gla)):
        ours = gated_recurrence_chunked(q, k, v, decay, CHUNK)
        torch.testing.assert_close(ek.gated_recurrence(q, k, v, decay, op=op), ours)
    log_gamma = torch.log(1 - torch.rand(H, generator=g, dtype=torch.float64) / 4)
    ours = gated_recurrence_chunked(q, k, v, log_gamma.view(H, 1, 1).expand(H, L, 1), CHUNK)
    torch.testing.assert_close(ek.retention(q, k, v, log_gamma, op=fla_chunk_simple_gla), ours)


@pytest.mark.parametrize("E,B,L,H", SHAPES)
def test_delta_rule_map(E, B, L, H):
    g = torch.Generator().manual_seed(10 + L)
    q, k = (torch.nn.functional.normalize(rand(E, B, H, L, 4, g=g), dim=-1) for _ in range(2))
    v = rand(E, B, H, L, 4, g=g)
    beta = torch.rand(E, B, H, L, generator=g, dtype=torch.float64)
    log_decay = -torch.rand(E, B, H, L, generator=g, dtype=torch.float64)
    torch.testing.assert_close(ek.delta_rule(q, k, v, beta, None, op=fla_chunk_delta_rule),
                               delta_rule_chunked(q, k, v, beta, None, CHUNK))
    torch.testing.assert_close(ek.delta_rule(q, k, v, beta, log_decay, op=fla_chunk_gated_delta_rule),
                               delta_rule_chunked(q, k, v, beta, log_decay, CHUNK))


@pytest.mark.parametrize("E,B,L,H", SHAPES)
def test_rwkv7_map(E, B, L, H):
    g = torch.Generator().manual_seed(20 + L)
    r, k, v = rand(E, B, H, L, 4, g=g), rand(E, B, H, L, 4, g=g), rand(E, B, H, L, 4, g=g)
    decay = 0.55 + 0.45 * torch.rand(E, B, H, L, 4, generator=g, dtype=torch.float64)
    kappa = torch.nn.functional.normalize(rand(E, B, H, L, 4, g=g), dim=-1)
    a_kappa = torch.rand(E, B, H, L, 4, generator=g, dtype=torch.float64) * kappa
    torch.testing.assert_close(ek.rwkv7(r, decay, kappa, a_kappa, k, v, op=fla_chunk_rwkv7),
                               chunked_delta_rule(r, decay, kappa, a_kappa, k, v, chunk=CHUNK))


@pytest.mark.parametrize("E,B,L,H", SHAPES)
def test_ssd_map_both_packages(E, B, L, H):
    g = torch.Generator().manual_seed(30 + L)
    x, Bm, Cm = rand(E, B, L, H, 3, g=g), rand(E, B, L, 1, 2, g=g), rand(E, B, L, 1, 2, g=g)
    dt = torch.rand(E, B, L, H, 1, generator=g, dtype=torch.float64)
    A = -1 - 3 * torch.rand(E, H, generator=g, dtype=torch.float64)
    ours = gated_recurrence_chunked(Cm.transpose(2, 3), Bm.transpose(2, 3), (x * dt).transpose(2, 3),
                                    (dt * A.view(E, 1, 1, H, 1)).transpose(2, 3), CHUNK).transpose(2, 3)
    torch.testing.assert_close(ek.ssd(x, dt, A, Bm, Cm, CHUNK, kernel="mamba-ssm", op=mamba_chunk_scan_combined), ours)
    torch.testing.assert_close(ek.ssd(x, dt, A, Bm, Cm, CHUNK, kernel="fla", op=fla_chunk_simple_gla), ours)


# ---------------------------------------------------------------- every covered model, wired through the option

SMALL = {"gla": dict(n_layer=1, n_head=2, d_model=8, d_ffn=8, gate_rank=2, chunk=CHUNK),
         "retnet": dict(n_layer=1, n_head=2, d_model=8, d_ffn=8, chunk=CHUNK),
         "deltanet": dict(n_layer=1, n_head=2, d_model=8, d_ffn=8, chunk=CHUNK),
         "gated-deltanet": dict(n_layer=1, n_head=2, d_model=8, d_ffn=8, chunk=CHUNK),
         "rwkv7": dict(n_layer=1, n_head=2, d_model=8, d_ffn=8),
         "mamba2": dict(n_layer=1, n_head=2, d_model=8, d_state=4, chunk=CHUNK)}


@pytest.fixture
def kernels_here(monkeypatch):
    """Pretend the packages import and the model is on CUDA, with the stand-ins as their functions."""
    monkeypatch.setattr(ek, "available", lambda kernel: True)
    monkeypatch.setattr(ek, "check_device", lambda kernel, x: None)
    calls: list[str] = []

    def resolve(kernel: str, op: str):
        calls.append(op)
        return STAND_INS[op]

    monkeypatch.setattr(ek, "resolve", resolve)
    return calls


def test_every_covered_architecture_has_a_small_config():
    assert set(SMALL) == set(ek.COVERED)


@pytest.mark.parametrize("arch,kernel", [(a, k) for a in sorted(ek.COVERED) for k in ek.COVERED[a] if k != "torch"])
def test_a_model_with_an_outside_kernel_equals_the_torch_one(arch, kernel, kernels_here):
    """Same weights, kernel=torch against the outside kernel's map (stand-in), logits and gradients, E = 2, L = 7."""
    task = get_task("bijection", V=4)
    ours = get_model(arch, task, seeds=[0, 1], **SMALL[arch]).double()
    theirs = get_model(arch, task, seeds=[0, 1], kernel=kernel, **SMALL[arch]).double()
    with torch.no_grad():
        for p in ours.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel()), dtype=p.dtype))
    theirs.load_state_dict(ours.state_dict())
    tokens = torch.randint(0, task.vocab_size, (2, 2, 7), generator=torch.Generator().manual_seed(0))
    a, b = ours(tokens), theirs(tokens)
    assert kernels_here, f"{arch}: the outside kernel was never called"
    torch.testing.assert_close(b, a)
    a.square().sum().backward()
    b.square().sum().backward()
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        torch.testing.assert_close(q.grad, p.grad, msg=lambda m: f"{arch} {name}: {m}")


# ---------------------------------------------------------------- refusals

@pytest.mark.parametrize("arch", sorted(ek.COVERED))
def test_an_outside_kernel_without_its_package_is_refused_naming_the_setting(arch, monkeypatch):
    monkeypatch.setattr(ek.importlib.util, "find_spec", lambda name: None)
    for kernel in ek.COVERED[arch][1:]:
        with pytest.raises(SettingError, match=rf"^kernel='{kernel}' needs the .* not installed") as err:
            get_model(arch, get_task("bijection", V=4), seeds=[0], kernel=kernel, **SMALL[arch])
        assert err.value.fields == ("kernel",) and "\n" not in str(err.value)


def test_an_outside_kernel_on_a_cpu_tensor_is_refused(monkeypatch):
    monkeypatch.setattr(ek, "available", lambda kernel: True)
    model = get_model("gla", get_task("bijection", V=4), seeds=[0], kernel="fla", **SMALL["gla"])
    with pytest.raises(SettingError, match=r"^kernel='fla' runs on a CUDA device only .* use kernel='torch'"):
        model(torch.zeros(1, 1, 3, dtype=torch.long))


def test_a_kernel_the_layer_has_none_of_is_refused():
    with pytest.raises(SettingError, match=r"^kernel must be one of \('torch', 'fla'\), got 'mamba-ssm'"):
        get_model("gla", get_task("bijection", V=4), seeds=[0], kernel="mamba-ssm", **SMALL["gla"])
    assert ek.check_kernel("torch", ("torch",)) == "torch" and ek.available("torch")
