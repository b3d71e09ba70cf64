"""``/metrics`` over HTTP for Prometheus: prometheus_client's own server, one per RpcServer.

Bound to the gRPC server's host (loopback by default). Port 0 picks a free one
(``port`` tells which). The endpoint has no authentication: it shows topic and
group names and sizes, never records, tokens or transactional data.

Thread rule: ``start``/``stop`` from the server's owning thread; the HTTP server
answers on its own daemon thread.
"""

from __future__ import annotations

import threading
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

from twinlog.engine.base.errors import InvalidConfigError


class MetricsEndpoint:
    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self.registry = registry
        self.host = host.strip("[]")  # an IPv6 literal, without the URL brackets
        self.port = port
        self._http: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def start(self) -> None:
        try:
            self._http, self._thread = start_http_server(
                self.port, addr=self.host, registry=self.registry
            )
        except OSError as error:
            raise InvalidConfigError(
                f"cannot serve metrics on {self.host}:{self.port}: {error.strerror or error}; "
                "pick another --metrics-port (0 picks a free one)"
            ) from None
        self.port = self._http.server_port

    def stop(self) -> None:
        if self._http is None:
            return
        self._http.shutdown()
        self._http.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._http = self._thread = None
