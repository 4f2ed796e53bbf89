"""A pure-Python HashPipe (Sivaraman et al., SOSR'17) with the data plane's hashing and tie rule
(docs/protocol.md "HashPipe hashing"; p4src/features/hashpipe.p4): the reference the switch's
registers are compared with."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

HP_TAG_SEED = (0x9E3779B9 * 9) % 2**32


def stage_index(stage: int, seed: int, key: bytes, slots: int) -> int:
    """Stage ``stage``'s index: crc32({seed, key, ``stage`` 32-bit zero words}) mod w over the
    big-endian concatenation."""
    return zlib.crc32(struct.pack("!I", seed) + key + bytes(4 * stage)) % slots


def key_tag(key: bytes) -> int:
    """The tag later stages compare: crc32({HP_TAG_SEED, the key's words last to first}) | 1."""
    words = b"".join(key[i : i + 4] for i in (12, 8, 4, 0))
    return zlib.crc32(struct.pack("!I", HP_TAG_SEED) + words) | 1


@dataclass
class HashPipeModel:
    seeds: tuple[int, ...]
    slots: int
    keys: list[list[bytes]] = field(init=False)
    counts: list[list[int]] = field(init=False)
    merges: list[int] = field(init=False)  # per stage: carried keys added to their slot

    def __post_init__(self) -> None:
        self.keys = [[bytes(16)] * self.slots for _ in self.seeds]
        self.counts = [[0] * self.slots for _ in self.seeds]
        self.merges = [0] * len(self.seeds)

    def insert(self, key: bytes) -> None:
        carry_key, carry_cnt = key, 1
        for stage, seed in enumerate(self.seeds):
            idx = stage_index(stage, seed, carry_key, self.slots)
            slot_key, slot_cnt = self.keys[stage][idx], self.counts[stage][idx]
            if slot_cnt == 0:
                self.keys[stage][idx], self.counts[stage][idx] = carry_key, carry_cnt
                return
            # the same key: the whole key in the first stage, its tag in later ones (a key
            # sharing the tag merges into the occupant, whose key stays)
            same = slot_key == carry_key if stage == 0 else key_tag(slot_key) == key_tag(carry_key)
            if same:
                self.counts[stage][idx] = slot_cnt + carry_cnt
                self.merges[stage] += 1
                return
            if stage == 0 or carry_cnt > slot_cnt:
                self.keys[stage][idx], self.counts[stage][idx] = carry_key, carry_cnt
                carry_key, carry_cnt = slot_key, slot_cnt


def tag_twin(key: bytes) -> bytes:
    """Another key with ``key``'s tag and its slot in every stage. CRC-32 is affine, so every
    stage's index CRC has one linear part (the seeds add constants), and ``key ^ d`` is such a twin
    for each ``d != 0`` that this part and the tag's send to 0: one is found by elimination."""

    def linear(f: Callable[[bytes], int]) -> list[int]:
        zero = f(bytes(16))
        return [f((1 << i).to_bytes(16, "big")) ^ zero for i in range(128)]

    index_crc = linear(lambda k: zlib.crc32(bytes(4) + k))
    joint = [t >> 1 << 32 | i for t, i in zip(linear(key_tag), index_crc, strict=True)]
    basis: list[tuple[int, int]] = []  # (value, the key bits combined into it), reduced
    for bit, v in enumerate(joint):
        comb = 1 << bit
        for bv, bc in basis:
            if v ^ bv < v:
                v, comb = v ^ bv, comb ^ bc
        if not v:  # comb is in the kernel
            return (int.from_bytes(key, "big") ^ comb).to_bytes(16, "big")
        basis.append((v, comb))
        basis.sort(reverse=True)
    raise AssertionError("the maps have full rank")  # 128 bits onto 63 cannot


VECTORS_ABOUT = (
    "docs/protocol.md 'HashPipe hashing' and p4src/features/hashpipe.p4: stage s indexes with "
    "zlib.crc32(seed_s (4 bytes, big-endian) + key16 + 4s zero bytes) mod slots (a power of two); "
    "stage 0 always inserts, later "
    "stages add to the same key, fill an empty slot (count 0) or keep the larger count (ties keep "
    "the occupant); in later stages 'the same key' is the same tag, zlib.crc32(HP_TAG_SEED "
    "(0x8FF34781, 4 bytes, big-endian) + key16's four 4-byte words last to first) | 1. "
    "trace[i] is an index into population; population[j] is the ASCII of "
    "'key-<j>' right-padded with zero bytes to 16. registers are the state after the whole trace; "
    "keys are hex, null where the count is 0."
)


def make_vectors(stages: int, slots: int, population: int, length: int, seed: int) -> dict:
    """Test vectors: a Zipf-like trace and the registers this model ends with."""
    import random

    rng = random.Random(seed)
    keys = [f"key-{j}".encode().ljust(16, b"\0") for j in range(population)]
    weights = [1 / (rank + 1) for rank in range(population)]
    trace = rng.choices(range(population), weights, k=length)
    seeds = tuple((0x9E3779B9 * (s + 1)) % 2**32 for s in range(stages))
    model = HashPipeModel(seeds, slots)
    for index in trace:
        model.insert(keys[index])
    return {
        "about": VECTORS_ABOUT,
        "stages": stages,
        "slots": slots,
        "seeds": list(seeds),
        "tag_seed": HP_TAG_SEED,
        "population": population,
        "trace": trace,
        "registers": {
            "keys": [
                [k.hex() if c else None for k, c in zip(ks, cs, strict=True)]
                for ks, cs in zip(model.keys, model.counts, strict=True)
            ],
            "counts": model.counts,
        },
    }


def main() -> None:
    """Write tests/vectors/hashpipe.json (run from the repository root:
    ``python -m tests.dataplane.hashpipe_model``)."""
    import json
    from pathlib import Path

    from kvswitch.bench.kernel import hashpipe_width

    slots = hashpipe_width(64, 4)
    vectors = make_vectors(stages=4, slots=slots, population=300, length=10_000, seed=20190908)
    out = Path("tests/vectors/hashpipe.json")
    out.write_text(json.dumps(vectors, indent=None, separators=(",", ":")) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
