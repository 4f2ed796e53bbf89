"""kvswitch.ports.listens: a listener counts, a closed port and a self-connection do not."""

from __future__ import annotations

import socket

from kvswitch.ports import listens


def test_a_listener_counts_and_a_closed_port_does_not() -> None:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        assert listens("127.0.0.1", port, 1.0)
    assert not listens("127.0.0.1", port, 1.0)
    assert not listens("127.0.0.1", 70000, 1.0)  # no such port: no traceback


def test_a_self_connection_is_not_a_listener(monkeypatch) -> None:
    """The kernel can pick the destination port as a loopback connection's source port while
    nothing listens: the socket connects to itself. Made here on purpose."""
    own = socket.socket()
    own.bind(("127.0.0.1", 0))
    port = own.getsockname()[1]
    own.connect(("127.0.0.1", port))  # simultaneous open with itself
    assert own.getsockname() == own.getpeername()
    monkeypatch.setattr(socket, "create_connection", lambda *_a, **_k: own)
    assert not listens("127.0.0.1", port, 1.0)
