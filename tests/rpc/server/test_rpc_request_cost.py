"""What one client may cost the server: idle long polls never starve other clients' calls,
batches with bad records are refused over gRPC as over the embedded broker, and a reader
that meets such a batch in old data is told where it is and where to skip to."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from batch_support import batch_around

from twinlog.engine.base.errors import (
    InvalidConfigError,
    InvalidRecordError,
    NotEnoughResourcesError,
    TwinlogError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_builder import RecordBatchBuilder, build_batch, encode_record
from twinlog.rpc.client import Consumer
from twinlog.rpc.client.remote import RemoteBroker
from twinlog.rpc.server.config import ServerConfig
from twinlog.rpc.server.long_poll_slots import LongPollSlots
from twinlog.rpc.server.server import RpcServer

WORKER_THREADS = 8
LONG_POLL_MS = 4_000


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RpcServer]:
    with Broker.open(tmp_path / "data") as broker:
        broker.create_topic("idle", partitions=1)
        broker.create_topic("orders", partitions=2)
        started = RpcServer(broker, ServerConfig(port=0, worker_threads=WORKER_THREADS))
        started.start()
        try:
            yield started
        finally:
            started.stop(grace_ms=0)


@pytest.fixture
def served(server: RpcServer) -> tuple[Broker, str]:
    return server.broker, server.address  # type: ignore[return-value]


def bad_deltas_batch(transactional: bool = False, producer: tuple[int, int] = (-1, -1)) -> bytes:
    """Three records whose offset deltas repeat (0, 0, 0): consumers would see 3, 3, 3."""
    section = b"".join(encode_record(0, 0, b"k", b"v", None) for _ in range(3))
    return batch_around(
        section,
        3,
        timestamp_ms=1_700_000_000_000,
        producer_id=producer[0],
        producer_generation=producer[1],
        transactional=transactional,
    )


@pytest.mark.slow
def test_idle_long_polls_do_not_make_another_clients_commit_wait(
    served: tuple[Broker, str],
) -> None:
    _, address = served
    outcomes: list[str] = []
    started = threading.Barrier(WORKER_THREADS + 3)

    def idle_poll() -> None:
        with RemoteBroker(address) as remote:
            started.wait()
            try:
                remote.fetch("idle", 0, 0, max_wait_ms=LONG_POLL_MS)
                outcomes.append("waited")
            except NotEnoughResourcesError as error:
                assert error.retriable and "long_polls" in str(error)
                outcomes.append("refused")

    pollers = [threading.Thread(target=idle_poll) for _ in range(WORKER_THREADS + 2)]
    for poller in pollers:
        poller.start()
    started.wait()
    time.sleep(0.5)  # every poll is parked or refused
    with RemoteBroker(address) as remote:
        began = time.monotonic()
        identity = remote.init_producer("other-client")
        producer = (identity.producer_id, identity.producer_generation)
        transaction_id = remote.begin_transaction(*producer)
        remote.add_partitions_to_transaction(transaction_id, *producer, [("orders", 0)])  # type: ignore[list-item]
        builder = RecordBatchBuilder(
            producer_id=producer[0],
            producer_generation=producer[1],
            base_sequence=0,
            transactional=True,
        )
        builder.append(b"paid")
        remote.produce("orders", 0, builder.build(), transaction_id=transaction_id)
        remote.commit_transaction(transaction_id, *producer, wait_for_applied=True)
        waited_s = time.monotonic() - began
    for poller in pollers:
        poller.join()
    assert waited_s < 1.5, f"the commit waited {waited_s:.1f} s behind idle long polls"
    assert outcomes.count("refused") >= 1  # fewer than all could park


def test_a_long_poll_without_a_slot_still_gets_records_that_are_there(
    server: RpcServer,
) -> None:
    server.broker.produce("orders", 1, build_batch([b"ready"]))
    taken = 0
    while server.consuming.slots.try_take(None, f"elsewhere-{taken}") is None:
        taken += 1  # every slot, each from a connection of its own
    with RemoteBroker(server.address) as remote:
        result = remote.fetch("orders", 1, 0, max_wait_ms=LONG_POLL_MS)
        assert result.log_end_offset == 1 and result.records
        with pytest.raises(NotEnoughResourcesError, match="long_polls_max"):
            remote.fetch("idle", 0, 0, max_wait_ms=LONG_POLL_MS)
        assert remote.fetch("idle", 0, 0).records == b""  # a fetch that does not wait: served


def test_slots_bound_each_principal_and_connection() -> None:
    slots = LongPollSlots(total_max=4, per_principal_max=2, per_connection_max=2)
    assert slots.try_take("alice", "c1") is None
    assert slots.try_take("alice", "c2") is None
    assert "principal alice" in (slots.try_take("alice", "c3") or "")
    assert slots.try_take("bob", "c1") is None
    assert "connection c1" in (slots.try_take(None, "c1") or "")
    assert slots.try_take(None, "c4") is None  # no principal: only the other limits
    assert "long_polls_max" in (slots.try_take(None, "c5") or "")
    slots.give_back("alice", "c1")
    assert slots.try_take(None, "c5") is None
    assert slots.parked == 4


def test_long_polls_and_streams_leave_threads_for_other_calls() -> None:
    config = ServerConfig()
    assert config.long_polls_limit + config.produce_streams_limit < config.worker_threads
    with pytest.raises(InvalidConfigError, match="long_polls_max"):
        ServerConfig(worker_threads=8, produce_streams_max=4, long_polls_max=4)


def test_bad_records_are_refused_over_grpc_naming_topic_and_partition(
    served: tuple[Broker, str],
) -> None:
    _, address = served
    with RemoteBroker(address) as remote:
        with pytest.raises(InvalidRecordError, match="orders-1") as refused:
            remote.produce("orders", 1, bad_deltas_batch())
        assert (refused.value.topic, refused.value.partition) == ("orders", 1)
        assert refused.value.record_index == 1 and not refused.value.retriable
        identity = remote.init_producer("txn")
        producer = (identity.producer_id, identity.producer_generation)
        transaction_id = remote.begin_transaction(*producer)
        remote.add_partitions_to_transaction(transaction_id, *producer, [("orders", 0)])  # type: ignore[list-item]
        with pytest.raises(InvalidRecordError, match="orders-0"):
            remote.produce(
                "orders", 0, bad_deltas_batch(True, producer), transaction_id=transaction_id
            )
        assert remote.fetch("orders", 1, 0).log_end_offset == 0


def test_a_consumer_meeting_an_old_bad_batch_is_told_where_to_skip(tmp_path: Path) -> None:
    with Broker.open(tmp_path / "data") as broker:
        broker.create_topic("old", partitions=1)
        broker.produce("old", 0, build_batch([b"a", b"b"]))
        # Written as a broker that did not check records would have: straight to the log.
        broker.partition(TopicPartition("old", 0)).writer.append_plain(
            bad_deltas_batch(), validate=False
        )
        broker.produce("old", 0, build_batch([b"c"]))
        with Consumer(broker, auto_offset_reset="earliest") as consumer:
            consumer.assign([("old", 0)])
            seen = [r.value for r in consumer.poll(timeout_ms=2_000)]
            error: TwinlogError | None = None
            deadline = time.monotonic() + 5
            while error is None and time.monotonic() < deadline:
                try:
                    seen += [r.value for r in consumer.poll(timeout_ms=500)]
                except InvalidRecordError as raised:
                    error = raised
            assert seen == [b"a", b"b"]
            assert error is not None, "the bad batch was read as records"
            assert (error.topic, error.partition, error.offset, error.next_offset) == (
                "old",
                0,
                2,
                5,
            )
            assert "old-0" in str(error) and "offset 2" in str(error) and "seek to 5" in str(error)
            consumer.seek(("old", 0), error.next_offset)  # type: ignore[arg-type]
            assert [r.value for r in consumer.poll(timeout_ms=2_000)] == [b"c"]
