"""P4Runtime behaviour the specification fixes, checked with raw protobuf requests: arbitration,
pipeline config actions, error codes, batch atomicity, canonical byte strings, wildcard reads."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import grpc
import pytest
from finsy.proto import p4r, p4r_grpc, rpc_code, rpc_status

from softswitch.runtime.p4info_index import P4InfoIndex
from tests.softswitch.runtime.conftest import Client, Program, Server

Code = rpc_code.Code


@pytest.fixture
def clients(rt_server: Server) -> Iterator[list[Client]]:
    made: list[Client] = []
    yield made
    for c in made:
        c.close()


@pytest.fixture
def primary(
    rt_server: Server, clients: list[Client], program: Program
) -> tuple[Client, P4InfoIndex]:
    """A client that is primary and has set the test program, with the program's P4Info."""
    a = client(rt_server, clients)
    a.arbitrate(1)
    a.set_pipeline(program)
    return a, P4InfoIndex(program.bundle.compile().p4info)


def client(rt_server: Server, clients: list[Client]) -> Client:
    c = Client(rt_server.address)
    clients.append(c)
    return c


def details(err: grpc.RpcError) -> list[p4r.Error]:
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = rpc_status.Status.FromString(value)
            out = []
            for d in status.details:
                e = p4r.Error()
                d.Unpack(e)
                out.append(e)
            return out
    return []


def l2_entry(
    index: P4InfoIndex, port: bytes, out_port: int = 2, op: int = p4r.Update.INSERT
) -> p4r.Update:
    table = index.table("l2")
    action = index.action("forward")
    assert table and action
    te = p4r.TableEntry(table_id=table.id)
    te.match.add(field_id=table.keys[0].id).exact.value = port
    te.action.action.action_id = action.id
    te.action.action.params.add(param_id=1, value=out_port.to_bytes(2, "big"))
    return p4r.Update(type=op, entity=p4r.Entity(table_entry=te))


def test_arbitration_primary_backup_and_failover(rt_server: Server, clients: list[Client]) -> None:
    a, b = client(rt_server, clients), client(rt_server, clients)
    arb = a.arbitrate(10)
    assert arb.status.code == Code.OK and arb.election_id.low == 10
    arb = b.arbitrate(5)
    assert arb.status.code == Code.ALREADY_EXISTS and arb.election_id.low == 10  # backup
    # b takes over with a higher id: both are told
    arb_b = b.arbitrate(20)
    assert arb_b.status.code == Code.OK
    arb_a = a.next_arbitration()
    assert arb_a.status.code == Code.ALREADY_EXISTS and arb_a.election_id.low == 20
    # the same election id on another stream is refused and that stream is closed
    c = client(rt_server, clients)
    with pytest.raises(grpc.RpcError) as exc:
        c.arbitrate(20)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # the primary leaves: the backup hears there is no primary
    b.close()
    clients.remove(b)
    arb = a.next_arbitration()
    assert arb.status.code == Code.NOT_FOUND


def test_pipeline_required_and_permission(
    rt_server: Server, clients: list[Client], program: Program
) -> None:
    a, b = client(rt_server, clients), client(rt_server, clients)
    a.arbitrate(10)
    b.arbitrate(3)
    with pytest.raises(grpc.RpcError) as exc:
        a.stub.GetForwardingPipelineConfig(p4r.GetForwardingPipelineConfigRequest(device_id=0))
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    index = P4InfoIndex(program.bundle.compile().p4info)
    with pytest.raises(grpc.RpcError) as exc:
        a.write(l2_entry(index, b"\x01"))
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as exc:
        b.set_pipeline(program)
    assert exc.value.code() == grpc.StatusCode.PERMISSION_DENIED
    # VERIFY and VERIFY_AND_SAVE install nothing; COMMIT installs the saved config
    req = p4r.SetForwardingPipelineConfigRequest
    a.set_pipeline(program, req.VERIFY)
    assert rt_server.device.pipeline is None
    a.set_pipeline(program, req.VERIFY_AND_SAVE, cookie=9)
    assert rt_server.device.pipeline is None
    a.stub.SetForwardingPipelineConfig(
        req(device_id=0, election_id=p4r.Uint128(low=10), action=req.COMMIT)
    )
    got = a.stub.GetForwardingPipelineConfig(p4r.GetForwardingPipelineConfigRequest(device_id=0))
    assert got.config.cookie.cookie == 9 and got.config.p4info.tables
    assert got.config.p4_device_config == program.bundle.to_bytes()
    with pytest.raises(grpc.RpcError) as exc:
        b.write(l2_entry(index, b"\x01"))
    assert exc.value.code() == grpc.StatusCode.PERMISSION_DENIED
    # a bad device config is refused and the running pipeline stays
    bad = p4r.ForwardingPipelineConfig(p4info=got.config.p4info, p4_device_config=b"not a bundle")
    with pytest.raises(grpc.RpcError) as exc:
        a.stub.SetForwardingPipelineConfig(
            req(
                device_id=0,
                election_id=p4r.Uint128(low=10),
                action=req.VERIFY_AND_COMMIT,
                config=bad,
            )
        )
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert rt_server.device.pipeline is not None


