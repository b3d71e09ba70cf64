"""A TCP proxy on 127.0.0.1 that can hold every byte: a network partition, in a test.

``HoldingProxy(target_port)`` accepts connections and forwards bytes both ways to
the target. ``hold()`` stops forwarding in both directions while every socket stays
open (as a partition that drops packets, or a peer that stopped reading: the sender
sees no error, just no answer); ``hold(UP)`` only what the connecting side sends
(requests reach nobody), ``hold(DOWN)`` only what comes back (requests arrive and are
acted on, their answers are lost: a one-way cut); ``release()`` forwards again, bytes
held included. ``ProxyGroup(a, b, ...)`` holds and releases several proxies together: one
link carrying more than one port (a broker's client port and its inter-broker
listener). No tests here.

Thread rule: ``hold``, ``release`` and ``close`` from the test's thread; one accept
thread and two pump threads per connection, all ended by ``close``.
"""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Callable

POLL_S = 0.05  # how often an idle pump looks at the hold switch and the close flag
CHUNK_BYTES = 64 * 1024
UP = "up"  # connecting side -> target
DOWN = "down"  # target -> connecting side
BOTH = "both"


class HoldingProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(POLL_S)
        self.port: int = self._listener.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self._flowing = {UP: threading.Event(), DOWN: threading.Event()}
        for event in self._flowing.values():
            event.set()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._start(self._accept, "proxy-accept")

    def hold(self, direction: str = BOTH) -> None:
        """Stop forwarding bytes ``direction`` (UP, DOWN or BOTH); connections stay open
        and new ones are accepted."""
        if direction not in (UP, DOWN, BOTH):
            raise ValueError(f"direction {direction!r}: UP, DOWN or BOTH")
        for name, event in self._flowing.items():
            if direction in (name, BOTH):
                event.clear()

    @property
    def held(self) -> bool:
        return not all(event.is_set() for event in self._flowing.values())

    def release(self) -> None:
        for event in self._flowing.values():
            event.set()

    def close(self) -> None:
        self._closed.set()
        self.release()
        self._listener.close()
        with self._lock:
            sockets, threads = list(self._sockets), list(self._threads)
        for sock in sockets:
            sock.close()
        for thread in threads:
            thread.join(timeout=2)

    def __enter__(self) -> HoldingProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _start(self, target: Callable[..., None], name: str, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:  # closed
                return
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets.extend((client, server))
            self._start(self._pump, "proxy-up", client, server, self._flowing[UP])
            self._start(self._pump, "proxy-down", server, client, self._flowing[DOWN])

    def _wait_flowing(self, flowing: threading.Event) -> bool:
        """Wait while held; False once closed."""
        while not flowing.wait(POLL_S):
            if self._closed.is_set():
                return False
        return not self._closed.is_set()

    def _pump(self, source: socket.socket, sink: socket.socket, flowing: threading.Event) -> None:
        try:
            while self._wait_flowing(flowing):
                ready, _, _ = select.select([source], [], [], POLL_S)
                if not ready:
                    continue
                if not flowing.is_set():  # held between the check and now: keep it
                    continue
                data = source.recv(CHUNK_BYTES)
                if not data:
                    break
                if not self._wait_flowing(flowing):  # held while it was read: it waits too
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            # Each pump closes the socket it reads: the other one, woken by the shutdown,
            # closes its own, so a connection's two sockets go with it (a long run through
            # proxies would otherwise keep every connection's descriptors until close()).
            source.close()
            with self._lock:
                if source in self._sockets:
                    self._sockets.remove(source)
                self._threads = [t for t in self._threads if t.is_alive()]


class ProxyGroup:
    """Proxies cut and healed as one link. Thread rule: as ``HoldingProxy``."""

    def __init__(self, *proxies: HoldingProxy) -> None:
        self.proxies = list(proxies)

    def hold(self, direction: str = BOTH) -> None:
        for proxy in self.proxies:
            proxy.hold(direction)

    @property
    def held(self) -> bool:
        return any(proxy.held for proxy in self.proxies)

    def release(self) -> None:
        for proxy in self.proxies:
            proxy.release()

    def close(self) -> None:
        for proxy in self.proxies:
            proxy.close()
