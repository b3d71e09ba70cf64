"""Where a consumer reads a partition from, as the log and the group say: ``PositionLookup``
finds where a partition starts (the group's committed offset, else the
``auto_offset_reset`` offset: "earliest", "latest"; "none" raises OffsetOutOfRangeError
until ``seek()``), as Kafka's consumer does before its first fetch of a partition; it
seeks to a log's beginning or end (``seek_to_*``, and the reset of a position a fetch
found out of range).

``consumer.Consumer`` calls ``look_up`` for ``position()`` on its own thread, and
``await_all`` in ``poll``: there the lookup runs on a fetcher thread, so poll returns at its
deadline whatever the server does, and a lookup still unanswered stays outstanding (its
own deadline, default_api_timeout_ms, ends it) for the next poll to pick up. The positions
found go to ``SubscriptionState``.

Threads: ``await_all`` and ``cancel`` run on the consumer's thread and change the lookup in
flight; ``seek_to`` and ``reset`` run there and change positions; ``look_up`` runs on the consumer's thread or a fetcher thread and changes nothing
here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from concurrent.futures import Future, wait
from typing import Any

from twinlog.engine.base.errors import OffsetOutOfRangeError, TwinlogError
from twinlog.engine.base.types import TopicPartition
from twinlog.rpc.client.call_deadline import deadline_at
from twinlog.rpc.client.consumer_commits import OffsetCommitter
from twinlog.rpc.client.consumer_fetcher import Fetcher
from twinlog.rpc.client.consumer_offsets_lookup import list_offset
from twinlog.rpc.client.consumer_settings import ConsumerSettings
from twinlog.rpc.client.consumer_subscription import SubscriptionState, as_topic_partitions
from twinlog.rpc.wire.broker_api import BrokerApi

log = logging.getLogger("twinlog.client")


class PositionLookup:
    def __init__(
        self,
        broker: BrokerApi,
        subscriptions: SubscriptionState,
        fetcher: Fetcher,
        commits: OffsetCommitter,
        settings: ConsumerSettings,
    ) -> None:
        self._broker = broker
        self._subscriptions = subscriptions
        self._fetcher = fetcher
        self._commits = commits
        self._settings = settings
        # Starting positions being looked up for poll, for the current assignment only:
        # ``cancel`` drops it when a partition leaves the assignment.
        self._lookup: Future[dict[TopicPartition, int]] | None = None

    def look_up(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Consumer's thread (position()) or a fetcher thread (poll()): where each partition
        starts. The whole lookup (a committed() call, then one list_offset per partition)
        is bounded by default_api_timeout_ms, not each of its requests."""
        with deadline_at(time.monotonic() + self._settings.default_api_timeout_ms / 1000):
            return self._look_up_now(partitions)

    def await_all(self, deadline_s: float) -> bool:
        """Consumer's thread, in poll: True once every assigned partition has a position;
        waits until ``deadline_s`` at most for the lookup (which stays outstanding for the
        next poll when unanswered)."""
        # A second round for partitions assigned while one ran, or after one that failed.
        for _ in range(2):
            missing = self._subscriptions.without_position()
            if not missing:
                return True
            if self._lookup is None:
                self._lookup = self._fetcher.submit(self.look_up, missing)
            wait([self._lookup], timeout=max(0.0, deadline_s - time.monotonic()))
            if not self._lookup.done():
                return False
            lookup, self._lookup = self._lookup, None
            try:
                found = lookup.result()
            except TwinlogError as error:
                if not error.retriable:
                    raise
                # Unanswered (the server stalled or down): the next round asks again.
                log.warning("looking up the starting positions failed: %s; retrying", error)
                continue
            self._subscriptions.start_at(found)
        return not self._subscriptions.without_position()

    def seek_to(self, partitions: Iterable[Any] | None, spec: str) -> None:
        """Consumer's thread (seek_to_beginning, seek_to_end, a reset): seek each
        partition (all assigned: None) to its offset for ``spec``, "earliest" or
        "latest", one after the other, each lookup within default_api_timeout_ms."""
        subscriptions = self._subscriptions
        settings = self._settings
        chosen = subscriptions.assigned if partitions is None else as_topic_partitions(partitions)
        for topic_partition in chosen:
            found = subscriptions.require_assigned(topic_partition)
            what = f"seek to {spec} of {found}"
            offset = list_offset(
                self._broker, found, spec, settings.retry, settings.default_api_timeout_ms, what
            )
            self._fetcher.forget(subscriptions.seek(found, offset))

    def reset(self, topic_partition: TopicPartition) -> None:
        """Consumer's thread, when a fetch finds the position out of the log's range:
        seek to ``auto_offset_reset``."""
        self.seek_to([topic_partition], self._settings.auto_offset_reset)

    def cancel(self) -> None:
        """Consumer's thread, when a partition leaves the assignment (and at close): drop
        the lookup in flight. It read committed offsets for the old assignment: a
        partition that leaves and comes back later must be looked up again, else the old
        answer would replay what another owner copied meanwhile (Kafka drops a pending
        OffsetFetch of an older generation the same way)."""
        if self._lookup is not None:
            self._lookup.cancel()
            self._lookup = None

    def _look_up_now(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        settings = self._settings
        group_id = settings.group_id
        reset = settings.auto_offset_reset
        positions: dict[TopicPartition, int] = {}
        committed = self._commits.committed(group_id, partitions) if group_id else {}
        for topic_partition in partitions:
            offset = committed.get(topic_partition)
            if offset is None:
                if reset == "none":
                    raise OffsetOutOfRangeError(
                        f"{topic_partition} has no committed offset for group {group_id!r} "
                        "and auto_offset_reset is 'none'; seek() first",
                        -1,
                        -1,
                    )
                offset = list_offset(
                    self._broker,
                    topic_partition,
                    reset,
                    settings.retry,
                    settings.default_api_timeout_ms,
                    f"looking up the {reset} offset of {topic_partition}",
                )
            positions[topic_partition] = offset
        return positions
