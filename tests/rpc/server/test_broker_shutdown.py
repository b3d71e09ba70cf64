"""The doors a cluster operator moves partitions and retires brokers with, on a real
``twinlog serve`` with tokens and ACLs: ReassignPartitions needs ALTER on the topic (a
single node can only keep a partition where it is); ShutdownBroker needs ALTER on
``broker:ID``, refuses a call meant for another broker, and otherwise stops the server
as SIGTERM does (a clean exit, status 0), each step in the audit log."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from server_process import ServerProcess

from twinlog.engine.base.errors import (
    AuthorizationError,
    InvalidConfigError,
    InvalidReplicaAssignmentError,
    NoReassignmentInProgressError,
)
from twinlog.rpc.client import Admin

pytestmark = [pytest.mark.slow]

ALICE = "alice-token-3f9a1c7e5b2d"
OPS = "ops-token-8b4e2d6a0c1f9"
TOKENS = f"{ALICE} alice\n{OPS} ops\n"
ACL = """
alice read *
ops all *
ops alter broker:*
"""
EXIT_WAIT_S = 30.0


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    (tmp_path / "tokens").write_text(TOKENS)
    (tmp_path / "acl").write_text(ACL)
    with ServerProcess(
        tmp_path / "data",
        "--tokens-file", str(tmp_path / "tokens"), "--acl-file", str(tmp_path / "acl"),
    ) as process:  # fmt: skip
        yield process


def test_reassignment_needs_alter_and_a_single_node_keeps_partitions_where_they_are(
    server: ServerProcess,
) -> None:
    ops = Admin(server.address, token=OPS)
    ops.create_topic("kept", 1)
    with pytest.raises(AuthorizationError, match="may not alter 'kept'"):
        Admin(server.address, token=ALICE).reassign_partitions({("kept", 0): (0,)})
    stay, move, cancel = (
        ops.reassign_partitions({("kept", 0): (0,)})
        + ops.reassign_partitions({("kept", 0): (1,)})
        + ops.reassign_partitions({("kept", 0): None})
    )
    assert stay.error is None
    assert isinstance(move.error, InvalidReplicaAssignmentError)
    assert "a single node has one broker" in str(move.error)
    assert isinstance(cancel.error, NoReassignmentInProgressError)
    assert ops.partition_reassignments() == []
    with pytest.raises(InvalidConfigError, match="single node"):
        ops.plan_rebalance()
    assert "partitions.reassign principal=ops" in server.log()


def test_a_shutdown_needs_alter_on_the_broker_names_it_and_stops_it_cleanly(
    server: ServerProcess,
) -> None:
    with pytest.raises(AuthorizationError):
        Admin(server.address, token=ALICE).shutdown_broker(0)
    assert "acl.denied principal=alice action=alter resource=broker name=0" in server.log()
    ops = Admin(server.address, token=OPS)
    # A call meant for another broker that reached this one (a stale address): refused.
    with pytest.raises(InvalidConfigError, match="this is broker 0, not broker 7"):
        ops.shutdown_broker(7)
    assert server.process is not None and server.process.poll() is None
    ops.shutdown_broker(0)
    assert server.process is not None
    assert server.process.wait(timeout=EXIT_WAIT_S) == 0
    log = server.log()
    assert "broker.shutdown principal=ops" in log
    assert "a shutdown was asked by ops" in log and "stopped cleanly" in log
