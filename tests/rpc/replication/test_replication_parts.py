"""The small parts: the fetchers' backoff, the answer's size cap, the follower's channel options."""

from __future__ import annotations

import pytest
from replication_fakes import FakeFollower

from twinlog.engine.base.backoff import Backoff
from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.replication.fetch_calls import FetchedPartition
from twinlog.rpc.client.remote import KEEPALIVE_OPTIONS
from twinlog.rpc.client.request_size import MESSAGE_BYTES_MAX
from twinlog.rpc.replication import channel
from twinlog.rpc.replication.fetcher import ReplicaFetchers
from twinlog.rpc.replication.service import within_bytes


def test_a_fetcher_s_backoff_doubles_up_to_its_cap_without_jitter() -> None:
    settings = ReplicaFetchers(FakeFollower([]), lambda _: None).settings
    assert settings.backoff == Backoff(50, 1_000, jitter=0)  # the one policy, its numbers
    pauses = [settings.backoff.delay_s(failures) for failures in range(1, 8)]
    assert pauses == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    with pytest.raises(InvalidConfigError, match="backoff_ms is 0, expected 1 or more"):
        ReplicaFetchers(FakeFollower([]), lambda _: None, backoff_ms=0, backoff_max_ms=10)
    with pytest.raises(
        InvalidConfigError, match=r"backoff_max_ms is 10, expected at least backoff_ms \(20\)"
    ):
        ReplicaFetchers(FakeFollower([]), lambda _: None, backoff_ms=20, backoff_max_ms=10)
    for name in ("request_timeout_ms", "idle_wait_ms"):
        with pytest.raises(InvalidConfigError, match=f"replica fetcher setting {name} is 0, "):
            ReplicaFetchers(FakeFollower([]), lambda _: None, **{name: 0})


def _part(partition: int, size: int) -> FetchedPartition:
    return FetchedPartition(
        TopicPartition("t", partition),
        records=b"x" * size,
        high_watermark=partition + 10,
        log_start_offset=partition,
        log_end_offset=partition + 20,
    )


def test_records_past_the_response_cap_wait_for_the_next_fetch() -> None:
    answer = [_part(0, 60), _part(1, 50), _part(2, 40), _part(3, 0)]
    assert within_bytes(answer, None) == answer
    kept = within_bytes(answer, 100)
    assert [len(item.records) for item in kept] == [60, 0, 40, 0]
    # A partition left out still tells the follower the leader's bounds.
    assert (kept[1].high_watermark, kept[1].log_start_offset, kept[1].log_end_offset) == (
        11,
        1,
        21,
    )
    # The first partition always travels whole, or a large one would never move.
    assert [len(item.records) for item in within_bytes([_part(0, 500), _part(1, 1)], 100)] == [
        500,
        0,
    ]


def test_the_follower_channel_keeps_the_clients_limits_and_keepalive() -> None:
    assert channel.KEEPALIVE_OPTIONS == KEEPALIVE_OPTIONS
    assert channel.MESSAGE_BYTES_MAX == MESSAGE_BYTES_MAX
    options = dict(channel.CHANNEL_OPTIONS)
    assert options["grpc.max_reconnect_backoff_ms"] <= 1_000
