"""``/metrics`` over HTTP(S) for Prometheus, one endpoint per RpcServer.

Bound to ``metrics_host``, 127.0.0.1 unless told otherwise, whatever the gRPC
server's ``--host``: the metrics show topic and group names, sizes and offsets
(never records, tokens or transactional data), which a server on 0.0.0.0 should
not hand to everyone. Port 0 picks a free one (``port`` tells which).

With a token file, a scrape must send ``Authorization: Bearer TOKEN`` (Prometheus's
``authorization: credentials_file:``); anything else gets 401 and an audit line
``metrics.refused peer=... reason=...``. With a certificate and key it serves
HTTPS only.

prometheus_client's ``start_http_server`` cannot check a token, and with TLS it
makes the handshake in ``accept()``, on its only serving thread, where one client
that connects and sends nothing stops every scrape. So this is its WSGI app behind
a token check, on a threaded ``wsgiref`` server of our own: each connection gets a
thread and a socket timeout (the TLS handshake included), and at most
``CONNECTIONS_MAX`` connections are served at once.

Thread rule: ``start``/``stop`` from the server's owning thread; the HTTP server
accepts on its own daemon thread and answers each connection on another.
"""

from __future__ import annotations

import hmac
import logging
import socket
import ssl
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from prometheus_client import CollectorRegistry, make_wsgi_app

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.rpc.policy.audit import audit
from twinlog.rpc.policy.auth import TOKEN_BYTES_MIN

log = logging.getLogger("twinlog.server")

