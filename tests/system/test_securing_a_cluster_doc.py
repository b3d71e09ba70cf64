"""docs/operations.md, "Securing a cluster", followed as written: its marked shell blocks
(``<!-- securing-a-cluster -->`` before a fenced ``sh`` block) run in order with bash in
a scratch folder, against a real ZooKeeper on 127.0.0.1. Two things differ from a
reader's run: the doc's ``export ZOOKEEPER=...`` names this test's ZooKeeper (and a
chroot of its own), and every port the blocks name is swapped for a free one, the same
one everywhere it appears. Then: the records produced with alice's token are consumed
back, and on a broker's inter-broker listener a stranger without a certificate fails
the handshake and a CN=alice certificate of the cluster CA is refused and audited.

Thread rule: the test's thread.
"""

from __future__ import annotations

import datetime
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest
from cluster_support import wait_for
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from server_process import ROOT, environment

from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper
from twinlog.rpc.generated.twinlog.v1 import coordination_pb2, coordination_pb2_grpc
from twinlog.rpc.replication.broker_identity import BrokerTls, broker_name
from twinlog.rpc.replication.channel import CHANNEL_OPTIONS, open_channel
from twinlog.rpc.wire.errors import error_from_rpc_error

pytestmark = pytest.mark.slow

DOC = ROOT / "docs" / "operations.md"
SECTION = "## Securing a cluster"
MARKED_BLOCK = re.compile(r"<!-- securing-a-cluster -->\n```sh\n(.*?)```", re.S)
ZOOKEEPER_LINE = re.compile(r"^export ZOOKEEPER=\S+$", re.M)
PORT = re.compile(r"(?:127\.0\.0\.1:|--port |--metrics-port )(\d+)\b")
BLOCK_TIMEOUT_S = 120.0
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
CALL_TIMEOUT_S = 10.0
BROKERS = (1, 2, 3)


def section_blocks() -> list[str]:
    text = DOC.read_text()
    start = text.index(SECTION)
    following = text.find("\n## ", start + len(SECTION))
    section = text[start : following if following >= 0 else len(text)]
    return MARKED_BLOCK.findall(section)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def localized(blocks: list[str], connect: str) -> tuple[list[str], dict[int, int]]:
    """The blocks with this test's ZooKeeper and free ports; the port map (doc -> here)."""
    ports = sorted({int(port) for block in blocks for port in PORT.findall(block)})
    mapping = {port: free_port() for port in ports}
    assert len(set(mapping.values())) == len(mapping), "two free ports were the same"
    done = []
    for block in blocks:
        block = ZOOKEEPER_LINE.sub(f"export ZOOKEEPER={shlex.quote(connect)}", block)
        for port, here in mapping.items():
            block = re.sub(rf"\b{port}\b", str(here), block)
        done.append(block)
    return done, mapping


def shell_environment(extra: dict[str, str]) -> dict[str, str]:
    env = environment()
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    env.update(extra)
    return env


