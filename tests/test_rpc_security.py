"""TLS (with a CA and certificates made at test time by openssl), tokens and ACLs, end to end."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_rpc_process import ServerProcess

from engine.errors import (
    AuthenticationError,
    AuthorizationError,
    BrokerUnavailableError,
)
from rpc.client import Admin, Consumer, Producer

pytestmark = [
    pytest.mark.slow,
]

ALICE = "alice-token-8c1e0f2a9b7d"
OPS = "ops-token-5d3b8e6f1a2c4"


def openssl(*arguments: str, cwd: Path) -> None:
    subprocess.run(["openssl", *arguments], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ca.pem; server.pem/.key for 127.0.0.1 and localhost; client.pem/.key (CN=alice)."""
    directory = tmp_path_factory.mktemp("pki")
    openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=twinlog test CA",
        "-keyout", "ca.key", "-out", "ca.pem", cwd=directory,
    )  # fmt: skip
    (directory / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, subject in (("server", "/CN=localhost"), ("client", "/CN=alice")):
        openssl(
            "req", "-newkey", "rsa:2048", "-nodes", "-subj", subject,
            "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=directory,
        )  # fmt: skip
        extra = ["-extfile", "server.ext"] if name == "server" else []
        openssl(
            "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "1", "-out", f"{name}.pem", *extra, cwd=directory,
        )  # fmt: skip
    return directory


@pytest.fixture(scope="module")
def tls_server(
    certificates: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    c = certificates
    with ServerProcess(
        tmp_path_factory.mktemp("tls") / "data",
        "--tls-cert", str(c / "server.pem"), "--tls-key", str(c / "server.key"),
        "--tls-client-ca", str(c / "ca.pem"),
    ) as process:  # fmt: skip
        yield process


def test_mutual_tls(tls_server: ServerProcess, certificates: Path) -> None:
    c = certificates
    options = {
        "tls_ca_file": str(c / "ca.pem"),
        "tls_cert_file": str(c / "client.pem"),
        "tls_key_file": str(c / "client.key"),
        "request_timeout_ms": 5_000,
    }
    with Admin(tls_server.address, **options) as admin:
        admin.create_topic("tls-topic", 1)
    with Producer(tls_server.address, **options) as producer:
        producer.send("tls-topic", b"over TLS", partition=0).result(timeout=10)
    with Consumer(tls_server.address, **options) as consumer:
        consumer.assign([("tls-topic", 0)])
        consumer.seek_to_beginning()
        assert [r.value for r in consumer.poll(5_000)] == [b"over TLS"]
    assert "TLS with client certificates" in tls_server.log()


def test_plaintext_or_certificate_less_client_is_refused(
    tls_server: ServerProcess, certificates: Path
) -> None:
    fast = {"request_timeout_ms": 3_000}
    from rpc.client.connection import ConnectionOptions
    from rpc.client.remote import RemoteBroker

    with RemoteBroker(tls_server.address, ConnectionOptions(**fast)) as plain:
        with pytest.raises(BrokerUnavailableError):
            plain.list_topics()
    no_certificate = ConnectionOptions(tls_ca_file=str(certificates / "ca.pem"), **fast)
    with RemoteBroker(tls_server.address, no_certificate) as remote:
        with pytest.raises(BrokerUnavailableError):
            remote.list_topics()


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("tokens")
    (directory / "tokens").write_text(f"{ALICE} alice\n{OPS} ops\n")
    (directory / "acl").write_text("alice write shared*\nalice read *\nops all *\n")
    with ServerProcess(
        directory / "data",
        "--tokens-file", str(directory / "tokens"), "--acl-file", str(directory / "acl"),
    ) as process:  # fmt: skip
        yield process
    assert ALICE not in process.log() and OPS not in process.log()


def test_missing_and_wrong_token(token_server: ServerProcess) -> None:
    with pytest.raises(AuthenticationError, match="requires a bearer token"):
        Admin(token_server.address).list_topics()
    with pytest.raises(AuthenticationError, match="not known"):
        Admin(token_server.address, token="not-a-real-token-at-all").list_topics()
    assert Admin(token_server.address, token=ALICE).list_topics() is not None


def test_principal_denied_a_topic_writes_nothing(token_server: ServerProcess) -> None:
    ops = Admin(token_server.address, token=OPS)
    ops.create_topic("shared", 1)
    ops.create_topic("payroll", 1)
    with pytest.raises(AuthorizationError, match="may not create"):
        Admin(token_server.address, token=ALICE).create_topic("alice-own", 1)
    producer = Producer(token_server.address, token=ALICE, transactional_id="alice-app")
    producer.init_transactions()
    with pytest.raises(AuthorizationError, match="may not write 'payroll'"):
        with producer.transaction():
            producer.send("shared", b"fine", partition=0)
            producer.send("payroll", b"denied", partition=0)
    with producer.transaction():
        producer.send("shared", b"fine again", partition=0)
    producer.close()
    assert ops.describe_topic("payroll").partitions[0].log_end_offset == 0
    assert ops.describe_topic("payroll").partitions[0].journal_entries_pending == 0
    assert "alice-own" not in ops.list_topics()
    with Consumer(token_server.address, token=ALICE) as consumer:
        consumer.assign([("shared", 0)])
        consumer.seek_to_beginning()
        values = []
        for _ in range(10):
            values.extend(r.value for r in consumer.poll(300))
            if values:
                break
        assert values == [b"fine again"]
    with pytest.raises(AuthorizationError, match="may not abort"):
        Admin(token_server.address, token=ALICE).abort_transaction(12345)
