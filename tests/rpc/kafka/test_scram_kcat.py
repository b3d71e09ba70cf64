"""SASL/SCRAM from kcat (the distribution's package, librdkafka 2.0) against a real
``twinlog serve`` with a Kafka listener, a tokens file and an ACL file, the user's
credential set by ``twinlog users set-scram``. librdkafka 2.0 repeats its own nonce before
the server's in its client-final message, which Kafka takes (the nonce must end with the
one the server sent). kcat produces and consumes; a wrong password is refused (nothing
written) and audited without the password. confluent-kafka produces and consumes too.
(The frames after a SaslHandshake v0 are tested in test_scram_login.py.)"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import confluent_kafka
import pytest
from server_process import ServerProcess, run_cli
from test_serve import _kafka_port

from twinlog.rpc.client import Admin, Consumer

pytestmark = pytest.mark.slow  # a server process, a kcat process per step

OPS_TOKEN = "ops-token-0123456789"
PASSWORD = "dora's long passphrase"
TOPIC = "scram-kcat"
GROUP = "scram-kcat-readers"
KCAT_TIMEOUT_S = 60
READ_DEADLINE_S = 20


@dataclass
class Served:
    server: ServerProcess
    bootstrap: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    directory = tmp_path_factory.mktemp("scram-kcat")
    (directory / "tokens").write_text(f"{OPS_TOKEN} ops\ndora-token-unused dora\n")
    (directory / "acl").write_text(
        f"ops alter cluster:*\nops all *\ndora all {TOPIC}\ndora read group:*\n"
    )
    server = ServerProcess(
        directory / "data",
        *("--kafka-listener", "127.0.0.1:0"),
        *("--tokens-file", str(directory / "tokens")),
        *("--acl-file", str(directory / "acl")),
    ).start()
    try:
        bootstrap = f"127.0.0.1:{_kafka_port(server)}"
        (directory / "password").write_text(PASSWORD + "\n")
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            result = run_cli(
                *("users", "set-scram", "--server", server.address, "--token", OPS_TOKEN),
                *("--user", "dora", "--mechanism", mechanism),
                *("--password-file", str(directory / "password")),
            )
            assert result.returncode == 0, result.stderr
        with Admin(server.address, token=OPS_TOKEN) as admin:
            admin.create_topic(TOPIC, partitions=1)
        yield Served(server, bootstrap)
        assert server.stop() == 0, server.log()[-5000:]
    finally:
        server.kill()


def _kcat(
    served: Served, password: str, *arguments: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is not installed: `apt-get install kcat` (README)"
    sasl = [
        *("-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=SCRAM-SHA-256"),
        *("-X", "sasl.username=dora", "-X", f"sasl.password={password}"),
    ]
    return subprocess.run(
        [kcat, "-b", served.bootstrap, *sasl, *arguments],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=KCAT_TIMEOUT_S,
    )


def _end_offset(served: Served) -> int:
    with Consumer(served.server.address, token=OPS_TOKEN) as consumer:
        return next(iter(consumer.end_offsets([(TOPIC, 0)]).values()))


def test_kcat_produces_and_consumes_with_scram(served: Served) -> None:
    sent = _kcat(served, PASSWORD, "-P", "-t", TOPIC, "-p", "0", stdin="kcat-1\nkcat-2\n")
    assert sent.returncode == 0, sent.stderr
    read = _kcat(served, PASSWORD, "-C", "-t", TOPIC, "-o", "beginning", "-e", "-f", "%s\\n")
    assert read.returncode == 0, read.stderr
    assert {"kcat-1", "kcat-2"} <= set(read.stdout.split()), read.stdout


def test_kcat_with_a_wrong_password_is_refused_audited_and_writes_nothing(served: Served) -> None:
    wrong = "not " + PASSWORD
    end_before = _end_offset(served)
    log_before = len(served.server.log())
    refused = _kcat(
        served, wrong, "-P", "-t", TOPIC, "-p", "0",
        "-X", "message.timeout.ms=3000", "-X", "socket.timeout.ms=3000",
        stdin="never\n",
    )  # fmt: skip
    assert refused.returncode != 0 or "never" not in refused.stdout
    assert "Authentication failed" in refused.stderr or "SASL" in refused.stderr, refused.stderr
    assert _end_offset(served) == end_before
    audited = [
        line
        for line in served.server.log()[log_before:].splitlines()
        if "authentication.failed " in line
    ]
    assert audited, served.server.log()[log_before:]
    assert "mechanism=SCRAM-SHA-256" in audited[0] and "user=dora" in audited[0], audited
    assert "door=kafka" in audited[0], audited
    assert not any(wrong in line or PASSWORD in line for line in audited), audited


def test_confluent_kafka_produces_and_consumes_with_scram(served: Served) -> None:
    sasl = {
        "bootstrap.servers": served.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "dora",
        "sasl.password": PASSWORD,
    }
    producer = confluent_kafka.Producer(sasl)
    delivered: list[object] = []
    for number in range(3):
        producer.produce(
            TOPIC,
            b"confluent-%d" % number,
            partition=0,
            on_delivery=lambda error, message: delivered.append(error or message.offset()),
        )
    assert producer.flush(20) == 0
    assert all(isinstance(offset, int) for offset in delivered), delivered
    consumer = confluent_kafka.Consumer(
        {**sasl, "group.id": GROUP, "auto.offset.reset": "earliest"}
    )
    read: list[bytes] = []
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + READ_DEADLINE_S
        while len([v for v in read if v.startswith(b"confluent-")]) < 3:
            assert time.monotonic() < deadline, read
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                read.append(message.value())
    finally:
        consumer.close()
    assert sorted(v for v in read if v.startswith(b"confluent-")) == [
        b"confluent-0",
        b"confluent-1",
        b"confluent-2",
    ]