def run_block(block: str, cwd: Path, env: dict[str, str]) -> str:
    # ZOOKEEPER is exported by step 3; later blocks run in shells of their own
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
    )
    assert result.returncode == 0, (
        f"{block}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    )
    return result.stdout


@contextmanager
def started_in_background(block: str, cwd: Path, env: dict[str, str]) -> Iterator[int]:
    """Run the block that starts the brokers (each with ``&``) in a session of its own;
    at the end, SIGTERM that session's processes (the brokers), SIGKILL after a while."""
    shell = subprocess.Popen(["bash", "-eu", "-c", block], cwd=cwd, env=env, start_new_session=True)
    group = shell.pid
    try:
        assert shell.wait(timeout=BLOCK_TIMEOUT_S) == 0
        yield group
    finally:
        _end_group(group)


def _end_group(group: int) -> None:
    for signal_number in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(group, signal_number)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                os.killpg(group, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


def alice_of_cluster_ca(certs: Path) -> BrokerTls:
    """A client's certificate (CN=alice) signed by the cluster CA the doc made."""
    ca_pem = (certs / "ca.pem").read_bytes()
    ca = x509.load_pem_x509_certificate(ca_pem)
    ca_key = serialization.load_pem_private_key((certs / "ca.key").read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "alice")]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return BrokerTls(-1, certificate.public_bytes(serialization.Encoding.PEM), key_pem, ca_pem)


def lookup(channel: grpc.Channel, metadata: tuple[tuple[str, str], ...] = ()) -> grpc.RpcError:
    """A LookupProducer call that must be refused; its error."""
    stub = coordination_pb2_grpc.CoordinationStub(channel)
    request = coordination_pb2.LookupProducerRequest(producer_id=1, producer_generation=0)
    with pytest.raises(grpc.RpcError) as raised:
        stub.LookupProducer(request, timeout=CALL_TIMEOUT_S, metadata=metadata)
    error = raised.value
    assert isinstance(error, grpc.RpcError)
    return error


def test_the_doc_has_the_steps_this_test_follows() -> None:
    blocks = section_blocks()
    assert len(blocks) == 7, blocks
    assert sum(bool(ZOOKEEPER_LINE.search(block)) for block in blocks) == 1
    assert "twinlog cluster certs" in blocks[0]
    assert blocks[4].count("twinlog serve") == 3


def test_securing_a_cluster_as_written(tmp_path: Path) -> None:
    blocks = section_blocks()
    assert len(blocks) == 7
    certs_block, files_block, zookeeper_block, metrics_block, start_block, use, check = blocks
    with LocalZooKeeper(tmp_path / "zookeeper") as zookeeper:
        connect = f"{zookeeper.connect_string}/twinlog/{uuid.uuid4().hex[:12]}"
        (
            [certs_block, files_block, zookeeper_block, metrics_block, start_block, use, check],
            ports,
        ) = localized(blocks, connect)
        work = tmp_path / "work"
        work.mkdir()
        env = shell_environment({"ZOOKEEPER": connect})
        for block in (certs_block, files_block, zookeeper_block, metrics_block):
            run_block(block, work, env)
        secure = work / "secure"
        for secret in ("tokens.txt", "zookeeper.auth", "metrics.token", "certs/ca.key"):
            assert (secure / secret).stat().st_mode & 0o077 == 0, secret

        with started_in_background(start_block, work, env):
            logs = {broker: secure / f"b{broker}.log" for broker in BROKERS}

            def serving() -> bool:
                texts = {b: log.read_text() if log.exists() else "" for b, log in logs.items()}
                for broker, text in texts.items():
                    assert "error:" not in text, f"broker {broker} refused to start:\n{text}"
                return all("serving on" in text for text in texts.values())

            try:
                wait_for("three brokers serving", serving, START_TIMEOUT_S)
                # Each on one CPU, its broker id's turn round them from the last: brokers
                # started on one machine spread over its CPUs (docs/operations.md, "CPU").
                from_last = sorted(os.sched_getaffinity(0), reverse=True)
                for broker, broker_log in logs.items():
                    cpu = from_last[broker % len(from_last)]
                    assert f"cpu: one CPU, {cpu} of " in broker_log.read_text(), broker
                run_block(use, work, env)
                consumed = (secure / "consumed.txt").read_text().split()
                assert sorted(consumed, key=int) == [str(n) for n in range(1, 101)]

                described = run_block(check, work, env)
                assert "orders" in described, described
                assert int((secure / "metric-lines.txt").read_text()) > 0

                # A stranger on broker 1's inter-broker listener.
                inter_broker = f"127.0.0.1:{ports[7171]}"
                no_certificate = grpc.ssl_channel_credentials(
                    root_certificates=(secure / "certs" / "ca.pem").read_bytes()
                )
                name = (("grpc.ssl_target_name_override", broker_name(1)),)
                with grpc.secure_channel(inter_broker, no_certificate, options=name) as channel:
                    assert lookup(channel).code() == grpc.StatusCode.UNAVAILABLE
                alice = alice_of_cluster_ca(secure / "certs")
                with open_channel(inter_broker, CHANNEL_OPTIONS, alice, 1) as channel:
                    error = lookup(channel)
                assert error.code() == grpc.StatusCode.PERMISSION_DENIED
                assert type(error_from_rpc_error(error)).__name__ == "ClusterAuthorizationError"
                wait_for(
                    "broker 1's audit line of the refusal",
                    lambda: re.search(
                        r"internal\.refused method=coordination\.lookup_producer .*broker=none "
                        r"error=ClusterAuthorizationError",
                        logs[1].read_text(),
                    ),
                    CALL_TIMEOUT_S,
                )
                # The client port does not serve the internal services, token or not.
                token = (secure / "alice.token").read_text().strip()
                with grpc.insecure_channel(f"127.0.0.1:{ports[7071]}") as channel:
                    error = lookup(channel, (("authorization", f"Bearer {token}"),))
                assert error.code() == grpc.StatusCode.UNIMPLEMENTED, error
            except BaseException:
                for broker, log in logs.items():
                    text = log.read_text() if log.exists() else ""
                    print(f"--- broker {broker} ---\n{text[-6000:]}")
                raise
