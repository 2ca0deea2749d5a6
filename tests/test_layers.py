"""The package's layers (docs/layout.md): each module imports only its own layer and the layers
below it, and the import graph has no cycle beyond the few lazy ones listed here with their
reasons. Measured from the import statements of every file of `bayesbench/`, those inside
functions included, by `ast`: nothing is imported to find them."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The layer of each top-level part of the package, as docs/layout.md's table gives it ("" is
# bayesbench/__init__.py). kernels/ sits with models/: the Triton attention is a model's
# attention and checks itself against models/attention.py.
LAYERS = {
    "checks": 1, "stats": 1, "versions": 1, "identity": 1, "ops": 1, "presets": 1, "running": 1,
    "metric_table": 1, "figures": 1, "outside_code": 1, "trust": 1, "_version": 1, "_C": 1,
    "oracle": 2, "models": 2, "store": 2, "kernels": 2,
    "tasks": 3, "training": 4, "scoring": 5, "sweep": 6, "": 6, "data": 7, "dynamics": 7, "report": 8,
    "cli": 9, "__main__": 9, "api": 10,
}

# Cycles through imports inside functions, each a deliberate lazy import (none at module level):
# the command package builds the parser from its command modules, and two of them read the
# parser back (completion draws it, settings checks a file's keys against it); models/ builds the
# Triton attention of kernels/ on request, which checks itself against models/attention.py.
KNOWN_CYCLES = {
    ("bayesbench.cli", "bayesbench.cli.completion"),
    ("bayesbench.cli", "bayesbench.cli.errors", "bayesbench.cli.settings"),
}
KNOWN_PART_CYCLES = {("kernels", "models")}


def _files() -> dict[str, Path]:
    out = {}
    for path in sorted((ROOT / "bayesbench").rglob("*.py")):
        parts = list(path.relative_to(ROOT / "bayesbench").with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(["bayesbench", *parts])] = path
    return out


FILES = _files()
# Modules a build makes (the compiled extension, setuptools-scm's version file): a checkout that has
# not been built has no file for them, and an import of one must still count as that module.
BUILT = {"bayesbench._C", "bayesbench._version"}
MODULES = set(FILES) | BUILT


def part(module: str) -> str:
    """The top-level part of the package a module belongs to ("" for the package itself)."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else ""


def imports(module: str, path: Path) -> set[tuple[str, int]]:
    """(imported bayesbench module, line) for every import in the file: a name imported from a
    package counts as its submodule when there is one, else as the package."""
    base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            name = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else [])) \
                if node.level else node.module
            targets = [f"{name}.{a.name}" if f"{name}.{a.name}" in MODULES else name for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        for target in targets:
            while target not in MODULES and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in MODULES and target != module:
                out.add((target, node.lineno))
    return out


GRAPH = {m: imports(m, p) for m, p in FILES.items()}


def cycles(graph: dict[str, set[str]]) -> set[tuple[str, ...]]:
    """Every cycle a depth-first walk meets, as the sorted tuple of its members."""
    found, state, stack = set(), {}, []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                found.add(tuple(sorted(stack[stack.index(t):])))
            elif t not in state:
                visit(t)
        state[m] = 2
        stack.pop()

    for m in sorted(graph):
        if m not in state:
            visit(m)
    return found


def test_every_part_has_a_layer():
    assert {part(m) for m in MODULES} <= set(LAYERS), {part(m) for m in MODULES} - set(LAYERS)


def test_no_module_imports_a_layer_above_its_own():
    upward = [f"{FILES[m].relative_to(ROOT)}:{line} imports {t} (layer {LAYERS[part(t)]} > {LAYERS[part(m)]})"
              for m, targets in GRAPH.items() for t, line in sorted(targets)
              if LAYERS[part(t)] > LAYERS[part(m)]]
    assert not upward, "\n".join(upward)


def test_import_cycles_are_only_the_known_lazy_ones():
    graph = {m: {t for t, _ in targets} for m, targets in GRAPH.items()}
    assert cycles(graph) == KNOWN_CYCLES
    parts = collections.defaultdict(set)
    for m, targets in graph.items():
        parts[part(m)] |= {part(t) for t in targets if part(t) != part(m)}
    assert cycles(parts) == KNOWN_PART_CYCLES


def test_the_checker_sees_an_upward_and_a_circular_import(tmp_path):
    """The walk is not blind: an import of report/ from store/ is upward, and two modules that
    import each other are a cycle."""
    fake = tmp_path / "tuning.py"
    fake.write_text("def f():\n    from ..report.curve_stats import trained_part\n")
    (target, line), = imports("bayesbench.store.tuning", fake)
    assert target == "bayesbench.report.curve_stats" and line == 2
    assert LAYERS[part(target)] > LAYERS[part("bayesbench.store.tuning")]
    assert cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == {("a", "b")}
