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


@cache  # one parse for the tests below
def parsed(root: Path) -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text(), str(p)) for p in sorted(root.rglob("*.py"))}


@cache
def import_graph(root: Path = ROOT) -> tuple[dict[str, set[str]], list[str]]:
    """softswitch module -> the softswitch modules it imports; and the KVSwitch imports found."""
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {m: set() for m in files}
    foreign: list[str] = []
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(parsed(root)[path]):
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


# the methods of the generated header/struct classes and of header stacks (engine/objects.py
# Stack): underscored so that they cannot clash with a P4 field name, called by the packet paths
GENERATED_OBJECT_METHODS = {"_copy", "_reset", "_set", "_inv", "_next", "_last", "_at"}


def private_uses_across_files(root: Path = ROOT) -> list[str]:
    """``obj._name`` (not on ``self``/``cls``) where ``_name`` is defined (a method, or an
    attribute assigned) in another softswitch file and not in this one."""
    trees = parsed(root)
    defined: dict[Path, set[str]] = {}
    for path, tree in trees.items():
        names = defined.setdefault(path, set())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
    found = []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
                continue
            if node.attr.startswith("__") or node.attr in defined[path] | GENERATED_OBJECT_METHODS:
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            owners = [p for p, names in defined.items() if p != path and node.attr in names]
            if owners:
                where = ", ".join(str(p.relative_to(root)) for p in owners)
                found.append(f"{path.relative_to(root)}:{node.lineno} uses {node.attr} of {where}")
    return found


def test_private_use_checker_sees_one(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("class A:\n    def _hidden(self):\n        pass\n")
    (tmp_path / "b.py").write_text("def f(a):\n    return a._hidden()\n")
    assert private_uses_across_files(tmp_path) == ["b.py:2 uses _hidden of a.py"]


def test_no_private_use_across_files() -> None:
    """Modules talk through public names: the packet paths use the switch's device state through
    its public methods, as the architecture interface declares them."""
    found = private_uses_across_files()
    assert not found, found
