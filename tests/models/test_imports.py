"""The models package has no import cycle: not at module level, not through imports inside
functions. The registry finds model files (and the builder of outside models) by name, and
they import it to register; nothing in the package imports upwards into its `__init__`."""

from __future__ import annotations

import ast
import os

import bayesbench.models

PACKAGE = "bayesbench.models"


def _imports(path: str, module: str, is_package: bool) -> set[str]:
    """The `bayesbench.models` modules `module` imports, anywhere in the file."""
    out = set()
    base = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parent = base[:len(base) - node.level + 1]
                name = ".".join(parent + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            names = [f"{name}.{a.name}" for a in node.names] + [name]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out |= {n for n in names if n == PACKAGE or n.startswith(PACKAGE + ".")}
    return out


def _graph() -> dict[str, set[str]]:
    folder = os.path.dirname(bayesbench.models.__file__)
    files = {f[:-3]: os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".py")}
    modules = {(PACKAGE if stem == "__init__" else f"{PACKAGE}.{stem}"): path for stem, path in files.items()}
    return {m: {t for t in _imports(p, m, p.endswith("__init__.py")) if t in modules and t != m}
            for m, p in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                return stack[stack.index(t):] + [t]
            if t not in state and (found := visit(t)):
                return found
        state[m] = 2
        stack.pop()
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_the_models_package_has_no_import_cycle():
    graph = _graph()
    assert "bayesbench.models.registry" in graph and graph["bayesbench.models.registry"] <= {
        "bayesbench.models.base", "bayesbench.models.capacity"}  # the registry imports no model
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_the_cycle_finder_finds_one():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
