"""A produce or fetch over gRPC carrying the client's leader epoch (Kafka's
current_leader_epoch): checked by the broker against the partition's, on a real server
over a real broker; one sent by a client whose metadata is ahead of the broker is refused
(UnknownLeaderEpochError, retriable) and writes nothing; none sent is not checked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from twinlog.engine.base.errors import UnknownLeaderEpochError
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_builder import build_batch
from twinlog.rpc.client.remote import RemoteBroker
from twinlog.rpc.server.config import ServerConfig
from twinlog.rpc.server.server import RpcServer


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[tuple[Broker, RemoteBroker]]:
    with Broker.open(tmp_path / "data") as broker:
        broker.create_topic("orders", 1)
        server = RpcServer(broker, ServerConfig(port=0))
        server.start()
        try:
            with RemoteBroker(f"127.0.0.1:{server.port}") as remote:
                yield broker, remote
        finally:
            server.stop(grace_ms=0)


def test_the_partitions_epoch_is_accepted_a_newer_one_refused(
    served: tuple[Broker, RemoteBroker],
) -> None:
    broker, remote = served
    epoch = broker.client_leader_epoch("orders", 0)
    with pytest.raises(UnknownLeaderEpochError, match="retry shortly") as refused:
        remote.produce("orders", 0, build_batch([b"ahead"]), current_leader_epoch=epoch + 1)
    assert refused.value.retriable
    assert broker.list_offset("orders", 0, "latest") == 0  # nothing written
    assert remote.produce("orders", 0, build_batch([b"now"]), current_leader_epoch=epoch)
    assert remote.produce("orders", 0, build_batch([b"unchecked"])).base_offset == 1
    with pytest.raises(UnknownLeaderEpochError):
        remote.fetch("orders", 0, 0, current_leader_epoch=epoch + 1)
    assert remote.fetch("orders", 0, 0, current_leader_epoch=epoch).records
    assert remote.fetch("orders", 0, 0, max_wait_ms=100, current_leader_epoch=epoch).records


def test_a_produce_stream_carries_the_epoch_too(served: tuple[Broker, RemoteBroker]) -> None:
    broker, remote = served
    epoch = broker.client_leader_epoch("orders", 0)
    pipe = remote.open_produce_stream()
    try:
        ahead = pipe.submit("orders", 0, build_batch([b"ahead"]), current_leader_epoch=epoch + 1)
        with pytest.raises(UnknownLeaderEpochError):
            ahead.result(10)
        assert (
            pipe.submit("orders", 0, build_batch([b"now"]), current_leader_epoch=epoch)
            .result(10)
            .base_offset
            == 0
        )
    finally:
        pipe.close(5)
