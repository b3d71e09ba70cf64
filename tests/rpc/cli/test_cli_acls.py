"""``twinlog acls list|add|remove`` as a user types them, run in this process against a
real broker behind a real gRPC server with tokens and an ACL file: a grant added lets a
principal produce that was refused, is listed beside the file's grants, survives a
restart of the server, and once removed the produce is refused again; the ACL file's
grants cannot be removed; a principal without ALTER on the cluster is refused and
audited."""

from __future__ import annotations

import json
import logging
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from twinlog.engine.base.errors import AuthorizationError
from twinlog.engine.broker.broker import Broker
from twinlog.rpc.cli.main import main
from twinlog.rpc.client import Producer
from twinlog.rpc.policy.acl_store import FILE_NAME, FileAclStore
from twinlog.rpc.policy.audit import AUDIT_LOGGER
from twinlog.rpc.server.config import ServerConfig
from twinlog.rpc.server.server import RpcServer

OPS_TOKEN = "ops-token-0123456789"
ALICE_TOKEN = "alice-token-0123456789"
BOB_TOKEN = "bob-token-0123456789"
ACL_FILE = "ops alter cluster:*\nops create *\nalice read orders\n"


@dataclass
class Served:
    directory: Path
    broker: Broker | None = None
    server: RpcServer | None = None
    address: str = ""
    started: list[int] = field(default_factory=list)

    def start(self) -> None:
        self.broker = Broker.open(self.directory / "data")
        config = ServerConfig(
            port=0,
            tokens_file=str(self.directory / "tokens"),
            acl_file=str(self.directory / "acl"),
        )
        self.server = RpcServer(self.broker, config)
        self.server.start()
        self.address = f"127.0.0.1:{self.server.port}"

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(grace_ms=0)
        if self.broker is not None:
            self.broker.close()
        self.server = self.broker = None

    def run(
        self, capsys: pytest.CaptureFixture[str], token: str, *arguments: str
    ) -> tuple[int, str, str]:
        status = main(["acls", *arguments, "--server", self.address, "--token", token])
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    def alice_produces(self, topic: str) -> bool:
        with Producer(self.address, token=ALICE_TOKEN, linger_ms=0) as producer:
            try:
                producer.send(topic, b"by alice", partition=0).result(timeout=10)
            except AuthorizationError:
                return False
        return True


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[Served]:
    (tmp_path / "tokens").write_text(f"{OPS_TOKEN} ops\n{ALICE_TOKEN} alice\n{BOB_TOKEN} bob\n")
    (tmp_path / "acl").write_text(ACL_FILE)
    served = Served(tmp_path)
    served.start()
    assert served.broker is not None
    served.broker.create_topic("orders", 1)
    try:
        yield served
    finally:
        served.stop()


