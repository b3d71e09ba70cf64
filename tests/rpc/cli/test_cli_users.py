"""``twinlog users set-scram|list|delete-scram`` as a user types them, run in this process
against a real broker behind a real gRPC server with tokens and an ACL file: ALTER on the
cluster is needed, the password is read from a file or standard input and never stored,
and ``list`` shows no secret."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from twinlog.engine.broker.broker import Broker
from twinlog.rpc.cli.main import main
from twinlog.rpc.policy.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramError, ServerExchange
from twinlog.rpc.policy.scram_store import FILE_NAME, file_scram_store
from twinlog.rpc.server.config import ServerConfig
from twinlog.rpc.server.server import RpcServer

OPS_TOKEN = "ops-token-0123456789"
ALICE_TOKEN = "alice-token-0123456789"
PASSWORD = "s3cret-pa55word"


@dataclass
class Served:
    broker: Broker
    address: str
    data_dir: Path

    def run(
        self, capsys: pytest.CaptureFixture[str], token: str, *arguments: str
    ) -> tuple[int, str, str]:
        status = main(["users", *arguments, "--server", self.address, "--token", token])
        captured = capsys.readouterr()
        return status, captured.out, captured.err


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    directory = tmp_path_factory.mktemp("users")
    (directory / "tokens").write_text(f"{OPS_TOKEN} ops\n{ALICE_TOKEN} alice\n")
    (directory / "acl").write_text("ops alter cluster:*\nalice read *\n")
    broker = Broker.open(directory / "data")
    config = ServerConfig(
        port=0, tokens_file=str(directory / "tokens"), acl_file=str(directory / "acl")
    )
    server = RpcServer(broker, config)
    server.start()
    try:
        yield Served(broker, f"127.0.0.1:{server.port}", directory / "data")
    finally:
        server.stop(grace_ms=0)
        broker.close()


def _logs_in(data_dir: Path, user: str, mechanism: str, password: str) -> bool:
    """A SCRAM login against the server's store, as the Kafka listener makes it."""
    from kafka.net.sasl.scram import ScramClient

    store = file_scram_store(data_dir)
    client = ScramClient(user, password, mechanism)
    exchange = ServerExchange(mechanism, lambda name: store.credential(name, mechanism))
    client.process_server_first_message(exchange.first(client.first_message()))
    try:
        final = exchange.final(client.final_message())
    except ScramError:
        return False
    client.process_server_final_message(final)
    return True


def test_set_scram_then_a_login_works_and_list_shows_no_secret(
    served: Served,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "pw").write_text(PASSWORD + "\n")
    status, out, err = served.run(
        capsys, OPS_TOKEN, "set-scram", "--user", "carol", "--mechanism", SCRAM_SHA_256,
        "--password-file", str(tmp_path / "pw"),
    )  # fmt: skip
    assert status == 0, err
    assert "set SCRAM-SHA-256 credential of carol" in out
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD))
    status, _, err = served.run(
        capsys, OPS_TOKEN, "set-scram", "--user", "carol", "--mechanism", SCRAM_SHA_512,
        "--iterations", "4096",
    )  # fmt: skip
    assert status == 0, err
    assert _logs_in(served.data_dir, "carol", SCRAM_SHA_256, PASSWORD)
    assert _logs_in(served.data_dir, "carol", SCRAM_SHA_512, PASSWORD)
    assert not _logs_in(served.data_dir, "carol", SCRAM_SHA_512, "wrong")
    assert PASSWORD.encode() not in (served.data_dir / FILE_NAME).read_bytes()

    status, out, err = served.run(capsys, OPS_TOKEN, "list")
    assert status == 0, err
    assert "carol" in out and "SCRAM-SHA-256 (8192 iterations)" in out
    status, out, _ = served.run(capsys, OPS_TOKEN, "list", "--format", "json")
    listed = json.loads(out)
    assert listed == [
        {
            "user": "carol",
            "mechanisms": [
                {"mechanism": SCRAM_SHA_256, "iterations": 8192},
                {"mechanism": SCRAM_SHA_512, "iterations": 4096},
            ],
        }
    ]

    status, out, err = served.run(
        capsys, OPS_TOKEN, "delete-scram", "--user", "carol", "--mechanism", SCRAM_SHA_512
    )
    assert status == 0, err
    assert not _logs_in(served.data_dir, "carol", SCRAM_SHA_512, PASSWORD)
    status, _, err = served.run(
        capsys, OPS_TOKEN, "delete-scram", "--user", "carol", "--mechanism", SCRAM_SHA_512
    )
    assert status == 1 and "has no SCRAM-SHA-512 credential" in err


def test_changing_credentials_needs_alter_on_the_cluster(
    served: Served, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "pw").write_text(PASSWORD)
    status, _, err = served.run(
        capsys, ALICE_TOKEN, "set-scram", "--user", "alice", "--mechanism", SCRAM_SHA_256,
        "--password-file", str(tmp_path / "pw"),
    )  # fmt: skip
    assert status == 1
    assert "may not alter cluster 'kafka-cluster'" in err and "alter cluster:" in err
    status, _, err = served.run(capsys, ALICE_TOKEN, "list")
    assert status == 1 and "may not describe cluster" in err


def test_too_few_iterations_are_refused(
    served: Served, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "pw").write_text(PASSWORD)
    status, _, err = served.run(
        capsys, OPS_TOKEN, "set-scram", "--user", "dave", "--mechanism", SCRAM_SHA_256,
        "--iterations", "1000", "--password-file", str(tmp_path / "pw"),
    )  # fmt: skip
    assert status != 0 and "4096..16384" in err


def test_help_has_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["users", "set-scram", "--help"])
    out = capsys.readouterr().out
    assert "--password-file" in out and "example:" in out and "twinlog users set-scram" in out
