"""The adversarial suite (issue 11, docs/protocol.md "Trust"): forged packets from an ordinary
client host of a Mininet rack, on the rack as shipped (``on``) and on the same rack with every trust
rule switched off by its test-only flag (``off``, conftest.py).

``c1`` is a legitimate client whose operations are recorded and checked by
``kvswitch.consistency.lincheck``; ``c2`` is the attacker (its own legitimate writes are recorded
too: a client may write a cold key). Every case asserts on what later reads return and on the
agents' versions (and, for ops only servers send, on the switch's version registers), and asserts
that the
attack **succeeds** on the ``off`` rack, so each case is shown to fail without its defences.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable

import pytest

from kvswitch import protocol as p
from kvswitch.consistency.lincheck import Op, check_history
from tests.security.conftest import SERVERS, SWITCH_MAC, Rack

pytestmark = [pytest.mark.netns, pytest.mark.slow]

FORGED = (0xFFFF, 0xFFFFFFF0)  # the largest version an attacker would pick
RING = p.HashRing(SERVERS)


def key16(name: str) -> bytes:
    return p.pad_key(name)


def origin(key: bytes) -> int:
    return RING.origin(key)


def record(rack: Rack, client: str, rec: dict[str, object]) -> None:
    ret = rec.get("ret")
    rack.history.append(
        Op(
            kind=str(rec["kind"]),
            key=bytes.fromhex(str(rec["key"])),
            call=float(rec["call"]),  # type: ignore[arg-type]
            ret=math.inf if ret is None else float(ret),  # type: ignore[arg-type]
            value=None if rec["value"] is None else bytes.fromhex(str(rec["value"])),
            output=None
            if rec["output"] is None or rec["kind"] == "delete"  # a delete: either outcome
            else bytes.fromhex(str(rec["output"])),
            client=client,
        )
    )


def ops(rack: Rack, host: str, todo: list[list[str]]) -> list[dict[str, object]]:
    """Client operations from ``host`` (["get", name] / ["set", name, value]), recorded."""
    wire = [[o[0], key16(o[1]).hex(), *(v.encode().hex() for v in o[2:])] for o in todo]
    recs: list[dict[str, object]] = rack.shell(host)("ops", servers=rack.servers, ops=wire)
    for rec in recs:
        record(rack, host, rec)
    return recs


#: What :func:`reads` reports for a Get that failed (with the defences off, a forged copy can make
#: the switch drop a replica's replies: docs/protocol.md rule 6 takes them for a copy that is not
#: current, so the client times out instead of reading the forged value from it).
FAILED_READ = b"<failed>"


def reads(rack: Rack, name: str, n: int = 16) -> list[bytes | None]:
    recs = ops(rack, "c1", [["get", name]] * n)
    if rack.mode == "on":
        assert all(r["error"] is None for r in recs), recs
    return [
        FAILED_READ
        if r["error"] is not None
        else None
        if r["output"] is None
        else bytes.fromhex(str(r["output"]))
        for r in recs
    ]


def linearizable(rack: Rack, name: str) -> bool:
    results = check_history([o for o in rack.history if o.key == key16(name)])
    return all(r.ok for r in results)


def versions(rack: Rack, name: str) -> list[tuple[int, int, bool] | None]:
    out: list[tuple[int, int, bool] | None] = []
    for s in range(SERVERS):
        v = rack.versions(s).get(key16(name))
        out.append(None if v is None else (v.epoch, v.ver, v.live))
    return out


def wait_for(cond: Callable[[], bool], what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def holders(rack: Rack, name: str) -> list[int]:
    return [s for s in range(SERVERS) if key16(name) in rack.agents[s].keys()]  # noqa: SIM118 (a control call)


def make_hot(rack: Rack, names: list[str]) -> None:
    """Gets of ``names`` only (from c1, in the background) until the controller made each of them
    hot with at least one replica: their origins carry the load, so the balancing places them."""
    if rack.loaded:
        rack.shell("c1")("load_stop")
    rack.loaded = list(names)
    keys = [key16(n).hex() for n in names]
    rack.shell("c1")("load", servers=rack.servers, keys=keys, rate=200)
    for name in names:
        wait_for(lambda n=name: len(holders(rack, n)) >= 2, f"{name} to be replicated")


def settled_registers(rack: Rack) -> dict[str, list[int]]:
    """The version registers once the controller has stopped changing them (the same over three
    of its periods): a change during the attack is then the attack's."""
    last = rack.registers()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        time.sleep(1.5)
        now = rack.registers()
        if now == last:
            return now
        last = now
    raise AssertionError("the switch's version registers did not settle")


