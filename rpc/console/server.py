"""The console served by waitress: a production WSGI server (bounded worker threads,
no debugger, no reloader), stopped gracefully from another thread.

``ConsoleServer.start()`` binds and serves on a thread of its own; ``stop()`` lets the
requests being answered finish (at most ``STOP_GRACE_S``) and closes the port.
"""

from __future__ import annotations

import ipaddress
import threading
from typing import Any

from waitress import wasyncore
from waitress.server import create_server

from twinlog.rpc.console.app import create_app
from twinlog.rpc.console.guard import ALLOWED_HOSTS
from twinlog.rpc.console.session import ClusterSession, ConsoleTarget

THREADS = 8
STOP_GRACE_S = 5  # a page in flight has 4 s of cluster calls, then renders
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_hosts(host: str, port: int) -> frozenset[str]:
    """The Host headers a browser sends to this console: its own address, and on loopback
    every loopback name (a name that resolves elsewhere is refused: DNS rebinding)."""
    names = set(LOOPBACK_NAMES) if is_loopback(host) else {host}
    return frozenset(f"{name}:{port}" for name in names | {host})


class ConsoleServer:
    """Thread rule: start and stop from one thread."""

    def __init__(self, target: ConsoleTarget, host: str, port: int) -> None:
        self.session = ClusterSession(target)
        self.host = host
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._requested_port = port
        self.port = port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def start(self) -> ConsoleServer:
        # Bound first (port 0 picks one), then told which Host headers to answer.
        app = create_app(self.session)
        self._server = create_server(
            app,
            host=self.host,
            port=self._requested_port,
            threads=THREADS,
            ident="twinlog-console",
            channel_timeout=30,
            cleanup_interval=5,
            asyncore_loop_timeout=0.2,
        )
        self.port = int(self._server.effective_port)
        app.config[ALLOWED_HOSTS] = allowed_hosts(self.host, self.port)
        self._thread = threading.Thread(target=self._serve, name="twinlog-console", daemon=True)
        self._thread.start()
        return self

    def _serve(self) -> None:
        try:
            self._server.run()
        except OSError:  # the socket closed under the loop by stop()
            pass

    def stop(self) -> None:
        if self._server is not None:
            # The requests being answered finish first; then every socket closes, the idle
            # keep-alive connections of browsers included (a single-socket server's close()
            # closes only its listening socket, and its loop would wait for them).
            self._server.task_dispatcher.shutdown(timeout=STOP_GRACE_S)
            self._server.close()
            wasyncore.close_all(self._server._map)
            self._server = None
        if self._thread is not None:
            self._thread.join(STOP_GRACE_S)
            self._thread = None
        self.session.close()
