"""Any plain `torch.nn.Module` as an E-seed ensemble: `from_module(factory, task, seeds=[...])`.

A factory `factory(spec) -> nn.Module` builds ONE model for a task's shapes (`spec` is the
`TaskShape`: vocab_size, num_classes, max_len, header_len, header_dim). Its module maps tokens
[B, L] (long, in [0, vocab_size)) -- and, for tasks with a continuous header (the HMM `rows`
encoding), header [B, H, D] as a second argument -- to logits [B, L, num_classes].

`AdaptedModel` turns it into an ensemble-native model like the zoo's:

- **parameters stacked with a leading seed dimension**: each of the module's parameters and
  buffers becomes one tensor [E, ...] (`torch.func.stack_module_state`'s layout), registered
  under the module's own names (`net.<name>`), so the trainer's per-member gradient clipping,
  weight decay on every matrix (>= 3 dims with the seed dim: weights and embeddings, not biases
  or norms), NaN freeze, checkpoints and resume all apply unchanged;
- **member e initialised from its own seed**: `torch.manual_seed(s_e); factory(spec)` (inside
  `torch.random.fork_rng`, so the global RNG is untouched), exactly what a solo run with seed
  s_e builds, whatever E and the other seeds are;
- **one vmapped forward** (`torch.func.vmap` over `torch.func.functional_call` of one template
  module) when the module can be vmapped, else **a loop over members** (the same numbers, E
  forward calls). The choice is made once, by a trial forward and backward on a small random
  batch when the members are initialised: vmap must run, and agree with the loop, or the loop
  is used; `model.cfg.path` and `model.cfg.fallback` say which and why (a one-line note on stderr says
  so too, once per model and process).
  Modules that cannot be vmapped: data-dependent Python control flow on tensor values, custom
  `torch.autograd.Function`s without vmap rules, ops without batching rules (`torch.nn.GRU`,
  `torch.nn.LSTM`'s fused kernels).

Bad factories fail at build time with a ValueError naming the rule: not an nn.Module, no
parameters, wrong logits shape, NaN/inf logits, a structure that changes between calls, members
whose initial parameters (or outputs) do not depend on their seed.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import weakref
from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap

from ..checks import SettingError
from ..outside_code import guarded
from .base import EnsembleModel, TaskLike, TaskShape, other_float_dtypes

Factory = Callable[..., nn.Module]
PATHS = ("vmap", "loop")
_TRIAL_BATCH = 2
_WARNED: set[str] = set()
_quiet = 0  # depth of `notes_off()` blocks


@contextlib.contextmanager
def notes_off():
    """No note about the forward path from models built in the block (a trial build whose member
    count is not the run's: its caller reports the path itself)."""
    global _quiet
    _quiet += 1
    try:
        yield
    finally:
        _quiet -= 1


@dataclass(frozen=True)
class AdapterConfig:
    """What the store records about an adapted model: its source, its forward path and why."""

    spec: str  # where the factory came from ("pkg.mod:build", "/abs/mine.py:build", "hf:gpt2", or a Python name)
    path: str = "vmap"  # "vmap" (one batched call) or "loop" (one call per member)
    fallback: str | None = None  # why vmap was not used
    options: tuple = ()  # keyword arguments given to the factory, as (key, value) pairs


def _note(message: str) -> None:
    """One line on stderr (stdout may carry --json), around any progress bar."""
    import sys

    print(message, file=sys.stderr, flush=True)


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return (text.splitlines()[0] if text else "")[:300]


def _describe(factory: Factory) -> str:
    return f"{getattr(factory, '__module__', '?')}:{getattr(factory, '__qualname__', repr(factory))}"


def _takes_header(module: nn.Module) -> bool:
    """Whether module.forward accepts a second positional argument (the header)."""
    try:
        params = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        return True
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2


def _owner(root: nn.Module, dotted: str, create: bool) -> tuple[nn.Module, str]:
    """The submodule holding `dotted`'s leaf (creating empty containers when `create`)."""
    *path, leaf = dotted.split(".")
    mod = root
    for part in path:
        child = mod._modules.get(part)
        if child is None:
            if not create:
                raise KeyError(dotted)
            child = nn.Module()
            mod.add_module(part, child)
        mod = child
    return mod, leaf


class AdaptedModel(EnsembleModel):
    """E copies of a plain module, stacked: tokens [E, B, L] (+ header [E, B, H, D]) -> logits [E, B, L, C]."""

    template: nn.Module  # set with object.__setattr__, outside the module tree (below)

    def __init__(self, shape: TaskShape, ensemble: int, factory: Factory, *, spec: str | None = None,
                 options: dict | None = None) -> None:
        super().__init__(shape, ensemble)
        if not callable(factory):
            raise ValueError(f"factory must be callable as factory(spec) -> nn.Module, got {factory!r}")
        self.factory, self.options = factory, dict(options or {})
        self.cfg = AdapterConfig(spec or _describe(factory), options=tuple(sorted(self.options.items())))
        with torch.random.fork_rng(devices=[]), torch.device("cpu"):  # the global RNG is left as it was
            template = self._make()  # (on the CPU even when counting on the meta device: user code may need data)
        self.takes_header = _takes_header(template)
        if shape.header_dim > 0 and not self.takes_header:
            raise ValueError(f"{self.cfg.spec}: the task gives a continuous header [H={shape.header_len}, "
                             f"D={shape.header_dim}] at positions 0..{shape.header_len - 1} (the HMM's 'rows' "
                             "encoding); the module's forward must take (tokens, header)")
        self.names = [n for n, _ in template.named_parameters()]
        dtypes = other_float_dtypes(template)
        if dtypes:  # checked again at scoring (`scoring.rows.check_as_keyed`); here before any training
            raise ValueError(f"{self.cfg.spec}: the factory built {', '.join(dtypes)} parameters (rule: a model's "
                             "parameters are float32, as every key says; build it without .double() or "
                             "torch.set_default_dtype)")
        if not self.names:
            raise ValueError(f"{self.cfg.spec}: the module has no parameters (nothing to train or to seed)")
        self.net = nn.Module()  # the stacked tensors, under the module's own names
        for name, p in template.named_parameters():
            stacked = nn.Parameter(torch.empty((ensemble, *p.shape), dtype=p.dtype),  # the ambient device
                                   requires_grad=p.requires_grad)
            if getattr(p, "_no_weight_decay", False):
                setattr(stacked, "_no_weight_decay", True)  # the flag training/numerics.decays reads
            owner, leaf = _owner(self.net, name, create=True)
            owner.register_parameter(leaf, stacked)
        self.buffer_names = []
        for name, b in template.named_buffers():
            src_owner, leaf = _owner(template, name, create=False)
            owner, _ = _owner(self.net, name, create=True)
            persistent = leaf not in src_owner._non_persistent_buffers_set
            stacked_buffer = torch.empty((ensemble, *b.shape), dtype=b.dtype)
            if stacked_buffer.device.type != "meta":
                stacked_buffer.copy_(b.detach().unsqueeze(0).expand(ensemble, *b.shape))
            owner.register_buffer(leaf, stacked_buffer, persistent=persistent)
            self.buffer_names.append(name)
        # The template only supplies the forward code: its tensors go to the meta device (no
        # memory) and functional_call swaps the stacked slices in. Kept out of the module tree so
        # that parameters(), state_dict() and .to() see only the stacked tensors.
        # (a copy: the factory's own object is never changed, even when it hands out one shared module)
        object.__setattr__(self, "template", copy.deepcopy(template).to("meta"))
        self._first = weakref.ref(template)  # alive only if the factory keeps it: then it reuses one module
        self._path = "vmap"

    # -- construction
    def _make(self) -> nn.Module:
        try:
            with guarded():  # torch's process-wide settings as they were, whatever the factory sets
                module = self.factory(self.shape, **self.options)
        except TypeError as err:
            if "unexpected keyword argument" in str(err) or "required" in str(err):
                raise  # a configuration mismatch: the registry names it
            raise ValueError(f"{self.cfg.spec}: the factory raised TypeError: {_first_line(err)}") from err
        except SettingError:
            raise  # a rule of bayesbench's own on an option (the hf: factories' sizes): it names the option
        except Exception as err:  # the user's factory failing, on its options too, is the user's error
            raise ValueError(f"{self.cfg.spec}: the factory raised {type(err).__name__}: {_first_line(err)}") from err
        if isinstance(module, EnsembleModel):
            raise ValueError(f"{self.cfg.spec}: the factory returned an ensemble-native {type(module).__name__}; "
                             "register it with bayesbench.models.register_model instead of adapting it")
        if not isinstance(module, nn.Module):
            raise ValueError(f"{self.cfg.spec}: the factory must return a torch.nn.Module, got {type(module).__name__}")
        return module

    def init_members(self, seeds: list[int]) -> None:
        """Member e = the module `factory(spec)` builds right after torch.manual_seed(seeds[e])."""
        seeds = [int(s) for s in seeds]
        if len(seeds) != self.ensemble:
            raise ValueError(f"seeds must have one entry per member ({self.ensemble}), got {len(seeds)}")
        modules: list[nn.Module] = []
        for seed in seeds:
            with torch.random.fork_rng(devices=[]), torch.device("cpu"):
                torch.manual_seed(seed)
                module = self._make()
            if module is self._first() or any(module is m for m in modules):
                raise ValueError(f"{self.cfg.spec}: the factory returned the same module object twice: it ignores "
                                 "the seed (build a fresh module on every call; its init must draw from torch's "
                                 "global RNG)")
            modules.append(module)
        self.load_members(modules, seeds, what="freshly initialised members")
        if self.ensemble > 1 and len(set(seeds)) == self.ensemble:
            params = dict(self.net.named_parameters())
            for e in range(1, self.ensemble):
                if all(torch.equal(params[n][0], params[n][e]) for n in self.names):
                    raise ValueError(f"{self.cfg.spec}: members 0 and {e} (seeds {seeds[0]}, {seeds[e]}) got "
                                     "identical initial parameters: the factory ignores the seed (build a fresh "
                                     "module on every call; its init must draw from torch's global RNG)")

    def load_members(self, modules: list[nn.Module], seeds: list[int], *,
                     what: str = "the given modules' own weights") -> None:
        """Copy each module's parameters and buffers into its member's slice, then choose the path
        (`what` names the weights in the trial forward's error, e.g. loaded ones)."""
        if len(modules) != self.ensemble:
            raise ValueError(f"modules must have one entry per member ({self.ensemble}), got {len(modules)}")
        params, buffers = self._stacked()
        for e, module in enumerate(modules):
            got = dict(module.named_parameters())
            if list(got) != self.names or any(got[n].shape != params[n].shape[1:] for n in self.names):
                raise ValueError(f"{self.cfg.spec}: member {e} is a different module (parameter names or shapes "
                                 "differ from the first); the factory must build the same architecture every time")
            with torch.no_grad():
                for n in self.names:
                    params[n][e].copy_(got[n].detach())
                for n, b in module.named_buffers():
                    if n in buffers:
                        buffers[n][e].copy_(b.detach())
        self.seeds = [int(s) for s in seeds]
        self._choose_path(what)

    # -- the two forward paths
    def _member_inputs(self, tokens: Tensor, header: Tensor | None) -> tuple:
        return (tokens, header) if self.takes_header and header is not None else (tokens,)

    def _call(self, params: dict, buffers: dict, tokens: Tensor, header: Tensor | None) -> Tensor:
        out = functional_call(self.template, (params, buffers), self._member_inputs(tokens, header))
        if not isinstance(out, Tensor):
            raise ValueError(f"{self.cfg.spec}: forward must return a logits tensor [B, L, C], "
                             f"got {type(out).__name__}")
        if not out.dtype.is_floating_point:
            raise ValueError(f"{self.cfg.spec}: forward must return floating-point logits [B, L, C], got {out.dtype} "
                             "(unnormalised log-probabilities, one per class)")
        return out

    def _stacked(self) -> tuple[dict, dict]:
        return dict(self.net.named_parameters()), dict(self.net.named_buffers())

    def _forward_loop(self, tokens: Tensor, header: Tensor | None) -> Tensor:
        params, buffers = self._stacked()
        outs = []
        for e in range(self.ensemble):
            outs.append(self._call({k: v[e] for k, v in params.items()}, {k: v[e] for k, v in buffers.items()},
                                   tokens[e], None if header is None else header[e]))
        shapes = {tuple(o.shape) for o in outs}
        if len(shapes) != 1:
            raise ValueError(f"{self.cfg.spec}: members returned logits of different shapes {sorted(shapes)}")
        return torch.stack(outs)

    def _forward_vmap(self, tokens: Tensor, header: Tensor | None) -> Tensor:
        params, buffers = self._stacked()
        in_dims = (0, 0, 0, None if header is None else 0)
        return vmap(self._call, in_dims=in_dims, randomness="different")(params, buffers, tokens, header)

    @property
    def path(self) -> str:
        return self._path

    def set_path(self, path: str) -> None:
        """Force the forward path ("vmap" or "loop"); the trial forward chooses it otherwise."""
        if path not in PATHS:
            raise ValueError(f"path must be one of {PATHS}, got {path!r}")
        self._path = path
        self.cfg = AdapterConfig(self.cfg.spec, path, self.cfg.fallback if path == "loop" else None,
                                 self.cfg.options)

    def _trial_inputs(self) -> tuple[Tensor, Tensor | None]:
        g = torch.Generator().manual_seed(0)
        E, B, L = self.ensemble, _TRIAL_BATCH, self.shape.max_len
        device = next(self.parameters()).device
        tokens = torch.randint(0, self.shape.vocab_size, (E, B, L), generator=g).to(device)
        header = None
        if self.shape.header_dim > 0:
            header = torch.rand((E, B, self.shape.header_len, self.shape.header_dim), generator=g).to(device)
        return tokens, header

    def _check_logits(self, logits: Tensor, what: str) -> None:
        E, B, L, C = self.ensemble, _TRIAL_BATCH, self.shape.max_len, self.shape.num_classes
        if tuple(logits.shape) != (E, B, L, C):
            raise ValueError(f"{self.cfg.spec}: the module returned logits of shape {list(logits.shape[1:])} for "
                             f"tokens [B={B}, L={L}]; expected [B={B}, L={L}, C={C}] (batch, positions, the "
                             f"task's {C} classes)")
        if not bool(torch.isfinite(logits).all()):
            raise ValueError(f"{self.cfg.spec}: the module's logits contain NaN or inf on a random trial batch "
                             f"({what})")

    def _choose_path(self, what: str) -> None:
        """Trial forward (eval mode) by the loop, then by vmap: vmap is kept if it runs forward and
        backward and agrees with the loop; the loop's output is also checked for shape, finiteness
        and dependence on each member's parameters."""
        tokens, header = self._trial_inputs()
        was_training = self.training
        self.eval()
        try:
            try:
                ref = self._forward_loop(tokens, header)
            except ValueError:
                raise
            except Exception as err:  # the user's module failing is the user's error
                raise ValueError(f"{self.cfg.spec}: forward failed on a random trial batch of tokens "
                                 f"[B={_TRIAL_BATCH}, L={self.shape.max_len}]: {type(err).__name__}: "
                                 f"{_first_line(err)}") from err
            self._check_logits(ref.detach(), what)
            trainable = [p for p in self.parameters() if p.requires_grad]
            grads = torch.autograd.grad(ref.float().square().mean(), trainable, allow_unused=True)
            moved = [e for e in range(self.ensemble)
                     if any(g is not None and bool(g[e].ne(0).any()) for g in grads)]
            if len(moved) < self.ensemble:
                raise ValueError(f"{self.cfg.spec}: the logits of member(s) "
                                 f"{sorted(set(range(self.ensemble)) - set(moved))} do not depend on their own "
                                 "parameters (zero gradient on that member's slice): the output ignores the seed "
                                 "dimension (tensors captured outside the module, or weights kept in plain "
                                 "attributes instead of nn.Parameter?)")
            ref = ref.detach()
            reason = None
            try:
                out = self._forward_vmap(tokens, header)
                grads = torch.autograd.grad(out.float().square().mean(), [p for p in self.parameters()
                                                                         if p.requires_grad], allow_unused=True)
                del grads
                out = out.detach()
                if tuple(out.shape) != tuple(ref.shape) or not torch.allclose(out, ref, rtol=1e-4, atol=1e-5):
                    reason = "the vmapped forward disagrees with the per-member forward"
            except Exception as err:  # any failure of vmap means: use the loop
                reason = f"{type(err).__name__}: {_first_line(err)}"
        finally:
            self.train(was_training)
        if reason is None:
            self.set_path("vmap")
        else:
            self.cfg = AdapterConfig(self.cfg.spec, "loop", reason, self.cfg.options)
            self._path = "loop"
            if self.ensemble > 1 and self.cfg.spec not in _WARNED and not _quiet:  # once per model and process
                _WARNED.add(self.cfg.spec)
                _note(f"bayesbench: note: {self.cfg.spec} runs its {self.ensemble} members in a loop, one forward "
                      f"call each (same numbers; vmap over members failed: {reason})")

    # -- nn.Module
    def train(self, mode: bool = True) -> "AdaptedModel":
        super().train(mode)
        self.template.train(mode)  # functional_call runs the template's code: dropout etc. follow it
        return self

    def forward(self, tokens: Tensor, header: Tensor | None = None) -> Tensor:
        self.check_inputs(tokens, header)
        if header is not None and not self.takes_header:
            header = None
        try:
            if self._path == "vmap":
                return self._forward_vmap(tokens, header)
            return self._forward_loop(tokens, header)
        except ValueError:
            raise
        except Exception as err:  # the user's module failing is the user's error
            raise ValueError(f"{self.cfg.spec}: the model's forward raised {type(err).__name__}: {_first_line(err)} "
                             f"(on tokens {list(tokens.shape)}: an error in the model's own code)") from err

    def param_breakdown(self) -> dict[str, int]:
        """Parameters of one member per top-level submodule of the adapted module."""
        out = {name: sum(p.numel() for p in child.parameters()) // self.ensemble
               for name, child in self.net.named_children()}
        direct = sum(p.numel() for p in self.net.parameters(recurse=False)) // self.ensemble
        if direct:
            out["(top level)"] = direct
        return out


def from_module(factory: Factory, task_or_shape: TaskLike | TaskShape, *, seeds: list[int] | None = None,
                max_len: int | None = None, device: torch.device | str | None = None, spec: str | None = None,
                **options) -> AdaptedModel:
    """An E-seed ensemble of `factory(spec)`, member e initialised from seeds[e] (default [0]).

    `task_or_shape` is a Task or a TaskShape; `max_len` sizes the spec for the longest sequence
    the model will see (default: the task's length); `options` are passed to the factory.
    """
    seeds = [0] if seeds is None else list(seeds)
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    model = AdaptedModel(TaskShape.of(task_or_shape, max_len), len(seeds), factory, spec=spec, options=options)
    model.init_members(seeds)
    return model.to(device) if device is not None else model


def from_modules(modules: list[nn.Module], task_or_shape: TaskLike | TaskShape, *, max_len: int | None = None,
                 seeds: list[int] | None = None, spec: str | None = None) -> AdaptedModel:
    """An ensemble of already built (e.g. trained) modules of one architecture, weights kept.

    Member e holds modules[e]'s tensors (copied; the modules are not changed). `seeds` only
    labels the members (default 0..E-1).
    """
    if not isinstance(modules, (list, tuple)) or not modules or not all(isinstance(m, nn.Module) for m in modules):
        raise ValueError("modules must be a non-empty list of torch.nn.Module")
    seeds = list(range(len(modules))) if seeds is None else list(seeds)
    first = modules[0]
    model = AdaptedModel(TaskShape.of(task_or_shape, max_len), len(modules), lambda spec: copy.deepcopy(first),
                         spec=spec or type(first).__qualname__)
    model.load_members(list(modules), seeds)
    return model


_REGISTERED: dict[str, Factory] = {}


def register_module(name: str, factory: Factory, description: str = "") -> str:
    """Register `factory` as the architecture `name` (in this process), so that `get_model`,
    `train` and `bayesbench run` in this process take it like a built-in; returns the name.

    For worker processes (`bayesbench run --jobs N`) use an importable name instead
    ('pkg.mod:build' or './file.py:build'): they import the factory themselves.
    """
    from .registry import register_model

    if _REGISTERED.get(name) is factory:
        return name
    spec = _describe(factory)

    def build(shape: TaskShape, ensemble: int, **options) -> AdaptedModel:
        return AdaptedModel(shape, ensemble, factory, spec=spec, options=options)

    register_model(name, description or f"your module {spec} (adapted: parameters stacked per seed)",
                   module=getattr(factory, "__module__", None) or "")(build)  # its home: the factory's
    _REGISTERED[name] = factory
    return name