def server_ip(rack: Rack, s: int) -> str:
    return str(rack.server(s)["ip"])


def send(rack: Rack, host: str, to: int, msg: p.Message, **fields: object) -> dict[str, object]:
    dst = [server_ip(rack, to), p.KVS_PORT]
    answer: dict[str, object] = rack.shell(host)(
        "udp", dst=dst, payload_hex=msg.encode().hex(), **fields
    )
    return answer


def spoofed(rack: Rack, host: str, src_ip: str, to: int, msg: p.Message) -> None:
    c = rack.client(host)
    rack.shell(host)(
        "spoof",
        src=src_ip,
        dst=server_ip(rack, to),
        sport=p.KVS_PORT,
        dport=p.KVS_PORT,
        src_mac=c["mac"],
        dst_mac=SWITCH_MAC,
        iface=f"{host}-eth0",
        payload_hex=msg.encode().hex(),
    )


@pytest.fixture(scope="module")
def warm(rack: Rack) -> Rack:
    """Values for the keys of the suite written before their attack."""
    # (the late-* keys are first written by the attack itself: HashPipe has not seen them, so they
    # are cold then, whatever the controller's threshold has fallen to)
    cold = ["cold-remove", "cold-id", "cold-id-spoof", "cold-reply"]
    hot = ["hot-push", "hot-push-spoof", "hot-remove"]
    recs = ops(rack, "c1", [["set", n, f"{n}-v0"] for n in [*hot, *cold]])
    assert all(r["error"] is None for r in recs), recs
    return rack


def attack_holds(rack: Rack, **facts: bool) -> None:
    """The attack failed on the shipped rack (every fact true) and succeeded with the defences off
    (some fact false)."""
    if rack.mode == "on":
        assert all(facts.values()), f"the defence did not hold: {facts}"
    else:
        assert not all(facts.values()), f"the attack did not succeed with defences off: {facts}"


@pytest.mark.parametrize("source", ["own address", "spoofed server address"])
def test_forged_push_to_origin_and_replica(warm: Rack, source: str) -> None:
    name = "hot-push" if source == "own address" else "hot-push-spoof"
    key = key16(name)
    o = origin(key)
    make_hot(warm, [name])
    replica = next(s for s in holders(warm, name) if s != o)
    regs, vers = settled_registers(warm), versions(warm, name)
    forged = p.Message(p.Op.PUSH, key, b"FORGED", epoch=FORGED[0], ver=FORGED[1])
    for target in (o, replica):
        if source == "own address":
            send(warm, "c2", target, forged)
        else:  # the other holder's address, as if one server pushed to another
            other = replica if target == o else o
            spoofed(warm, "c2", server_ip(warm, other), target, forged)
    time.sleep(0.3)
    untouched = versions(warm, name) == vers and warm.registers() == regs
    before = reads(warm, name)
    wrote = ops(warm, "c1", [["set", name, f"{name}-legit"]])[0]
    after = reads(warm, name)
    attack_holds(
        warm,
        untouched=untouched,
        set_ok=wrote["error"] is None,
        no_forged_read=b"FORGED" not in before,
        reads_the_set=after == [f"{name}-legit".encode()] * 16,
        linearizable=linearizable(warm, name),
    )
    if warm.mode == "off":  # what issue 11 measured: the legitimate Set is refused as STALE
        assert wrote["error"] == "StaleWrite" and b"FORGED" in after


def test_forged_remove_to_a_replica(warm: Rack) -> None:
    name = "hot-remove"
    key = key16(name)
    make_hot(warm, [name])
    replica = next(s for s in holders(warm, name) if s != origin(key))
    regs, vers = settled_registers(warm), versions(warm, name)
    send(warm, "c2", replica, p.Message(p.Op.REMOVE, key, seq=1))
    time.sleep(0.3)
    got = reads(warm, name)
    attack_holds(
        warm,
        versions_kept=versions(warm, name) == vers,
        registers_kept=warm.registers() == regs,
        every_read_found=got == [f"{name}-v0".encode()] * 16,
        linearizable=linearizable(warm, name),
    )


