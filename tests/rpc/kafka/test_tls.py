"""TLS on the Kafka listener: kafka-python and confluent-kafka, unmodified, over SSL and
SASL_SSL (PLAIN), with client certificates, and what a plaintext client, a client that
trusts another CA, one that says nothing and one that sends garbage get: a prompt
failure, never a hang, and never at the expense of the other clients.

Certificates come from a throwaway CA (``pki_support``); the listeners run in this
process, on one broker, except the last test's, which is ``twinlog serve``'s.
"""

from __future__ import annotations

import io
import re
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka
import kafka
import kafka.errors
import pytest
from kafka.net.compat import KafkaNetClient
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from pki_support import make_pki
from server_process import ServerProcess

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.broker.broker import Broker
from twinlog.rpc.cli.serve import kafka_listener_opener
from twinlog.rpc.client import Admin
from twinlog.rpc.kafka.listener import KafkaListener
from twinlog.rpc.kafka.settings import KafkaListenerSettings
from twinlog.rpc.kafka.tls import server_tls_context
from twinlog.rpc.policy.auth import Acl, Guard, TokenTable
from twinlog.rpc.server.config import ServerConfig

CLIENT_TIMEOUT_MS = 5_000
HANDSHAKE_MS = 1_000  # the listeners' tls_handshake_ms: short, as tests wait it out
ALICE_TOKEN = "alice-tls-token-4f9c2e7a1b"
ACL = """
alice  write  orders*
alice  read   orders*
"""
KAFKA_SERVING = re.compile(r"serving Kafka clients on 127\.0\.0\.1:(\d+) \((.*)\)")


@dataclass
class Pki:
    directory: Path
    other: Path  # another CA's files: its ca.pem does not verify this server

    def __getitem__(self, name: str) -> str:
        return str(self.directory / name)


@dataclass
class Listeners:
    broker: Broker
    ssl: KafkaListener  # no authentication
    sasl_ssl: KafkaListener  # SASL/PLAIN with the tokens
    mutual: KafkaListener  # client certificates name the principal; the ACL applies


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(make_pki(tmp_path_factory.mktemp("pki")), make_pki(tmp_path_factory.mktemp("other")))


@pytest.fixture(scope="module")
def listeners(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Listeners]:
    directory = tmp_path_factory.mktemp("kafka-tls")
    (directory / "acl.txt").write_text(ACL)
    acl = Acl.load(directory / "acl.txt")
    broker = Broker.open(directory / "data")
    for name in ("orders-ssl", "orders-sasl", "orders-mutual"):
        Admin(broker).create_topic(name, partitions=1)
    settings = KafkaListenerSettings(tls_handshake_ms=HANDSHAKE_MS, fetch_wait_slice_ms=50)
    tls = server_tls_context(pki["server.pem"], pki["server.key"])
    mutual_tls = server_tls_context(pki["server.pem"], pki["server.key"], pki["ca.pem"])
    started = [
        KafkaListener(broker, "127.0.0.1", 0, settings, tls=tls),
        KafkaListener(
            broker,
            "127.0.0.1",
            0,
            settings,
            guard=Guard(TokenTable([(ALICE_TOKEN, "alice")]), acl, mutual_tls=False),
            tls=tls,
        ),
        KafkaListener(
            broker,
            "127.0.0.1",
            0,
            settings,
            guard=Guard(None, acl, mutual_tls=True),
            tls=mutual_tls,
        ),
    ]
    for listener in started:
        listener.start()
    try:
        yield Listeners(broker, *started)
    finally:
        for listener in started:
            listener.stop(grace_ms=2_000)
        broker.close()


def _bootstrap(listener: KafkaListener) -> str:
    return f"127.0.0.1:{listener.port}"


def _kafka_python(**options: Any) -> dict[str, Any]:
    """kafka-python settings that fail within seconds instead of retrying for 30 s."""
    return {
        "request_timeout_ms": CLIENT_TIMEOUT_MS,
        "bootstrap_timeout_ms": 2_000,
        "reconnect_backoff_max_ms": 200,
        **options,
    }


@contextmanager
def _refused_kafka_python() -> Iterator[dict[str, Any]]:
    """``kafka_client=`` for a KafkaProducer whose constructor is expected to fail:
    kafka-python does not close the client it made then (its wakeup socket pair stays
    open), so the clients made are closed here."""
    clients: list[KafkaNetClient] = []

    def make_client(**configs: Any) -> KafkaNetClient:
        client = KafkaNetClient(**configs)
        clients.append(client)
        return client

    try:
        yield {"kafka_client": make_client}
    finally:
        for client in clients:
            client.close()


