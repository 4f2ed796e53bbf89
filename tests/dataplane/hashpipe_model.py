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
            if slot_cnt == 0 or slot_key == carry_key:
                self.keys[stage][idx] = carry_key
                self.counts[stage][idx] = slot_cnt + carry_cnt
                return
            if stage == 0 or carry_cnt > slot_cnt:
                self.keys[stage][idx], self.counts[stage][idx] = carry_key, carry_cnt
                carry_key, carry_cnt = slot_key, slot_cnt