def test_forged_remove_to_a_cold_keys_origin(warm: Rack) -> None:
    name = "cold-remove"
    vers = versions(warm, name)
    send(warm, "c2", origin(key16(name)), p.Message(p.Op.REMOVE, key16(name), seq=1))
    time.sleep(0.3)
    attack_holds(
        warm,
        versions_kept=versions(warm, name) == vers,
        found=reads(warm, name, 2) == [f"{name}-v0".encode()] * 2,
        linearizable=linearizable(warm, name),
    )


def _forged_set(name: str, value: bytes) -> p.Message:
    cid = random.randrange(1, 1 << 32)
    return p.Message(p.Op.SET, key16(name), value, cid=cid, seq=1, epoch=FORGED[0], ver=FORGED[1])


@pytest.mark.parametrize("transport", ["udp", "tcp", "udp-delete", "tcp-update"])
def test_client_chosen_version_on_a_key_that_turns_hot(warm: Rack, transport: str) -> None:
    """A client may write a cold key, but not choose its version: once the key turns hot, the
    switch's versions must still win (else every later Set is STALE and reads are stuck). The
    Delete variant leaves (defence off) a tombstone with the forged version, the UPDATE variant (an
    op only the switch sends, hidden behind a Get in one TCP segment) a value with it; a later
    unversioned Set keeps that version."""
    name = f"late-{transport}"
    key = key16(name)
    o = origin(key)
    value = f"{name}-by-c2".encode()
    forged = _forged_set(name, value)
    tcp_dst = [server_ip(warm, o), p.KVS_PORT]
    if transport == "udp-delete":
        forged = p.Message(p.Op.DEL, key, cid=forged.cid, seq=1, epoch=FORGED[0], ver=FORGED[1])
        answer = send(warm, "c2", o, forged)
        replies = [p.Message.decode(bytes.fromhex(str(a))) for a in answer["answers"]]  # type: ignore[union-attr]
        assert [(r.op, r.status) for r in replies] == [(p.Op.DEL_REPLY, p.Status.NOT_FOUND)]
        rec = {"kind": "delete", "key": key.hex(), "call": answer["call"], "ret": answer["ret"]}
        record(warm, "c2", {**rec, "value": None, "output": None})
    elif transport == "tcp-update":  # unanswered: an UPDATE is CONFIRMed to the switch
        update = p.Message(p.Op.UPDATE, key, value, epoch=FORGED[0], ver=FORGED[1])
        payload = p.Message(p.Op.GET, key, cid=forged.cid, seq=0).encode() + update.encode()
        warm.shell("c2")("tcp", dst=tcp_dst, payload_hex=payload.hex())
    elif transport == "udp":
        answer = send(warm, "c2", o, forged)
        replies = [p.Message.decode(bytes.fromhex(str(a))) for a in answer["answers"]]  # type: ignore[union-attr]
    else:  # a Get first: the switch parses only a segment's first header
        first = p.Message(p.Op.GET, key, cid=forged.cid, seq=0)
        payload = first.encode() + forged.encode()
        answer = warm.shell("c2")("tcp", dst=tcp_dst, payload_hex=payload.hex())
        data = bytes.fromhex(str(answer["data"]))
        replies = [p.Message.decode(data[p.message_length(data) :])] if data else []
    if transport in ("udp-delete", "tcp-update"):  # then the key gets a value from c1
        value = f"{name}-v0".encode()
        wrote_first = ops(warm, "c1", [["set", name, value.decode()]])[0]
        if wrote_first["error"] is not None:  # refused already (the key turned hot meanwhile)
            attack_holds(warm, set_after_the_forgery_ok=False)
            assert wrote_first["error"] == "StaleWrite"
            return
    else:
        acked = [r for r in replies if r.op == p.Op.SET_REPLY and r.status == p.Status.OK]
        assert acked, replies  # a client may write a cold key: that much it is entitled to
        rec = {"kind": "set", "key": key.hex(), "call": answer["call"], "ret": answer["ret"]}
        record(warm, "c2", {**rec, "value": value.hex(), "output": None})
    stored = versions(warm, name)[o]
    if transport in ("udp", "tcp"):  # (the other variants' key was never written before)
        assert holders(warm, name) == [o], "the key must still be cold when it is written"
    make_hot(warm, [name])
    wrote = ops(warm, "c1", [["set", name, f"{name}-legit"]])[0]
    after = reads(warm, name)
    attack_holds(
        warm,
        version_not_forged=stored is not None and stored[:2] != FORGED,
        # a cold Set is entitled to no version (c1's Set after the Delete may have been hot)
        set_unversioned=transport not in ("udp", "tcp")
        or (stored is not None and stored[:2] == (0, 0)),
        set_ok=wrote["error"] is None,
        reads_the_set=after == [f"{name}-legit".encode()] * 16,
        linearizable=linearizable(warm, name),
    )
    if warm.mode == "off":
        assert wrote["error"] == "StaleWrite" and value in after