class _ClosingContext(ssl.SSLContext):
    """A client context that keeps every socket it wraps, for ``close_all``: kafka-python
    3.0 drops the TLS socket of a failed handshake without closing it (its
    ``_build_transport`` raises before anyone owns the transport), so a test whose client
    is refused that way closes them itself."""

    def __init__(self, cafile: str) -> None:
        super().__init__()  # the protocol is __new__'s
        self.minimum_version = ssl.TLSVersion.TLSv1_2  # as kafka-python's own context
        self.load_verify_locations(cafile)
        self.wrapped: list[ssl.SSLSocket] = []

    def __new__(cls, cafile: str) -> _ClosingContext:
        return super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)

    def wrap_socket(
        self,
        sock: socket.socket,
        server_side: bool = False,
        do_handshake_on_connect: bool = True,
        suppress_ragged_eofs: bool = True,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLSocket:
        wrapped = super().wrap_socket(
            sock,
            server_side=server_side,
            do_handshake_on_connect=do_handshake_on_connect,
            suppress_ragged_eofs=suppress_ragged_eofs,
            server_hostname=server_hostname,
            session=session,
        )
        self.wrapped.append(wrapped)
        return wrapped

    def close_all(self) -> None:
        for wrapped in self.wrapped:
            wrapped.close()


def _sasl_ssl_kafka_python(pki: Pki) -> dict[str, Any]:
    return _kafka_python(
        security_protocol="SASL_SSL",
        ssl_cafile=pki["ca.pem"],
        sasl_mechanism="PLAIN",
        sasl_plain_username="alice",
        sasl_plain_password=ALICE_TOKEN,
    )


def _poll_one(consumer: confluent_kafka.Consumer) -> confluent_kafka.Message:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None:
            assert message.error() is None, message.error()
            return message
    raise AssertionError("no message within 10 s")


def test_kafka_python_produces_and_confluent_kafka_consumes_over_ssl(
    listeners: Listeners, pki: Pki
) -> None:
    bootstrap = _bootstrap(listeners.ssl)
    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        max_block_ms=CLIENT_TIMEOUT_MS,
        **_kafka_python(security_protocol="SSL", ssl_cafile=pki["ca.pem"]),
    )
    try:
        producer.send("orders-ssl", b"over TLS", key=b"k", partition=0).get(timeout=10)
    finally:
        producer.close(timeout=5)
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "tls-readers",
            "security.protocol": "SSL",
            "ssl.ca.location": pki["ca.pem"],
            "socket.timeout.ms": CLIENT_TIMEOUT_MS,
        }
    )
    try:
        consumer.assign(
            [confluent_kafka.TopicPartition("orders-ssl", 0, confluent_kafka.OFFSET_BEGINNING)]
        )
        message = _poll_one(consumer)
        assert (message.key(), message.value()) == (b"k", b"over TLS")
    finally:
        consumer.close()


def test_confluent_kafka_produces_and_kafka_python_consumes_over_sasl_ssl(
    listeners: Listeners, pki: Pki
) -> None:
    bootstrap = _bootstrap(listeners.sasl_ssl)
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": pki["ca.pem"],
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": ALICE_TOKEN,
            "enable.idempotence": True,
            "message.timeout.ms": CLIENT_TIMEOUT_MS,
        }
    )
    reports: list[Any] = []
    producer.produce(
        "orders-sasl", b"over SASL_SSL", partition=0, on_delivery=lambda e, m: reports.append(e)
    )
    assert producer.flush(10) == 0
    assert reports == [None]
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, **_sasl_ssl_kafka_python(pki))
    try:
        partition = kafka.TopicPartition("orders-sasl", 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        records = consumer.poll(timeout_ms=5_000).get(partition, [])
        assert [record.value for record in records] == [b"over SASL_SSL"]
    finally:
        consumer.close()


def test_a_client_certificate_names_the_principal(listeners: Listeners, pki: Pki) -> None:
    """Under mutual TLS alice's certificate makes her alice, whom the ACL lets write."""
    bootstrap = _bootstrap(listeners.mutual)
    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap,
        max_block_ms=CLIENT_TIMEOUT_MS,
        **_kafka_python(
            security_protocol="SSL",
            ssl_cafile=pki["ca.pem"],
            ssl_certfile=pki["client.pem"],
            ssl_keyfile=pki["client.key"],
        ),
    )
    try:
        producer.send("orders-mutual", b"from alice's certificate", partition=0).get(timeout=10)
    finally:
        producer.close(timeout=5)
    assert listeners.broker.list_offset("orders-mutual", 0, "latest") == 1


