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
soon as any of them brings records.

Positions start at the group's committed offset when there is one, else at
``auto_offset_reset``: "latest" by default, as Kafka's consumer (only records
produced from now on), "earliest" (from the log start), or "none" (position()
and poll() raise until seek()).

A fetch that fails with a retriable error (server down, restarting) is tried
again after an exponential backoff (``retry``), per partition; while every
partition backs off, ``poll`` sleeps instead of spinning, and one warning is
logged until a fetch succeeds again.

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

Thread rule: one thread uses a consumer (as Kafka's); ``close`` from that thread. A
subscribed consumer has a heartbeat thread of its own; the listener runs on the caller's.
"""

from __future__ import annotations

import functools
import logging
import re
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from itertools import islice, repeat
from typing import Any, cast

from twinlog.engine.base.errors import (
    InvalidConfigError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    TwinlogError,
)
from twinlog.engine.base.types import FetchResult, TopicPartition
from twinlog.engine.groups.group_calls import OUTSIDE_ANY_GROUP, GroupMemberRef
from twinlog.engine.records.batch_reader import RecordBatch, iter_batches
from twinlog.engine.records.record_decoder import RecordColumns
from twinlog.engine.records.undecodable_batch import naming_the_batch
from twinlog.rpc.client.call_deadline import deadline_at
from twinlog.rpc.client.client_metrics import ConsumerMetrics
from twinlog.rpc.client.connection import ConnectionOptions, Target, connect
from twinlog.rpc.client.consumer_membership import (
    ConsumerMembership,
    Subscription,
)
from twinlog.rpc.client.consumer_offsets_lookup import OffsetAndTimestamp, offsets_for_times
from twinlog.rpc.client.kafka_config import accepts_kafka_names
from twinlog.rpc.client.rebalance_listener import (
    CallbackListener,
    ConsumerGroupMetadata,
    ConsumerRebalanceListener,
    PartitionsCallback,
)
from twinlog.rpc.client.records import ConsumerRecord
from twinlog.rpc.client.retry import RetryPolicy, call_with_retry
from twinlog.rpc.client.timeouts import DEFAULT_API_TIMEOUT_MS, require_positive_ms

log = logging.getLogger("twinlog.client")

OFFSET_RESETS = ("earliest", "latest", "none")
FETCHER_THREADS_MAX = 16
NO_OFFSET = -1
MEMBERSHIP_CHECK_S = 0.1  # a subscribed poll looks at its group's changes this often
ITERATION_POLL_MS = 500  # each poll of an iteration


@dataclass
class _Fetch:
    offset: int
    future: Future[FetchResult]


def as_topic_partitions(partitions: Iterable[Any]) -> list[TopicPartition]:
    return [TopicPartition(*item) for item in partitions]


class Consumer:
    @accepts_kafka_names("Consumer")  # and config=; docs/client-config.md
    def __init__(
        self,
        target: Target,
        group_id: str | None = None,
        *,
        auto_offset_reset: str = "latest",
        fetch_max_bytes: int = 1 << 20,
        fetch_max_wait_ms: int = 500,
        max_poll_records: int = 500,
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5_000,
        group_instance_id: str | None = None,
        session_timeout_ms: int = 45_000,
        max_poll_interval_ms: int = 300_000,
        metadata_max_age_ms: int = 300_000,
        consumer_timeout_ms: int | None = None,
        default_api_timeout_ms: int = DEFAULT_API_TIMEOUT_MS,
        retry: RetryPolicy | None = None,
        connection: ConnectionOptions | None = None,
        **connection_options: Any,
    ) -> None:
        if auto_offset_reset not in OFFSET_RESETS:
            raise InvalidConfigError(
                f"auto_offset_reset {auto_offset_reset!r} is not one of {', '.join(OFFSET_RESETS)}"
            )
        if group_instance_id is not None and not group_id:
            raise InvalidConfigError("group_instance_id needs a group: pass group_id= too")
        options = connection or ConnectionOptions(**connection_options)
        self.default_api_timeout_ms = require_positive_ms(
            "default_api_timeout_ms", default_api_timeout_ms
        )
        for name, value in (
            ("auto_commit_interval_ms", auto_commit_interval_ms),
            ("session_timeout_ms", session_timeout_ms),
            ("max_poll_interval_ms", max_poll_interval_ms),
            ("metadata_max_age_ms", metadata_max_age_ms),
        ):
            require_positive_ms(name, value)
        self._connection_options = options
        self._broker, self._owns_broker = connect(target, options)
        self.group_id = group_id
        self.enable_auto_commit = bool(enable_auto_commit) and bool(group_id)
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self.group_instance_id = group_instance_id
        self.session_timeout_ms = session_timeout_ms
        self.max_poll_interval_ms = max_poll_interval_ms
        self.metadata_max_age_ms = metadata_max_age_ms
        self.consumer_timeout_ms = consumer_timeout_ms
        self.auto_offset_reset = auto_offset_reset
        self.fetch_max_bytes = fetch_max_bytes
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.max_poll_records = max_poll_records
        # Without a policy of its own, a call retries for as long as its deadline allows,
        # and then says it timed out (RequestTimedOutError), as default_api_timeout_ms promises.
        self.retry = retry or RetryPolicy(timeout_ms=self.default_api_timeout_ms)
        self._assigned: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int] = {}
        self._fetches: dict[TopicPartition, _Fetch] = {}
        self._buffers: dict[TopicPartition, deque[ConsumerRecord]] = {}
        self._max_bytes: dict[TopicPartition, int] = {}  # grows when a batch does not fit
        self._not_before: dict[TopicPartition, float] = {}  # monotonic; after a failed fetch
        self._failures: dict[TopicPartition, int] = {}  # consecutive retriable fetch failures
        self._unreachable = False  # a warning was logged; an info line when it ends
        self._fetchers: ThreadPoolExecutor | None = None
        # Starting positions being looked up for poll (committed offset, or the reset), for
        # the current assignment only: dropped when a partition leaves it (``_set_assignment``).
        self._lookup: Future[dict[TopicPartition, int]] | None = None
        self._closed = False
        self._metrics = ConsumerMetrics()
        # group membership (subscribe), None while assigned by hand or not at all
        self._membership: ConsumerMembership | None = None
        self._member_at_poll = OUTSIDE_ANY_GROUP
        self._listener = ConsumerRebalanceListener()
        self._paused: set[TopicPartition] = set()
        self._committer: ThreadPoolExecutor | None = None  # commit_async's one thread
        self._last_async: Future[None] | None = None  # commit() waits for it
        self._next_auto_commit_s = time.monotonic() + auto_commit_interval_ms / 1000

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- assignment and positions ------------------------------------------------------

    def assign(self, partitions: Iterable[Any]) -> None:
        """Read exactly these (topic, partition) pairs from now on (no group membership)."""
        self._check_open()
        if self._membership is not None:
            raise InvalidConfigError(
                "assign() on a subscribed consumer: call unsubscribe() first (a consumer "
                "either subscribes or assigns, as Kafka's)"
            )
        self._set_assignment(as_topic_partitions(partitions))

    def _set_assignment(self, assigned: list[TopicPartition]) -> None:
        keep = set(assigned)
        if self._lookup is not None and not keep.issuperset(self._assigned):
            # The lookup read committed offsets for the old assignment: a partition that
            # leaves and comes back later must be looked up again, else the old answer
            # would replay what another owner copied meanwhile (Kafka drops a pending
            # OffsetFetch of an older generation the same way).
            self._lookup.cancel()
            self._lookup = None
        self._assigned = list(dict.fromkeys(assigned))
        for topic_partition in list(self._positions):
            if topic_partition not in keep:
                self._forget(topic_partition)
                self._positions.pop(topic_partition, None)
        for topic_partition in list(self._not_before):
            if topic_partition not in keep:  # a stale backoff would cut every wait to zero
                self._not_before.pop(topic_partition, None)
                self._failures.pop(topic_partition, None)
        self._paused &= keep
        if self._fetchers is None and self._assigned:
            self._fetchers = ThreadPoolExecutor(
                min(FETCHER_THREADS_MAX, max(1, len(self._assigned))),
                thread_name_prefix="twinlog-fetch",
            )

    def assignment(self) -> list[TopicPartition]:
        return list(self._assigned)

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
        if self._assigned and self._membership is None:
            raise InvalidConfigError(
                "subscribe() on a consumer with assign()ed partitions: assign([]) first (a "
                "consumer either subscribes or assigns, as Kafka's)"
            )
        chosen = (topics,) if isinstance(topics, str) else tuple(topics)
        if bool(chosen) == (pattern is not None):
            raise InvalidConfigError("subscribe() takes topics or a pattern, one of them")
        compiled = None
        if pattern is not None:
            try:
                compiled = re.compile(pattern)
            except re.error as error:
                raise InvalidConfigError(
                    f"pattern {pattern!r} is not a valid regular expression: {error}"
                ) from None
        if listener is not None and (on_assign or on_revoke or on_lost):
            raise InvalidConfigError("pass a listener or on_* callbacks, not both")
        if listener is None and (on_assign or on_revoke or on_lost):
            listener = CallbackListener(self, on_assign, on_revoke, on_lost)
        if self._membership is not None:
            self.unsubscribe()
        self._listener = listener or ConsumerRebalanceListener()
        self._membership = ConsumerMembership(
            self._broker.group_heartbeat,
            self._broker.list_topics,
            group_id,
            Subscription(tuple(sorted(set(chosen))), compiled),
            instance_id=self.group_instance_id,
            client_id=str(getattr(self, "client_id", "") or ""),
            session_timeout_ms=self.session_timeout_ms,
            max_poll_interval_ms=self.max_poll_interval_ms,
            metadata_max_age_ms=self.metadata_max_age_ms,
            request_timeout_ms=self._connection_options.request_timeout_ms,
            retry=self.retry,
        )
        self._membership.start()

    def subscription(self) -> set[str]:
        """The topics subscribed to (for a pattern: those it matched so far)."""
        return set() if self._membership is None else self._membership.subscribed_topics()

    def unsubscribe(self, *, autocommit: bool = True, timeout_ms: int | None = None) -> None:
        """Give up the subscription: commit (with auto-commit), on-revoked, leave the group.
        The commit waits at most ``timeout_ms`` (None: default_api_timeout_ms)."""
        membership = self._membership
        if membership is None:
            return
        owned = [tp for tp in self._assigned if tp in membership.owned()]
        if owned:
            if self.enable_auto_commit and autocommit:
                self._commit_quietly(owned, "before leaving the group", timeout_ms)
            self._listener.on_partitions_revoked(owned)
        membership.leave()
        self._membership = None
        self._set_assignment([])

    def group_metadata(self) -> ConsumerGroupMetadata:
        """For ``Producer.send_offsets_to_transaction`` (KIP-447): this member in the
        generation of the last poll (the one its records were read in); without membership
        (``assign()``), the group alone."""
        group_id = self._require_group("group_metadata()")
        member = self._member()
        return ConsumerGroupMetadata(
            group_id, member.member_id, member.member_epoch, member.instance_id
        )

    def _member(self) -> GroupMemberRef:
        """Who commits: the member as of the last poll's changes (``MembershipChanges``)."""
        return OUTSIDE_ANY_GROUP if self._membership is None else self._member_at_poll

    def _reconcile(self) -> None:
        """Apply what the group's coordinator changed (on this thread, inside poll)."""
        membership = self._membership
        if membership is None:
            return
        changes = membership.pending_changes()
        self._member_at_poll = changes.member
        if not changes:
            return
        if changes.lost:
            lost = [tp for tp in self._assigned if tp in changes.lost]
            self._set_assignment([tp for tp in self._assigned if tp not in changes.lost])
            if lost:
                log.warning(
                    "group %r: partitions lost (not committed: another member may own them "
                    "now): %s",
                    self.group_id,
                    ", ".join(f"{tp.topic}-{tp.partition}" for tp in lost),
                )
                self._listener.on_partitions_lost(lost)
        if changes.revoked:
            revoked = sorted(changes.revoked)
            if self.enable_auto_commit:
                self._commit_quietly(revoked, "before revoking them")
            self._listener.on_partitions_revoked(revoked)
            self._set_assignment([tp for tp in self._assigned if tp not in changes.revoked])
        if changes.assigned:
            self._set_assignment([*self._assigned, *sorted(changes.assigned)])
            self._listener.on_partitions_assigned(sorted(changes.assigned))
        if not membership.acknowledge(changes) and changes.assigned:
            gone = set(changes.assigned)
            self._set_assignment([tp for tp in self._assigned if tp not in gone])
            self._listener.on_partitions_lost(sorted(gone))

    def _commit_quietly(
        self, partitions: Iterable[TopicPartition], when: str, timeout_ms: int | None = None
    ) -> None:
        """Commit the positions of ``partitions``; a failure is logged, not raised (the
        records after the last commit are read again by the next owner: at-least-once)."""
        chosen = {tp: self._positions[tp] for tp in partitions if tp in self._positions}
        try:
            self.commit(chosen, timeout_ms=timeout_ms)
        except TwinlogError as error:
            log.warning("group %r: commit %s failed: %s", self.group_id, when, error)

    # --- pausing -----------------------------------------------------------------------

    def pause(self, partitions: Iterable[Any]) -> None:
        """Stop fetching and returning these partitions (they stay assigned)."""
        for topic_partition in as_topic_partitions(partitions):
            self._paused.add(self._require_assigned(topic_partition))

    def resume(self, partitions: Iterable[Any]) -> None:
        for topic_partition in as_topic_partitions(partitions):
            self._paused.discard(TopicPartition(*topic_partition))

    def paused(self) -> set[TopicPartition]:
        return set(self._paused)

    def _require_assigned(self, topic_partition: Any) -> TopicPartition:
        found = TopicPartition(*topic_partition)
        if found not in self._assigned:
            raise InvalidConfigError(
                f"{found} is not assigned to this consumer; call assign() with it first"
            )
        return found

    def _forget(self, topic_partition: TopicPartition) -> None:
        """Drop buffered records and an in-flight fetch (its answer will be ignored)."""
        self._buffers.pop(topic_partition, None)
        self._metrics.forget(topic_partition)
        fetch = self._fetches.pop(topic_partition, None)
        if fetch is not None:
            fetch.future.cancel()

    def seek(self, topic_partition: Any, offset: int) -> None:
        """The next poll returns records of this partition from ``offset`` on."""
        found = self._require_assigned(topic_partition)
        if offset < 0:
            raise InvalidConfigError(f"offset {offset} is negative; offsets start at 0")
        self._forget(found)
        self._positions[found] = offset

    def _seek_to(self, partitions: Iterable[Any] | None, spec: str) -> None:
        chosen = self._assigned if partitions is None else as_topic_partitions(partitions)
        for topic_partition in chosen:
            found = self._require_assigned(topic_partition)
            offset = call_with_retry(
                self.retry,
                functools.partial(self._broker.list_offset, found.topic, found.partition, spec),
                f"seek to {spec} of {found}",
                timeout_ms=self.default_api_timeout_ms,
            )
            self.seek(found, offset)

    def seek_to_beginning(self, partitions: Iterable[Any] | None = None) -> None:
        self._seek_to(partitions, "earliest")

    def seek_to_end(self, partitions: Iterable[Any] | None = None) -> None:
        self._seek_to(partitions, "latest")

    def position(self, topic_partition: Any) -> int:
        """Offset of the next record ``poll`` will return for this partition."""
        found = self._require_assigned(topic_partition)
        if found not in self._positions:
            self._positions.update(self._look_up_positions([found]))
        return self._positions[found]

    def _look_up_positions(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Where each partition starts: the group's committed offset, else the reset.

        Runs on the caller's thread (position()) or a fetcher thread (poll()); the whole
        lookup (a committed() call, then one list_offset per partition) is bounded by
        default_api_timeout_ms, not each of its requests.
        """
        with deadline_at(time.monotonic() + self.default_api_timeout_ms / 1000):
            return self._look_up_positions_now(partitions)

    def _look_up_positions_now(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        positions: dict[TopicPartition, int] = {}
        committed = self.committed(partitions) if self.group_id else {}
        for topic_partition in partitions:
            offset = committed.get(topic_partition)
            if offset is None:
                if self.auto_offset_reset == "none":
                    raise OffsetOutOfRangeError(
                        f"{topic_partition} has no committed offset for group {self.group_id!r} "
                        "and auto_offset_reset is 'none'; seek() first",
                        -1,
                        -1,
                    )
                offset = call_with_retry(
                    self.retry,
                    functools.partial(
                        self._broker.list_offset,
                        topic_partition.topic,
                        topic_partition.partition,
                        self.auto_offset_reset,
                    ),
                    f"looking up the {self.auto_offset_reset} offset of {topic_partition}",
                    timeout_ms=self.default_api_timeout_ms,
                )
            positions[topic_partition] = offset
        return positions

    # --- polling ------------------------------------------------------------------------

    def poll(self, timeout_ms: int = 0) -> list[ConsumerRecord]:
        """Records after the current positions (up to ``max_poll_records``); waits up to
        ``timeout_ms`` when none are there yet. Advances the positions past what it returns.
        """
        self._check_open()
        membership = self._membership
        if not self._assigned and membership is None:
            raise InvalidConfigError(
                "poll() before assign() or subscribe(): give it partitions or topics first"
            )
        deadline_s = time.monotonic() + max(0, timeout_ms) / 1000
        if membership is not None:
            membership.polled()
            self._auto_commit_if_due()
        while True:
            if membership is not None and not self._await_assignment(membership, deadline_s):
                return []
            if not self._await_positions(deadline_s):
                return []
            self._collect()
            records = self._drain()
            if records:
                return records
            self._start_fetches()
            now_s = time.monotonic()
            wait_s = deadline_s - now_s
            if wait_s <= 0:
                return []
            if membership is not None:
                wait_s = min(wait_s, MEMBERSHIP_CHECK_S)  # a revocation must not wait
            if self._not_before:
                wait_s = min(wait_s, max(0.0, min(self._not_before.values()) - now_s))
            futures = [fetch.future for fetch in self._fetches.values()]
            if futures:
                wait(futures, timeout=wait_s, return_when=FIRST_COMPLETED)
            else:
                # Every partition is backing off (or paused): wait() on no futures would
                # return at once and this loop would spin until the backoff ends.
                time.sleep(wait_s)

    def _await_assignment(self, membership: ConsumerMembership, deadline_s: float) -> bool:
        """Apply the group's changes; wait (until ``deadline_s``) while nothing is assigned."""
        while True:
            self._reconcile()
            if self._assigned:
                return True
            remaining_s = deadline_s - time.monotonic()
            if remaining_s <= 0:
                return False
            membership.changed.wait(timeout=remaining_s)

    def _auto_commit_if_due(self) -> None:
        """Commit the positions of what earlier polls returned, every interval (before this
        poll returns more: at-least-once, as Kafka's auto-commit)."""
        if not self.enable_auto_commit or time.monotonic() < self._next_auto_commit_s:
            return
        self._next_auto_commit_s = time.monotonic() + self.auto_commit_interval_ms / 1000
        self.commit_async(callback=_log_auto_commit_failure)

    def _await_positions(self, deadline_s: float) -> bool:
        """True once every assigned partition has a position; waits until ``deadline_s`` at
        most for the lookup (which stays outstanding for the next poll when unanswered)."""
        assert self._fetchers is not None
        # A second round for partitions assigned while one ran, or after one that failed.
        for _ in range(2):
            missing = [tp for tp in self._assigned if tp not in self._positions]
            if not missing:
                return True
            if self._lookup is None:
                self._lookup = self._fetchers.submit(self._look_up_positions, missing)
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
            assigned = set(self._assigned)
            for topic_partition, offset in found.items():
                # setdefault: a seek() made meanwhile wins
                if topic_partition in assigned:
                    self._positions.setdefault(topic_partition, offset)
        return all(tp in self._positions for tp in self._assigned)

    def _start_fetches(self) -> None:
        assert self._fetchers is not None
        now_s = time.monotonic()
        for topic_partition in self._assigned:
            if topic_partition in self._fetches or self._buffers.get(topic_partition):
                continue
            if topic_partition in self._paused:
                continue
            if self._not_before.get(topic_partition, 0.0) > now_s:
                continue
            self._not_before.pop(topic_partition, None)
            offset = self._positions[topic_partition]
            max_bytes = self._max_bytes.get(topic_partition, self.fetch_max_bytes)
            future = self._fetchers.submit(
                self._metrics.timed(self._broker.fetch),
                topic_partition.topic,
                topic_partition.partition,
                offset,
                max_bytes,
                self.fetch_max_wait_ms,
                1,
            )
            self._fetches[topic_partition] = _Fetch(offset, future)

    def _collect(self) -> None:
        for topic_partition, fetch in list(self._fetches.items()):
            if not fetch.future.done():
                continue
            del self._fetches[topic_partition]
            if fetch.future.cancelled() or fetch.offset != self._positions.get(topic_partition):
                continue  # a seek happened meanwhile
            try:
                result = fetch.future.result()
            except OffsetOutOfRangeError:
                if self.auto_offset_reset == "none":
                    raise
                self._seek_to([topic_partition], self.auto_offset_reset)
                continue
            except TwinlogError as error:
                if error.retriable:  # fetched again after a growing pause
                    self._back_off(topic_partition, error)
                    continue
                raise
            self._fetched(topic_partition)
            self._buffer(topic_partition, fetch.offset, result)

    def _back_off(self, topic_partition: TopicPartition, error: TwinlogError) -> None:
        failures = self._failures[topic_partition] = self._failures.get(topic_partition, 0) + 1
        pause_s = self.retry.pause_ms(failures) / 1000
        self._not_before[topic_partition] = time.monotonic() + pause_s
        if not self._unreachable:
            self._unreachable = True
            log.warning(
                "fetching %s failed: %s: %s; retrying with backoff (up to %d ms) until it "
                "succeeds (logged once)",
                topic_partition,
                type(error).__name__,
                error,
                self.retry.backoff_max_ms,
            )
        else:
            log.debug("fetching %s failed again: %s", topic_partition, error)

    def _fetched(self, topic_partition: TopicPartition) -> None:
        self._failures.pop(topic_partition, None)
        if self._unreachable and not self._failures:
            self._unreachable = False
            log.info("fetching works again")

    def _buffer(self, topic_partition: TopicPartition, offset: int, result: FetchResult) -> None:
        records: deque[ConsumerRecord] = deque()
        topic, partition = topic_partition
        next_offset = offset  # after the last whole batch fetched
        for batch in iter_batches(result.records, allow_partial_tail=True):
            try:
                columns = _columns_of(batch, topic, partition)
            except InvalidRecordError:
                if records:
                    break  # hand out the records before it; the next fetch starts at it
                raise
            next_offset = batch.header.next_offset
            offsets = columns.offsets
            # The first batch may start before ``offset``; offsets grow within a batch.
            skipped = bisect_left(offsets, offset) if offsets and offsets[0] < offset else 0
            # One tuple per record, built in C (a ConsumerRecord(...) call runs Python).
            records.extend(
                map(
                    _new_consumer_record,
                    islice(
                        zip(
                            repeat(topic),
                            repeat(partition),
                            offsets,
                            columns.keys,
                            columns.values,
                            columns.headers,
                            columns.timestamps_ms,
                        ),
                        skipped,
                        None,
                    ),
                )
            )
        if not records and next_offset > offset:
            # Whole batches without a record from ``offset`` on: compaction emptied them
            # (record offsets have gaps in a compacted log). Step over them, as Kafka's does.
            self._positions[topic_partition] = next_offset
        elif not records and result.records:
            # Only a partial batch came back: the next batch is larger than max_bytes.
            current = self._max_bytes.get(topic_partition, self.fetch_max_bytes)
            self._max_bytes[topic_partition] = current * 2
        if records:
            self._buffers[topic_partition] = records
        self._metrics.fetched(topic_partition, offset, result, records)

    def _drain(self) -> list[ConsumerRecord]:
        taken: list[ConsumerRecord] = []
        for topic_partition in self._assigned:
            if topic_partition in self._paused:
                continue
            buffer = self._buffers.get(topic_partition)
            while buffer and len(taken) < self.max_poll_records:
                record = buffer.popleft()
                taken.append(record)
                self._positions[topic_partition] = record.offset + 1
        return taken

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
        group_id = self._require_group("commit()")
        chosen = self._offsets_to_commit(offsets)
        budget_ms = self.default_api_timeout_ms if timeout_ms is None else timeout_ms
        started_s = time.monotonic()
        last_async = self._last_async
        if last_async is not None:
            # An earlier commit_async still in flight would land after this one and move
            # the committed offsets back: commits go in the order they were asked.
            wait([last_async], timeout=budget_ms / 1000)
        if chosen:
            member = self._member()
            budget_ms = max(1, budget_ms - int((time.monotonic() - started_s) * 1000))
            call_with_retry(
                self.retry,
                lambda: self._broker.commit_offsets(group_id, chosen, member),
                "commit()",
                timeout_ms=budget_ms,
            )

    def commit_async(
        self,
        offsets: Mapping[Any, int] | None = None,
        callback: Callable[[dict[TopicPartition, int], BaseException | None], None] | None = None,
    ) -> Future[None]:
        """``commit`` on a background thread; ``callback(offsets, error)`` when it is done
        (error None on success). Commits run one at a time, in the order asked."""
        group_id = self._require_group("commit_async()")
        chosen = self._offsets_to_commit(offsets)
        member = self._member()
        if self._committer is None:
            self._committer = ThreadPoolExecutor(1, thread_name_prefix="twinlog-commit")

        def run() -> None:
            error: BaseException | None = None
            try:
                if chosen:
                    call_with_retry(
                        self.retry,
                        lambda: self._broker.commit_offsets(group_id, chosen, member),
                        "commit_async()",
                        timeout_ms=self.default_api_timeout_ms,
                    )
            except BaseException as failure:
                error = failure
            if callback is not None:
                callback(chosen, error)
            if error is not None:
                raise error

        self._last_async = self._committer.submit(run)
        return self._last_async

    def _offsets_to_commit(self, offsets: Mapping[Any, int] | None) -> dict[TopicPartition, int]:
        if offsets is None:
            return dict(self._positions)
        return {TopicPartition(*tp): int(offset) for tp, offset in offsets.items()}

    def committed(self, partitions: Iterable[Any]) -> dict[TopicPartition, int | None]:
        """The group's committed offsets (None where there is none)."""
        group_id = self._require_group("committed()")
        chosen = as_topic_partitions(partitions)
        found = call_with_retry(
            self.retry,
            lambda: self._broker.fetch_offsets(group_id, chosen),
            "committed()",
            timeout_ms=self.default_api_timeout_ms,
        )
        return {tp: (None if found.get(tp, NO_OFFSET) == NO_OFFSET else found[tp]) for tp in chosen}

    # --- offsets of the logs -----------------------------------------------------------------

    def beginning_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        """Each partition's first offset (its log start)."""
        return self._list_offsets(partitions, "earliest")

    def end_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        """Each partition's end: the offset the next committed record will have."""
        return self._list_offsets(partitions, "latest")

    def _list_offsets(self, partitions: Iterable[Any], spec: str) -> dict[TopicPartition, int]:
        found = {}
        with deadline_at(time.monotonic() + self.default_api_timeout_ms / 1000):
            for topic_partition in as_topic_partitions(partitions):
                found[topic_partition] = call_with_retry(
                    self.retry,
                    functools.partial(
                        self._broker.list_offset,
                        topic_partition.topic,
                        topic_partition.partition,
                        spec,
                    ),
                    f"{spec} offset of {topic_partition}",
                    timeout_ms=self.default_api_timeout_ms,
                )
        return found

    def offsets_for_times(
        self, timestamps: Mapping[Any, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the first record with a timestamp at or after the given one
        (ms), with its timestamp; None where there is no such record (kafka-python's)."""
        with deadline_at(time.monotonic() + self.default_api_timeout_ms / 1000):
            return offsets_for_times(
                self._broker, timestamps, self.retry, self.default_api_timeout_ms
            )

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
            if self._membership is not None:
                self.unsubscribe(autocommit=autocommit, timeout_ms=timeout_ms)
            elif self.enable_auto_commit and autocommit and self._positions:
                self._commit_quietly(list(self._positions), "at close", timeout_ms)
        finally:
            self._close_now()

    def _close_now(self) -> None:
        self._closed = True
        if self._committer is not None:
            self._committer.shutdown(wait=True)
        for fetch in self._fetches.values():
            fetch.future.cancel()
        self._fetches.clear()
        if self._lookup is not None:
            self._lookup.cancel()
            self._lookup = None
        if self._fetchers is not None:
            self._fetchers.shutdown(wait=False, cancel_futures=True)
        if self._owns_broker:
            self._broker.close()


def _log_auto_commit_failure(
    offsets: dict[TopicPartition, int], error: BaseException | None
) -> None:
    if error is not None:
        log.warning("auto-commit of %d offset(s) failed: %s", len(offsets), error)


def _columns_of(batch: RecordBatch, topic: str, partition: int) -> RecordColumns:
    """The batch's records as columns; InvalidRecordError naming the batch if they do not
    decode."""
    with naming_the_batch(topic, partition, batch.header):
        return batch.columns()


# ConsumerRecord from a tuple of its fields, in C: the NamedTuple's own __new__ is Python.
_new_consumer_record = cast(
    Callable[[tuple[Any, ...]], ConsumerRecord], functools.partial(tuple.__new__, ConsumerRecord)
)
