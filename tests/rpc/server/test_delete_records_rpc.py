"""DeleteRecords through a real ``twinlog serve`` process with tokens and ACLs: DELETE on the
topic is needed (Kafka's rule), each partition answers for itself, the CLI prints the low
watermark, the audit log names who deleted what, and a restart keeps the new start."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from server_process import ServerProcess, run_cli

from twinlog.engine.base.errors import (
    AuthorizationError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.rpc.client import Admin, Consumer, Producer

pytestmark = [pytest.mark.slow]

ALICE = "alice-token-3f9a1c7e5b2d"
OPS = "ops-token-8b4e2a6c9d1f"
TOKENS = f"{ALICE} alice\n{OPS} ops\n"
ACL = """
alice write trim*
alice read *
ops all *
"""
TOPIC = "trim-me"
RECORDS = 10


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("delete-records")
    (directory / "tokens").write_text(TOKENS)
    (directory / "acl").write_text(ACL)
    with ServerProcess(
        directory / "data",
        "--tokens-file", str(directory / "tokens"), "--acl-file", str(directory / "acl"),
    ) as process:  # fmt: skip
        ops = Admin(process.address, token=OPS)
        ops.create_topic(TOPIC, 2)
        with Producer(process.address, token=OPS) as producer:
            for number in range(RECORDS):
                producer.send(TOPIC, b"r%d" % number, partition=0).result(timeout=10)
        ops.close()
        yield process


def _log_start(admin: Admin, partition: int = 0) -> int:
    return admin.describe_topic(TOPIC).partitions[partition].log_start_offset


def test_delete_records_needs_delete_on_the_topic(server: ServerProcess) -> None:
    with Admin(server.address, token=ALICE) as alice, Admin(server.address, token=OPS) as ops:
        with pytest.raises(AuthorizationError, match=f"may not delete '{TOPIC}'"):
            alice.delete_records({(TOPIC, 0): 3})
        assert _log_start(ops) == 0
        assert ops.delete_records({(TOPIC, 0): 3}) == {TopicPartition(TOPIC, 0): 3}
        assert _log_start(ops) == 3
    cli = run_cli(
        "topics", "delete-records", TOPIC, "--partition", "0", "--before", "5",
        "--server", server.address, "--token", ALICE,
    )  # fmt: skip
    assert cli.returncode == 1 and "AuthorizationError" in cli.stderr
    assert "records.delete principal=ops" in server.log()
    assert "acl.denied principal=alice" in server.log()


def test_each_partition_answers_for_itself_and_the_first_refusal_is_raised(
    server: ServerProcess,
) -> None:
    with Admin(server.address, token=OPS) as ops:
        with pytest.raises(OffsetOutOfRangeError, match="high watermark") as refused:
            ops.delete_records({(TOPIC, 1): 1, (TOPIC, 0): 4, (TOPIC, 9): 0})
        notes = "\n".join(getattr(refused.value, "__notes__", []))
        assert f"also refused: {TOPIC}-9" in notes and f"{TOPIC}-0 from 4" in notes
        assert _log_start(ops) == 4  # the partition that could be done was
        with pytest.raises(UnknownTopicOrPartitionError):
            ops.delete_records({(TOPIC, 9): 0})


def test_the_cli_deletes_up_to_the_high_watermark_and_a_restart_keeps_it(
    server: ServerProcess,
) -> None:
    cli = run_cli(
        "topics", "delete-records", TOPIC, "--partition", "0", "--before", "-1",
        "--server", server.address, "--token", OPS,
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    assert f"{TOPIC}-0: low watermark {RECORDS}" in cli.stdout
    usage = run_cli("topics", "delete-records", TOPIC, "--partition", "0", "--before", "-2")
    assert usage.returncode == 2 and "-1 for the high watermark" in usage.stderr
    server.stop()
    server.start()
    with Admin(server.address, token=OPS) as ops:
        assert _log_start(ops) == RECORDS
    with Producer(server.address, token=OPS) as producer:
        producer.send(TOPIC, b"after", partition=0).result(timeout=10)
    with Consumer(server.address, token=ALICE, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(TOPIC, 0)])
        values: list[bytes | None] = []
        for _ in range(50):
            values += [record.value for record in consumer.poll(timeout_ms=200)]
            if values:
                break
    assert values == [b"after"]