# A scrape is one short request: a client silent this long (connected, no request or
# no TLS handshake) is dropped, so it holds a thread for seconds, not forever.
SOCKET_TIMEOUT_MS = 5_000
# Prometheus scrapes one connection at a time per server (two for an HA pair); a flood
# of idle connections beyond this is closed at once instead of costing a thread each.
CONNECTIONS_MAX = 16
PEER_KEY = "twinlog.peer"
REFUSED_BODY = (
    b"401 Unauthorized: send 'Authorization: Bearer TOKEN' with the token of this server's "
    b"--metrics-token-file (Prometheus: authorization: credentials_file: FILE)\n"
)

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def read_metrics_token(path: str | Path) -> bytes:
    """The token a scrape must send, from a file holding only it (surrounding whitespace
    and newlines dropped, as Prometheus reads its ``credentials_file``)."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise InvalidConfigError(
            f"cannot read metrics token file {path}: {reason}; give --metrics-token-file a "
            "readable file holding the token Prometheus sends"
        ) from None
    token = text.strip()
    # The token is never quoted in a message: a refusal says what is wrong, not what is there.
    if len(token.split()) > 1 or not (token.isascii() and token.isprintable()):
        raise InvalidConfigError(
            f"metrics token file {path} must hold one token: one word of printable ASCII, "
            "without spaces or other lines"
        )
    if len(token) < TOKEN_BYTES_MIN:
        raise InvalidConfigError(
            f"metrics token file {path} holds a token shorter than {TOKEN_BYTES_MIN} "
            "characters; generate one with "
            "'python -c \"import secrets; print(secrets.token_hex(16))\"'"
        )
    return token.encode()


def metrics_tls_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(certfile=cert_file, keyfile=key_file)
    except (OSError, ssl.SSLError) as error:
        raise InvalidConfigError(
            f"cannot load the metrics TLS certificate {cert_file} and key {key_file}: "
            f"{error.strerror or error}; give --metrics-tls-cert and --metrics-tls-key PEM "
            "files of one key pair"
        ) from None
    return context


def peer_of(address: Any) -> str:
    """The client as gRPC names peers (``ipv4:10.0.0.7:41234``), so audit lines compare."""
    host, port = address[0], address[1]
    return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"


def require_token(app: WsgiApp, token: bytes) -> WsgiApp:
    """``app`` for requests that send ``Authorization: Bearer TOKEN``; 401 for others."""

    def guarded(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        header = environ.get("HTTP_AUTHORIZATION", "")
        scheme, _, credentials = header.strip().partition(" ")
        if not header:
            reason = "no Authorization header"
        elif scheme.lower() != "bearer":
            reason = "not a bearer token"
        # http.server decodes headers as latin-1, so this gives back the bytes sent.
        elif hmac.compare_digest(credentials.strip().encode("latin-1"), token):
            return app(environ, start_response)
        else:
            reason = "the bearer token is wrong"
        audit("metrics.refused", peer=environ.get(PEER_KEY, "-"), reason=reason)
        start_response(
            "401 Unauthorized",
            [
                ("Content-Type", "text/plain; charset=utf-8"),
                ("Content-Length", str(len(REFUSED_BODY))),
                ("WWW-Authenticate", 'Bearer realm="twinlog metrics"'),
            ],
        )
        return [REFUSED_BODY]

    return guarded


class _Handler(WSGIRequestHandler):
    def get_environ(self) -> dict[str, str]:
        environ = super().get_environ()
        environ[PEER_KEY] = peer_of(self.client_address)
        return environ

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per scrape on stderr would drown the server's log


class _HttpServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # stop() does not wait for a slow client; its timeout ends it
    # socketserver's backlog of 5 makes a sixth connection arriving in a burst wait a SYN
    # retransmission (1 s); the cap above is what limits connections, not the backlog.
    request_queue_size = 4 * CONNECTIONS_MAX

    def __init__(
        self,
        address: tuple[str, int],
        family: socket.AddressFamily,
        tls: ssl.SSLContext | None,
        socket_timeout_ms: int,
    ) -> None:
        self.address_family = family
        self.tls = tls
        self.socket_timeout_s = socket_timeout_ms / 1000
        self.slots = threading.BoundedSemaphore(CONNECTIONS_MAX)
        super().__init__(address, _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        connection, address = self.socket.accept()
        connection.settimeout(self.socket_timeout_s)  # reads, writes and the TLS handshake
        return connection, address

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()  # no thread started to release it
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def finish_request(self, request: Any, client_address: Any) -> None:
        """On the connection's own thread: so the TLS handshake is made here, where a
        silent client times out alone, not in ``accept()`` on the serving thread."""
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        try:
            # wrap_socket takes over the connection's file descriptor (closing it on failure)
            secured = self.tls.wrap_socket(request, server_side=True)
        except OSError as error:  # plain HTTP, a bad handshake, or a timeout
            log.debug("metrics: TLS handshake with %s failed: %s", peer_of(client_address), error)
            return
        try:
            super().finish_request(secured, client_address)
        finally:
            self.shutdown_request(secured)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that stalls or hangs up is its own problem: no traceback on stderr.
        log.debug("metrics: request from %s failed", peer_of(client_address), exc_info=True)


class MetricsEndpoint:
    """The endpoint's files are read here, so a bad one is refused before anything serves."""

    def __init__(
        self,
        registry: CollectorRegistry,
        host: str,
        port: int,
        *,
        token_file: str | None = None,
        tls_cert_file: str | None = None,
        tls_key_file: str | None = None,
        socket_timeout_ms: int = SOCKET_TIMEOUT_MS,
    ) -> None:
        self.registry = registry
        self.host = host.strip("[]")  # an IPv6 literal, without the URL brackets
        self.port = port
        self.socket_timeout_ms = socket_timeout_ms
        self._token = None if token_file is None else read_metrics_token(token_file)
        self._tls = None
        if tls_cert_file and tls_key_file:
            self._tls = metrics_tls_context(tls_cert_file, tls_key_file)
        self._http: _HttpServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def tls(self) -> bool:
        return self._tls is not None

    @property
    def token_required(self) -> bool:
        return self._token is not None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}/metrics"

    @property
    def bound_address(self) -> tuple[str, int]:
        """(host, port) the listening socket is bound to; only while started."""
        assert self._http is not None, "the metrics endpoint is not started"
        name = self._http.socket.getsockname()
        return name[0], name[1]

    def start(self) -> None:
        app: WsgiApp = make_wsgi_app(self.registry)
        if self._token is not None:
            app = require_token(app, self._token)
        try:
            # The first address the name resolves to, as prometheus_client does (IPv6 too).
            family, *_, sockaddr = socket.getaddrinfo(
                self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )[0]
            http = _HttpServer(
                (str(sockaddr[0]), self.port), family, self._tls, self.socket_timeout_ms
            )
        except OSError as error:
            raise InvalidConfigError(
                f"cannot serve metrics on {self.host}:{self.port}: {error.strerror or error}; "
                "pick another --metrics-port (0 picks a free one) or --metrics-host"
            ) from None
        http.set_app(app)
        self._http = http
        self.port = http.server_port
        self._thread = threading.Thread(
            target=http.serve_forever, name="twinlog-metrics", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._http is None:
            return
        self._http.shutdown()
        self._http.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._http = self._thread = None
