"""Models from outside the package, named by a string (zoology's convention):

- `my_pkg.my_mod:build`: an importable module and a factory in it (the current directory is
  tried too when the module is not on sys.path);
- `./mine.py:build` (any path ending in .py, or containing a path separator): a file outside the
  package, imported by path (`bayesbench.outside_code`, shared with outside tasks);
- `hf:gpt2`, `hf:llama`, `hf:mamba`: a randomly initialised Hugging Face `transformers` model
  built from a config sized to the preset (`bayesbench.models.hf`; `pip install bayesbench[hf]`).

Such a name works wherever an architecture name does (`get_model`, `train`, `bayesbench run
--model`): the registry hands it here and `AdaptedModel` makes the factory an E-seed ensemble.
Worker processes and `load_result` import the factory themselves from the name, so only the
string travels. File paths are made absolute (`normalise`) before they are stored.

`code(spec)` is what keys a result of the model (`bayesbench.versions`): the contents of its
file and of the modules it imports from its own folder (`outside_code.contents`), or for `hf:` models
the `transformers` version. `load_factory` imports the file anew when those contents changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Callable

from .. import outside_code
from .adapter import AdaptedModel
from .base import TaskShape
from .registry import is_outside, register_outside  # noqa: F401  (is_outside re-exported: the test of a name)

HF_PREFIX = "hf:"
FORMS = "'package.module:factory', './file.py:factory' or 'hf:gpt2|llama|mamba'"
_FACTORIES: dict[str, Callable] = {}


def normalise(spec: str, base: str | None = None) -> str:
    """The canonical form of an outside model name: file paths absolute, syntax checked.

    A relative file path is taken from the folder `base` (a sweep file's folder), by default
    the current directory."""
    if spec.startswith(HF_PREFIX):
        return spec
    return outside_code.normalise(spec, "model", FORMS, base)


def default_name(spec: str) -> str:
    """A leaderboard name for an outside model: 'hf-gpt2', 'mine' (file stem), 'my_mod' (module)."""
    if spec.startswith(HF_PREFIX):
        return "hf-" + spec[len(HF_PREFIX):]
    return outside_code.stem(spec, "model", FORMS)


def code(spec: str) -> dict:
    """The code an outside model name points to, as keys record it (see the module doc)."""
    spec = normalise(spec)
    if spec.startswith(HF_PREFIX):
        try:
            import transformers
        except ImportError:
            raise ValueError(f"model {spec!r} needs the transformers package (pip install 'bayesbench[hf]')") from None
        return {"contents": f"transformers {transformers.__version__}", "files": []}
    return outside_code.contents(spec, "model", FORMS)


def load_factory(spec: str) -> Callable:
    """The factory an outside model name points to (imported once per process, and again when
    its file's contents change)."""
    spec = normalise(spec)
    if spec.startswith(HF_PREFIX):
        if spec not in _FACTORIES:
            from .hf import hf_factory

            _FACTORIES[spec] = hf_factory(spec[len(HF_PREFIX):])
        return _FACTORIES[spec]
    factory = outside_code.load(spec, "model", FORMS)
    if not callable(factory):
        raise ValueError(f"model {spec!r}: {spec.rpartition(':')[2]} is a {type(factory).__name__}, not a "
                         "callable factory(spec) -> nn.Module")
    return factory


def preset_options(spec: str, models: Mapping[str, dict]) -> dict:
    """The keyword arguments an outside model's factory gets from a preset's model table (arch ->
    config): for an `hf:` model the sizes of the preset's transformer (`hf.preset_sizes`), then
    the table's own entry for `spec` (a sweep's `models`), which wins."""
    sizes = {}
    if spec.startswith(HF_PREFIX):
        from .hf import preset_sizes

        sizes = preset_sizes(spec[len(HF_PREFIX):], models)
    return {**sizes, **models.get(spec, {})}


@register_outside
def build_outside(spec: str, shape: TaskShape, ensemble: int, **options) -> AdaptedModel:
    """Construct (without initialising) the adapted ensemble of an outside model."""
    spec = normalise(spec)
    return AdaptedModel(shape, ensemble, load_factory(spec), spec=spec, options=options)
