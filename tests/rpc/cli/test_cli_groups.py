"""``twinlog groups list|describe|delete|reset-offsets`` as a user types them, run in this
process against a real broker behind a real gRPC server on loopback.

Members are made with the broker's own heartbeat call (member epoch 0 joins, -1 leaves).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.groups.group_calls import JOIN_EPOCH, LEAVE_EPOCH, GroupHeartbeat
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.rpc.cli.main import main
from twinlog.rpc.server.config import ServerConfig
from twinlog.rpc.server.server import RpcServer

GROUP = "billing"
TOPIC = "orders"
START_MS = 1_795_687_200_000  # 2026-11-26T10:00:00Z; record i of a partition is i seconds later
RECORDS = {0: 10, 1: 4}


@dataclass
class Served:
    broker: Broker
    address: str

    def run(self, capsys: pytest.CaptureFixture[str], *arguments: str) -> tuple[int, str, str]:
        status = main(["groups", *arguments, "--server", self.address])
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    def committed(self) -> dict[int, int]:
        found = self.broker.fetch_offsets(GROUP, [TopicPartition(TOPIC, p) for p in RECORDS])
        return {tp.partition: offset for tp, offset in found.items()}

    def commit(self, offsets: dict[int, int]) -> None:
        self.broker.commit_offsets(GROUP, {TopicPartition(TOPIC, p): o for p, o in offsets.items()})

    def join(self, member_id: str) -> None:
        self.broker.group_heartbeat(
            GroupHeartbeat(
                GROUP, member_id, JOIN_EPOCH, subscribed_topics=(TOPIC,), client_id="biller-1"
            )
        )

    def leave(self, member_id: str) -> None:
        self.broker.group_heartbeat(GroupHeartbeat(GROUP, member_id, LEAVE_EPOCH))


@pytest.fixture(autouse=True)
def root_logging_restored() -> Iterator[None]:
    """A command against a server points the root logger at this test's captured stderr
    (``configure_logging``); later tests must not log into that closed stream."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[Served]:
    with Broker.open(tmp_path / "data") as broker:
        server = RpcServer(broker, ServerConfig(port=0))
        server.start()
        try:
            broker.create_topic(TOPIC, len(RECORDS))
            for partition, count in RECORDS.items():
                for index in range(count):  # one batch per record: exact time lookups
                    builder = RecordBatchBuilder()
                    builder.append(b"%d" % index, timestamp_ms=START_MS + 1000 * index)
                    broker.produce(TOPIC, partition, builder.build())
            yield Served(broker, f"127.0.0.1:{server.port}")
        finally:
            server.stop(grace_ms=0)


def table(out: str, first_column: str) -> list[list[str]]:
    """The rows of a printed table that start with ``first_column``, split on spaces."""
    return [line.split() for line in out.splitlines() if line.split()[:1] == [first_column]]