@pytest.mark.parametrize("source", ["own address", "spoofed victim address"])
def test_request_id_of_another_client(warm: Rack, source: str) -> None:
    """The attacker sends a victim's next (cid, seq) first (say it saw one of its packets): the
    victim's own write must still be applied, not answered as a repeat of the attacker's."""
    name = "cold-id" if source == "own address" else "cold-id-spoof"
    key, o = key16(name), origin(key16(name))
    cid, seq = random.randrange(1, 1 << 32), 77
    forged = p.Message(p.Op.SET, key, f"{name}-by-c2".encode(), cid=cid, seq=seq)
    if source == "own address":
        answer = send(warm, "c2", o, forged)
        rec = {"kind": "set", "key": key.hex(), "call": answer["call"], "ret": answer["ret"]}
        record(warm, "c2", {**rec, "value": forged.value.hex(), "output": None})
    else:  # unanswered (the reply goes to c1's port 8900, where nobody listens): outcome unknown
        call = time.monotonic()
        spoofed(warm, "c2", str(warm.client("c1")["ip"]), o, forged)
        rec = {"kind": "set", "key": key.hex(), "call": call, "ret": None}
        record(warm, "c2", {**rec, "value": forged.value.hex(), "output": None})
    time.sleep(0.2)
    victim = p.Message(p.Op.SET, key, f"{name}-by-c1".encode(), cid=cid, seq=seq)
    answer = send(warm, "c1", o, victim)
    replies = [p.Message.decode(bytes.fromhex(str(a))) for a in answer["answers"]]  # type: ignore[union-attr]
    assert replies and replies[0].status == p.Status.OK, replies  # acknowledged either way
    rec = {"kind": "set", "key": key.hex(), "call": answer["call"], "ret": answer["ret"]}
    record(warm, "c1", {**rec, "value": victim.value.hex(), "output": None})
    got = reads(warm, name, 2)
    attack_holds(
        warm,
        applied_not_a_repeat=not replies[0].flags & p.F_DUP,
        reads_the_victims_set=got == [victim.value] * 2,
        linearizable=linearizable(warm, name),
    )


def test_forged_reply_to_another_client(warm: Rack) -> None:
    """A reply only a server may send: the attacker answers a victim's Get before the server does
    (say it saw the request). The victim must read only what a Set wrote."""
    name = "cold-reply"
    key, o = key16(name), origin(key16(name))
    cid, seq, port = random.randrange(1, 1 << 32), 5, 45000
    victim = warm.shell("c1")
    get = p.Message(p.Op.GET, key, cid=cid, seq=seq)
    dst = [server_ip(warm, o), p.KVS_PORT]
    # the victim binds its port, then sends its Get 0.6 s later; the forged reply comes meanwhile
    victim.start("udp", dst=dst, payload_hex=get.encode().hex(), sport=port, delay=0.6)
    time.sleep(0.2)
    fake = get.reply(p.Op.GET_REPLY, p.Status.OK, b"FABRICATED")
    c1 = str(warm.client("c1")["ip"])
    warm.shell("c2")("udp", dst=[c1, port], payload_hex=fake.encode().hex(), sport=p.KVS_PORT)
    answer = victim.result()
    matching = [
        m
        for m in (p.Message.decode(bytes.fromhex(str(a))) for a in answer["answers"])
        if (m.op, m.cid, m.seq, m.key) == (p.Op.GET_REPLY, cid, seq, key)
    ]
    assert matching, answer  # the server's own reply comes either way
    first = matching[0]  # what a client library takes: the first reply that matches its request
    rec = {"kind": "get", "key": key.hex(), "call": answer["call"], "ret": answer["ret"]}
    record(warm, "c1", {**rec, "value": None, "output": first.value.hex()})
    attack_holds(
        warm,
        reads_the_set=first.value == f"{name}-v0".encode(),
        only_the_servers_reply=len(matching) == 1,
        linearizable=linearizable(warm, name),
    )