def test_add_list_restart_remove(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    assert not served.alice_produces("orders")
    add = ("--principal", "User:alice", "--operation", "write", "--topic", "orders")
    status, out, err = served.run(capsys, OPS_TOKEN, "add", *add)
    assert (status, err) == (0, ""), err
    assert out.strip() == "granted: alice write topic orders"
    assert served.alice_produces("orders")
    status, out, _ = served.run(capsys, OPS_TOKEN, "add", *add)
    assert out.strip() == "already granted: alice write topic orders"

    status, out, _ = served.run(capsys, OPS_TOKEN, "list", "--principal", "alice")
    assert status == 0
    rows = [line.split() for line in out.splitlines()]
    assert rows == [
        ["PRINCIPAL", "OPERATION", "RESOURCE", "NAME", "PATTERN", "SOURCE"],
        ["alice", "read", "topic", "orders", "glob", "acl-file"],
        ["alice", "write", "topic", "orders", "literal", "store"],
    ]

    served.stop()  # a restart: the grant is read back from the data directory
    assert len(FileAclStore(served.directory / "data" / FILE_NAME).grants()) == 1
    served.start()
    assert served.alice_produces("orders")
    status, out, _ = served.run(
        capsys, OPS_TOKEN, "list", "--resource-type", "topic", "--format", "json"
    )
    assert {"principal": "alice", "operation": "write", "resource_type": "topic",
            "name": "orders", "pattern_type": "literal", "source": "store"} in json.loads(out)  # fmt: skip

    status, out, err = served.run(capsys, OPS_TOKEN, "remove", *add)
    assert (status, out.strip()) == (0, "removed: alice write topic orders"), err
    assert not served.alice_produces("orders")
    status, _, err = served.run(capsys, OPS_TOKEN, "remove", *add)
    assert status == 1 and "no stored grant" in err


def test_prefixed_group_and_transactional_id_grants(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    for flags in (
        ("--operation", "write", "--topic", "ord", "--prefixed"),
        ("--operation", "read", "--group", "billing"),
        ("--operation", "write", "--transactional-id", "loader-", "--prefixed"),
    ):
        status, _, err = served.run(capsys, OPS_TOKEN, "add", "--principal", "alice", *flags)
        assert status == 0, err
    assert served.alice_produces("orders")
    status, out, _ = served.run(capsys, OPS_TOKEN, "list", "--resource-type", "group")
    assert [line.split()[:5] for line in out.splitlines()[1:]] == [
        ["alice", "read", "group", "billing", "literal"]
    ]


def test_the_acl_files_grants_cannot_be_removed(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = served.run(
        capsys, OPS_TOKEN, "remove", "--principal", "alice", "--operation", "read",
        "--topic", "orders",
    )  # fmt: skip
    assert status == 1
    assert "comes from the ACL file" in err and "restart" in err, err


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_a_principal_without_alter_on_the_cluster_is_refused_and_audited(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    kept = Kept()
    audit_log = logging.getLogger(AUDIT_LOGGER)
    # The CLI sets the root logger up its own way (WARNING, its handler): the audit
    # logger is heard here directly, at its level.
    level = audit_log.level
    audit_log.addHandler(kept)
    audit_log.setLevel(logging.INFO)
    try:
        status, _, err = served.run(
            capsys, BOB_TOKEN, "add", "--principal", "bob", "--operation", "write",
            "--topic", "orders",
        )  # fmt: skip
    finally:
        audit_log.removeHandler(kept)
        audit_log.setLevel(level)
    assert status == 1 and "AuthorizationError" in err and "alter" in err, err
    assert any(
        line.startswith("acl.denied principal=bob action=alter resource=cluster")
        for line in kept.lines
    ), kept.lines
    status, _, err = served.run(capsys, BOB_TOKEN, "list")
    assert status == 1 and "describe" in err, err


def test_a_grant_that_means_nothing_is_refused_saying_why(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = served.run(
        capsys, OPS_TOKEN, "add", "--principal", "alice", "--operation", "write",
        "--group", "billing",
    )  # fmt: skip
    assert status == 1 and "does not apply to groups" in err, err


def test_a_grant_survives_a_restart_of_twinlog_serve(tmp_path: Path) -> None:
    """The whole path as an operator runs it: ``twinlog serve`` processes, ``twinlog acls``
    commands; the grant is read back by a new process from ``DATA_DIR/acls`` (mode 600)."""
    from server_process import ServerProcess, run_cli

    (tmp_path / "tokens").write_text(f"{OPS_TOKEN} ops\n")
    (tmp_path / "acl").write_text(ACL_FILE)
    arguments = ("--tokens-file", str(tmp_path / "tokens"), "--acl-file", str(tmp_path / "acl"))
    grant = ("--principal", "alice", "--operation", "read", "--group", "billing")
    with ServerProcess(tmp_path / "data", *arguments) as server:
        added = run_cli("acls", "add", *grant, "--server", server.address, "--token", OPS_TOKEN)
        assert added.returncode == 0, added.stderr
        assert "acl.create principal=ops" in server.log()
    store = tmp_path / "data" / FILE_NAME
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    with ServerProcess(tmp_path / "data", *arguments) as server:
        listed = run_cli(
            "acls", "list", "--resource-type", "group", "--format", "json",
            "--server", server.address, "--token", OPS_TOKEN,
        )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == [
        {"principal": "alice", "operation": "read", "resource_type": "group", "name": "billing",
         "pattern_type": "literal", "source": "store"}
    ]  # fmt: skip