def test_list_describe_and_members(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    served.commit({0: 3})
    served.join("member-a")

    status, out, _ = served.run(capsys, "list")
    assert status == 0
    assert table(out, "GROUP") == [["GROUP", "STATE", "MEMBERS"]]
    assert table(out, GROUP)[0][2] == "1"

    status, out, _ = served.run(capsys, "describe", GROUP)
    assert status == 0
    assert out.startswith(f"group {GROUP}: state ")
    assert "1 member(s)" in out.splitlines()[0]
    assert table(out, "TOPIC") == [
        ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID", "CLIENT-ID"]
    ]
    assert table(out, TOPIC) == [
        [TOPIC, "0", "3", "10", "7", "member-a", "biller-1"],
        [TOPIC, "1", "-", "4", "-", "member-a", "biller-1"],
    ]

    status, out, _ = served.run(capsys, "describe", GROUP, "--members")
    assert status == 0
    assert table(out, "member-a") == [
        ["member-a", "-", "biller-1", "1", "stable", "2", "orders-0,orders-1"]
    ]


def test_json_output(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    served.commit({1: 1})
    status, out, _ = served.run(capsys, "list", "--format", "json")
    assert status == 0
    assert json.loads(out) == [{"group_id": GROUP, "state": "empty", "member_count": 0}]
    status, out, _ = served.run(capsys, "describe", GROUP, "--format", "json")
    assert status == 0
    described = json.loads(out)
    assert (described["state"], described["members"]) == ("empty", [])
    assert described["partitions"] == [
        {
            "topic": TOPIC,
            "partition": 1,
            "committed_offset": 1,
            "log_end_offset": 4,
            "lag": 3,
            "member_id": None,
            "client_id": None,
        }
    ]
    status, out, _ = served.run(
        capsys, "reset-offsets", GROUP, "--topic", TOPIC, "--to-latest", "--format", "json"
    )
    assert status == 0
    assert json.loads(out) == {
        "group_id": GROUP,
        "dry_run": False,
        "partitions": [
            {"topic": TOPIC, "partition": 0, "previous_offset": None, "new_offset": 10},
            {"topic": TOPIC, "partition": 1, "previous_offset": 1, "new_offset": 4},
        ],
    }


def test_delete_is_refused_with_a_member_and_done_once_it_left(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    served.commit({0: 3})
    served.join("member-a")
    status, out, err = served.run(capsys, "delete", GROUP)
    assert status == 1 and out == ""
    assert err.startswith("error: NonEmptyGroupError: ") and "active member" in err
    assert len(err.splitlines()) == 1
    assert served.committed()[0] == 3

    served.leave("member-a")
    status, out, _ = served.run(capsys, "delete", GROUP)
    assert (status, out) == (0, f"deleted group {GROUP}\n")
    assert served.committed() == {0: -1, 1: -1}


def test_an_unknown_group_is_one_clear_line(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in (
        ["describe", "nobody"],
        ["describe", "nobody", "--members"],
        ["delete", "nobody"],
    ):
        status, out, err = served.run(capsys, *command)
        assert status == 1 and out == ""
        assert err.startswith("error: GroupIdNotFoundError: ") and "'nobody'" in err, err
        assert len(err.splitlines()) == 1


def resets(out: str) -> dict[int, tuple[str, str]]:
    assert table(out, "TOPIC") == [["TOPIC", "PARTITION", "PREVIOUS", "NEW"]]
    return {int(row[1]): (row[2], row[3]) for row in table(out, TOPIC)}


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (["--to-earliest"], {0: ("5", "0"), 1: ("2", "0")}),
        (["--to-latest"], {0: ("5", "10"), 1: ("2", "4")}),
        (["--to-offset", "7"], {0: ("5", "7"), 1: ("2", "4")}),  # clamped to the log end
        (["--shift-by", "-3"], {0: ("5", "2"), 1: ("2", "0")}),  # clamped to the log start
        (["--shift-by", "4"], {0: ("5", "9"), 1: ("2", "4")}),
        (["--to-datetime", "2026-11-26T10:00:03"], {0: ("5", "3"), 1: ("2", "3")}),
        (["--to-datetime", "2026-11-26T11:00:06+01:00"], {0: ("5", "6"), 1: ("2", "4")}),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_reset_offsets(
    served: Served,
    capsys: pytest.CaptureFixture[str],
    target: list[str],
    expected: dict[int, tuple[str, str]],
) -> None:
    served.commit({0: 5, 1: 2})
    status, out, err = served.run(capsys, "reset-offsets", GROUP, "--topic", TOPIC, *target)
    assert status == 0, err
    assert resets(out) == expected
    assert "dry run" not in out
    assert served.committed() == {p: int(new) for p, (_, new) in expected.items()}


def test_reset_some_partitions_as_a_dry_run_commits_nothing(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    served.commit({0: 5})
    status, out, _ = served.run(
        capsys, "reset-offsets", GROUP, "--topic", f"{TOPIC}:1", "--to-offset", "2", "--dry-run"
    )
    assert status == 0
    assert resets(out) == {1: ("-", "2")}
    assert out.rstrip().endswith("(dry run: nothing committed)")
    assert served.committed() == {0: 5, 1: -1}


def test_a_reset_while_the_group_has_members_is_refused(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    served.commit({0: 5})
    served.join("member-a")
    status, out, err = served.run(capsys, "reset-offsets", GROUP, "--topic", TOPIC, "--to-earliest")
    assert status == 1 and out == ""
    assert err.startswith("error: NonEmptyGroupError: offsets of group 'billing' not reset")
    assert len(err.splitlines()) == 1
    assert served.committed() == {0: 5, 1: -1}


def test_shift_by_without_a_committed_offset_names_the_partition(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    served.commit({0: 5})
    status, _, err = served.run(capsys, "reset-offsets", GROUP, "--topic", TOPIC, "--shift-by", "1")
    assert status == 1
    assert err.startswith("error: InvalidConfigError: ") and "orders-1" in err
    assert served.committed() == {0: 5, 1: -1}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--topic", "orders"], "one of the arguments --to-earliest"),
        (["--topic", "orders", "--to-earliest", "--to-latest"], "not allowed with argument"),
        (["--to-earliest"], "the following arguments are required: --topic"),
        (["--topic", "orders:x", "--to-earliest"], "expected TOPIC:P,P"),
        (["--topic", "orders:-1", "--to-earliest"], "partitions are >= 0"),
        (["--topic", "orders", "--to-datetime", "yesterday"], "expected an ISO 8601 time"),
        (["--topic", "orders", "--to-offset", "1.5"], "expected a whole number"),
    ],
)
def test_bad_reset_flags_are_usage_errors(
    capsys: pytest.CaptureFixture[str], arguments: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["groups", "reset-offsets", GROUP, *arguments, "--server", "127.0.0.1:1"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: twinlog groups reset-offsets") and message in err, err


def test_every_groups_command_has_help_with_an_example(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for command in ([], ["list"], ["describe"], ["delete"], ["reset-offsets"]):
        with pytest.raises(SystemExit):
            main(["groups", *command, "--help"])
        assert "example:\n  twinlog groups" in capsys.readouterr().out
