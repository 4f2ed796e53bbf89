"""The Python client against real agents on loopback, on every backend."""

from __future__ import annotations

import asyncio
import json
import math
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from kvswitch import protocol as p
from kvswitch.agent.backend_procs import free_port, start_agent
from kvswitch.agent.backends import Backend, MemoryBackend
from kvswitch.agent.control import AgentControl, ControlError, KeyVersion, SyncedItem
from kvswitch.agent.core import AgentCore
from kvswitch.agent.server import AgentConfig, AgentServer
from kvswitch.client import AsyncClient, Client, KeyTooLong, Request, Timeout, ValueTooLarge
from kvswitch.client.oneshot import main as client_main
from kvswitch.consistency.lincheck import Op as HistOp
from kvswitch.consistency.lincheck import check_history

LOOP = "127.0.0.1"
AgentFactory = Callable[..., AgentServer]


def addr(agent: AgentServer) -> tuple[str, int]:
    return (LOOP, agent.port)


def test_get_set_delete_udp_and_tcp(backend: Backend, agent_factory: AgentFactory) -> None:
    agent = agent_factory(backend)
    for tcp in (False, True):
        with Client([addr(agent)], timeout=1.0, tcp_writes=tcp) as c:
            assert c.get(b"missing") is None
            c.set("user:1", b"alice")
            assert c.get("user:1") == b"alice"
            c.set(b"bin\x00\xff", bytes(range(256)) * 8)
            assert c.get(b"bin\x00\xff") == bytes(range(256)) * 8
            c.set(b"big", b"x" * p.MAX_VALUE)
            assert c.get(b"big") == b"x" * p.MAX_VALUE
            assert c.delete("user:1") is True
            assert c.delete("user:1") is False
            assert c.get("user:1") is None


def test_client_refuses_bad_keys_and_values(agent_factory: AgentFactory) -> None:
    agent = agent_factory(MemoryBackend())
    with Client([addr(agent)]) as c:
        with pytest.raises(KeyTooLong):
            c.get(b"k" * 17)
        with pytest.raises(ValueTooLarge):
            c.set(b"k", b"v" * (p.MAX_VALUE + 1))
    assert agent.core.stats["rx"] == 0


def test_server_too_large_is_value_too_large() -> None:
    server = AgentServer(AgentCore(MemoryBackend(), max_value=10), AgentConfig(port=0))
    server.start()
    try:
        with Client([(LOOP, server.port)]) as c, pytest.raises(ValueTooLarge):
            c.set(b"k", b"v" * 11)
    finally:
        server.stop()


def test_timeout_after_retries() -> None:
    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    silent.bind((LOOP, 0))
    with Client([silent.getsockname()], timeout=0.05, retries=2) as c:
        started = time.monotonic()
        with pytest.raises(Timeout):
            c.get(b"k")
        assert 0.14 < time.monotonic() - started < 1.0
    silent.settimeout(0.5)
    received = [silent.recv(100) for _ in range(3)]
    assert len(set(received)) == 1, "retries must resend the same request id"
    silent.close()


def test_reply_from_another_address_matched_by_key_and_seq() -> None:
    """A redirected Get is answered by a replica: another source address than the one asked."""
    origin = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    origin.bind((LOOP, 0))
    replica = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    replica.bind((LOOP, 0))

    def serve() -> None:
        data, client_addr = origin.recvfrom(100)
        req = p.Message.decode(data)
        # Stray replies first: wrong seq, wrong cid, wrong op, garbage. All must be ignored.
        replica.sendto(
            req.reply(p.Op.GET_REPLY, value=b"no", seq=req.seq + 1).encode(), client_addr
        )
        replica.sendto(
            req.reply(p.Op.GET_REPLY, value=b"no", cid=req.cid ^ 1).encode(), client_addr
        )
        replica.sendto(req.reply(p.Op.SET_REPLY).encode(), client_addr)
        replica.sendto(b"garbage", client_addr)
        replica.sendto(req.reply(p.Op.GET_REPLY, value=b"from-replica").encode(), client_addr)

    thread = threading.Thread(target=serve)
    thread.start()
    with Client([origin.getsockname()], timeout=1.0) as c:
        assert c.get(b"hot") == b"from-replica"
        time.sleep(0.05)
        assert c.stray_replies == 4
    thread.join()
    origin.close()
    replica.close()


