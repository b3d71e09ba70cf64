"""The fault tests' TCP proxy (tests/support/tcp_proxy.py): a hold keeps connections open
and drops nothing, one direction at a time or both, and a release delivers what waited."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
from tcp_proxy import BOTH, DOWN, UP, HoldingProxy

WAIT_S = 0.3  # long enough for held bytes to show they are held (the proxy polls at 50 ms)


@pytest.fixture()
def echo_port() -> Iterator[tuple[int, list[bytes]]]:
    """A server that records what it receives and echoes it back."""
    received: list[bytes] = []
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            while data := connection.recv(1024):
                received.append(data)
                connection.sendall(data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1], received
    listener.close()


def _reply(client: socket.socket, timeout_s: float) -> bytes | None:
    client.settimeout(timeout_s)
    try:
        return client.recv(1024)
    except TimeoutError:
        return None


@pytest.mark.parametrize("direction", [UP, DOWN, BOTH])
def test_a_held_direction_delivers_nothing_until_released(
    echo_port: tuple[int, list[bytes]], direction: str
) -> None:
    port, received = echo_port
    with HoldingProxy(port) as proxy, socket.create_connection(("127.0.0.1", proxy.port)) as client:
        client.sendall(b"before")
        assert _reply(client, 5) == b"before"
        proxy.hold(direction)
        assert proxy.held
        client.sendall(b"during")
        assert _reply(client, WAIT_S) is None  # no answer, and no error either
        # a one-way cut in the answers' direction: the request arrived and was acted on
        assert (b"during" in received) == (direction == DOWN)
        proxy.release()
        assert _reply(client, 5) == b"during"  # held, never lost
        assert received == [b"before", b"during"]


def test_an_unknown_direction_is_refused() -> None:
    with HoldingProxy(1) as proxy, pytest.raises(ValueError, match="UP, DOWN or BOTH"):
        proxy.hold("sideways")
