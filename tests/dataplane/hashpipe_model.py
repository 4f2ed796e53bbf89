"""A pure-Python HashPipe (Sivaraman et al., SOSR'17) with the data plane's hashing and tie rule
(docs/protocol.md "HashPipe hashing"; p4src/features/hashpipe.p4): the reference the switch's
registers are compared with."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field


def stage_index(seed: int, key: bytes, slots: int) -> int:
    """crc32({seed, key}) mod w over the 20-byte big-endian concatenation."""
    return zlib.crc32(struct.pack("!I", seed) + key) % slots


@dataclass
class HashPipeModel:
    seeds: tuple[int, ...]
    slots: int
    # the TNA build's later stages (p4src/features/hashpipe_tna.p4): the count decides before the
    # key is compared, so a carried key meeting its own copy is treated as another key
    tofino: bool = False
    keys: list[list[bytes]] = field(init=False)
    counts: list[list[int]] = field(init=False)

    def __post_init__(self) -> None:
        self.keys = [[bytes(16)] * self.slots for _ in self.seeds]
        self.counts = [[0] * self.slots for _ in self.seeds]

    def insert(self, key: bytes) -> None:
        carry_key, carry_cnt = key, 1
        for stage, seed in enumerate(self.seeds):
            idx = stage_index(seed, carry_key, self.slots)
            slot_key, slot_cnt = self.keys[stage][idx], self.counts[stage][idx]
            if self.tofino and stage > 0:
                if slot_cnt == 0 or carry_cnt > slot_cnt:
                    self.keys[stage][idx], self.counts[stage][idx] = carry_key, carry_cnt
                    if slot_cnt == 0:
                        return
                    carry_key, carry_cnt = slot_key, slot_cnt
                continue
            if slot_cnt == 0 or slot_key == carry_key:
                self.keys[stage][idx] = carry_key
                self.counts[stage][idx] = slot_cnt + carry_cnt
                return
            if stage == 0 or carry_cnt > slot_cnt:
                self.keys[stage][idx], self.counts[stage][idx] = carry_key, carry_cnt
                carry_key, carry_cnt = slot_key, slot_cnt


VECTORS_ABOUT = (
    "docs/protocol.md 'HashPipe hashing' and p4src/features/hashpipe.p4: stage s indexes with "
    "zlib.crc32(seed_s (4 bytes, big-endian) + key16) mod slots; stage 0 always inserts, later "
    "stages add to the same key, fill an empty slot (count 0) or keep the larger count (ties keep "
    "the occupant). trace[i] is an index into population; population[j] is the ASCII of "
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