class LossyRelay:
    """Forwards datagrams between clients and one agent; drops replies the predicate picks."""

    def __init__(self, target: tuple[str, int], drop: Callable[[p.Message], bool]) -> None:
        self.target = target
        self.drop = drop
        self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.front.bind((LOOP, 0))
        self.back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.back.bind((LOOP, 0))
        self.client: tuple[str, int] | None = None
        self.dropped = 0
        for sock in (self.front, self.back):
            sock.settimeout(0.1)
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._up, daemon=True),
            threading.Thread(target=self._down, daemon=True),
        ]
        for t in self._threads:
            t.start()

    @property
    def addr(self) -> tuple[str, int]:
        return self.front.getsockname()

    def _up(self) -> None:
        while not self._stop.is_set():
            try:
                data, self.client = self.front.recvfrom(65535)
            except TimeoutError:
                continue
            self.back.sendto(data, self.target)

    def _down(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.back.recv(65535)
            except TimeoutError:
                continue
            if self.drop(p.Message.decode(data)):
                self.dropped += 1
                continue
            assert self.client is not None
            self.front.sendto(data, self.client)

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()
        self.front.close()
        self.back.close()


def test_retried_set_is_applied_once(backend: Backend, agent_factory: AgentFactory) -> None:
    agent = agent_factory(backend)
    first_reply = [True]

    def drop_first_set_reply(m: p.Message) -> bool:
        if m.op == p.Op.SET_REPLY and first_reply[0]:
            first_reply[0] = False
            return True
        return False

    relay = LossyRelay(addr(agent), drop_first_set_reply)
    try:
        with Client([relay.addr], timeout=0.2, retries=3) as c:
            c.set(b"k", b"v1")  # first reply lost: the retry is answered with the first result
        assert relay.dropped == 1
        assert agent.core.stats["duplicate"] == 1
        assert agent.core.stats["op_set"] == 2
    finally:
        relay.close()
    # The same request id replayed after another client's write changes nothing.
    raw = p.Message(p.Op.SET, p.pad_key(b"r"), b"old", cid=77, seq=5).encode()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s, Client([addr(agent)]) as other:
        s.settimeout(1)
        s.sendto(raw, addr(agent))
        assert p.Message.decode(s.recv(100)).status == p.Status.OK
        other.set(b"r", b"new")
        s.sendto(raw, addr(agent))
        assert p.Message.decode(s.recv(100)).flags == p.F_DUP
        assert other.get(b"r") == b"new"


def test_concurrent_clients_linearizable(backend: Backend, agent_factory: AgentFactory) -> None:
    """Threads hammer three keys of one server; the history must be linearizable."""
    agent = agent_factory(backend)
    history: list[HistOp] = []
    lock = threading.Lock()
    keys = [b"a", b"b", b"c"]

    def worker(n: int) -> None:
        rng = random.Random(n)
        with Client([addr(agent)], timeout=1.0) as c:
            for i in range(120):
                key = rng.choice(keys)
                kind = rng.choice(("get", "get", "set", "delete"))
                call = time.monotonic()
                value: bytes | None = None
                output: object = None
                if kind == "get":
                    output = c.get(key)
                elif kind == "set":
                    value = b"%d-%d" % (n, i)
                    c.set(key, value)
                else:
                    output = c.delete(key)
                ret = time.monotonic()
                with lock:
                    history.append(HistOp(kind, key, call, ret, value, output, n))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(history) == 480
    results = check_history(history)
    assert all(r.ok for r in results), [r.key for r in results if not r.ok]
    # The checker does refuse a history with a stale read (so the check above can fail).
    bad = [
        HistOp("set", b"a", 0, 1, b"x"),
        HistOp("set", b"a", 2, 3, b"y"),
        HistOp("get", b"a", 4, 5, output=b"x"),
    ]
    assert not all(r.ok for r in check_history(bad))
    assert not any(op.ret == math.inf for op in history)


def test_pipeline_many_in_flight(agent_factory: AgentFactory) -> None:
    agent = agent_factory(MemoryBackend())
    with Client([addr(agent)], timeout=1.0) as c:
        sets = [Request("set", b"k%d" % i, b"v%d" % i) for i in range(500)]
        assert all(o.error is None for o in c.pipeline(sets, window=64))
        gets = [Request("get", b"k%d" % (i % 600)) for i in range(2000)]
        outcomes = c.pipeline(gets, window=128)
        for i, o in enumerate(outcomes):
            expect = b"v%d" % (i % 600) if i % 600 < 500 else None
            assert o.error is None and o.value == expect
            assert o.latency > 0
        bad = c.pipeline([Request("get", b"x" * 17), Request("frob", b"k")])
        assert isinstance(bad[0].error, KeyTooLong) and isinstance(bad[1].error, ValueError)


def test_keys_go_to_their_origin(agent_factory: AgentFactory) -> None:
    agents = [agent_factory(MemoryBackend()) for _ in range(3)]
    with Client([addr(a) for a in agents], timeout=1.0) as c:
        keys = [b"key%d" % i for i in range(150)]
        for k in keys:
            c.set(k, k.upper())
        ring = p.HashRing(3)
        for i, a in enumerate(agents):
            held = {k for k, _ in a.core.snapshot()}
            assert held == {p.pad_key(k) for k in keys if ring.origin(k) == i}
            assert held, "consistent hashing left a server without keys"
        assert [c.get(k) for k in keys] == [k.upper() for k in keys]


@pytest.fixture
def fake_switch() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((LOOP, 0))
    sock.settimeout(2)
    yield sock
    sock.close()


def _control(port: int, *requests: dict[str, object] | bytes) -> list[dict[str, object]]:
    with socket.create_connection((LOOP, port), timeout=5) as conn:
        f = conn.makefile("rwb")
        for r in requests:
            f.write(r if isinstance(r, bytes) else json.dumps(r).encode() + b"\n")
        f.flush()
        return [json.loads(f.readline()) for _ in requests]


def test_control_push_sync_flow(fake_switch: socket.socket, agent_factory: AgentFactory) -> None:
    switch = fake_switch.getsockname()
    origin = agent_factory(MemoryBackend(), switch, control_port=0)
    replica = agent_factory(MemoryBackend(), switch, control_port=0)
    assert origin.control_port and replica.control_port
    with Client([addr(origin)]) as c:
        c.set(b"hot", b"value")
    answers: list[dict[str, object]] = []
    sync = {"cmd": "sync", "key": "hot"}
    t = threading.Thread(target=lambda: answers.extend(_control(origin.control_port or 0, sync)))
    t.start()
    # The switch's part: stamp the SYNC and reflect it; then collect SYNC_DONE.
    data, sender = fake_switch.recvfrom(100)
    msg = p.Message.decode(data)
    assert (msg.op, msg.key, msg.ver, sender) == (p.Op.SYNC, p.pad_key(b"hot"), 0, addr(origin))
    fake_switch.sendto(p.Message(p.Op.SYNC, msg.key, epoch=2, ver=41).encode(), sender)
    data, sender = fake_switch.recvfrom(100)
    t.join()
    done = p.Message.decode(data)
    assert (p.Op(done.op), done.version, sender) == (p.Op.SYNC_DONE, (2, 41), addr(origin))
    assert answers == [{"ok": True, "epoch": 2, "ver": 41, "value_hex": b"value".hex()}]
    # The controller's part: the item into the replica over the replica's control API.
    push = {"cmd": "push", "key": "hot", "value_hex": b"value".hex(), "epoch": 2, "ver": 41}
    assert _control(replica.control_port, push) == [
        {"ok": True, "applied": True, "epoch": 2, "ver": 41}
    ]
    data, sender = fake_switch.recvfrom(100)
    confirm = p.Message.decode(data)
    assert (p.Op(confirm.op), confirm.version, sender) == (p.Op.CONFIRM, (2, 41), addr(replica))
    keys = _control(replica.control_port, {"cmd": "keys"}, {"cmd": "versions"})
    row = {"key_hex": p.pad_key(b"hot").hex(), "epoch": 2, "ver": 41, "live": True}
    assert keys[0] == {"ok": True, "keys": [row]}
    with Client([addr(replica)]) as c:
        assert c.get(b"hot") == b"value"
    out = _control(
        replica.control_port,
        {"cmd": "remove", "key": "hot"},
        {"cmd": "remove", "key_hex": "00"},
        {"cmd": "frobnicate"},
        b"not json\n",
        b"[1, 2]\n",
        {"cmd": "push", "key": "hot", "value_hex": "zz", "epoch": 2, "ver": 42},
        {"cmd": "push", "key": "hot", "value_hex": "00", "epoch": 0, "ver": 0},
        {"cmd": "push", "key": "hot", "value_hex": "00", "epoch": "2", "ver": 42},
        {"cmd": "push", "key": "hot"},
        {"cmd": "stats"},
    )
    assert out[0] == {"ok": True, "found": True}
    assert [o["ok"] for o in out[1:9]] == [False] * 8
    assert out[9]["ok"] is True and out[9]["stats"]["confirm_sent"] == 1  # type: ignore[index]
    with Client([addr(replica)]) as c:
        assert c.get(b"hot") is None


def test_control_push_without_reflection_fails_cleanly(
    fake_switch: socket.socket, agent_factory: AgentFactory
) -> None:
    origin = agent_factory(MemoryBackend(), fake_switch.getsockname(), control_port=0)
    origin.config.sync_timeout = 0.05
    with Client([addr(origin)]) as c:
        c.set(b"k", b"v")
    out = _control(origin.control_port or 0, {"cmd": "sync", "key": "k"})
    assert out == [{"ok": False, "error": "no SYNC reflection from the switch"}]
    assert origin.core.pending_syncs == {}


def _sync_answers(
    fake_switch: socket.socket, port: int, versions: list[int]
) -> list[dict[str, object]]:
    """The origin's ``sync`` of ``hot`` over its control port, the switch reflecting its
    successive SYNCs with ``versions`` (0: unstamped, a write of the key on its way)."""
    answers: list[dict[str, object]] = []
    t = threading.Thread(
        target=lambda: answers.extend(_control(port, {"cmd": "sync", "key": "hot"}))
    )
    t.start()
    for ver in versions:
        data, sender = fake_switch.recvfrom(100)
        msg = p.Message.decode(data)
        assert (msg.op, msg.key) == (p.Op.SYNC, p.pad_key(b"hot"))
        fake_switch.sendto(p.Message(p.Op.SYNC, msg.key, epoch=2, ver=ver).encode(), sender)
    t.join()
    return answers


def test_a_sync_reflected_unstamped_is_sent_again_at_once(
    fake_switch: socket.socket, agent_factory: AgentFactory
) -> None:
    """Rule 5: while a write of the key is on its way to the origin, the switch reflects its
    SYNC with ver 0. The origin asks again a moment later, not after its whole timeout (30 s
    here, longer than the control call's 5 s); once its attempts are spent, the answer says
    why."""
    origin = agent_factory(MemoryBackend(), fake_switch.getsockname(), control_port=0)
    origin.config.sync_timeout = 30.0
    origin.config.sync_attempts = 3
    with Client([addr(origin)]) as c:
        c.set(b"hot", b"value")
    port = origin.control_port or 0
    answers = _sync_answers(fake_switch, port, [0, 0, 43])
    assert answers == [{"ok": True, "epoch": 2, "ver": 43, "value_hex": b"value".hex()}]
    assert origin.core.stats["sync_busy"] == 2
    data, _ = fake_switch.recvfrom(100)
    assert p.Op(p.Message.decode(data).op) == p.Op.SYNC_DONE
    error = "SYNC reflected unstamped 3 times: a write of the key was on its way"
    assert _sync_answers(fake_switch, port, [0, 0, 0]) == [{"ok": False, "error": error}]
    assert origin.core.pending_syncs == {}


def test_agent_cli_process_and_client_cli(capfd: pytest.CaptureFixture[str]) -> None:
    agent = start_agent(control=True)  # ports 0: the agent picks and prints them
    try:
        servers = ["--servers", f"{LOOP}:{agent.port}"]
        assert client_main([*servers, "set", "cli-key", "cli-value"]) == 0
        assert client_main([*servers, "get", "cli-key"]) == 0
        assert client_main([*servers, "--tcp", "del", "cli-key"]) == 0
        assert client_main([*servers, "get", "cli-key"]) == 1
        assert client_main([*servers, "get", "k" * 17]) == 2
        assert "cli-value" in capfd.readouterr().out
        (pong,) = _control(agent.control_port or 0, {"cmd": "ping"})
        assert pong["ok"] is True and pong["port"] == agent.port
        assert isinstance(pong["incarnation"], int) and pong["incarnation"] > 0
    finally:
        agent.proc.terminate()  # the PID started above
        assert agent.proc.wait(timeout=5) == 0


def test_async_client(backend: Backend, agent_factory: AgentFactory) -> None:
    agents = [agent_factory(backend), agent_factory(MemoryBackend())]

    async def run() -> None:
        async with await AsyncClient.connect([addr(a) for a in agents], timeout=1.0) as kv:
            assert await kv.get(b"nope") is None
            await asyncio.gather(*(kv.set(b"k%d" % i, b"v%d" % i) for i in range(200)))
            values = await asyncio.gather(*(kv.get(b"k%d" % (i % 250)) for i in range(500)))
            assert values == [b"v%d" % (i % 250) if i % 250 < 200 else None for i in range(500)]
            assert await kv.delete(b"k1") is True
            assert await kv.delete(b"k1") is False
            with pytest.raises(KeyTooLong):
                await kv.get(b"x" * 17)
        silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        silent.bind((LOOP, 0))
        try:
            async with await AsyncClient.connect(
                [silent.getsockname()], timeout=0.05, retries=1
            ) as kv:
                with pytest.raises(Timeout):
                    await kv.get(b"k")
        finally:
            silent.close()

    asyncio.run(run())
    assert sum(a.core.stats["op_set"] for a in agents) == 200


class LossyAgent(AgentServer):
    """An agent that loses a share of the requests it receives and of the replies it sends."""

    def __init__(self, core: AgentCore, config: AgentConfig, loss: float, seed: int) -> None:
        super().__init__(core, config)
        self.loss = loss
        self.rng = random.Random(seed)
        self.lost = 0

    def _lose(self) -> bool:
        with self.lock:
            lost = self.rng.random() < self.loss
            self.lost += lost
            return lost

    def process(self, data: bytes, src: tuple[str, int]) -> list[tuple[bytes, tuple[str, int]]]:
        return [] if self._lose() else super().process(data, src)

    def send(self, outputs: list[tuple[bytes, tuple[str, int]]]) -> None:
        super().send([out for out in outputs if not self._lose()])


def test_concurrent_clients_linearizable_with_loss(backend: Backend) -> None:
    """10 % of requests and 10 % of replies lost: retries are deduplicated, the history is still
    linearizable (deletes record no found/missing output: a retried delete cannot tell)."""
    agent = LossyAgent(AgentCore(backend), AgentConfig(port=0, tcp=False), loss=0.1, seed=3)
    agent.start()
    history: list[HistOp] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        rng = random.Random(100 + n)
        with Client([addr(agent)], timeout=0.03, retries=8) as c:
            for i in range(60):
                key = rng.choice((b"a", b"b"))
                kind = rng.choice(("get", "set", "set", "delete"))
                call = time.monotonic()
                value = b"%d-%d" % (n, i) if kind == "set" else None
                output: object = None
                try:
                    if kind == "get":
                        output = c.get(key)
                    elif kind == "set":
                        c.set(key, value or b"")
                    else:
                        c.delete(key)
                    ret = time.monotonic()
                except Timeout:
                    if kind == "get":
                        continue  # a read without an answer says nothing
                    ret = math.inf
                with lock:
                    history.append(HistOp(kind, key, call, ret, value, output, n))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        agent.stop()
    assert agent.lost > 10
    assert agent.core.stats["duplicate"] > 0
    results = check_history(history)
    assert all(r.ok for r in results), [r.key for r in results if not r.ok]


def test_control_push_of_a_key_not_held(
    fake_switch: socket.socket, agent_factory: AgentFactory
) -> None:
    origin = agent_factory(MemoryBackend(), fake_switch.getsockname(), control_port=0)
    out = _control(origin.control_port or 0, {"cmd": "sync", "key": "nope"})
    assert out == [{"ok": False, "error": "key not held here"}]
    assert origin.core.stats["sync_sent"] == 0


def test_internal_error_is_counted_not_fatal(agent_factory: AgentFactory) -> None:
    class Broken(MemoryBackend):
        def get(self, key: bytes) -> None:
            if key == p.pad_key(b"boom"):
                raise ZeroDivisionError("a bug")
            return super().get(key)  # type: ignore[return-value]

    agent = agent_factory(Broken())
    with Client([addr(agent)], timeout=0.1, retries=0) as c:
        with pytest.raises(Timeout):
            c.get(b"boom")
        c.set(b"fine", b"yes")
        assert c.get(b"fine") == b"yes"
    assert agent.core.stats["internal_error"] == 1


def test_agent_cli_refuses_an_unreachable_backend(capsys: pytest.CaptureFixture[str]) -> None:
    from kvswitch.agent.main import main as agent_main

    dead = f"{LOOP}:{free_port()}"
    assert agent_main(["--port", "0", "--backend", "redis", "--backend-addr", dead]) == 1
    assert agent_main(["--port", "0", "--backend", "memcached", "--backend-addr", dead]) == 1
    assert "Connection refused" in capsys.readouterr().err


def test_pipeline_resends_lost_requests() -> None:
    agent = LossyAgent(AgentCore(MemoryBackend()), AgentConfig(port=0, tcp=False), 0.1, seed=9)
    agent.start()
    try:
        with Client([addr(agent)], timeout=0.03, retries=10) as c:
            sets = c.pipeline([Request("set", b"k%d" % i, b"v%d" % i) for i in range(300)])
            assert [o.error for o in sets] == [None] * 300
            gets = c.pipeline([Request("get", b"k%d" % i) for i in range(300)], window=50)
            assert [o.value for o in gets] == [b"v%d" % i for i in range(300)]
        assert agent.lost > 20
        assert agent.core.stats["duplicate"] > 0  # some Set replies were lost and retried
    finally:
        agent.stop()
    with Client([addr(agent)], timeout=0.02, retries=1) as c:  # the agent is gone: timeouts
        outcomes = c.pipeline([Request("get", b"k1"), Request("get", b"k2")])
        assert all(isinstance(o.error, Timeout) for o in outcomes)


def test_agent_control_client(agent_factory: AgentFactory) -> None:
    origin = agent_factory(MemoryBackend(), control_port=0)  # standalone: no switch to SYNC with
    replica = agent_factory(MemoryBackend(), control_port=0)
    stamped = p.Message(p.Op.SET, p.pad_key(b"hot"), b"val", cid=1, seq=1, epoch=3, ver=7)
    origin.process(stamped.encode(), (LOOP, 1))
    with (
        AgentControl(LOOP, origin.control_port or 0) as oc,
        AgentControl(LOOP, replica.control_port or 0) as rc,
    ):
        assert oc.ping() == origin.port
        item = oc.sync(b"hot")
        assert item == SyncedItem(b"val", 3, 7)
        assert rc.push(b"hot", item) == (3, 7)
        assert rc.keys() == {p.pad_key(b"hot"): KeyVersion(3, 7, True)}
        assert rc.push(b"hot", SyncedItem(b"older", 3, 6)) == (3, 7)  # not newer: kept
        assert rc.stats()["push_applied"] == rc.stats()["push_stale"] == 1
        with pytest.raises(ControlError, match="key not held"):
            oc.sync(b"cold")
        assert rc.remove(b"hot") is True
        assert rc.remove(b"hot") is False
        assert rc.versions() == {}
        with pytest.raises(ControlError, match="unknown cmd"):
            rc.request(cmd="frob")
        assert rc.ping() == replica.port  # the connection survives refused requests
    with pytest.raises(ControlError):
        AgentControl(LOOP, free_port(), timeout=0.5).ping()


def test_tcp_framing_by_vlen(agent_factory: AgentFactory) -> None:
    """The agent frames a TCP stream by vlen: split headers, several messages per segment."""
    agent = agent_factory(MemoryBackend())
    k = p.pad_key(b"tcp")
    set_raw = p.Message(p.Op.SET, k, b"value", cid=3, seq=1).encode()
    get_raw = p.Message(p.Op.GET, k, cid=3, seq=2).encode()
    big_raw = p.Message(p.Op.SET, k, b"x" * (p.MAX_VALUE + 1), cid=3, seq=3).encode()
    with socket.create_connection(addr(agent), timeout=2) as conn:
        for i in range(len(set_raw)):  # one byte per segment
            conn.sendall(set_raw[i : i + 1])
            time.sleep(0.001 if i % 8 == 0 else 0)
        conn.sendall(get_raw + big_raw + get_raw)  # three messages in one write
        replies = []
        buf = b""
        while len(replies) < 4:
            buf += conn.recv(65536)
            while len(buf) >= p.HEADER_LEN and len(buf) >= p.message_length(buf):
                n = p.message_length(buf)
                replies.append(p.Message.decode(buf[:n]))
                buf = buf[n:]
    assert [(r.op, r.status, r.seq, r.value) for r in replies] == [
        (p.Op.SET_REPLY, p.Status.OK, 1, b""),
        (p.Op.GET_REPLY, p.Status.OK, 2, b"value"),
        (p.Op.SET_REPLY, p.Status.TOO_LARGE, 3, b""),
        (p.Op.GET_REPLY, p.Status.OK, 2, b"value"),
    ]


@pytest.mark.backend
@pytest.mark.parametrize("kind", ["memcached", "redis"])
def test_agent_restart_keeps_acknowledged_writes(kind: str, request: pytest.FixtureRequest) -> None:
    """An agent crashes and a new one starts on the same port and store: every acknowledged write
    is still there, and a client that kept retrying through the gap gets its answer."""
    from kvswitch.agent.backends import make_backend

    store = request.getfixturevalue(f"{kind}_addr")
    prefix = f"restart-{uuid.uuid4().hex[:8]}:"

    def start(port: int) -> AgentServer:
        server = AgentServer(AgentCore(make_backend(kind, store, prefix)), AgentConfig(port=port))
        server.start()
        return server

    first = start(0)
    port = first.port
    with Client([(LOOP, port)], timeout=0.1, retries=30) as c:
        for i in range(50):
            c.set(b"k%d" % i, b"v%d" % i)
        first.stop()
        first.core.backend.close()
        result: list[bytes | None] = []
        reader = threading.Thread(target=lambda: result.append(c.get(b"k7")))
        reader.start()  # retries while no agent listens
        time.sleep(0.3)
        second = start(port)
        try:
            reader.join()
            assert result == [b"v7"]
            assert [c.get(b"k%d" % i) for i in range(50)] == [b"v%d" % i for i in range(50)]
        finally:
            second.stop()
            second.core.backend.close()
