"""Compatibility of the kernels with the Triton versions the project runs on (3.6 on the GPU
machine, torch 2.11; 3.9 in CI), applied when the kernels are first imported.

Triton 3.6's interpreter (TRITON_INTERPRET=1) turns a scalar into a Python int with
`int(ndarray)`; its scalars are 1-element 1-D arrays, which numpy >= 2.4 refuses to convert
("only 0-dimensional arrays can be converted to Python scalars"). So every `range` whose bound is
a run-time value (the sequence length T, a block start from the program id) fails there. Later
Triton squeezes the array first; `fix_interpreter_index` installs that same conversion on older
versions. Compiled kernels (a GPU) are not affected.
"""

from __future__ import annotations

import numpy as np

from .config import interpreting


def _index(self) -> int:
    return int(np.asarray(self.handle.data).reshape(-1)[0])


def fix_interpreter_index() -> bool:
    """Make the interpreter's tensor.__index__ accept 1-element arrays. Returns True when the
    interpreter's patch hook was wrapped (now or earlier), False when there is nothing to wrap."""
    try:
        from triton.runtime import interpreter
    except ImportError:
        return False
    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None:
        return False
    if getattr(original, "bayesbench_index_fix", False):
        return True

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", _index)

    setattr(patched, "bayesbench_index_fix", True)  # a mark on the function: mypy knows no such attribute
    interpreter._patch_lang_tensor = patched
    return True


def apply() -> None:
    """Apply the fixes this process needs (only the interpreter needs one today)."""
    if interpreting():
        fix_interpreter_index()