def test_errors_per_update_and_atomicity(primary: tuple[Client, P4InfoIndex]) -> None:
    a, index = primary
    unknown_table = p4r.Update(
        type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=p4r.TableEntry(table_id=0x0200FFFF))
    )
    too_wide = l2_entry(index, b"\x02\x00")  # 512 does not fit bit<9>: OUT_OF_RANGE (spec 8.4)
    bad_param = l2_entry(index, b"\x03", out_port=1 << 12)  # does not fit bit<9>
    good = l2_entry(index, b"\x00\x04")  # non-canonical but fitting: accepted
    with pytest.raises(grpc.RpcError) as exc:
        a.write(unknown_table, too_wide, bad_param, good)  # CONTINUE_ON_ERROR
    assert exc.value.code() == grpc.StatusCode.UNKNOWN
    codes = [e.canonical_code for e in details(exc.value)]
    assert codes == [Code.NOT_FOUND, Code.OUT_OF_RANGE, Code.OUT_OF_RANGE, Code.OK]
    [entity] = a.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=index.table("l2").id)))  # type: ignore[union-attr]
    assert entity.table_entry.match[0].exact.value == b"\x04"  # read back canonical
    assert entity.table_entry.action.action.params[0].value == b"\x02"

    # ROLLBACK_ON_ERROR: the good insert before the failure is undone
    with pytest.raises(grpc.RpcError) as exc:
        a.write(
            l2_entry(index, b"\x05"),
            l2_entry(index, b"\x04"),
            atomicity=p4r.WriteRequest.ROLLBACK_ON_ERROR,
        )
    codes = [e.canonical_code for e in details(exc.value)]
    assert codes == [Code.ABORTED, Code.ALREADY_EXISTS]
    assert len(a.read(p4r.Entity(table_entry=p4r.TableEntry()))) == 1
    # MODIFY / DELETE of a missing entry: NOT_FOUND; priority on an exact table: INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as exc:
        a.write(l2_entry(index, b"\x06", op=p4r.Update.DELETE))
    assert [e.canonical_code for e in details(exc.value)] == [Code.NOT_FOUND]
    upd = l2_entry(index, b"\x07")
    upd.entity.table_entry.priority = 3
    with pytest.raises(grpc.RpcError) as exc:
        a.write(upd)
    assert [e.canonical_code for e in details(exc.value)] == [Code.INVALID_ARGUMENT]
    # the switch still serves after all that
    a.write(l2_entry(index, b"\x08"))
    assert len(a.read(p4r.Entity(table_entry=p4r.TableEntry()))) == 2
    # read filtered by action; an empty Entity is not a wildcard
    by_action = p4r.TableEntry(table_id=index.table("l2").id)  # type: ignore[union-attr]
    by_action.action.action.action_id = index.action("drop").id  # type: ignore[union-attr]
    assert a.read(p4r.Entity(table_entry=by_action)) == []
    by_action.action.action.action_id = index.action("forward").id  # type: ignore[union-attr]
    assert len(a.read(p4r.Entity(table_entry=by_action))) == 2
    with pytest.raises(grpc.RpcError) as exc:
        a.read(p4r.Entity())
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_ternary_rules_registers_and_reconcile(
    primary: tuple[Client, P4InfoIndex], program: Program
) -> None:
    a, index = primary
    acl, punt = index.table("acl"), index.action("punt")
    assert acl and punt

    def acl_update(value: bytes, mask: bytes, priority: int) -> p4r.Update:
        te = p4r.TableEntry(table_id=acl.id, priority=priority)
        fm = te.match.add(field_id=acl.keys[0].id)
        fm.ternary.value, fm.ternary.mask = value, mask
        te.action.action.action_id = punt.id
        return p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=te))

    for bad in (
        acl_update(b"\x08\x01", b"\xff\x00", 1),
        acl_update(b"\x08\x00", b"\xff\x00", 0),
        acl_update(b"\x00", b"\x00", 1),
    ):
        with pytest.raises(grpc.RpcError) as exc:
            a.write(bad)
        assert [e.canonical_code for e in details(exc.value)] == [Code.INVALID_ARGUMENT]
    a.write(acl_update(b"\x08\x00", b"\xff\x00", 1))

    reg = index.register("last_ttl")
    assert reg
    entry = p4r.RegisterEntry(register_id=reg.id, index=p4r.Index(index=2))
    entry.data.bitstring = b"\x2a"
    a.write(p4r.Update(type=p4r.Update.MODIFY, entity=p4r.Entity(register_entry=entry)))
    cells = a.read(p4r.Entity(register_entry=p4r.RegisterEntry(register_id=reg.id)))
    assert len(cells) == reg.size and cells[2].register_entry.data.bitstring == b"\x2a"
    entry.index.index = reg.size
    with pytest.raises(grpc.RpcError) as exc:
        a.write(p4r.Update(type=p4r.Update.MODIFY, entity=p4r.Entity(register_entry=entry)))
    assert [e.canonical_code for e in details(exc.value)] == [Code.OUT_OF_RANGE]

    # RECONCILE_AND_COMMIT keeps entries and register values
    a.set_pipeline(program, p4r.SetForwardingPipelineConfigRequest.RECONCILE_AND_COMMIT)
    assert len(a.read(p4r.Entity(table_entry=p4r.TableEntry()))) == 1
    cells = a.read(
        p4r.Entity(register_entry=p4r.RegisterEntry(register_id=reg.id, index=p4r.Index(index=2)))
    )
    assert cells[0].register_entry.data.bitstring == b"\x2a"
    # VERIFY_AND_COMMIT starts afresh
    a.set_pipeline(program)
    assert a.read(p4r.Entity(table_entry=p4r.TableEntry())) == []


