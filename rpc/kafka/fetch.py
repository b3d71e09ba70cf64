"""Fetch: the data log's bytes as they are stored, whole batches, below the high watermark.

twinlog's logs hold committed data only, so every isolation level reads the same bytes,
the last stable offset is the high watermark and no aborted transactions are listed.

Sizes are Kafka's: each partition gets at most its ``partition_max_bytes`` and the whole
answer at most ``max_bytes`` (and the listener's ``fetch_bytes_max``), except that the
first partition with records always gets one whole batch, however large, so a consumer
never stalls on a batch bigger than its limits.

A Fetch with less than ``min_bytes`` ready (and no partition in error) waits up to
``max_wait_ms`` (at most ``fetch_wait_ms_max``) in the broker's one purgatory, on all its
partitions at once (``Broker.wait_for_records``: an append to any of them wakes it), in
slices of ``fetch_wait_slice_ms``, then reads them all again; it holds its own
connection's thread only, so other connections are served meanwhile, and a shutdown ends
the wait at the next slice.

From version 9 each partition's ``current_leader_epoch`` (unless -1) is checked against
the partition's (KIP-320): older is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH, and
the client refreshes its metadata and validates its position (OffsetForLeaderEpoch). A
``last_fetched_epoch`` (v12+) is compared with the log's epochs as a follower's is
(``diverging_epoch``): where the client's epoch ends earlier in the leader's log than its
fetch offset, or the leader never had that epoch, the partition is answered without
records and with the diverging epoch and its end, and the client validates its position.
The logs hold committed records only, which no leader truncates, so a consumer reading
them never sees it; a client sending an epoch of another log does.

Fetch sessions (KIP-227) are not kept: every answer says session id 0 ("no session"), so a
client sends full fetches; an incremental fetch naming a session gets
FETCH_SESSION_ID_NOT_FOUND and the client starts over with a full one.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from kafka.protocol.consumer import FetchRequest, FetchResponse

from twinlog.engine.base.errors import OffsetOutOfRangeError, TwinlogError
from twinlog.engine.base.types import TopicPartition
from twinlog.rpc.kafka.access import authorize
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import (
    FETCH_SESSION_ID_NOT_FOUND,
    NONE,
    UNKNOWN_TOPIC_ID,
    UNSUPPORTED_VERSION,
    code_of,
)
from twinlog.rpc.kafka.leader_hints import LeaderHints
from twinlog.rpc.kafka.metadata import name_of_topic_id
from twinlog.rpc.policy.auth import Operation

log = logging.getLogger("twinlog.kafka")

NO_SESSION = 0
TOPIC_IDS_VERSION = 13  # topics named by id (KIP-516) from this version
RECORD_BATCH_V2_VERSION = 4  # older versions read message formats v0/v1 only
NO_READ_REPLICA = -1
UNKNOWN_OFFSET = -1
CURRENT_LEADER_EPOCH_VERSION = 9  # each partition names the leader epoch it expects (KIP-320)
NO_LEADER_EPOCH = -1  # not checked
DIVERGING_EPOCH_VERSION = 12  # last_fetched_epoch compared (KIP-595's diverging epoch)
LEADER_HINT_VERSION = 12  # a "not here" partition names its leader (KIP-951; endpoints: v16)

TopicAnswer = FetchResponse.FetchableTopicResponse
PartitionAnswer = TopicAnswer.PartitionData


class _Reading:
    """One pass over the request's partitions, within the answer's byte budget."""

    def __init__(
        self,
        context: KafkaContext,
        answer_bytes_max: int,
        denied: dict[str, int],
        checks_epochs: bool = False,
        diverges: bool = False,
        hints: LeaderHints | None = None,
    ) -> None:
        self.context = context
        # a partition "not here" names its leader (v12+, KIP-951)
        self.hints = hints or LeaderHints(enabled=False)
        # each partition's current_leader_epoch is checked (v9+; -1 is not)
        self.checks_epochs = checks_epochs
        # and its last_fetched_epoch compared with the log's epochs (v12+)
        self.diverges = diverges
        self.denied = denied  # topic -> TOPIC_AUTHORIZATION_FAILED, checked once per request
        self.remaining_bytes = answer_bytes_max
        self.total_bytes = 0
        # (topic, partition, offset) of partitions that answered no records and no error:
        # where a wait may park
        self.waitable: list[tuple[str, int, int]] = []
        self.answers: list[Any] = []
        self.errors = 0

    def read(self, request: FetchRequest, names: list[str | None]) -> None:
        self.answers = [
            TopicAnswer(
                topic=name,
                topic_id=topic.topic_id,
                partitions=[self.partition(name, item) for item in topic.partitions],
            )
            for topic, name in zip(request.topics, names, strict=True)
        ]

    def _diverging(self, topic: str, partition: int, diverging: Any) -> Any:
        """No records: the client's log parts from ours where ``diverging`` says (it
        validates its position with OffsetForLeaderEpoch, then fetches again)."""
        broker = self.context.broker
        high_watermark = broker.list_offset(topic, partition, "latest")
        self.errors += 1  # answered now, no wait
        return PartitionAnswer(
            partition_index=partition,
            error_code=NONE,
            high_watermark=high_watermark,
            last_stable_offset=high_watermark,
            log_start_offset=broker.list_offset(topic, partition, "earliest"),
            diverging_epoch=PartitionAnswer.EpochEndOffset(
                epoch=diverging.epoch, end_offset=diverging.end_offset
            ),
            preferred_read_replica=NO_READ_REPLICA,
            aborted_transactions=[],
            records=b"",
        )

    def partition(self, topic: str | None, request: Any) -> Any:
        partition = request.partition
        offset = request.fetch_offset
        if topic is None or topic in self.denied:
            self.errors += 1
            return PartitionAnswer(
                partition_index=partition,
                error_code=UNKNOWN_TOPIC_ID if topic is None else self.denied[topic],
                high_watermark=UNKNOWN_OFFSET,
                last_stable_offset=UNKNOWN_OFFSET,
                log_start_offset=UNKNOWN_OFFSET,
                preferred_read_replica=NO_READ_REPLICA,
                aborted_transactions=None,
                records=None,
            )
        limit = min(max(1, request.partition_max_bytes), self.remaining_bytes)
        if limit <= 0:
            if self.total_bytes > 0:  # the answer is full: this partition gets nothing now
                limit = 0
            else:
                limit = 1  # the first batch goes whole, whatever the limits
        try:
            if self.checks_epochs and request.current_leader_epoch != NO_LEADER_EPOCH:
                self.context.broker.client_leader_epoch(
                    topic, partition, request.current_leader_epoch
                )
            if self.diverges and request.last_fetched_epoch != NO_LEADER_EPOCH:
                diverging = self.context.broker.consumer_divergence(
                    topic, partition, offset, request.last_fetched_epoch
                )
                if diverging is not None:
                    return self._diverging(topic, partition, diverging)
            if limit == 0:
                result = self.context.broker.fetch(topic, partition, offset, max_bytes=1)
                records = b""
            else:
                result = self.context.broker.fetch(topic, partition, offset, max_bytes=limit)
                records = result.records
        except OffsetOutOfRangeError as error:
            self.errors += 1
            return PartitionAnswer(
                partition_index=partition,
                error_code=code_of(error),
                high_watermark=error.log_end_offset,
                last_stable_offset=error.log_end_offset,
                log_start_offset=error.log_start_offset,
                preferred_read_replica=NO_READ_REPLICA,
                aborted_transactions=None,
                records=None,
            )
        except TwinlogError as error:
            self.errors += 1
            code, hint = self.context.partition_refusal(
                error, FetchRequest.API_KEY, topic, partition
            )
            return PartitionAnswer(
                partition_index=partition,
                error_code=code,
                high_watermark=UNKNOWN_OFFSET,
                last_stable_offset=UNKNOWN_OFFSET,
                log_start_offset=UNKNOWN_OFFSET,
                preferred_read_replica=NO_READ_REPLICA,
                aborted_transactions=None,
                records=None,
                current_leader=self.hints.current_leader(
                    PartitionAnswer.LeaderIdAndEpoch, hint, code
                ),
            )
        self.remaining_bytes -= len(records)
        self.total_bytes += len(records)
        if not records:
            self.waitable.append((topic, partition, offset))
        return PartitionAnswer(
            partition_index=partition,
            error_code=NONE,
            high_watermark=result.log_end_offset,
            last_stable_offset=result.log_end_offset,
            log_start_offset=result.log_start_offset,
            preferred_read_replica=NO_READ_REPLICA,
            aborted_transactions=[],
            records=records,
        )


def handle_fetch(request: FetchRequest, version: int, context: KafkaContext) -> FetchResponse:
    settings = context.settings
    if request.session_id != NO_SESSION:
        return FetchResponse(
            version=version,
            throttle_time_ms=0,
            error_code=FETCH_SESSION_ID_NOT_FOUND,
            session_id=NO_SESSION,
            responses=[],
        )
    answer_bytes_max = min(max(1, request.max_bytes), settings.fetch_bytes_max)
    min_bytes = max(1, request.min_bytes)
    wait_ms = min(max(0, request.max_wait_ms), settings.fetch_wait_ms_max)
    deadline = time.monotonic() + wait_ms / 1000
    names = _topic_names(request, version, context)
    if version < RECORD_BATCH_V2_VERSION:
        log.info(
            "Fetch v%d from %s: answered UNSUPPORTED_VERSION per partition (message formats "
            "v0/v1 are not served; a client of Kafka 0.11 or later fetches v4+)",
            version,
            context.connection.peer,
        )
        return _refused(request, names, version, UNSUPPORTED_VERSION)
    denied = {}
    for topic in {name for name in names if name is not None}:
        code = authorize(context.guard, context.connection.principal, Operation.READ, (topic,))
        if code:
            denied[topic] = code
    while True:
        hints = LeaderHints(enabled=version >= LEADER_HINT_VERSION)
        reading = _Reading(
            context,
            answer_bytes_max,
            denied,
            version >= CURRENT_LEADER_EPOCH_VERSION,
            version >= DIVERGING_EPOCH_VERSION,
            hints,
        )
        reading.read(request, names)
        remaining_s = deadline - time.monotonic()
        # As Kafka: a fetch of no partitions, or one with an error to tell, is answered now.
        if (
            reading.total_bytes >= min_bytes
            or not reading.waitable
            or reading.errors
            or remaining_s <= 0
            or context.stopping.is_set()
        ):
            return FetchResponse(
                version=version,
                throttle_time_ms=0,
                error_code=NONE,
                session_id=NO_SESSION,
                responses=reading.answers,
                node_endpoints=hints.node_endpoints(FetchResponse.NodeEndpoint),
            )
        slice_ms = max(1, min(int(remaining_s * 1000), settings.fetch_wait_slice_ms))
        positions = [
            (TopicPartition(topic, index), offset) for topic, index, offset in reading.waitable
        ]
        try:
            context.broker.wait_for_records(positions, slice_ms)  # woken by any of them
        except TwinlogError:
            pass  # the next pass answers it


def _topic_names(request: FetchRequest, version: int, context: KafkaContext) -> list[str | None]:
    """Each requested topic's name (None: an id no topic has)."""
    if version < TOPIC_IDS_VERSION:
        return [topic.topic for topic in request.topics]
    ids: dict[uuid.UUID, str | None] = {}
    for topic in request.topics:
        if topic.topic_id not in ids:
            ids[topic.topic_id] = name_of_topic_id(context, topic.topic_id)
    return [ids[topic.topic_id] for topic in request.topics]


def _refused(
    request: FetchRequest, names: list[str | None], version: int, code: int
) -> FetchResponse:
    answers = [
        TopicAnswer(
            topic=name,
            topic_id=topic.topic_id,
            partitions=[
                PartitionAnswer(
                    partition_index=item.partition,
                    error_code=code,
                    high_watermark=UNKNOWN_OFFSET,
                    records=None,
                )
                for item in topic.partitions
            ],
        )
        for topic, name in zip(request.topics, names, strict=True)
    ]
    return FetchResponse(
        version=version,
        throttle_time_ms=0,
        error_code=NONE,
        session_id=NO_SESSION,
        responses=answers,
    )
