"""The package's imports run one way (issue 31): no circle, and no import against the layers.

Every import statement counts, those inside functions too; only ``if TYPE_CHECKING:``
blocks (never run) are left out.  Layers, bottom up: kernels and data -> models ->
fitting -> engines -> api -> result -> scale and interop.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "bulkem"


def _module(path: Path) -> tuple[str, list[str]]:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
        return ".".join(parts), parts
    return ".".join(parts), parts[:-1]


def _imports(tree: ast.AST):
    """Import nodes, skipping the bodies of ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for stmt in node.orelse for n in _imports_in(stmt))
            continue
        yield from _imports_in(node)


def _imports_in(node: ast.AST):
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node
    else:
        yield from _imports(node)


def import_graph() -> dict[str, set[str]]:
    """Module -> the bulkem modules it imports (a name imported from a package counts as
    its submodule when there is one, else as the package)."""
    files = {}
    for path in ROOT.rglob("*.py"):
        name, pkg = _module(path)
        files[name] = (path, pkg)

    def resolve(name: str) -> str | None:
        while name and name not in files:
            name = name.rsplit(".", 1)[0] if "." in name else ""
        return name or None

    graph = {}
    for name, (path, pkg) in files.items():
        deps = set()
        for node in _imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = (".".join(pkg[: len(pkg) - node.level + 1] + ([node.module] if node.module
                                                                       else []))
                        if node.level else node.module or "")
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base
                           for a in node.names]
            deps.update(r for r in map(resolve, targets) if r and r != name)
        graph[name] = deps
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_circle():
    assert _circles(import_graph()) == []


def _layer_of(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def test_imports_run_one_way():
    forbidden = {  # importer's layer -> layers it must not import
        "kernels": {"models", "fitting", "engines", "api", "result", "scale", "interop"},
        "data": {"models", "fitting", "engines", "api", "result", "scale", "interop"},
        "models": {"engines", "api", "result", "scale", "interop"},
        "fitting": {"engines", "api", "result", "scale", "interop"},
        "engines": {"api", "result", "scale", "interop"},
        "api": {"scale", "interop"},
        "result": {"api", "scale", "interop", "ssm"},
    }
    wrong = sorted(f"{a} -> {b}" for a, deps in import_graph().items() for b in deps
                   if _layer_of(b) in forbidden.get(_layer_of(a), ()))
    assert wrong == []
