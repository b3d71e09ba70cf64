"""The Kafka listener: a TCP socket (TLS if given a context), one thread per connection,
size-prefixed frames.

A connection's requests are answered one at a time, in order, as a Kafka broker does
(it reads the next request only after answering the previous one), so a long-polling
Fetch holds its own connection only. Everything is bounded: the connections
(``connections_max``, and ``connections_per_address_max`` from one IP address; one more
is accepted, logged and closed), a frame's size (``frame_bytes_max``; a larger one is
logged and the connection closed before its bytes are read), an idle connection's life
(``connection_idle_ms``), a TLS handshake's time (``tls_handshake_ms``;
``twinlog.rpc.kafka.tls``), the wait for a connection's first request
(``first_request_ms``) and, with a tokens file, for its SASL authentication
(``authentication_ms``): a connection that misses either is logged and closed, so
connections that say nothing cannot keep the slots from real clients. Produced batches
go to the broker as written, which checks their records within its decompression budget
(the one its gRPC door shares).

``stop()`` closes the listening socket, lets requests in flight finish within the
grace period (a waiting Fetch ends at its next slice), then closes every connection.

Thread rule: ``start``/``stop`` from the owning thread; the accept loop and the
connection threads share ``_connections`` (each connection's thread and its socket: the
TLS one once wrapped) and ``_connections_by_address`` under ``_lock``.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import ssl
import struct
import threading
import time
from collections import Counter

from twinlog.engine.base.addresses import join_host_port
from twinlog.engine.base.errors import InvalidConfigError
from twinlog.rpc.kafka.access import new_connection
from twinlog.rpc.kafka.cluster import KafkaCluster
from twinlog.rpc.kafka.context import KafkaBroker, KafkaContext
from twinlog.rpc.kafka.dispatch import CloseConnection, advertised_versions, answer_frame
from twinlog.rpc.kafka.sasl import authenticate_unframed
from twinlog.rpc.kafka.settings import KafkaListenerSettings
from twinlog.rpc.kafka.tls import TlsHandshakeError, peer_common_name, secure
from twinlog.rpc.policy.auth import Guard
from twinlog.rpc.policy.producer_access import TransactionalAccess
from twinlog.rpc.server.metrics import ServerMetrics

log = logging.getLogger("twinlog.kafka")

FRAME_SIZE = struct.Struct(">i")
# The shortest request: api key, version, correlation id and a null client id.
REQUEST_BYTES_MIN = 10
ACCEPT_POLL_S = 0.5  # the accept loop rechecks the stop flag this often
BACKLOG = 64


class _Closed(Exception):
    """The peer closed the connection (or it timed out idle)."""


class ConnectionDeadlineMissed(Exception):
    """A connection did not send its first request, or did not authenticate, in time; the
    message says which limit it missed (logged, then the connection is closed)."""


def _read_exactly(connection: socket.socket, size: int, due: float | None = None) -> bytes:
    """``size`` bytes; with ``due`` (a time.monotonic() instant), TimeoutError once it has
    passed, however slowly the bytes trickle in (each read waits only what is left)."""
    chunks = []
    remaining = size
    while remaining > 0:
        if due is not None:
            left_s = due - time.monotonic()
            if left_s <= 0:
                raise TimeoutError()
            connection.settimeout(left_s)
        chunk = connection.recv(min(remaining, 1 << 20))
        if not chunk:
            raise _Closed()
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


class KafkaListener:
    """Speaks Kafka's protocol on ``host:port`` in front of ``broker`` (any object with
    the broker API: the one the gRPC server serves)."""

    def __init__(
        self,
        broker: KafkaBroker,
        host: str = "127.0.0.1",
        port: int = 9092,
        settings: KafkaListenerSettings | None = None,
        advertised_host: str | None = None,
        guard: Guard | None = None,
        tls: ssl.SSLContext | None = None,
        cluster: KafkaCluster | None = None,
        metrics: ServerMetrics | None = None,
        request_log_slow_ms: int = 1_000,
    ) -> None:
        """``guard``: the tokens and ACLs both doors ask (``twinlog.rpc.policy.auth.Guard``,
        the one the gRPC server was given); None serves everyone as the anonymous principal, unchecked. ``tls``: serve TLS
        (``twinlog.rpc.kafka.tls.server_tls_context``); None: plaintext. ``cluster``: the
        cluster ``broker`` is a member of (None: a single node).
        ``metrics``: the gRPC server's, which count the Kafka requests too;
        ``request_log_slow_ms``: the gRPC server's too (a request this slow is logged at INFO)."""
        self.settings = settings or KafkaListenerSettings()
        self.tls = tls
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._connections: dict[threading.Thread, socket.socket] = {}
        self._connections_by_address: Counter[str] = Counter()
        try:
            self._socket = socket.create_server((host, port), backlog=BACKLOG)
        except OSError as error:
            raise InvalidConfigError(
                f"cannot listen for Kafka clients on {join_host_port(host, port)}: "
                f"{error.strerror}; pick another --kafka-listener port (0 picks a free one)"
            ) from None
        self._socket.settimeout(ACCEPT_POLL_S)
        self.host = host
        self.port: int = self._socket.getsockname()[1]
        self.advertised_host = advertised_host or host
        guard = guard or Guard(None, None, mutual_tls=False)
        self.context = KafkaContext(
            broker=broker,
            endpoint=lambda: (self.advertised_host, self.port),
            settings=self.settings,
            stopping=self.stopping,
            advertised_versions=advertised_versions(),
            guard=guard,
            access=TransactionalAccess(guard, broker),
            connection=new_connection(guard),
            cluster=cluster,
            metrics=metrics,
            request_log_slow_ms=request_log_slow_ms,
        )
        self._acceptor = threading.Thread(
            target=self._accept_loop, name="twinlog-kafka-accept", daemon=True
        )

    @property
    def address(self) -> str:
        return join_host_port(self.host, self.port)

    def start(self) -> None:
        self._acceptor.start()

    def stop(self, grace_ms: int = 10_000) -> None:
        """Stop accepting, give requests in flight ``grace_ms``, then close what is left."""
        self.stopping.set()
        if self._acceptor.is_alive():
            self._acceptor.join()
        self._socket.close()
        with self._lock:
            connections = dict(self._connections)
        # Idle connections wait in recv: shutting their reading side down ends them now,
        # while a request being answered still gets its answer written. The plain socket's
        # shutdown, also for a TLS socket: SSLSocket.shutdown drops the TLS state, after
        # which that answer would leave unencrypted.
        for connection in connections.values():
            try:
                socket.socket.shutdown(connection, socket.SHUT_RD)
            except OSError:
                pass
        deadline = time.monotonic() + grace_ms / 1000
        for thread in connections:
            thread.join(max(0.0, deadline - time.monotonic()))
        for connection in connections.values():
            try:
                connection.close()
            except OSError:
                pass

    def connection_count(self) -> int:
        with self._lock:
            return len(self._connections)

    def _accept_loop(self) -> None:
        while not self.stopping.is_set():
            try:
                connection, peer = self._socket.accept()
            except TimeoutError:
                continue
            except OSError:
                if self.stopping.is_set():
                    return
                log.exception("Kafka listener: accept failed")
                time.sleep(ACCEPT_POLL_S)
                continue
            address = str(peer[0])
            peer_text = f"{address}:{peer[1]}"
            with self._lock:
                refusal = self._refusal(address)
                if refusal is None:
                    thread = threading.Thread(
                        target=self._serve,
                        args=(connection, peer_text, address),
                        name=f"twinlog-kafka-{peer_text}",
                        daemon=True,
                    )
                    self._connections[thread] = connection
                    self._connections_by_address[address] += 1
            if refusal is not None:
                log.warning(
                    "Kafka connection from %s refused: %s; it is closed", peer_text, refusal
                )
                connection.close()
                continue
            thread.start()

    def _refusal(self, address: str) -> str | None:
        """Why one more connection from ``address`` is refused; None: it is served.
        Under ``_lock``."""
        if len(self._connections) >= self.settings.connections_max:
            return f"{self.settings.connections_max} connections are open (connections_max)"
        if self._connections_by_address[address] >= self.settings.connections_per_address_max:
            return (
                f"{self.settings.connections_per_address_max} connections from {address} are "
                "open (connections_per_address_max)"
            )
        return None

    def _serve(self, connection: socket.socket, peer: str, address: str) -> None:
        context = dataclasses.replace(
            self.context, connection=new_connection(self.context.guard, peer)
        )
        try:
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tls is not None:
                secured = self._secure(connection, peer)
                if secured is None:
                    return
                connection = secured
                self._identify(secured, context)
            connection.settimeout(self.settings.connection_idle_ms / 1000)
            self._answer_requests(connection, context, peer)
        except (_Closed, TimeoutError, ConnectionError):
            pass  # the client went away or idled out: nothing to say
        except ConnectionDeadlineMissed as missed:
            log.warning("Kafka connection from %s closed: %s", peer, missed)
        except OSError as error:
            if not self.stopping.is_set():
                log.info("Kafka connection from %s ended: %s", peer, error)
        finally:
            with self._lock:
                # The TLS socket, once wrapped: the plain one no longer owns the descriptor.
                connection = self._connections.pop(threading.current_thread(), connection)
                self._connections_by_address[address] -= 1
                if not self._connections_by_address[address]:
                    del self._connections_by_address[address]
            try:
                connection.close()
            except OSError:
                pass

    def _secure(self, connection: socket.socket, peer: str) -> ssl.SSLSocket | None:
        """The connection after its TLS handshake; None (logged if worth it): closed."""
        assert self.tls is not None
        try:
            return secure(connection, self.tls, self.settings.tls_handshake_ms / 1000, self._adopt)
        except TlsHandshakeError as reason:
            log.warning("Kafka connection from %s closed: %s", peer, reason)
            return None

    def _adopt(self, connection: ssl.SSLSocket) -> bool:
        """The calling thread's connection is now ``connection``; False: the listener is
        stopping (it may have missed the connection, so the thread ends here)."""
        with self._lock:
            if self.stopping.is_set():
                return False
            self._connections[threading.current_thread()] = connection
            return True

    def _identify(self, connection: ssl.SSLSocket, context: KafkaContext) -> None:
        """Under mutual TLS without a tokens file the certificate names the principal, as
        on the gRPC port (with one, SASL/PLAIN does, after the handshake)."""
        guard = context.guard
        if guard.mutual_tls and guard.tokens is None:
            context.connection.principal = guard.authenticate((), peer_common_name(connection))

    def _deadline(
        self, context: KafkaContext, ready: float, first: bool
    ) -> tuple[float | None, str]:
        """When the next request must have been read (time.monotonic(); None: only
        connection_idle_ms holds) and the limit named if it is not. ``ready``: when the
        connection was ready for requests; ``first``: none was read yet."""
        settings = self.settings
        due: float | None = None
        missed = ""
        if not context.connection.authenticated:
            due = ready + settings.authentication_ms / 1000
            missed = (
                f"SASL authentication not done within {settings.authentication_ms} ms "
                "(authentication_ms)"
            )
        first_request_due = ready + settings.first_request_ms / 1000
        if first and (due is None or first_request_due <= due):
            due = first_request_due
            missed = f"no request within {settings.first_request_ms} ms (first_request_ms)"
        return due, missed

    def _answer_requests(self, connection: socket.socket, context: KafkaContext, peer: str) -> None:
        """Reads and answers requests in order until the client leaves, the listener stops
        or a request closes the connection (raises _Closed, TimeoutError, OSError,
        ConnectionDeadlineMissed)."""
        settings = self.settings
        ready = time.monotonic()
        first = True
        timed_by_deadline = False
        while not self.stopping.is_set():
            # Until the first request is read and SASL is done (with a tokens file), reads
            # wait for the nearer deadline (setting the socket's timeout), then idle_ms again.
            due, missed = self._deadline(context, ready, first)
            if due is None and timed_by_deadline:
                connection.settimeout(settings.connection_idle_ms / 1000)
                timed_by_deadline = False
            timed_by_deadline = timed_by_deadline or due is not None
            try:
                (size,) = FRAME_SIZE.unpack(_read_exactly(connection, FRAME_SIZE.size, due))
                unframed_sasl = context.connection.unframed_sasl_next
                bytes_min = 1 if unframed_sasl else REQUEST_BYTES_MIN
                frame_bytes_ok = bytes_min <= size <= settings.frame_bytes_max
                frame = _read_exactly(connection, size, due) if frame_bytes_ok else b""
            except TimeoutError:
                if due is None:
                    raise  # idle: nothing to say
                raise ConnectionDeadlineMissed(missed) from None  # each read waited for due
            if not frame_bytes_ok:
                log.warning(
                    "Kafka connection from %s closed: a request frame of %d bytes (the "
                    "limit is frame_bytes_max, %d bytes, and a request has at least %d)",
                    peer,
                    size,
                    self.settings.frame_bytes_max,
                    REQUEST_BYTES_MIN,
                )
                return
            first = False
            if unframed_sasl:  # after SaslHandshake v0: a SASL message, not a request
                server_message = authenticate_unframed(frame, context)
                if server_message is None:
                    log.warning(
                        "Kafka connection from %s closed: %s",
                        peer,
                        context.connection.close_after_answer or "SASL authentication failed",
                    )
                    return
                connection.sendall(FRAME_SIZE.pack(len(server_message)) + server_message)
                continue
            try:
                answer = answer_frame(frame, context, peer)
            except CloseConnection as reason:
                log.warning("Kafka connection from %s closed: %s", peer, reason)
                return
            if answer is not None:
                connection.sendall(answer)
            if context.connection.close_after_answer is not None:
                log.warning(
                    "Kafka connection from %s closed: %s",
                    peer,
                    context.connection.close_after_answer,
                )
                return