def test_a_client_without_a_certificate_is_refused_under_mutual_tls(
    listeners: Listeners, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    started = time.monotonic()
    with _refused_kafka_python() as closing, pytest.raises(kafka.errors.KafkaTimeoutError):
        kafka.KafkaProducer(
            bootstrap_servers=_bootstrap(listeners.mutual),
            **_kafka_python(security_protocol="SSL", ssl_cafile=pki["ca.pem"], **closing),
        )
    assert time.monotonic() - started < 5
    assert "TLS handshake failed" in caplog.text and "certificate" in caplog.text


def test_a_plaintext_client_on_the_tls_port_fails_promptly(
    listeners: Listeners, caplog: pytest.LogCaptureFixture
) -> None:
    started = time.monotonic()
    with _refused_kafka_python() as closing, pytest.raises(kafka.errors.KafkaTimeoutError):
        kafka.KafkaProducer(bootstrap_servers=_bootstrap(listeners.ssl), **_kafka_python(**closing))
    assert time.monotonic() - started < 5
    assert "plaintext Kafka request to this TLS listener" in caplog.text
    # What the client sees: the connection closed, unanswered, at once (reset: the
    # listener closes it with the request unread).
    with socket.create_connection(("127.0.0.1", listeners.ssl.port), timeout=5) as plain:
        request = ApiVersionsRequest()
        request.with_header(correlation_id=1, client_id="plaintext")
        plain.sendall(bytes(request.encode(version=3, header=True, framed=True)))
        assert _closed(plain)


def _closed(connection: socket.socket) -> bool:
    """The peer closed the connection (with or without reading what it was sent)."""
    try:
        return connection.recv(1) == b""
    except ConnectionResetError:
        return True


def test_clients_that_trust_another_ca_fail_their_handshake(
    listeners: Listeners, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    bootstrap = _bootstrap(listeners.ssl)
    wrong_ca = str(pki.other / "ca.pem")
    context = _ClosingContext(wrong_ca)
    started = time.monotonic()
    try:
        with _refused_kafka_python() as closing, pytest.raises(kafka.errors.KafkaTimeoutError):
            kafka.KafkaProducer(
                bootstrap_servers=bootstrap,
                **_kafka_python(security_protocol="SSL", ssl_context=context, **closing),
            )
    finally:
        context.close_all()
    assert context.wrapped  # the context given is the one used
    assert time.monotonic() - started < 5
    errors: list[confluent_kafka.KafkaError] = []
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.location": wrong_ca,
            "error_cb": errors.append,
        }
    )
    deadline = time.monotonic() + 5
    while not errors and time.monotonic() < deadline:
        producer.poll(0.1)
    assert errors and "certificate verify failed" in errors[0].str()
    assert "unknown ca" in caplog.text  # the server's side of it, logged


def _ssl_api_versions(port: int, pki: Pki) -> int:
    """A TLS connection's ApiVersions call; its error code."""
    client = ssl.create_default_context(cafile=pki["ca.pem"])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as plain:
        with client.wrap_socket(plain, server_hostname="127.0.0.1") as connection:
            request = ApiVersionsRequest()
            request.with_header(correlation_id=1, client_id="tls-test")
            connection.sendall(bytes(request.encode(version=3, header=True, framed=True)))
            data = b""
            while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
                chunk = connection.recv(65536)
                assert chunk, "closed before answering"
                data += chunk
    answer = ApiVersionsResponse.decode(io.BytesIO(data[4:]), version=3, header=True)
    return int(answer.error_code)


def test_silent_and_garbage_clients_neither_block_others_nor_stay(
    listeners: Listeners, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    port = listeners.ssl.port
    silent = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(3)]
    garbage = socket.create_connection(("127.0.0.1", port), timeout=5)
    garbage.sendall(b"\x16\x03\x01\x00\x05hello, not a ClientHello")
    half = socket.create_connection(("127.0.0.1", port), timeout=5)
    half.sendall(b"\x16\x03\x01")  # a record header, then nothing
    try:
        started = time.monotonic()
        assert _ssl_api_versions(port, pki) == 0
        # Served while the others hold their connections: well before their handshakes
        # could have timed out, so they never held the accept loop.
        assert time.monotonic() - started < HANDSHAKE_MS / 1000 / 2
        assert garbage.recv(1 << 16)[:1] == b"\x15"  # a TLS alert, then closed
        for connection in [*silent, half]:  # closed by the listener once the time is up
            assert _closed(connection)
        assert time.monotonic() - started < HANDSHAKE_MS / 1000 + 2
        assert "no TLS handshake within 1000 ms" in caplog.text
    finally:
        for connection in [*silent, garbage, half]:
            connection.close()


