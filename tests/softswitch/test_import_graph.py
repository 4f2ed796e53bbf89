"""softswitch's modules import each other without a circle, and import nothing of KVSwitch.

Every import counts: at the top of a module, inside a function (a deferred import hides a circle,
it does not remove it) and under ``TYPE_CHECKING``. ``from package import name`` is an edge to the
submodule when ``name`` is one, else to the package. The implicit import of a module's parent
packages is not an edge (every module would otherwise depend on ``softswitch/__init__.py``).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import softswitch

ROOT = Path(softswitch.__file__).parent
KVSWITCH_PACKAGES = ("kvswitch", "controller", "agent", "client_lib", "bench", "sim")


def module_name(path: Path, root: Path) -> str:
    parts = ["softswitch", *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache  # one walk for the tests below
def import_graph(root: Path = ROOT) -> tuple[dict[str, set[str]], list[str]]:
    """softswitch module -> the softswitch modules it imports; and the KVSwitch imports found."""
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {m: set() for m in files}
    foreign: list[str] = []
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, *([base] if base else [])])
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    targets.append(sub if sub in files else base)
            for t in targets:
                if t.split(".")[0] in KVSWITCH_PACKAGES:
                    foreign.append(f"{mod} imports {t}")
                while t and t not in files and t.startswith("softswitch"):
                    t = t.rpartition(".")[0]  # `import softswitch.x.y` of a non-module name
                if t in files and t != mod:
                    graph[mod].add(t)
    return graph, foreign


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_cycles_finds_a_circle() -> None:
    """The checker itself sees a circle, also one closed by a deferred import."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_import_graph_sees_deferred_and_type_checking_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "softswitch"
    (pkg / "engine").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "engine" / "__init__.py").write_text("")
    (pkg / "engine" / "a.py").write_text("def f():\n    from softswitch.engine import b\n")
    (pkg / "engine" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\n"
    )
    graph, _ = import_graph(pkg)
    assert cycles(graph) == [["softswitch.engine.a", "softswitch.engine.b"]]


def test_softswitch_has_no_import_circle() -> None:
    graph, _ = import_graph()
    found = cycles(graph)
    assert not found, "import circles in softswitch/: " + "; ".join(" <-> ".join(c) for c in found)


def test_softswitch_imports_nothing_of_kvswitch() -> None:
    _, foreign = import_graph()
    assert not foreign, foreign
