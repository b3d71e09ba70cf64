"""``Consumer``: a vanilla reader of data logs, alone or as a member of a group.

    consumer = Consumer("127.0.0.1:7070", group_id="billing")
    consumer.subscribe(["orders"])            # the group shares the partitions out
    for record in consumer:                   # or: consumer.poll(timeout_ms=1000)
        ...

    consumer = Consumer("127.0.0.1:7070", group_id="billing", enable_auto_commit=False)
    consumer.assign([("orders", 0), ("orders", 1)])   # exactly these, no membership
    records = consumer.poll(timeout_ms=1000)
    consumer.commit()

``subscribe(topics | pattern, listener)`` makes the consumer a member of its group
(``consumer_membership``: KIP-848's protocol; the group's coordinator assigns partitions
and moves them between members without two ever reading one at once). Changes of
assignment are applied inside ``poll`` on the caller's thread, with the listener's
on-revoked / on-assigned / on-lost (``rebalance_listener``). ``group_metadata()`` is what a
transactional producer's ``send_offsets_to_transaction`` takes, so a zombie's offsets are
fenced by its generation (KIP-447).

``enable_auto_commit`` (default True, as Kafka's) commits the positions of the records the
previous polls returned every ``auto_commit_interval_ms``, before a revocation, and at
``close``: at-least-once. Turn it off and call ``commit()`` (or use a transaction) to
decide yourself.

Data logs hold committed data only, so there is no transaction logic here: no
markers, no isolation level, no filtering. Each assigned partition has at most
one fetch (a long poll of ``fetch_max_wait_ms``) in flight; ``poll`` returns as
soon as any of them brings records. A fetch that fails with a retriable error (server
down, restarting) is tried again after a backoff, per partition (``consumer_fetcher``).

Positions start at the group's committed offset when there is one, else at
``auto_offset_reset``: "latest" by default, as Kafka's consumer (only records
produced from now on), "earliest" (from the log start), or "none" (position()
and poll() raise until seek()) (``consumer_positions``).

``pause``/``resume`` stop and restart fetching (and returning) partitions without giving
them up. ``end_offsets``, ``beginning_offsets`` and ``offsets_for_times`` look offsets up
(``consumer_offsets_lookup``). Iterating a consumer polls until ``consumer_timeout_ms``
passes without a record (forever by default), as kafka-python's does.

No call waits forever (docs/timeouts.md). ``poll(timeout_ms)`` returns within about
its timeout whatever the server does: looking up the starting positions and fetching
run on the fetcher threads, and a lookup or fetch still unanswered at poll's deadline
stays outstanding (its own request deadline ends it) for the next poll to pick up.
``committed``, ``position``, ``seek_to_*`` and ``commit`` wait at most
``default_api_timeout_ms``, then raise RequestTimedOutError.

This class is the facade: it checks what it is asked and drives its parts, as Kafka's
``KafkaConsumer`` does. ``consumer_subscription`` holds what is assigned or subscribed,
the positions and what is paused; ``consumer_fetcher`` fetches, buffers and decodes
records; ``consumer_positions`` finds where a partition starts; ``consumer_commits``
stores and reads the group's offsets; ``consumer_membership`` (the heartbeat thread) and
``consumer_rebalance`` (the changes it brings, applied in ``poll``) are the membership.

Thread rule: one thread uses a consumer (as Kafka's); ``close`` from that thread. A
subscribed consumer has a heartbeat thread of its own; the listener runs on the caller's.
Fetches and starting-position lookups run on fetcher threads, ``commit_async`` on a commit
thread; their answers come back through futures read on the consumer's thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future
from typing import Any

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.base.types import TopicPartition
from twinlog.rpc.client.client_metrics import ConsumerMetrics
from twinlog.rpc.client.connection import ConnectionOptions, Target, connect
from twinlog.rpc.client.consumer_commits import OffsetCommitter
from twinlog.rpc.client.consumer_config import ConsumerConfig
from twinlog.rpc.client.consumer_fetcher import Fetcher
from twinlog.rpc.client.consumer_offsets_lookup import (
    OffsetAndTimestamp,
    list_offsets,
    offsets_for_times,
)
from twinlog.rpc.client.consumer_positions import PositionLookup
from twinlog.rpc.client.consumer_rebalance import Rebalancer
from twinlog.rpc.client.consumer_subscription import (
    SubscriptionState,
    as_topic_partitions,
    listener_of,
    subscription_of,
)
from twinlog.rpc.client.kafka_config import accepts_kafka_names
from twinlog.rpc.client.rebalance_listener import (
    ConsumerGroupMetadata,
    ConsumerRebalanceListener,
    PartitionsCallback,
)
from twinlog.rpc.client.records import ConsumerRecord
from twinlog.rpc.client.retry import RetryPolicy

log = logging.getLogger("twinlog.client")

MEMBERSHIP_CHECK_S = 0.1  # a subscribed poll looks at its group's changes this often
ITERATION_POLL_MS = 500  # each poll of an iteration


class Consumer:
    @accepts_kafka_names("Consumer")  # and config=; docs/client-config.md
    def __init__(
        self,
        target: Target,
        group_id: str | None = None,
        *,
        # The defaults, and the rules each setting is checked by: ConsumerConfig's.
        auto_offset_reset: str = ConsumerConfig.auto_offset_reset,
        fetch_max_bytes: int = ConsumerConfig.fetch_max_bytes,
        fetch_max_wait_ms: int = ConsumerConfig.fetch_max_wait_ms,
        max_poll_records: int = ConsumerConfig.max_poll_records,
        enable_auto_commit: bool = ConsumerConfig.enable_auto_commit,
        auto_commit_interval_ms: int = ConsumerConfig.auto_commit_interval_ms,
        group_instance_id: str | None = None,
        session_timeout_ms: int = ConsumerConfig.session_timeout_ms,
        max_poll_interval_ms: int = ConsumerConfig.max_poll_interval_ms,
        metadata_max_age_ms: int = ConsumerConfig.metadata_max_age_ms,
        consumer_timeout_ms: int | None = None,
        default_api_timeout_ms: int = ConsumerConfig.default_api_timeout_ms,
        retry: RetryPolicy | None = None,
        connection: ConnectionOptions | None = None,
        **connection_options: Any,
    ) -> None:
        config = ConsumerConfig(
            group_id=group_id,
            auto_offset_reset=auto_offset_reset,
            fetch_max_bytes=fetch_max_bytes,
            fetch_max_wait_ms=fetch_max_wait_ms,
            max_poll_records=max_poll_records,
            enable_auto_commit=enable_auto_commit,
            auto_commit_interval_ms=auto_commit_interval_ms,
            group_instance_id=group_instance_id,
            session_timeout_ms=session_timeout_ms,
            max_poll_interval_ms=max_poll_interval_ms,
            metadata_max_age_ms=metadata_max_age_ms,
            consumer_timeout_ms=consumer_timeout_ms,
            default_api_timeout_ms=default_api_timeout_ms,
        )
        options = connection or ConnectionOptions(**connection_options)
        self._broker, self._owns_broker = connect(target, options)
        self.group_id = config.group_id
        self.enable_auto_commit = config.enable_auto_commit and bool(config.group_id)
        self.auto_commit_interval_ms = config.auto_commit_interval_ms
        self.group_instance_id = config.group_instance_id
        self.session_timeout_ms = config.session_timeout_ms
        self.max_poll_interval_ms = config.max_poll_interval_ms
        self.metadata_max_age_ms = config.metadata_max_age_ms
        self.consumer_timeout_ms = config.consumer_timeout_ms
        self.auto_offset_reset = config.auto_offset_reset
        self.fetch_max_bytes = config.fetch_max_bytes
        self.fetch_max_wait_ms = config.fetch_max_wait_ms
        self.max_poll_records = config.max_poll_records
        self.default_api_timeout_ms = config.default_api_timeout_ms
        # Without a policy of its own, a call retries for as long as its deadline allows,
        # and then says it timed out (RequestTimedOutError), as default_api_timeout_ms promises.
        self.retry = retry or RetryPolicy(timeout_ms=self.default_api_timeout_ms)
        self._closed = False
        self._metrics = ConsumerMetrics()
        # The parts read the settings above from this consumer each time they need one
        # (``consumer_settings``): each is kept once, as its public attribute.
        self._subscriptions = SubscriptionState()
        self._fetcher = Fetcher(self._broker, self._subscriptions, self._metrics, self)
        self._commits = OffsetCommitter(self._broker, self._subscriptions, self)
        self._lookup = PositionLookup(
            self._broker, self._subscriptions, self._fetcher, self._commits, self
        )
        self._rebalancer = Rebalancer(
            self._broker,
            self._subscriptions,
            self._commits,
            self._set_assignment,
            self,
            request_timeout_ms=options.request_timeout_ms,
        )

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- assignment --------------------------------------------------------------------

    def assign(self, partitions: Iterable[Any]) -> None:
        """Read exactly these (topic, partition) pairs from now on (no group membership)."""
        self._check_open()
        if self._subscriptions.membership is not None:
            raise InvalidConfigError(
                "assign() on a subscribed consumer: call unsubscribe() first (a consumer "
                "either subscribes or assigns, as Kafka's)"
            )
        self._set_assignment(as_topic_partitions(partitions))

    def _set_assignment(self, assigned: Iterable[TopicPartition]) -> None:
        """Every change of assignment (assign, and the group's through ``Rebalancer``): what
        the fetcher holds of a partition that left goes, and so does a lookup of starting
        positions made for the old assignment (``PositionLookup.cancel``)."""
        dropped = self._subscriptions.set_assignment(assigned)
        if dropped:
            self._lookup.cancel()
        for topic_partition in dropped:
            self._fetcher.release(topic_partition)
        self._fetcher.ensure_threads(len(self._subscriptions.assigned))

    def assignment(self) -> list[TopicPartition]:
        return list(self._subscriptions.assigned)

    # --- group membership ---------------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] | str = (),
        pattern: str | None = None,
        listener: ConsumerRebalanceListener | None = None,
        *,
        on_assign: PartitionsCallback | None = None,
        on_revoke: PartitionsCallback | None = None,
        on_lost: PartitionsCallback | None = None,
    ) -> None:
        """Join the group and read the partitions it assigns this consumer, of ``topics``
        or of the topics whose whole name matches ``pattern`` (a Python regular expression;
        checked again every ``metadata_max_age_ms`` for new topics). Changes of assignment
        come inside ``poll``, with ``listener``'s methods (or confluent-kafka's
        ``on_assign``/``on_revoke``/``on_lost`` callbacks) called on this thread."""
        self._check_open()
        group_id = self._require_group("subscribe()")
        subscriptions = self._subscriptions
        if subscriptions.assigned and subscriptions.membership is None:
            raise InvalidConfigError(
                "subscribe() on a consumer with assign()ed partitions: assign([]) first (a "
                "consumer either subscribes or assigns, as Kafka's)"
            )
        subscription = subscription_of(topics, pattern)
        chosen_listener = listener_of(self, listener, on_assign, on_revoke, on_lost)
        client_id = str(getattr(self, "client_id", "") or "")  # set after __init__
        self._rebalancer.join(group_id, subscription, chosen_listener, client_id)

    def subscription(self) -> set[str]:
        """The topics subscribed to (for a pattern: those it matched so far)."""
        return self._subscriptions.subscribed_topics()

    def unsubscribe(self, *, autocommit: bool = True, timeout_ms: int | None = None) -> None:
        """Give up the subscription: commit (with auto-commit), on-revoked, leave the group.
        The commit waits at most ``timeout_ms`` (None: default_api_timeout_ms)."""
        self._rebalancer.leave(autocommit, timeout_ms)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """For ``Producer.send_offsets_to_transaction`` (KIP-447): this member in the
        generation of the last poll (the one its records were read in); without membership
        (``assign()``), the group alone."""
        group_id = self._require_group("group_metadata()")
        member = self._subscriptions.member()
        return ConsumerGroupMetadata(
            group_id, member.member_id, member.member_epoch, member.instance_id
        )

    # --- pausing -----------------------------------------------------------------------

    def pause(self, partitions: Iterable[Any]) -> None:
        """Stop fetching and returning these partitions (they stay assigned)."""
        self._subscriptions.pause(partitions)

    def resume(self, partitions: Iterable[Any]) -> None:
        self._subscriptions.resume(partitions)

    def paused(self) -> set[TopicPartition]:
        return self._subscriptions.paused()

    # --- positions -------------------------------------------------------------------

    def seek(self, topic_partition: Any, offset: int) -> None:
        """The next poll returns records of this partition from ``offset`` on."""
        self._fetcher.forget(self._subscriptions.seek(topic_partition, offset))

    def seek_to_beginning(self, partitions: Iterable[Any] | None = None) -> None:
        self._lookup.seek_to(partitions, "earliest")

    def seek_to_end(self, partitions: Iterable[Any] | None = None) -> None:
        self._lookup.seek_to(partitions, "latest")

    def position(self, topic_partition: Any) -> int:
        """Offset of the next record ``poll`` will return for this partition."""
        found = self._subscriptions.require_assigned(topic_partition)
        offset = self._subscriptions.position(found)
        if offset is None:
            offset = self._lookup.look_up([found])[found]
            self._subscriptions.advance(found, offset)
        return offset

    # --- polling ------------------------------------------------------------------------

    def poll(self, timeout_ms: int = 0) -> list[ConsumerRecord]:
        """Records after the current positions (up to ``max_poll_records``); waits up to
        ``timeout_ms`` when none are there yet. Advances the positions past what it returns.
        """
        self._check_open()
        membership = self._subscriptions.membership
        if not self._subscriptions.assigned and membership is None:
            raise InvalidConfigError(
                "poll() before assign() or subscribe(): give it partitions or topics first"
            )
        deadline_s = time.monotonic() + max(0, timeout_ms) / 1000
        if membership is not None:
            membership.polled()
            self._commits.auto_commit_if_due()
        while True:
            if membership is not None and not self._rebalancer.await_assignment(
                membership, deadline_s
            ):
                return []
            if not self._lookup.await_all(deadline_s):
                return []
            self._fetcher.collect(self._lookup.reset)
            records = self._fetcher.drain()
            if records:
                return records
            self._fetcher.start()
            wait_s = deadline_s - time.monotonic()
            if wait_s <= 0:
                return []
            if membership is not None:
                wait_s = min(wait_s, MEMBERSHIP_CHECK_S)  # a revocation must not wait
            self._fetcher.wait(wait_s)

    # --- group offsets ----------------------------------------------------------------------

    def _require_group(self, what: str) -> str:
        if not self.group_id:
            raise InvalidConfigError(f"{what} needs a group: pass group_id= to Consumer()")
        return self.group_id

    def commit(
        self, offsets: Mapping[Any, int] | None = None, *, timeout_ms: int | None = None
    ) -> None:
        """Store the group's offsets: the given ones, or the current positions. A member
        commits in the generation of its last poll (a zombie's commit is refused:
        StaleMemberEpochError, UnknownMemberIdError). Waits at most ``timeout_ms`` (None:
        default_api_timeout_ms), then raises RequestTimedOutError."""
        self._commits.commit(self._require_group("commit()"), offsets, timeout_ms)

    def commit_async(
        self,
        offsets: Mapping[Any, int] | None = None,
        callback: Callable[[dict[TopicPartition, int], BaseException | None], None] | None = None,
    ) -> Future[None]:
        """``commit`` on a background thread; ``callback(offsets, error)`` when it is done
        (error None on success). Commits run one at a time, in the order asked."""
        return self._commits.commit_async(self._require_group("commit_async()"), offsets, callback)

    def committed(self, partitions: Iterable[Any]) -> dict[TopicPartition, int | None]:
        """The group's committed offsets (None where there is none)."""
        group_id = self._require_group("committed()")
        return self._commits.committed(group_id, as_topic_partitions(partitions))

    # --- offsets of the logs -----------------------------------------------------------------

    def beginning_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        """Each partition's first offset (its log start)."""
        return self._list_offsets(partitions, "earliest")

    def end_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        """Each partition's end: the offset the next committed record will have."""
        return self._list_offsets(partitions, "latest")

    def _list_offsets(self, partitions: Iterable[Any], spec: str) -> dict[TopicPartition, int]:
        chosen = as_topic_partitions(partitions)
        return list_offsets(self._broker, chosen, spec, self.retry, self.default_api_timeout_ms)

    def offsets_for_times(
        self, timestamps: Mapping[Any, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the first record with a timestamp at or after the given one
        (ms), with its timestamp; None where there is no such record (kafka-python's)."""
        return offsets_for_times(self._broker, timestamps, self.retry, self.default_api_timeout_ms)

    # --- iteration ------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Records as they come; stops after ``consumer_timeout_ms`` without one (never by
        default) or when the consumer is closed."""
        idle_since_s = time.monotonic()
        while not self._closed:
            records = self.poll(timeout_ms=ITERATION_POLL_MS)
            if records:
                idle_since_s = time.monotonic()
                yield from records
            elif (
                self.consumer_timeout_ms is not None
                and (time.monotonic() - idle_since_s) * 1000 >= self.consumer_timeout_ms
            ):
                return

    # --- metrics ------------------------------------------------------------------------------

    def metrics(self) -> dict[str, dict[str, float]]:
        """kafka-python's consumer metrics (``client_metrics``): records and bytes consumed,
        fetch latency, the largest lag of an assigned partition."""
        return self._metrics.snapshot()

    # --- closing ------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidConfigError("the consumer is closed; create a new one")

    def close(self, autocommit: bool = True, timeout_ms: int | None = None) -> None:
        """Commit (with auto-commit, unless ``autocommit`` is False), give up the
        subscription (on-revoked, leave the group), stop fetching and release the
        connection. The commit waits at most ``timeout_ms`` (None: default_api_timeout_ms,
        as kafka-python's close); a failed one is logged. Idempotent."""
        if self._closed:
            return
        try:
            if self._subscriptions.membership is not None:
                self.unsubscribe(autocommit=autocommit, timeout_ms=timeout_ms)
            elif self.enable_auto_commit and autocommit:
                positions = self._subscriptions.positions()
                if positions:
                    self._commits.commit_quietly(positions, "at close", timeout_ms)
        finally:
            self._close_now()

    def _close_now(self) -> None:
        self._closed = True
        self._commits.close()
        self._lookup.cancel()
        self._fetcher.close()
        if self._owns_broker:
            self._broker.close()