def test_stop_ends_idle_tls_connections_at_once(pki: Pki, tmp_path: Path) -> None:
    """An idle TLS connection waits in recv; stop must shut the TLS socket down, not the
    plain one it replaced, or it would wait out the grace period."""
    broker = Broker.open(tmp_path / "data")
    tls = server_tls_context(pki["server.pem"], pki["server.key"])
    listener = KafkaListener(broker, "127.0.0.1", 0, tls=tls)
    listener.start()
    client = ssl.create_default_context(cafile=pki["ca.pem"])
    try:
        with socket.create_connection(("127.0.0.1", listener.port), timeout=5) as plain:
            with client.wrap_socket(plain, server_hostname="localhost") as connection:
                request = ApiVersionsRequest()
                request.with_header(correlation_id=1, client_id="idle")
                connection.sendall(bytes(request.encode(version=3, header=True, framed=True)))
                assert connection.recv(4)
                time.sleep(0.2)  # the listener's thread is back in recv, waiting for more
                started = time.monotonic()
                listener.stop(grace_ms=5_000)
                assert time.monotonic() - started < 2
    finally:
        listener.stop(grace_ms=0)
        broker.close()


def test_the_tls_settings(pki: Pki, tmp_path: Path) -> None:
    context = server_tls_context(pki["server.pem"], pki["server.key"], pki["ca.pem"])
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert server_tls_context(pki["server.pem"], pki["server.key"]).verify_mode == ssl.CERT_NONE
    with pytest.raises(InvalidConfigError, match="cannot read"):
        server_tls_context(str(tmp_path / "missing.pem"), pki["server.key"])
    with pytest.raises(InvalidConfigError, match="not a PEM certificate"):
        server_tls_context(pki["server.pem"], pki["client.key"])  # another's key
    with pytest.raises(InvalidConfigError, match="client CA"):
        server_tls_context(pki["server.pem"], pki["server.key"], str(tmp_path / "no-ca.pem"))


def test_serve_speaks_sasl_ssl_with_the_servers_certificate(pki: Pki, tmp_path: Path) -> None:
    """``twinlog serve --tls-cert --tls-key --tokens-file --kafka-listener``: SASL_SSL."""
    (tmp_path / "tokens.txt").write_text(f"{ALICE_TOKEN} alice\n")
    arguments = [
        *("--tls-cert", pki["server.pem"], "--tls-key", pki["server.key"]),
        *("--tokens-file", str(tmp_path / "tokens.txt"), "--kafka-listener", "127.0.0.1:0"),
    ]
    with ServerProcess(tmp_path / "data", *arguments) as process:
        deadline = time.monotonic() + 10
        while not (found := KAFKA_SERVING.search(process.log())):
            assert time.monotonic() < deadline, process.log()
            time.sleep(0.05)
        assert found.group(2) == "SASL_SSL"
        bootstrap = f"127.0.0.1:{found.group(1)}"
        admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap, **_sasl_ssl_kafka_python(pki))
        try:
            admin.create_topics([kafka.admin.NewTopic("orders", 1, 1)])
        finally:
            admin.close()
        producer = kafka.KafkaProducer(
            bootstrap_servers=bootstrap,
            max_block_ms=CLIENT_TIMEOUT_MS,
            **_sasl_ssl_kafka_python(pki),
        )
        try:
            producer.send("orders", b"through twinlog serve", partition=0).get(timeout=10)
        finally:
            producer.close(timeout=5)
        with socket.create_connection(("127.0.0.1", int(found.group(1))), timeout=5) as plain:
            request = ApiVersionsRequest()
            request.with_header(correlation_id=1, client_id="plaintext")
            plain.sendall(bytes(request.encode(version=3, header=True, framed=True)))
            assert _closed(plain)
        deadline = time.monotonic() + 5
        while "plaintext Kafka request to this TLS listener" not in process.log():
            assert time.monotonic() < deadline, process.log()
            time.sleep(0.05)
        assert process.stop() == 0


def test_client_certificates_authenticate_kafka_clients_on_any_address(pki: Pki) -> None:
    """--tls-client-ca is authentication: no --tokens-file or --insecure is needed."""
    config = ServerConfig(
        host="0.0.0.0",
        tls_cert_file=pki["server.pem"],
        tls_key_file=pki["server.key"],
        tls_client_ca_file=pki["ca.pem"],
    )
    assert callable(kafka_listener_opener("0.0.0.0:0", config))
