"""The consistency package is product: it imports nothing of bench/ (bench imports it, never the
reverse) and no numba (the controller and the rack's history checker load it). Every import
counts, also one inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import kvswitch.consistency

ROOT = Path(kvswitch.consistency.__file__).parent
FORBIDDEN = ("kvswitch.bench", "numba")


def forbidden_imports(root: Path) -> list[str]:
    """``file:line imports name`` for every import of a FORBIDDEN module under ``root``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                if any(name == f or name.startswith(f + ".") for f in FORBIDDEN):
                    found.append(f"{path.relative_to(root)}:{node.lineno} imports {name}")
                    break
    return found


def test_checker_sees_a_deferred_bench_import(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def f():\n    from kvswitch.bench import coherence\n")
    (tmp_path / "b.py").write_text("import numba.core\nfrom kvswitch import benchmarks\n")
    assert forbidden_imports(tmp_path) == [
        "a.py:2 imports kvswitch.bench",
        "b.py:1 imports numba.core",
    ]


def test_consistency_imports_nothing_of_bench() -> None:
    assert (ROOT / "explore.py").exists() and (ROOT / "lincheck.py").exists()
    found = forbidden_imports(ROOT)
    assert not found, found
