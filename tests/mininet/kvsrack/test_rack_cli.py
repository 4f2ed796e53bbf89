"""The rack runner as a package: its command line, and who may import it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from kvswitch.paths import repo_root

# the product: nothing of it imports the runner (docs/rack.md; DESIGN "nothing imports mininet/")
PRODUCT = ("kvswitch", "controller", "server_agent", "client_lib/python", "softswitch")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60)


def test_help_and_bad_arguments_are_one_line() -> None:
    assert "--kill SERVER@S" in run("-m", "kvswitch", "rack", "--help").stdout
    bad = run("-m", "kvsrack", "--kill", "s3@soon")
    assert bad.returncode == 2
    assert "'s3@soon': expected SERVER@SECONDS, e.g. s3@20" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_command_line_does_not_load_mininet() -> None:
    """The command line, the scenarios and the topology load without Mininet (it is imported
    only to build the network), so a machine without it gets one line, not a traceback."""
    code = "import sys, kvsrack.cli, kvsrack.topology; print('mininet' in sys.modules)"
    assert run("-c", code).stdout.strip() == "False"


def test_the_product_never_imports_the_runner() -> None:
    root = repo_root()
    if root is None:
        pytest.skip("needs the source checkout")
    offenders = []
    for folder in PRODUCT:
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names = (
                    [a.name for a in node.names] if isinstance(node, ast.Import)
                    else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                )  # fmt: skip
                if any(n == "kvsrack" or n.startswith("kvsrack.") for n in names):
                    offenders.append(str(Path(path).relative_to(root)))
    assert not offenders