def test_capabilities(rt_server: Server) -> None:
    with grpc.insecure_channel(rt_server.address) as ch:
        resp = p4r_grpc.P4RuntimeStub(ch).Capabilities(p4r.CapabilitiesRequest())
    assert resp.p4runtime_api_version.startswith("1.")


def test_default_entry_scope_commit_and_direct_counters(
    rt_server: Server, clients: list[Client], program: Program
) -> None:
    a = client(rt_server, clients)
    a.arbitrate(1)
    req = p4r.SetForwardingPipelineConfigRequest
    with pytest.raises(grpc.RpcError) as exc:  # nothing saved
        a.stub.SetForwardingPipelineConfig(
            req(device_id=0, election_id=p4r.Uint128(low=1), action=req.COMMIT)
        )
    assert exc.value.code() == grpc.StatusCode.NOT_FOUND
    a.set_pipeline(program)
    index = P4InfoIndex(program.bundle.compile().p4info)
    lpm, acl = index.table("ipv4_lpm"), index.table("acl")
    drop, noaction = index.action("drop"), index.action("NoAction")
    assert lpm and acl and drop and noaction

    def default_update(action_id: int | None) -> p4r.Update:
        te = p4r.TableEntry(table_id=lpm.id, is_default_action=True)
        if action_id is not None:
            te.action.action.action_id = action_id
        return p4r.Update(type=p4r.Update.MODIFY, entity=p4r.Entity(table_entry=te))

    def default_action() -> int:
        [e] = a.read(
            p4r.Entity(table_entry=p4r.TableEntry(table_id=lpm.id, is_default_action=True))
        )
        return e.table_entry.action.action.action_id

    assert default_action() == noaction.id
    a.write(default_update(drop.id))
    assert default_action() == drop.id
    a.write(default_update(None))  # no action: reset to the program's default
    assert default_action() == noaction.id
    with pytest.raises(grpc.RpcError) as exc:
        a.write(p4r.Update(type=p4r.Update.INSERT, entity=default_update(drop.id).entity))
    assert [e.canonical_code for e in details(exc.value)] == [Code.INVALID_ARGUMENT]

    # a @defaultonly action in an entry: PERMISSION_DENIED
    te = p4r.TableEntry(table_id=acl.id, priority=1)
    fm = te.match.add(field_id=acl.keys[0].id)
    fm.ternary.value, fm.ternary.mask = b"\x08\x00", b"\xff\xff"
    te.action.action.action_id = noaction.id
    with pytest.raises(grpc.RpcError) as exc:
        a.write(p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=te)))
    assert [e.canonical_code for e in details(exc.value)] == [Code.PERMISSION_DENIED]

    # direct counters: set, read back, NOT_FOUND for a missing entry
    route = p4r.TableEntry(table_id=lpm.id)
    m = route.match.add(field_id=lpm.keys[0].id)
    m.lpm.value, m.lpm.prefix_len = b"\x0a\x00\x00\x00", 8
    route.action.action.action_id = drop.id
    a.write(p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=route)))
    key_only = p4r.TableEntry(table_id=lpm.id, match=route.match)
    dce = p4r.DirectCounterEntry(
        table_entry=key_only, data=p4r.CounterData(byte_count=100, packet_count=2)
    )
    a.write(p4r.Update(type=p4r.Update.MODIFY, entity=p4r.Entity(direct_counter_entry=dce)))
    [got] = a.read(p4r.Entity(direct_counter_entry=p4r.DirectCounterEntry(table_entry=key_only)))
    assert (
        got.direct_counter_entry.data.byte_count,
        got.direct_counter_entry.data.packet_count,
    ) == (100, 2)
    missing = p4r.TableEntry(table_id=lpm.id)
    mm = missing.match.add(field_id=lpm.keys[0].id)
    mm.lpm.value, mm.lpm.prefix_len = b"\x0b\x00\x00\x00", 8
    with pytest.raises(grpc.RpcError) as exc:
        a.read(p4r.Entity(direct_counter_entry=p4r.DirectCounterEntry(table_entry=missing)))
    assert exc.value.code() == grpc.StatusCode.NOT_FOUND


