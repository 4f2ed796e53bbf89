"""BMv2's hash and checksum algorithms, bit for bit (bm_sim/calculations.cpp)."""

from __future__ import annotations

import random as _random
import sys
import zlib
from collections.abc import Callable

_LITTLE = sys.byteorder == "little"


# (width, polynomial, init, xor out, reflect in, reflect out) of CRC-32 (IEEE, zlib's)
CRC32_PARAMS = (32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, True, True)


def _reflect(value: int, bits: int) -> int:
    out = 0
    for i in range(bits):
        if value >> i & 1:
            out |= 1 << (bits - 1 - i)
    return out


def _crc_table(width: int, poly: int) -> list[int]:
    top = 1 << (width - 1)
    mask = (1 << width) - 1
    table = []
    for dividend in range(256):
        rem = dividend << (width - 8)
        for _ in range(8):
            rem = ((rem << 1) ^ poly) if rem & top else (rem << 1)
        table.append(rem & mask)
    return table


def make_crc(
    width: int, poly: int, init: int, xor_out: int, refin: bool, refout: bool
) -> Callable[[bytes], int]:
    """A table-driven CRC with BMv2's ``crc_custom`` parameters (zlib's, in C, for CRC-32's)."""
    if (width, poly, init, xor_out, refin, refout) == CRC32_PARAMS:
        return zlib.crc32
    table = _crc_table(width, poly)
    mask = (1 << width) - 1
    shift = width - 8
    refl8 = [_reflect(b, 8) for b in range(256)]

    def crc(data: bytes) -> int:
        rem = init
        for byte in data:
            d = (refl8[byte] if refin else byte) ^ (rem >> shift)
            rem = (table[d & 0xFF] ^ (rem << 8)) & mask
        return (_reflect(rem, width) if refout else rem) ^ xor_out

    return crc


crc16 = make_crc(16, 0x8005, 0x0000, 0x0000, True, True)
crc16_custom = make_crc(16, 0x8005, 0x0000, 0x0000, True, True)
crc_ccitt = make_crc(16, 0x1021, 0xFFFF, 0x0000, False, False)


def crc32(data: bytes) -> int:
    return zlib.crc32(data)


def crc32_custom(data: bytes) -> int:
    return zlib.crc32(data)


def csum16(data: bytes) -> int:
    """Internet checksum (RFC 1071) of ``data`` (odd length padded with a zero byte)."""
    if len(data) & 1:
        data += b"\x00"
    # the one's-complement sum does not depend on byte order: sum native 16-bit words, then swap
    s = sum(memoryview(data).cast("H"))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    r = ~s & 0xFFFF
    if _LITTLE:
        r = ((r & 0xFF) << 8) | (r >> 8)
    return r


def xor16(data: bytes) -> int:
    if len(data) & 1:
        data += b"\x00"
    out = 0
    for i in range(0, len(data), 2):
        out ^= int.from_bytes(data[i : i + 2], "big")
    return out


def identity(data: bytes) -> int:
    return int.from_bytes(data[:8], "big")


def random_hash(data: bytes) -> int:
    return _random.getrandbits(64)


ALGORITHMS: dict[str, Callable[[bytes], int]] = {
    "crc16": crc16,
    "crc16_custom": crc16_custom,
    "crc32": crc32,
    "crc32_custom": crc32_custom,
    "csum16": csum16,
    "xor16": xor16,
    "identity": identity,
    "random": random_hash,
}


def pack_fields(values: list[int], widths: list[int]) -> bytes:
    """Concatenate fields big-endian at bit granularity, zero-padded to whole bytes (BMv2)."""
    acc = 0
    total = 0
    for v, w in zip(values, widths, strict=True):
        acc = (acc << w) | (v & ((1 << w) - 1))
        total += w
    pad = (-total) % 8
    return (acc << pad).to_bytes((total + pad) // 8, "big")


def pack_fields_valid(values: list[int], widths: list[int], valid: list[bool]) -> bytes:
    """pack_fields, leaving out the fields whose header is invalid."""
    keep = [i for i, v in enumerate(valid) if v]
    return pack_fields([values[i] for i in keep], [widths[i] for i in keep])
