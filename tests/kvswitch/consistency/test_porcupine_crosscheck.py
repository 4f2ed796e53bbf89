"""Cross-check: KVSwitch's checker and Porcupine (Go, an independent implementation) agree.

The Go program in ``porcupine/`` wraps Porcupine with the same register model. Random histories of
concurrent gets, sets and deletes over a few keys (some with unknown outcomes) go to both checkers.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from kvswitch.consistency.lincheck import Op, is_linearizable

HERE = Path(__file__).parent / "porcupine"


@pytest.fixture(scope="module")
def porcupine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = shutil.which("go")
    if go is None:
        pytest.skip("Go toolchain not installed: the Porcupine cross-check needs `go`")
    binary = tmp_path_factory.mktemp("porcupine") / "porcupine-check"
    proc = subprocess.run(
        [go, "build", "-o", str(binary), "."],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    return binary


def random_history(rng: random.Random) -> list[Op]:
    """A few clients; each op overlaps others; outputs sometimes right, sometimes wrong."""
    keys = [b"a", b"b"][: rng.randint(1, 2)]
    values = [b"1", b"2", b"3"]
    current: dict[bytes, bytes | None] = {k: None for k in keys}
    ops: list[Op] = []
    t = 0
    for _ in range(rng.randint(2, 9)):
        key = rng.choice(keys)
        call = t + rng.randint(0, 3)
        ret: float = call + rng.randint(0, 6)
        if rng.random() < 0.1:
            ret = math.inf
        kind = rng.choice(["get", "set", "delete"])
        if kind == "set":
            value = rng.choice(values)
            ops.append(Op("set", key, call, ret, value=value, client=len(ops)))
            current[key] = value
        elif kind == "get":
            seen = current[key] if rng.random() < 0.7 else rng.choice([None, *values])
            ops.append(Op("get", key, call, ret, output=seen, client=len(ops)))
        else:
            existed = rng.choice([None, current[key] is not None, current[key] is None])
            ops.append(Op("delete", key, call, ret, output=existed, client=len(ops)))
            current[key] = None
        t = call
    return ops


def to_json(ops: list[Op]) -> str:
    def text(b: bytes | None) -> str | None:
        return None if b is None else b.decode()

    return json.dumps(
        [
            {
                "kind": op.kind,
                "key": op.key.decode(),
                "call": int(op.call),
                "ret": -1 if op.ret == math.inf else int(op.ret),
                "value": text(op.value),
                "output": text(op.output) if op.kind == "get" else None,  # type: ignore[arg-type]
                "exists": op.output if op.kind == "delete" else None,
                "client": op.client,
            }
            for op in ops
        ]
    )


def test_verdicts_agree_with_porcupine(porcupine: Path) -> None:
    rng = random.Random(20261122)
    histories = [random_history(rng) for _ in range(1500)]
    proc = subprocess.run(
        [str(porcupine)],
        input="\n".join(map(to_json, histories)) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    theirs = [line == "true" for line in proc.stdout.split()]
    ours = [is_linearizable(h) for h in histories]
    assert len(theirs) == len(ours)
    disagreements = [h for h, a, b in zip(histories, ours, theirs, strict=True) if a != b]
    assert not disagreements, f"{len(disagreements)} disagreements, first: {disagreements[0]}"
    # Both verdicts occur, so the comparison is not vacuous.
    assert 0.1 < sum(ours) / len(ours) < 0.9