def test_multicast_replicas_read_back_as_written(primary: tuple[Client, P4InfoIndex]) -> None:
    """p4runtime-shell 0.0.6 writes and reads ``egress_port``; newer clients ``port`` bytes.
    As BMv2's server does, a read answers in the field each replica was written with."""
    a, _ = primary
    replicas = [p4r.Replica(egress_port=3, instance=0), p4r.Replica(port=b"\x04", instance=1)]
    mge = p4r.MulticastGroupEntry(multicast_group_id=5, replicas=replicas)
    pre = p4r.PacketReplicationEngineEntry(multicast_group_entry=mge)
    a.write(
        p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(packet_replication_engine_entry=pre))
    )
    [got] = a.read(
        p4r.Entity(
            packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                multicast_group_entry=p4r.MulticastGroupEntry(multicast_group_id=5)
            )
        )
    )
    back = got.packet_replication_engine_entry.multicast_group_entry.replicas
    assert [r.WhichOneof("port_kind") for r in back] == ["egress_port", "port"]
    assert (back[0].egress_port, back[1].port) == (3, b"\x04")


def test_multicast_groups_and_counters(
    rt_server: Server, primary: tuple[Client, P4InfoIndex]
) -> None:
    a, index = primary

    def group(
        gid: int, ports: list[int], op: int = p4r.Update.INSERT, metadata: bytes = b""
    ) -> p4r.Update:
        mge = p4r.MulticastGroupEntry(
            multicast_group_id=gid,
            metadata=metadata,
            replicas=[
                p4r.Replica(port=p.to_bytes(2, "big"), instance=i) for i, p in enumerate(ports)
            ],
        )
        pre = p4r.PacketReplicationEngineEntry(multicast_group_entry=mge)
        return p4r.Update(type=op, entity=p4r.Entity(packet_replication_engine_entry=pre))

    def groups() -> dict[int, tuple[list[tuple[int, int]], bytes]]:
        read = a.read(
            p4r.Entity(
                packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                    multicast_group_entry=p4r.MulticastGroupEntry()
                )
            )
        )
        out = {}
        for e in read:
            m = e.packet_replication_engine_entry.multicast_group_entry
            out[m.multicast_group_id] = (
                [(int.from_bytes(r.port, "big"), r.instance) for r in m.replicas],
                m.metadata,
            )
        return out

    a.write(group(1, [1, 2], metadata=b"\x07"), group(2, [3]))
    assert groups() == {1: ([(1, 0), (2, 1)], b"\x07"), 2: ([(3, 0)], b"")}
    # rollback: the modify of 1 and the delete of 2 are undone when inserting 0 fails
    with pytest.raises(grpc.RpcError) as exc:
        a.write(
            group(1, [4], p4r.Update.MODIFY),
            group(2, [], p4r.Update.DELETE),
            group(0, [1]),
            atomicity=p4r.WriteRequest.ROLLBACK_ON_ERROR,
        )
    assert [e.canonical_code for e in details(exc.value)] == [
        Code.ABORTED,
        Code.ABORTED,
        Code.INVALID_ARGUMENT,
    ]
    assert groups() == {1: ([(1, 0), (2, 1)], b"\x07"), 2: ([(3, 0)], b"")}
    arp = bytes.fromhex("ffffffffffff0200000000010806") + bytes(28)
    l2, set_mcast = index.table("l2"), index.action("set_mcast")
    assert l2 and set_mcast
    te = p4r.TableEntry(table_id=l2.id)
    te.match.add(field_id=l2.keys[0].id).exact.value = b"\x09"
    te.action.action.action_id = set_mcast.id
    te.action.action.params.add(param_id=1, value=b"\x01")
    a.write(p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=te)))
    assert sorted(p for p, _ in rt_server.device.process(9, arp)) == [1, 2]

    # counters: the frame above counted on port 9; write one cell, then leave it (no data)
    ctr = index.counter("port_counter")
    assert ctr
    [cell] = a.read(
        p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=ctr.id, index=p4r.Index(index=9)))
    )
    assert (cell.counter_entry.data.packet_count, cell.counter_entry.data.byte_count) == (
        1,
        len(arp),
    )
    entry = p4r.CounterEntry(
        counter_id=ctr.id, index=p4r.Index(index=9), data=p4r.CounterData(packet_count=5)
    )
    a.write(p4r.Update(type=p4r.Update.MODIFY, entity=p4r.Entity(counter_entry=entry)))
    entry.ClearField("data")
    a.write(p4r.Update(type=p4r.Update.MODIFY, entity=p4r.Entity(counter_entry=entry)))
    [cell] = a.read(
        p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=ctr.id, index=p4r.Index(index=9)))
    )
    assert (cell.counter_entry.data.packet_count, cell.counter_entry.data.byte_count) == (5, 0)
    assert len(a.read(p4r.Entity(counter_entry=p4r.CounterEntry()))) == ctr.size


def test_packets_never_see_half_a_batch(
    rt_server: Server, primary: tuple[Client, P4InfoIndex]
) -> None:
    """Each batch moves port 1's traffic between 3 and 4, then back to 2; packets processed
    meanwhile must only ever leave on 2 (a batch is applied between two packets)."""
    a, index = primary
    a.write(l2_entry(index, b"\x01", out_port=2))
    frame = bytes.fromhex("ffffffffffff0200000000010806") + bytes(28)
    seen: set[int] = set()
    stop = threading.Event()

    def traffic() -> None:
        while not stop.is_set():
            seen.update(p for p, _ in rt_server.device.process(1, frame))

    batch = [l2_entry(index, b"\x01", out_port=p, op=p4r.Update.MODIFY) for p in [3, 4] * 10 + [2]]
    thread = threading.Thread(target=traffic)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # let the two threads interleave finely
    thread.start()
    try:
        for _ in range(30):
            a.write(*batch)
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(interval)
    assert seen == {2}
