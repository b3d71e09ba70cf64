"""``twinlog groups delete-offsets`` (kafka-consumer-groups.sh --delete-offsets) as a user
types it, against a real ``twinlog serve`` with tokens and an ACL file: committed offsets
are deleted and ``groups describe`` no longer shows them; a topic a member of the group
reads keeps its offsets (GroupSubscribedToTopicError); DELETE on the group and READ on the
topic are needed, as Kafka's OffsetDelete checks them; each deletion and each refusal is
in the audit log."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from server_process import ServerProcess, run_cli

from twinlog.rpc.client import Admin, Consumer, Producer
from twinlog.rpc.client.group_offsets import ResetTo

pytestmark = pytest.mark.slow  # a server process, a CLI process per step

OPS = "ops-token-2b8e5c1f9a7d"
READER = "reader-token-6f1d3a9c2e8b"  # reads everything, may not delete the group's offsets
GROUP = "billing"
TOKENS = f"{OPS} ops\n{READER} reader\n"
ACL = """
ops all *
ops all group:*
reader read *
reader read group:*
"""
SECRET_ACL = "ops-secret"  # a principal with DELETE on the group but no READ on `secret`
ASSIGNMENT_DEADLINE_S = 20


@dataclass
class Served:
    server: ServerProcess

    def groups(self, token: str, *arguments: str) -> tuple[int, str, str]:
        result = run_cli("groups", *arguments, "--server", self.server.address, "--token", token)
        return result.returncode, result.stdout, result.stderr

    def commit(self, topic: str, offset: int) -> None:
        with Admin(self.server.address, token=OPS) as admin:
            admin.reset_group_offsets(GROUP, topic, ResetTo.offset(offset))

    def committed_partitions(self) -> set[tuple[str, int]]:
        status, out, err = self.groups(OPS, "describe", GROUP, "--format", "json")
        if status == 1 and "GroupIdNotFoundError" in err:
            return set()  # no offsets and no members left: the group is gone, as Kafka's
        assert status == 0, err
        return {
            (row["topic"], row["partition"])
            for row in json.loads(out)["partitions"]
            if row["committed_offset"] is not None
        }

    def audit_lines(self, event: str) -> list[str]:
        return [
            line
            for line in self.server.log().splitlines()
            if "twinlog.audit" in line and f"{event} " in line
        ]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    directory = tmp_path_factory.mktemp("delete-offsets")
    (directory / "tokens").write_text(TOKENS + f"{SECRET_ACL}-token-4c7a1e9b {SECRET_ACL}\n")
    (directory / "acl").write_text(ACL + f"{SECRET_ACL} delete group:*\n{SECRET_ACL} read orders\n")
    with ServerProcess(
        directory / "data",
        "--tokens-file", str(directory / "tokens"),
        "--acl-file", str(directory / "acl"),
    ) as server:  # fmt: skip
        with Admin(server.address, token=OPS) as admin:
            for topic in ("orders", "refunds", "secret"):
                admin.create_topic(topic, partitions=2)
        with Producer(server.address, token=OPS) as producer:
            for topic in ("orders", "refunds", "secret"):
                for partition in (0, 1):
                    for number in range(3):
                        producer.send(topic, b"%d" % number, partition=partition)
            producer.flush()
        yield Served(server)


def test_deleted_offsets_are_gone_from_describe_and_audited(served: Served) -> None:
    served.commit("orders", 2)
    assert {("orders", 0), ("orders", 1)} <= served.committed_partitions()
    status, out, err = served.groups(
        OPS, "delete-offsets", "--group", GROUP, "--topic", "orders", "--partition", "0"
    )
    assert status == 0, err
    assert out.split("\n")[0].split() == ["TOPIC", "PARTITION", "STATUS"]
    assert out.split("\n")[1].split() == ["orders", "0", "deleted"], out
    committed = served.committed_partitions()
    assert ("orders", 0) not in committed and ("orders", 1) in committed
    status, out, err = served.groups(OPS, "delete-offsets", "--group", GROUP, "--topic", "orders")
    assert status == 0, err
    assert not {("orders", 0), ("orders", 1)} & served.committed_partitions()
    audited = served.audit_lines("group.offsets.delete")
    assert len(audited) == 2, audited
    assert "principal=ops" in audited[0] and f"group={GROUP}" in audited[0]
    assert "orders-0" in audited[0] and "outcome=ok" in audited[0], audited


def test_a_topic_a_member_reads_keeps_its_offsets(served: Served) -> None:
    served.commit("orders", 1)
    served.commit("refunds", 1)
    with Consumer(served.server.address, token=OPS, group_id=GROUP) as consumer:
        consumer.subscribe(["orders"])
        deadline = time.monotonic() + ASSIGNMENT_DEADLINE_S
        while not consumer.assignment():
            assert time.monotonic() < deadline, "the consumer got no partitions"
            consumer.poll(timeout_ms=200)
        status, out, err = served.groups(
            OPS, "delete-offsets", "--group", GROUP, "--topic", "orders", "--topic", "refunds",
            "--format", "json",
        )  # fmt: skip
    assert status == 1 and "2 of 4 partition(s) kept their offsets" in err, err
    rows = {(r["topic"], r["partition"]): r for r in json.loads(out)["partitions"]}
    assert [rows[("orders", p)]["error"] for p in (0, 1)] == ["GroupSubscribedToTopicError"] * 2
    assert all(rows[("refunds", p)]["deleted"] for p in (0, 1)), rows
    committed = served.committed_partitions()
    assert {("orders", 0), ("orders", 1)} <= committed
    assert not {("refunds", 0), ("refunds", 1)} & committed


def test_without_delete_on_the_group_or_read_on_the_topic_nothing_is_deleted(
    served: Served,
) -> None:
    served.commit("orders", 1)
    served.commit("secret", 1)
    status, out, err = served.groups(
        READER, "delete-offsets", "--group", GROUP, "--topic", "orders"
    )
    assert status == 1 and "AuthorizationError" in err, err
    assert f"'reader delete group:{GROUP}'" in err, err  # names the grant to ask for
    denied = [line for line in served.audit_lines("acl.denied") if "principal=reader" in line]
    assert denied and "action=delete" in denied[-1], denied
    status, out, err = served.groups(
        f"{SECRET_ACL}-token-4c7a1e9b",
        "delete-offsets", "--group", GROUP, "--topic", "secret:0", "--topic", "orders:0",
    )  # fmt: skip
    assert status == 1, err
    lines = {tuple(line.split()[:2]): line for line in out.splitlines()[1:]}
    assert "AuthorizationError" in lines[("secret", "0")], out
    assert lines[("orders", "0")].split()[2] == "deleted", out
    committed = served.committed_partitions()
    assert ("secret", 0) in committed and ("orders", 1) in committed
    assert ("orders", 0) not in committed


def test_partition_without_one_topic_is_a_usage_error(served: Served) -> None:
    status, _, err = served.groups(
        OPS, "delete-offsets", "--group", GROUP, "--topic", "orders", "--topic", "refunds",
        "--partition", "0",
    )  # fmt: skip
    assert status == 2 and "--partition goes with exactly one --topic" in err, err
