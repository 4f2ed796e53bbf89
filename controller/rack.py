"""Addresses of the rack's servers, as the tables need them (IPv4, MAC, switch port)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServerAddress:
    ip: int
    mac: int
    port: int


@dataclass(frozen=True)
class Rack:
    servers: tuple[ServerAddress, ...]

    def __post_init__(self) -> None:
        for what in ("ip", "mac", "port"):
            values = [getattr(s, what) for s in self.servers]
            if len(set(values)) != len(values):
                raise ValueError(f"two servers share a {what}")

    @classmethod
    def synthetic(cls, count: int) -> Rack:
        """``count`` servers 10.0.0.1.. on ports 1.., MACs 02:00:00:00:xx:xx (the test racks')."""
        if not 0 < count < 254 * 256:
            raise ValueError("between 1 and 65023 servers")
        return cls(
            tuple(
                ServerAddress(ip=0x0A000001 + s, mac=0x020000000000 + s + 1, port=s + 1)
                for s in range(count)
            )
        )

    def __len__(self) -> int:
        return len(self.servers)

    def server_of_ip(self) -> dict[int, int]:
        return {a.ip: s for s, a in enumerate(self.servers)}

    def server_of_port(self) -> dict[int, int]:
        return {a.port: s for s, a in enumerate(self.servers)}
