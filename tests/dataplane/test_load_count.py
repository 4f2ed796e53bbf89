"""LoadcountTable (egress): every well-formed KVSwitch packet counts on its final destination."""

from __future__ import annotations

from .base import CLIENT, SERVERS, Dataplane, kvs, proto, udp_packet

S0, S1, S2, S3 = SERVERS


def test_counts_by_final_destination(dp: Dataplane) -> None:
    op = proto().op
    dp.make_hot("hot", 2, [S0, S1, S2])
    dp.make_valid(2, [S0, S1, S2], ver=3)
    sizes = {s: 0 for s in SERVERS}
    packets = {s: 0 for s in SERVERS}

    def send(dst: str, message: bytes, lands_on: list) -> None:
        pkt = bytes(udp_packet(CLIENT, dst, message))
        out = dp.send(CLIENT.port, pkt)
        assert sorted(port for port, _ in out) == sorted(s.port for s in lands_on)
        for port, data in out:
            server = next(s for s in SERVERS if s.port == port)
            sizes[server] += len(data)
            packets[server] += 1

    for seq in range(3):
        send(S3.ip, kvs(op.GET, "cold", seq=seq), [S3])
    # Hot Gets sent to the origin S0 land on S0, S1, S2 in turn: count on the final destination.
    for seq in range(3):
        send(S0.ip, kvs(op.GET, "hot", seq=seq), [[S0, S1, S2][seq]])
    # A hot Set: the origin and both replicas receive one packet each.
    send(S0.ip, kvs(op.SET, "hot", b"value"), [S0, S1, S2])
    # Not KVSwitch traffic: not counted.
    dp.send(CLIENT.port, udp_packet(CLIENT, S3.ip, b"dns?", dport=53))
    for server in SERVERS:
        assert dp.load_count(server) == (sizes[server], packets[server]), server.name
    assert packets == {S0: 2, S1: 2, S2: 2, S3: 3}
