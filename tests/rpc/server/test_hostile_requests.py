"""Hostile gRPC requests against a real ``twinlog serve`` process.

Hypothesis builds requests for every method of Producing, Consuming and
Administration: random fields, bytes that are not protobuf at all ("wrong
types"), huge sizes, negative offsets, unknown topics, transaction and producer
ids, stale generations, corrupted batches. Every call must end with OK (only
where the request is legitimately valid) or a non-OK status other than
UNKNOWN/INTERNAL, with a message and the ``twinlog-error-*`` trailing metadata
of ``twinlog.rpc.wire.errors`` (a request over gRPC's own size limit is refused by gRPC,
without metadata: RESOURCE_EXHAUSTED, as ``twinlog.rpc.wire.errors`` documents). The server
must stay alive throughout.

``test_hostile_requests_change_nothing``: requests built so that none may write
(unknown or internal topics, invalid ids, stale generations, corrupted batches,
undecodable bytes, ...). The data directory is checksummed before and after, and
file sizes and mtimes are compared after every single request, so the first
request that writes is named. Reads write nothing either: every file is
compared, except LMDB's reader table (``lock.mdb``) and the journal's lock file;
the server log lives outside the data directory.

``test_records_are_checked_at_the_door``: one of each batch whose CRC holds and whose
records do not (garbage, offset deltas backwards or repeated, a record count that
disagrees, a zstd bomb, millions of tiny records), each answered with its typed error
(InvalidRecordError, BatchTooLargeError); hypothesis draws more of them among the
hostile calls above, where the error's name is checked too.

``test_random_requests_get_clear_statuses``: a second server, any field values
(including valid ones, which may write), and random bytes for every method.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import os
import resource
import struct
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from server_process import ServerProcess
from zstandard import ZstdCompressor

from twinlog.engine.base.crc32c import crc32c
from twinlog.engine.base.errors import InvalidRecordError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.base.units import MEBIBYTE
from twinlog.engine.broker.config import BrokerConfig
from twinlog.engine.records.batch_builder import RecordBatchBuilder, encode_record
from twinlog.engine.records.batch_format import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    RECORDS_OFFSET,
    pack_header,
    read_header,
)
from twinlog.engine.records.compression import CODEC_NONE, CODEC_ZSTD, compress
from twinlog.engine.records.record_decoder import decode_records
from twinlog.rpc.client.connection import ConnectionOptions
from twinlog.rpc.client.remote import RemoteBroker
from twinlog.rpc.generated.twinlog.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    common_pb2,
    consume_pb2,
    consume_pb2_grpc,
    produce_pb2,
    produce_pb2_grpc,
)
from twinlog.rpc.wire.errors import ERROR_CLASSES_BY_NAME, NAME_KEY, RETRIABLE_KEY, status_of
from twinlog.rpc.wire.metadata import AUTHORIZATION_KEY

pytestmark = [pytest.mark.slow]

MAX_REQUEST_BYTES = 512 * 1024
MAX_BATCH_BYTES = 128 * 1024
GRPC_LIMIT_BYTES = MAX_REQUEST_BYTES + 64 * 1024  # twinlog.rpc.server.server.REQUEST_BYTES_MARGIN
# The server's file descriptor limit (inherited): low enough that a topic of
# thousands of partitions would exhaust it, so such a CreateTopic must be refused.
SERVER_OPEN_FILES = 2048
SERVER_ARGUMENTS = (
    *("--config", f"request_bytes_max={MAX_REQUEST_BYTES}"),
    *("--config", f"batch_bytes_max={MAX_BATCH_BYTES}"),
    *("--config", "fetch_wait_ms_max=200"),  # a hostile long poll ends quickly
    *("--config", "long_poll_slice_ms=50"),
    # No background writes while the data directory is watched (nothing times out:
    # the one open transaction has a 15-minute timeout).
    *("--config", "checkpoint_interval_ms=3600000"),
    *("--config", "retention_check_interval_ms=3600000"),
)
# "The server did not answer" means a hang, not a slow answer: 15 s was once too little
# for a plain TopicExists refusal while the suite's other worker ran cluster tests on the
# same two cores (Hypothesis could not repeat it). A hang is caught either way.
CALL_TIMEOUT_S = 30.0
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
FORBIDDEN_CODES = (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL)
# LMDB's reader table; the journal's flock file; the high-watermark checkpoint, which the
# broker rewrites on its own every 5 s once the seeding moved a high watermark (a request
# that moved one would change a log too)
IGNORED_FILES = {"lock.mdb", "twinlog.lock", "replication-offset-checkpoint"}
# More for a deeper search: TWINLOG_FUZZ_SCALE=10 runs ten times as many examples.
SCALE = float(os.environ.get("TWINLOG_FUZZ_SCALE", "1"))
HOSTILE_EXAMPLES = int(400 * SCALE)
RANDOM_EXAMPLES = int(300 * SCALE)
RAW_EXAMPLES = int(150 * SCALE)

SERVICES: dict[str, tuple[Any, Any]] = {
    "Producing": (produce_pb2_grpc.ProducingStub, produce_pb2),
    "Consuming": (consume_pb2_grpc.ConsumingStub, consume_pb2),
    "Administration": (admin_pb2_grpc.AdministrationStub, admin_pb2),
}
# Every method of the three services, with its request message class (read from the
# descriptors, so a method added to the .proto files is fuzzed without a change here).
METHODS: dict[tuple[str, str], type[Message]] = {}
for _service_name, (_, _module) in SERVICES.items():
    _service = _module.DESCRIPTOR.services_by_name[_service_name]
    for _method in _service.methods:
        _class = getattr(_module, _method.input_type.name, None)
        if _class is None:  # a message of common.proto or another file
            for _other in (produce_pb2, consume_pb2, admin_pb2, common_pb2):
                _class = getattr(_other, _method.input_type.name, None) or _class
        assert _class is not None, _method.full_name
        METHODS[(_service_name, _method.name)] = _class
STREAMING = {("Producing", "ProduceStream")}
READ_ONLY = {
    ("Consuming", "Fetch"),
    ("Consuming", "ListOffset"),
    ("Consuming", "FetchOffsets"),
    ("Administration", "ListTopics"),
    ("Administration", "DescribeTopic"),
    ("Administration", "DescribeTopicSettings"),
    ("Administration", "ListTransactions"),
    ("Administration", "DescribeProducers"),
    ("Administration", "Metadata"),
    ("Administration", "FindCoordinator"),
    ("Administration", "ListGroups"),
    ("Administration", "DescribeGroup"),
    ("Administration", "ListPartitionReassignments"),
    ("Administration", "ListScramUsers"),
    ("Administration", "ListAcls"),
}
assert len(METHODS) == 40 and STREAMING | READ_ONLY <= METHODS.keys()


# --- the seeded state --------------------------------------------------------------------


@dataclass(frozen=True)
class Seed:
    """What exists before the hostile phase: the ids and names requests aim at."""

    topics: dict[str, int]  # name -> partitions
    plain_producer: tuple[int, int]  # (producer id, generation), idempotent
    victim: tuple[int, int]  # transactional id "victim": (producer id, current generation 1)
    committed_txn: int  # victim's generation 0, committed and applied
    aborted_txn: int  # victim's generation 0, aborted when generation 1 was initialised
    open_txn: int  # victim's generation 1, ONGOING (journaled batch on known-1, holds g-held)
    open_txn_sequence_next: int  # the next base sequence of open_txn on known-1

    @property
    def transaction_ids(self) -> list[int]:
        return [self.committed_txn, self.aborted_txn, self.open_txn]

    @property
    def producer_ids(self) -> list[int]:
        return [self.plain_producer[0], self.victim[0]]


VICTIM = "victim"
HELD_GROUP = "g-held"  # its offset for known-0 is pending in the open transaction
PLAIN_GROUP = "g-plain"
OPEN_TXN_TIMEOUT_MS = 15 * 60_000


def txn_batch(
    transaction_id: int, producer: tuple[int, int], base_sequence: int, values: Sequence[bytes]
) -> bytes:
    """A transactional batch of ``producer``; ``transaction_id`` is for the request, not the
    batch (which names none). A generation an int16 cannot hold is written as a hostile
    client would: its low 16 bits, CRC recomputed."""
    builder = RecordBatchBuilder(
        "none",
        producer_id=producer[0],
        producer_generation=0,
        base_sequence=base_sequence,
        transactional=True,
    )
    for value in values:
        builder.append(value, key=b"k")
    batch = bytearray(builder.build())
    struct.pack_into(">H", batch, GENERATION_OFFSET, producer[1] & 0xFFFF)
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c(bytes(batch[ATTRIBUTES_OFFSET:])))
    return bytes(batch)


GENERATION_OFFSET = struct.calcsize(">qiibIhiqqq")  # after the producer id


def seed(remote: RemoteBroker) -> Seed:
    topics = {"known": 2, "empty": 1}
    for name, partitions in topics.items():
        remote.create_topic(name, partitions)
    plain = remote.init_producer()
    plain_producer = (plain.producer_id, plain.producer_generation)
    for partition in range(2):
        builder = RecordBatchBuilder(
            "zstd", producer_id=plain.producer_id, producer_generation=0, base_sequence=0
        )
        for number in range(3):
            builder.append(f"plain-{partition}-{number}".encode(), key=b"p")
        remote.produce("known", partition, builder.build())
    remote.commit_offsets(PLAIN_GROUP, {TopicPartition("known", 0): 2})
    first = remote.init_producer(VICTIM, OPEN_TXN_TIMEOUT_MS)
    gen0 = (first.producer_id, first.producer_generation)
    committed = remote.begin_transaction(*gen0)
    remote.produce(
        "known", 0, txn_batch(committed, gen0, 0, [b"t0-a", b"t0-b"]), transaction_id=committed
    )
    remote.commit_transaction(committed, *gen0, wait_for_applied=True)
    aborted = remote.begin_transaction(*gen0)
    remote.produce("known", 1, txn_batch(aborted, gen0, 0, [b"t0b-never"]), transaction_id=aborted)
    second = remote.init_producer(VICTIM, OPEN_TXN_TIMEOUT_MS)  # fences gen0, aborts `aborted`
    victim = (second.producer_id, second.producer_generation)
    assert victim == (gen0[0], 1)
    open_txn = remote.begin_transaction(*victim, request_id=77)
    remote.produce(
        "known", 1, txn_batch(open_txn, victim, 0, [b"t1-a", b"t1-b"]), transaction_id=open_txn
    )
    remote.send_offsets_to_transaction(
        open_txn, *victim, HELD_GROUP, {TopicPartition("known", 0): 1}
    )
    deadline = time.monotonic() + 10
    while len(remote.list_transactions()) != 1:  # the abort of `aborted` completes
        assert time.monotonic() < deadline, remote.list_transactions()
        time.sleep(0.05)
    return Seed(topics, plain_producer, victim, committed, aborted, open_txn, 2)


def visible_state(remote: RemoteBroker, seeded: Seed) -> dict[str, Any]:
    """What a client can see: it must be the same after the hostile phase."""
    found: dict[str, Any] = {
        "topics": remote.list_topics(),
        "transactions": [
            (t.transaction_id, t.state, t.partitions, t.groups) for t in remote.list_transactions()
        ],
        "plain group": remote.fetch_offsets(PLAIN_GROUP, [TopicPartition("known", 0)]),
    }
    for name, partitions in seeded.topics.items():
        found[name] = remote.describe_topic(name)
        for partition in range(partitions):
            found[f"{name}-{partition}"] = remote.fetch(name, partition, 0).records
    return found


# --- the data directory --------------------------------------------------------------------


def _files(data_dir: Path) -> Iterator[Path]:
    for path in sorted(data_dir.rglob("*")):
        if path.name not in IGNORED_FILES:
            yield path


def checksum(data_dir: Path) -> dict[str, str]:
    found = {}
    for path in _files(data_dir):
        relative = str(path.relative_to(data_dir))
        found[relative] = (
            "directory" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
        )
    return found


def file_stats(data_dir: Path) -> dict[str, tuple[int, int]]:
    found = {}
    for path in _files(data_dir):
        status = path.stat()
        found[str(path.relative_to(data_dir))] = (status.st_size, status.st_mtime_ns)
    return found


def settled_file_stats(
    data_dir: Path, quiet_s: float = 0.5, timeout_s: float = 30.0
) -> dict[str, tuple[int, int]]:
    """``file_stats`` once they stayed the same for ``quiet_s``: the background completions
    of the seeding requests (copies, COMMITTED records) may land after their answers, and
    later on a loaded machine."""
    deadline_s = time.monotonic() + timeout_s
    stats = file_stats(data_dir)
    quiet_since_s = time.monotonic()
    while time.monotonic() - quiet_since_s < quiet_s:
        assert time.monotonic() < deadline_s, f"{data_dir} kept changing for {timeout_s} s"
        time.sleep(0.05)
        latest = file_stats(data_dir)
        if latest != stats:
            stats, quiet_since_s = latest, time.monotonic()
    return stats


def differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    return sorted(key for key in before.keys() | after.keys() if before.get(key) != after.get(key))


# --- calls and their checks -----------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One request (or, for ProduceStream, a stream of them) and what it may answer."""

    service: str
    method: str
    requests: tuple[Message | bytes, ...]  # bytes: sent raw, not as protobuf
    ok_allowed: bool
    why: str
    # The error each request must be refused with (one name per request); () for any.
    expected: tuple[str, ...] = ()

    @property
    def path(self) -> str:
        return f"/twinlog.v1.{self.service}/{self.method}"

    @property
    def size_bytes(self) -> int:
        return max(
            (len(r) if isinstance(r, bytes) else r.ByteSize() for r in self.requests), default=0
        )

    def __repr__(self) -> str:  # hypothesis prints it for a failing example
        shown = [
            r[:64] if isinstance(r, bytes) else str(r)[:300].replace("\n", " ")
            for r in self.requests
        ]
        return f"Call({self.path}, {self.why}, ok_allowed={self.ok_allowed}, {shown})"


def _serialize(request: Message | bytes) -> bytes:
    return request if isinstance(request, bytes) else request.SerializeToString()


class Client:
    """Sends a Call and checks its answer. Raw bytes go through a generic call."""

    def __init__(self, address: str, token: str | None = None) -> None:
        # With a token, every call carries it (a server with --tokens-file and --acl-file).
        self.metadata = ((AUTHORIZATION_KEY, f"Bearer {token}"),) if token else None
        self.channel = grpc.insecure_channel(
            address,
            options=[
                ("grpc.max_send_message_length", 64 * 1024 * 1024),
                ("grpc.max_receive_message_length", 64 * 1024 * 1024),
            ],
        )
        self.stubs = {name: stub(self.channel) for name, (stub, _) in SERVICES.items()}
        self.refusals: list[str | None] = []  # the error name of each refused call, in order

    def close(self) -> None:
        self.channel.close()

    def send(self, call: Call) -> None:
        if (call.service, call.method) in STREAMING:
            self._stream(call)
            return
        (request,) = call.requests
        if isinstance(request, bytes):
            method: Callable[..., Any] = self.channel.unary_unary(call.path)  # bytes in, bytes out
        else:
            method = getattr(self.stubs[call.service], call.method)
        try:
            method(request, timeout=CALL_TIMEOUT_S, metadata=self.metadata)
        except grpc.RpcError as error:
            check_refusal(call, error)
            self.refusals.append(dict(error.trailing_metadata() or ()).get(NAME_KEY))  # type: ignore[attr-defined]
            assert call.expected in ((), (self.refusals[-1],)), f"{call!r}: {error.details()}"  # type: ignore[attr-defined]
        else:
            assert call.ok_allowed, f"{call!r} was accepted"

    def _stream(self, call: Call) -> None:
        stream = self.channel.stream_stream(
            call.path,
            request_serializer=_serialize,
            response_deserializer=produce_pb2.ProduceResponse.FromString,
        )
        try:
            responses = list(
                stream(iter(call.requests), timeout=CALL_TIMEOUT_S, metadata=self.metadata)
            )
        except grpc.RpcError as error:
            check_refusal(call, error)
            self.refusals.append(dict(error.trailing_metadata() or ()).get(NAME_KEY))  # type: ignore[attr-defined]
            return
        assert len(responses) == len(call.requests), f"{call!r}: {len(responses)} answers"
        expected = call.expected or (None,) * len(call.requests)
        for request, response, name in zip(call.requests, responses, expected, strict=True):
            if not response.HasField("error"):
                assert call.ok_allowed, f"{call!r}: {request!r} was accepted"
                continue
            error = response.error
            self.refusals.append(error.name)
            assert name in (None, error.name), f"{call!r}: {request!r} refused with {error}"
            code = _code_of(error.status_code)
            assert code not in FORBIDDEN_CODES, f"{call!r}: {error}"
            assert error.message and error.name in ERROR_CLASSES_BY_NAME, f"{call!r}: {error}"
            assert status_of(ERROR_CLASSES_BY_NAME[error.name]) == code, f"{call!r}: {error}"
            if not isinstance(request, bytes):
                assert response.correlation_id == request.correlation_id  # type: ignore[attr-defined]


def _code_of(value: int) -> grpc.StatusCode:
    for code in grpc.StatusCode:
        if code.value[0] == value:
            return code
    raise AssertionError(f"status code {value} is not a gRPC status code")


def check_refusal(call: Call, error: grpc.RpcError) -> None:
    code = error.code()  # type: ignore[attr-defined]
    details = error.details()  # type: ignore[attr-defined]
    metadata = dict(error.trailing_metadata() or ())  # type: ignore[attr-defined]
    assert code not in FORBIDDEN_CODES, f"{call!r}: {code.name} {details}"
    assert code is not grpc.StatusCode.DEADLINE_EXCEEDED, f"{call!r}: the server did not answer"
    assert details, f"{call!r}: {code.name} without a message"
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED and call.size_bytes > GRPC_LIMIT_BYTES:
        return  # refused by gRPC itself, before twinlog saw it: no metadata (rpc.errors)
    name = metadata.get(NAME_KEY)
    assert name in ERROR_CLASSES_BY_NAME, f"{call!r}: {code.name} {details}, metadata {metadata}"
    assert metadata.get(RETRIABLE_KEY) in ("true", "false"), f"{call!r}: {metadata}"
    assert status_of(ERROR_CLASSES_BY_NAME[name]) == code, f"{call!r}: {name} as {code.name}"


# --- strategies: values ------------------------------------------------------------------------

int32s = st.integers(*INT32)
int64s = st.integers(*INT64)
small_ints = st.integers(-3, 5)


def any_topic_names(seeded: Seed) -> st.SearchStrategy[str]:
    """A seeded topic, an unknown name, or an internal topic: what a change aims at."""
    return st.one_of(
        st.sampled_from(sorted(seeded.topics)),
        unknown_topics(seeded),
        st.just("__consumer_offsets"),
    )


def unknown_topics(seeded: Seed) -> st.SearchStrategy[str]:
    return st.one_of(
        st.text(max_size=40),
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=1, max_size=300),
        st.sampled_from(
            ["", ".", "..", "../known", "known/../empty", "known-0", "KNOWN", "x" * 250]
        ),
    ).filter(lambda name: name not in seeded.topics and name != "__consumer_offsets")


def bad_partitions(seeded: Seed) -> st.SearchStrategy[tuple[str, int]]:
    """(topic, partition) pairs that do not exist."""
    known = st.sampled_from(sorted(seeded.topics))
    return st.one_of(
        st.tuples(unknown_topics(seeded), st.one_of(small_ints, int32s)),
        known.flatmap(
            lambda name: st.tuples(
                st.just(name),
                st.one_of(st.integers(INT32[0], -1), st.integers(seeded.topics[name], INT32[1])),
            )
        ),
    )


def interesting_ids(seeded: Seed) -> st.SearchStrategy[int]:
    near = [i + d for i in seeded.transaction_ids + seeded.producer_ids for d in (-256, -1, 1, 256)]
    return st.one_of(
        int64s,
        small_ints,
        st.sampled_from(seeded.transaction_ids + seeded.producer_ids + near + [-1, 0, 2**63 - 1]),
    )


def stale_identities(seeded: Seed) -> st.SearchStrategy[tuple[int, int]]:
    """(producer id, generation) pairs that may not start or change anything."""
    victim_id, victim_generation = seeded.victim
    return st.one_of(
        st.tuples(interesting_ids(seeded), st.one_of(int32s, small_ints)),
        st.tuples(st.just(victim_id), st.sampled_from([0, victim_generation + 1, -1, 2**31 - 1])),
        st.tuples(st.just(seeded.plain_producer[0]), st.sampled_from([-1, 1, 2, 2**31 - 1])),
    ).filter(lambda identity: identity not in (seeded.victim, seeded.plain_producer))


def refs(seeded: Seed) -> st.SearchStrategy[produce_pb2.TransactionRef]:
    """Transaction references that are not the open transaction with its current owner."""
    return st.builds(
        lambda txn, identity: produce_pb2.TransactionRef(
            transaction_id=txn, producer_id=identity[0], producer_generation=identity[1]
        ),
        interesting_ids(seeded),
        st.one_of(stale_identities(seeded), st.just(seeded.victim)),
    ).filter(
        lambda ref: (
            (ref.transaction_id, ref.producer_id, ref.producer_generation)
            != (seeded.open_txn, *seeded.victim)
        )
    )


def record_values() -> st.SearchStrategy[list[bytes]]:
    return st.lists(st.binary(max_size=64), min_size=1, max_size=4)


def any_batch(seeded: Seed) -> st.SearchStrategy[bytes]:
    """A well-formed batch with any identity (plain or transactional)."""
    return st.builds(
        lambda txn, identity, sequence, values: txn_batch(txn, identity, sequence, values),
        interesting_ids(seeded),
        st.one_of(stale_identities(seeded), st.just(seeded.victim)),
        st.one_of(small_ints, int32s),
        record_values(),
    )


def corrupted(batches: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """A batch broken past its base offset and outside its partition leader epoch (the only
    bytes a CRC does not cover, both overwritten by the log)."""

    def flip(batch: bytes, position: int, mask: int) -> bytes:
        where = 8 + position % (len(batch) - 12)
        where = where if where < 12 else where + 4  # skip bytes 12..15, the epoch
        return batch[:where] + bytes([batch[where] ^ mask]) + batch[where + 1 :]

    return st.one_of(
        st.builds(flip, batches, st.integers(0, 1 << 20), st.integers(1, 255)),
        st.builds(lambda b, n: b[: 8 + n % (len(b) - 8)], batches, st.integers(0, 1 << 20)),
        st.builds(lambda b, tail: b + tail, batches, st.binary(min_size=1, max_size=200)),
        st.builds(lambda b: b + b, batches),  # two batches in one request
        st.binary(max_size=300),
    )


def huge_batches() -> st.SearchStrategy[bytes]:
    """Over the broker's batch_bytes_max (the topics' limit), or over gRPC's message limit."""
    return st.builds(
        lambda size, byte: bytes([byte]) * size,
        st.sampled_from(
            [MAX_BATCH_BYTES + 1, MAX_REQUEST_BYTES, GRPC_LIMIT_BYTES + 1, 4 * MAX_REQUEST_BYTES]
        ),
        st.integers(0, 255),
    )


def poison_bytes(request_class: type[Message] | None = None) -> st.SearchStrategy[bytes]:
    """Bytes that no protobuf message parses from: wrong wire types, truncation, bad UTF-8.

    With ``request_class``, only bytes that class really fails to parse: bad UTF-8 in
    field 1 is a valid unknown field to a message whose field 1 is not a string.
    """
    if request_class is not None:
        return poison_bytes().filter(lambda data: not _parses(request_class, data))
    return st.builds(
        lambda prefix, rest: prefix + rest,
        st.sampled_from(
            [
                b"\x0a\x01\xff",  # field 1 (a string in most requests) holding invalid UTF-8
                b"\x0a\x03\xc3\x28\x41",  # an invalid two-byte UTF-8 sequence
                b"\x0f",  # wire type 7: does not exist
                b"\x0e",  # wire type 6: does not exist
                b"\x00",  # field number 0
                b"\x0c",  # end of a group never started
                b"\x0a\x7f ab",  # a length past the end
                b"\x08\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",  # an 11-byte varint
            ]
        ),
        st.binary(max_size=100),
    )


def _parses(request_class: type[Message], data: bytes) -> bool:
    try:
        request_class.FromString(data)
    except Exception:  # DecodeError, or a RuntimeWarning-free failure of the C parser
        return False
    return True


# --- strategies: hostile calls that must write nothing ----------------------------------------


def call_of(
    service: str, method: str, requests: st.SearchStrategy[Any], ok_allowed: bool, why: str
) -> st.SearchStrategy[Call]:
    return requests.map(
        lambda r: Call(service, method, tuple(r) if isinstance(r, list) else (r,), ok_allowed, why)
    )


def hostile_produce_requests(seeded: Seed) -> st.SearchStrategy[produce_pb2.ProduceRequest]:
    known = st.sampled_from([(n, p) for n, count in seeded.topics.items() for p in range(count)])
    victim_batches = st.builds(
        lambda values: txn_batch(
            seeded.open_txn, seeded.victim, seeded.open_txn_sequence_next, values
        ),
        record_values(),
    )
    out_of_order = st.builds(
        lambda gap, values: txn_batch(
            seeded.open_txn, seeded.victim, seeded.open_txn_sequence_next + gap, values
        ),
        st.integers(1, 2**30),
        record_values(),
    )
    # A plain batch is valid anywhere it lands; a transactional one needs its owner. The
    # request names no transaction, so the victim's batch would join its open transaction.
    transactional = any_batch(seeded).filter(
        lambda b: _owner_of(b)[0] and _owner_of(b)[1:] != tuple(seeded.victim)
    )
    attempts = st.one_of(st.just(""), st.text(max_size=20))
    cases = st.one_of(
        st.tuples(
            bad_partitions(seeded),
            st.one_of(any_batch(seeded), corrupted(any_batch(seeded))),
            attempts,
        ),
        st.tuples(known, corrupted(any_batch(seeded)), attempts),
        st.tuples(known, transactional, attempts),
        st.tuples(known, huge_batches(), attempts),
        # A gap in the open transaction's sequences (another attempt tag numbers its own
        # batches, from anywhere: that would be a valid write).
        st.tuples(st.just(("known", 1)), out_of_order, st.just("")),
        st.tuples(st.just(("known", 1)), corrupted(victim_batches), attempts),
        # the internal topic takes no client batch, not even of an open transaction
        st.tuples(
            st.tuples(st.just("__consumer_offsets"), st.integers(0, 3)),
            st.one_of(victim_batches, any_batch(seeded)),
            attempts,
        ),
    )
    return st.builds(
        lambda case, correlation: produce_pb2.ProduceRequest(
            topic=case[0][0],
            partition=case[0][1],
            batch=case[1],
            attempt=case[2],
            correlation_id=correlation,
        ),
        cases,
        st.integers(0, 2**64 - 1),
    )


def _owner_of(batch: bytes) -> tuple[bool, int, int]:
    header = read_header(batch)
    return header.is_transactional, header.producer_id, header.producer_generation


# --- strategies: batches whose CRC holds and whose records do not -------------------------

INVALID_RECORD = InvalidRecordError.__name__
TOO_LARGE = "BatchTooLargeError"
BROKER_DEFAULTS = BrokerConfig()  # the hostile servers keep the door's default limits


def forged_batch(
    section: bytes,
    record_count: int,
    codec: int = CODEC_NONE,
    owner: tuple[int, tuple[int, int], int] | None = None,
    compressed: bool = False,
) -> bytes:
    """A batch with a valid CRC around any records section (compressed here with ``codec``
    unless it already is), plain or, with ``owner`` (transaction id, producer, base sequence),
    transactional: what a hostile client builds by hand."""
    transaction_id, (producer_id, generation), sequence = owner or (-1, (-1, -1), -1)
    buffer = bytearray(RECORDS_OFFSET) + (section if compressed else compress(codec, section))
    pack_header(
        buffer,
        base_offset=0,
        attributes=codec | (0x10 if transaction_id != -1 else 0),
        last_offset_delta=max(0, record_count - 1),
        first_timestamp_ms=1_700_000_000_000,
        max_timestamp_ms=1_700_000_000_000,
        producer_id=producer_id,
        producer_generation=generation,
        base_sequence=sequence,
        record_count=record_count,
    )
    return bytes(buffer)


def records_with_deltas(deltas: Sequence[int]) -> bytes:
    return b"".join(encode_record(delta, 0, b"k", b"v", None) for delta in deltas)


def _records_decode(section: bytes, record_count: int) -> bool:
    try:
        decode_records(section, read_header(forged_batch(section, record_count)))
    except InvalidRecordError:
        return False
    return True


@functools.cache
def zstd_bomb_section(size_bytes: int) -> bytes:
    """A few KiB of zstd that declare (and hold) ``size_bytes`` of zeros, built in pieces."""
    compressor = ZstdCompressor(write_content_size=True).compressobj(size=size_bytes)
    piece = bytes(MEBIBYTE)
    parts = [compressor.compress(piece) for _ in range(size_bytes // MEBIBYTE)]
    return b"".join(parts) + compressor.flush()


def bad_record_sections() -> st.SearchStrategy[tuple[bytes, int, int, bool, str]]:
    """(section, record count, codec, already compressed, the error that must answer)."""
    codecs = st.sampled_from([CODEC_NONE, CODEC_ZSTD])
    garbage = st.builds(
        lambda section, count, codec: (section, count, codec, False, INVALID_RECORD),
        st.binary(min_size=1, max_size=120),
        st.integers(1, 4),
        codecs,
    ).filter(lambda case: not _records_decode(case[0], case[1]))
    not_climbing = st.lists(st.integers(0, 6), min_size=2, max_size=6).filter(
        lambda deltas: any(b <= a for a, b in itertools.pairwise(deltas))
    )
    backwards_or_repeated = st.builds(
        lambda deltas, codec: (
            records_with_deltas(deltas),
            len(deltas),
            codec,
            False,
            INVALID_RECORD,
        ),
        not_climbing,
        codecs,
    )
    count_disagrees = st.builds(
        lambda held, said, codec: (
            records_with_deltas(range(held)),
            said,
            codec,
            False,
            INVALID_RECORD,
        ),
        st.integers(1, 5),
        st.integers(1, 8),
        codecs,
    ).filter(lambda case: case[0] != records_with_deltas(range(case[1])))
    limit = BROKER_DEFAULTS.batch_decompressed_bytes_max
    bombs = st.sampled_from([limit + MEBIBYTE, 256 * MEBIBYTE]).map(
        lambda size: (zstd_bomb_section(size), 1, CODEC_ZSTD, True, TOO_LARGE)
    )
    # Millions of empty records said in a batch of a few hundred bytes (each reader would
    # pay for every one of them): refused by count before anything is decoded.
    tiny_records = st.sampled_from([BROKER_DEFAULTS.batch_records_max + 1, 2_000_000]).map(
        lambda count: (
            records_with_deltas(range(0, count, count // 16)),
            count,
            CODEC_ZSTD,
            False,
            TOO_LARGE,
        )
    )
    return st.one_of(garbage, backwards_or_repeated, count_disagrees, bombs, tiny_records)


def door_requests(seeded: Seed) -> st.SearchStrategy[tuple[produce_pb2.ProduceRequest, str]]:
    """A produce request of a batch refused at the door, plain anywhere or in the victim's
    open transaction at its next sequence (where a well-formed batch would be written),
    with the name of the error that must answer it."""
    plain = st.tuples(st.sampled_from([("known", 0), ("known", 1), ("empty", 0)]), st.just(None))
    in_open_txn = st.just(
        (("known", 1), (seeded.open_txn, seeded.victim, seeded.open_txn_sequence_next))
    )
    return st.builds(
        lambda target, case: (
            produce_pb2.ProduceRequest(
                topic=target[0][0],
                partition=target[0][1],
                batch=forged_batch(case[0], case[1], case[2], target[1], case[3]),
            ),
            case[4],
        ),
        st.one_of(plain, in_open_txn),
        bad_record_sections(),
    )


acl_grants = st.builds(
    admin_pb2.AclGrant,
    principal=st.text(max_size=10),
    operation=st.one_of(st.sampled_from(["read", "write", "all", "abort"]), st.text(max_size=8)),
    resource_type=st.one_of(
        st.sampled_from(["topic", "group", "transactional-id", "cluster", "broker"]),
        st.text(max_size=8),
    ),
    name=st.text(max_size=20),
    pattern_type=st.sampled_from(["literal", "prefixed", "glob", "", "x"]),
)


def door_calls(seeded: Seed) -> st.SearchStrategy[Call]:
    return st.one_of(
        door_requests(seeded).map(
            lambda case: Call(
                "Producing", "Produce", (case[0],), False, "records refused at the door", (case[1],)
            )
        ),
        st.lists(door_requests(seeded), min_size=1, max_size=4).map(
            lambda cases: Call(
                "Producing",
                "ProduceStream",
                tuple(request for request, _ in cases),
                False,
                "records refused at the door, streamed",
                tuple(name for _, name in cases),
            )
        ),
    )


def hostile_call_kinds(seeded: Seed) -> list[st.SearchStrategy[Call]]:
    P, C, A = "Producing", "Consuming", "Administration"
    topic_names = st.one_of(unknown_topics(seeded), st.sampled_from(sorted(seeded.topics)))
    any_partitions = st.one_of(small_ints, int32s)
    topic_partitions = st.lists(
        st.builds(
            lambda tp: common_pb2.TopicPartition(topic=tp[0], partition=tp[1]),
            bad_partitions(seeded),
        ),
        max_size=4,
    )
    offsets = st.lists(
        st.builds(
            lambda tp, offset: common_pb2.PartitionOffset(
                topic=tp[0], partition=tp[1], offset=offset
            ),
            st.one_of(bad_partitions(seeded), st.just(("known", 0))),
            st.one_of(int64s, small_ints),
        ),
        max_size=4,
    )
    timeouts_refused = st.one_of(st.integers(INT32[0], -1), st.integers(15 * 60_000 + 1, INT32[1]))
    producing = [
        call_of(
            P,
            "InitProducer",
            st.one_of(
                st.builds(
                    produce_pb2.InitProducerRequest,
                    transactional_id=st.text(max_size=30),
                    transaction_timeout_ms=timeouts_refused,
                ),
                st.builds(
                    produce_pb2.InitProducerRequest,
                    transactional_id=st.text(max_size=10).map(lambda t: "__idempotent__" + t),
                    transaction_timeout_ms=st.one_of(st.just(0), int32s),
                ),
            ),
            False,
            "init with a refused timeout or a reserved id",
        ),
        call_of(P, "Produce", hostile_produce_requests(seeded), False, "hostile produce"),
        door_calls(seeded),
        call_of(
            P,
            "ProduceStream",
            st.lists(hostile_produce_requests(seeded), min_size=1, max_size=6),
            False,
            "hostile produce stream",
        ),
        call_of(
            P,
            "ProduceStream",
            st.lists(
                st.one_of(poison_bytes(), hostile_produce_requests(seeded)), min_size=1, max_size=6
            ),
            False,
            "produce stream with undecodable items",
        ),
        call_of(
            P,
            "BeginTransaction",
            st.builds(
                lambda identity, request_id: produce_pb2.BeginTransactionRequest(
                    producer_id=identity[0], producer_generation=identity[1], request_id=request_id
                ),
                stale_identities(seeded),
                st.one_of(int64s, small_ints),
            ),
            False,
            "begin with a stale or unknown identity",
        ),
        call_of(
            P,
            "BeginTransaction",
            st.builds(
                lambda request_id: produce_pb2.BeginTransactionRequest(
                    producer_id=seeded.victim[0],
                    producer_generation=seeded.victim[1],
                    request_id=request_id,
                ),
                st.one_of(int64s, small_ints),
            ).filter(lambda r: r.request_id != 77),
            False,
            "begin while a transaction is open",
        ),
        call_of(
            P,
            "BeginTransaction",
            st.just(
                produce_pb2.BeginTransactionRequest(
                    producer_id=seeded.victim[0],
                    producer_generation=seeded.victim[1],
                    request_id=77,
                )
            ),
            True,  # a retried begin: answers the open transaction, writes nothing
            "retried begin",
        ),
        call_of(
            P,
            "AddPartitionsToTransaction",
            st.builds(
                lambda ref, partitions: produce_pb2.AddPartitionsToTransactionRequest(
                    transaction=ref, partitions=partitions
                ),
                st.just(
                    produce_pb2.TransactionRef(
                        transaction_id=seeded.open_txn,
                        producer_id=seeded.victim[0],
                        producer_generation=seeded.victim[1],
                    )
                ),
                topic_partitions.filter(bool),
            ),
            False,
            "add unknown partitions to the open transaction",
        ),
        call_of(
            P,
            "AddPartitionsToTransaction",
            st.builds(
                lambda ref, partitions: produce_pb2.AddPartitionsToTransactionRequest(
                    transaction=ref, partitions=partitions
                ),
                refs(seeded),
                st.lists(
                    st.builds(
                        lambda name, p: common_pb2.TopicPartition(topic=name, partition=p),
                        st.sampled_from(sorted(seeded.topics)),
                        st.integers(0, 1),
                    ),
                    max_size=3,
                ),
            ),
            False,
            "add partitions to someone else's transaction",
        ),
        call_of(
            P,
            "SendOffsetsToTransaction",
            st.builds(
                lambda ref, group, offs: produce_pb2.SendOffsetsToTransactionRequest(
                    transaction=ref, group_id=group, offsets=offs
                ),
                refs(seeded),
                st.one_of(st.sampled_from([HELD_GROUP, PLAIN_GROUP, ""]), st.text(max_size=20)),
                offsets,
            ),
            False,
            "send offsets in someone else's transaction",
        ),
        call_of(
            P,
            "SendOffsetsToTransaction",
            st.builds(
                lambda ref: produce_pb2.SendOffsetsToTransactionRequest(
                    transaction=ref,
                    group_id=HELD_GROUP,
                    offsets=[common_pb2.PartitionOffset(topic="known", partition=0, offset=9)],
                ),
                st.builds(
                    lambda txn, identity: produce_pb2.TransactionRef(
                        transaction_id=txn, producer_id=identity[0], producer_generation=identity[1]
                    ),
                    st.one_of(
                        st.sampled_from([seeded.open_txn + 256 * k for k in range(1, 4)]),
                        st.integers(seeded.open_txn + 1, INT64[1]),
                    ),
                    st.one_of(st.just(seeded.victim), stale_identities(seeded)),
                ),
            ),
            False,
            "impostor commits the offsets an open transaction holds",
        ),
        *(
            st.builds(
                lambda ref, wait, select, attempts, method=method, completed=completed: Call(
                    P,
                    method,
                    (
                        produce_pb2.EndTransactionRequest(
                            transaction=ref,
                            wait_for_applied=wait,
                            select_attempts=select,
                            attempts=attempts,
                        ),
                    ),
                    # Ending a completed transaction the same way again is a retry: OK, and
                    # nothing is written (whoever asks: the coordinator remembers only the
                    # outcome). A stale generation is refused before that.
                    ref.transaction_id == completed
                    and (ref.producer_id, ref.producer_generation)
                    in (seeded.victim, seeded.plain_producer),
                    f"{method} of someone else's transaction",
                ),
                refs(seeded),
                st.booleans(),
                st.booleans(),
                st.lists(st.text(max_size=10), max_size=3),
            )
            for method, completed in (
                ("CommitTransaction", seeded.committed_txn),
                ("AbortTransaction", seeded.aborted_txn),
            )
        ),
    ]
    consuming = [
        call_of(
            C,
            "Fetch",
            st.builds(
                consume_pb2.FetchRequest,
                topic=topic_names,
                partition=any_partitions,
                offset=st.one_of(int64s, small_ints),
                max_bytes=st.one_of(int32s, small_ints),
                max_wait_ms=st.one_of(int32s, small_ints),
                min_bytes=st.one_of(int32s, small_ints),
            ),
            True,
            "fetch",
        ),
        call_of(
            C,
            "ListOffset",
            st.builds(
                consume_pb2.ListOffsetRequest,
                topic=topic_names,
                partition=any_partitions,
                position=st.one_of(st.integers(0, 2), int32s),
                timestamp_ms=int64s,
            ),
            True,
            "list offset",
        ),
        call_of(
            C,
            "CommitOffsets",
            st.builds(
                lambda group, offs: consume_pb2.CommitOffsetsRequest(group_id=group, offsets=offs),
                st.just(""),
                offsets,
            ),
            False,
            "commit offsets without a group",
        ),
        call_of(
            C,
            "CommitOffsets",
            st.builds(
                lambda offs: consume_pb2.CommitOffsetsRequest(
                    group_id=HELD_GROUP,
                    offsets=[
                        *offs,
                        common_pb2.PartitionOffset(topic="known", partition=0, offset=5),
                    ],
                ),
                offsets,
            ),
            False,
            "commit offsets held by a transaction",
        ),
        call_of(
            C,
            "FetchOffsets",
            st.builds(
                lambda group, tps: consume_pb2.FetchOffsetsRequest(group_id=group, partitions=tps),
                st.one_of(st.sampled_from([HELD_GROUP, PLAIN_GROUP, ""]), st.text(max_size=20)),
                st.lists(
                    st.builds(
                        lambda tp: common_pb2.TopicPartition(topic=tp[0], partition=tp[1]),
                        st.one_of(bad_partitions(seeded), st.just(("known", 0))),
                    ),
                    max_size=4,
                ),
            ),
            True,
            "fetch offsets",
        ),
        call_of(
            C,
            "GroupHeartbeat",
            st.one_of(
                # a join that must be refused: no group, or timeouts out of bounds
                st.builds(
                    lambda group, session, rebalance: consume_pb2.GroupHeartbeatRequest(
                        group_id=group,
                        member_epoch=0,
                        subscribed_topics=["known"],
                        session_timeout_ms=session,
                        rebalance_timeout_ms=rebalance,
                    ),
                    st.sampled_from(["", PLAIN_GROUP]),
                    st.one_of(st.integers(INT32[0], 999), st.integers(300_001, INT32[1])),
                    int32s,
                ),
                st.builds(
                    lambda group, rebalance: consume_pb2.GroupHeartbeatRequest(
                        group_id=group,
                        member_epoch=0,
                        session_timeout_ms=10_000,
                        rebalance_timeout_ms=rebalance,
                    ),
                    st.sampled_from([PLAIN_GROUP, HELD_GROUP]),
                    st.integers(INT32[0], 0),
                ),
                # a heartbeat of a member the coordinator never had, in any epoch but a leave
                st.builds(
                    lambda member, epoch, owned: consume_pb2.GroupHeartbeatRequest(
                        group_id=PLAIN_GROUP,
                        member_id=member,
                        member_epoch=epoch,
                        owned=owned,
                        session_timeout_ms=10_000,
                        rebalance_timeout_ms=10_000,
                    ),
                    st.text(min_size=1, max_size=40),
                    st.one_of(st.integers(1, INT32[1]), st.integers(INT32[0], -3)),
                    st.lists(
                        st.builds(
                            lambda tp: common_pb2.TopicPartition(topic=tp[0], partition=tp[1]),
                            st.one_of(bad_partitions(seeded), st.just(("known", 0))),
                        ),
                        max_size=4,
                    ),
                ),
            ),
            False,
            "a heartbeat that cannot join or stay",
        ),
    ]
    administration = [
        call_of(
            A,
            "CreateTopic",
            st.one_of(
                st.builds(
                    admin_pb2.CreateTopicRequest,
                    name=unknown_topics(seeded).filter(_invalid_topic_name),
                    partitions=any_partitions,
                ),
                st.builds(
                    admin_pb2.CreateTopicRequest,
                    name=st.sampled_from([*sorted(seeded.topics), "__consumer_offsets"]),
                    partitions=any_partitions,
                ),
                st.builds(
                    admin_pb2.CreateTopicRequest,
                    name=st.just("fresh"),
                    partitions=st.one_of(
                        st.integers(INT32[0], -1),
                        st.integers(10_001, INT32[1]),
                        st.sampled_from([SERVER_OPEN_FILES, 5_000, 10_000]),  # too many files
                    ),
                ),
                st.builds(
                    admin_pb2.CreateTopicRequest,
                    name=st.just("fresh"),
                    partitions=st.integers(0, 4),
                    config=st.dictionaries(
                        st.one_of(
                            st.text(max_size=20),
                            st.sampled_from(["segment.bytes", "retention.ms", "flush.messages"]),
                        ),
                        st.text(max_size=20).filter(lambda v: not v.strip().lstrip("-").isdigit()),
                        min_size=1,
                        max_size=3,
                    ),
                ),
            ),
            False,
            "create an invalid topic",
        ),
        call_of(
            A,
            "DeleteTopic",
            st.builds(
                admin_pb2.DeleteTopicRequest,
                name=st.one_of(unknown_topics(seeded), st.just("__consumer_offsets")),
            ),
            False,
            "delete an unknown or internal topic",
        ),
        call_of(
            A,
            "CreatePartitions",
            st.builds(
                admin_pb2.CreatePartitionsRequest,
                name=any_topic_names(seeded),
                partitions=st.one_of(st.integers(INT32[0], 1), st.integers(10_001, INT32[1])),
            ),
            False,
            "shrink, keep or overgrow a topic, or grow an unknown or internal one",
        ),
        call_of(
            A,
            "AlterTopicConfig",
            st.builds(
                admin_pb2.AlterTopicConfigRequest,
                name=any_topic_names(seeded),
                set=st.dictionaries(
                    st.one_of(
                        st.text(max_size=20),
                        st.sampled_from(["segment.bytes", "retention.ms", "replication.factor"]),
                    ),
                    st.text(max_size=20).filter(lambda v: not v.strip().lstrip("-").isdigit()),
                    min_size=1,
                    max_size=3,
                ),
                delete=st.lists(st.text(max_size=20), max_size=2),
            ),
            False,
            "set bad topic settings",
        ),
        call_of(
            A,
            "ElectLeaders",
            st.builds(
                admin_pb2.ElectLeadersRequest,
                partitions=topic_partitions,
                timeout_ms=st.one_of(st.integers(INT32[0], 0), st.integers(0, INT32[1])),
            ),
            True,  # one node: every partition is led by its one replica already
            "elect preferred leaders",
        ),
        call_of(
            A,
            "ReassignPartitions",
            st.builds(
                admin_pb2.ReassignPartitionsRequest,
                moves=st.lists(
                    st.builds(
                        admin_pb2.PartitionMove,
                        partition=st.builds(
                            lambda tp: common_pb2.TopicPartition(topic=tp[0], partition=tp[1]),
                            bad_partitions(seeded),
                        ),
                        replicas=st.lists(st.integers(*INT32), max_size=4),
                    ),
                    max_size=4,
                ),
                throttle_bytes_per_s=st.integers(*INT64),
                timeout_ms=st.integers(*INT32),
            ),
            True,  # one node: a partition can only stay on its one broker; each move says so
            "move partitions to brokers a single node does not have",
        ),
        call_of(
            A,
            "DeleteRecords",
            st.builds(
                admin_pb2.DeleteRecordsRequest,
                partitions=st.lists(
                    st.one_of(
                        st.builds(
                            lambda tp, offset: admin_pb2.RecordsDeletion(
                                partition=common_pb2.TopicPartition(topic=tp[0], partition=tp[1]),
                                before_offset=offset,
                            ),
                            bad_partitions(seeded),
                            st.one_of(st.integers(*INT64), st.just(-1)),
                        ),
                        # a known partition: above any high watermark, or below -1
                        st.builds(
                            lambda tp, offset: admin_pb2.RecordsDeletion(
                                partition=common_pb2.TopicPartition(topic=tp[0], partition=tp[1]),
                                before_offset=offset,
                            ),
                            st.sampled_from(
                                [(n, p) for n, count in seeded.topics.items() for p in range(count)]
                            ),
                            st.one_of(st.integers(2**40, INT64[1]), st.integers(INT64[0], -2)),
                        ),
                        # an internal topic's records are the coordinators' state: refused
                        st.builds(
                            lambda offset: admin_pb2.RecordsDeletion(
                                partition=common_pb2.TopicPartition(
                                    topic="__consumer_offsets", partition=0
                                ),
                                before_offset=offset,
                            ),
                            st.sampled_from([-1, 0, 1]),
                        ),
                    ),
                    max_size=4,
                ),
            ),
            True,  # per partition: each refused one says why in an OK answer
            "delete records of unknown partitions, or past a known one's high watermark",
        ),
        call_of(
            A,
            "ShutdownBroker",
            st.builds(
                admin_pb2.ShutdownBrokerRequest,
                broker_id=st.integers(*INT32).filter(lambda b: b != SERVER_BROKER_ID),
            ),
            False,
            "stop another broker through this one",
        ),
        call_of(
            A,
            "SetScramCredential",
            st.builds(
                admin_pb2.SetScramCredentialRequest,
                user=st.text(max_size=20),
                mechanism=st.one_of(
                    st.sampled_from(["", "PLAIN", "SCRAM-SHA-1", "scram-sha-256"]),
                    st.text(max_size=20),
                ).filter(lambda m: m not in ("SCRAM-SHA-256", "SCRAM-SHA-512")),
                iterations=st.integers(*INT32),
                salt=st.binary(max_size=16),
                salted_password=st.binary(max_size=80),
            ),
            False,
            "set a credential of a mechanism not offered",
        ),
        call_of(
            A,
            "SetScramCredential",
            st.builds(
                admin_pb2.SetScramCredentialRequest,
                user=st.text(max_size=20),
                mechanism=st.sampled_from(["SCRAM-SHA-256", "SCRAM-SHA-512"]),
                iterations=st.integers(*INT32).filter(lambda i: not 4096 <= i <= 16384),
                salt=st.binary(max_size=16),
                salted_password=st.binary(max_size=80),
            ),
            False,
            "set a credential with too few or too many iterations",
        ),
        call_of(
            A,
            "DeleteScramCredential",
            st.builds(
                admin_pb2.DeleteScramCredentialRequest,
                user=st.text(max_size=20),
                mechanism=st.one_of(
                    st.sampled_from(["SCRAM-SHA-256", "SCRAM-SHA-512"]), st.text(max_size=20)
                ),
            ),
            False,
            "delete a credential no user has",
        ),
        call_of(
            A, "ListScramUsers", st.just(admin_pb2.ListScramUsersRequest()), True, "list users"
        ),
        # This server has no ACL file: ACL administration is refused, whatever the grant.
        *(
            call_of(
                A,
                method,
                st.builds(request, grants=st.lists(acl_grants, max_size=3)),
                False,
                "administer ACLs on a server without them",
            )
            for method, request in (
                ("CreateAcls", admin_pb2.CreateAclsRequest),
                ("DeleteAcls", admin_pb2.DeleteAclsRequest),
            )
        ),
        call_of(
            A,
            "ListAcls",
            st.builds(admin_pb2.ListAclsRequest, principal=st.text(max_size=10)),
            False,
            "list the ACLs of a server without them",
        ),
        call_of(
            A,
            "ListPartitionReassignments",
            st.just(admin_pb2.ListPartitionReassignmentsRequest()),
            True,
            "list reassignments",
        ),
        call_of(A, "ListTopics", st.just(admin_pb2.ListTopicsRequest()), True, "list topics"),
        call_of(A, "ListGroups", st.just(admin_pb2.ListGroupsRequest()), True, "list groups"),
        call_of(
            A,
            "DescribeGroup",
            st.builds(
                admin_pb2.DescribeGroupRequest,
                group_id=st.one_of(
                    st.sampled_from([HELD_GROUP, PLAIN_GROUP, ""]), st.text(max_size=20)
                ),
            ),
            True,
            "describe a group",
        ),
        call_of(
            A,
            "DeleteGroup",
            st.builds(
                admin_pb2.DeleteGroupRequest,
                group_id=st.one_of(
                    st.just(HELD_GROUP),  # its offsets are held by an open transaction
                    st.text(max_size=20).filter(lambda g: g not in (HELD_GROUP, PLAIN_GROUP)),
                ),
            ),
            False,
            "delete an unknown group, or one whose offsets a transaction holds",
        ),
        call_of(
            A,
            "DeleteGroupOffsets",
            st.builds(
                admin_pb2.DeleteGroupOffsetsRequest,
                group_id=st.text(max_size=20).filter(lambda g: g not in (HELD_GROUP, PLAIN_GROUP)),
                partitions=st.lists(
                    st.builds(
                        common_pb2.TopicPartition,
                        topic=topic_names,
                        partition=st.integers(min_value=-2, max_value=4),
                    ),
                    max_size=3,
                ),
            ),
            True,  # OK with each partition refused (or none asked): nothing to delete
            "delete offsets of an unknown group",
        ),
        call_of(
            A,
            "DescribeTopic",
            st.builds(admin_pb2.DescribeTopicRequest, name=topic_names),
            True,
            "describe topic",
        ),
        call_of(
            A,
            "DescribeTopicSettings",
            st.builds(admin_pb2.DescribeTopicRequest, name=topic_names),
            True,
            "describe a topic's settings",
        ),
        call_of(
            A,
            "ListTransactions",
            st.just(admin_pb2.ListTransactionsRequest()),
            True,
            "list transactions",
        ),
        call_of(
            A,
            "AbortTransaction",
            st.builds(
                admin_pb2.AbortTransactionRequest,
                transaction_id=interesting_ids(seeded).filter(lambda i: i != seeded.open_txn),
            ),
            False,
            "admin abort of a transaction not in flight",
        ),
        call_of(
            A,
            "DescribeProducers",
            st.builds(
                admin_pb2.DescribeProducersRequest, topic=topic_names, partition=any_partitions
            ),
            True,
            "describe producers",
        ),
        call_of(
            A,
            "Metadata",
            st.builds(admin_pb2.MetadataRequest, topics=st.lists(topic_names, max_size=4)),
            True,
            "metadata of known and unknown topics",
        ),
        call_of(
            A,
            "FindCoordinator",
            st.builds(
                admin_pb2.FindCoordinatorRequest,
                key_type=st.integers(-1, 5),  # unknown values included
                key=st.one_of(st.text(max_size=40), st.integers(-(1 << 70), 1 << 70).map(str)),
            ),
            True,
            "find the coordinator of any key, of any kind",
        ),
    ]
    undecodable = st.sampled_from(sorted(METHODS)).flatmap(
        lambda method: call_of(
            *method,
            st.lists(poison_bytes(METHODS[method]), min_size=1, max_size=3)
            if method in STREAMING
            else poison_bytes(METHODS[method]),
            False,
            "undecodable bytes",
        )
    )
    return [*producing, *consuming, *administration, undecodable]


def hostile_calls(seeded: Seed) -> st.SearchStrategy[Call]:
    return st.one_of(*hostile_call_kinds(seeded))


def _invalid_topic_name(name: str) -> bool:
    from twinlog.engine.base.errors import InvalidConfigError
    from twinlog.engine.broker.topic_registry import validate_topic_name

    try:
        validate_topic_name(name)
    except InvalidConfigError:
        return True
    return False


# --- strategies: anything the proto allows -------------------------------------------------------


def interesting_strings(seeded: Seed) -> st.SearchStrategy[str]:
    return st.one_of(
        st.text(max_size=30),
        st.sampled_from(
            [*seeded.topics, "__consumer_offsets", VICTIM, HELD_GROUP, PLAIN_GROUP, "", "fresh"]
        ),
    )


_SCALARS: dict[int, Callable[[Seed], st.SearchStrategy[Any]]] = {
    FieldDescriptor.TYPE_INT32: lambda s: st.one_of(int32s, small_ints),
    FieldDescriptor.TYPE_INT64: lambda s: interesting_ids(s),
    FieldDescriptor.TYPE_UINT64: lambda s: st.integers(0, 2**64 - 1),
    FieldDescriptor.TYPE_BOOL: lambda s: st.booleans(),
    FieldDescriptor.TYPE_STRING: interesting_strings,
    FieldDescriptor.TYPE_BYTES: lambda s: st.one_of(
        st.binary(max_size=200), any_batch(s), corrupted(any_batch(s))
    ),
    FieldDescriptor.TYPE_ENUM: lambda s: st.one_of(st.integers(0, 3), int32s),
}


NESTING_MAX = 3  # levels of messages inside messages (a ProduceRequest holds ProduceRequests)


def random_messages(
    message_class: type[Message], seeded: Seed, depth: int = 0
) -> st.SearchStrategy[Message]:
    """Any message of the class: each field set or not, to any value its type allows;
    messages nest ``NESTING_MAX`` levels deep at most."""

    @st.composite
    def build(draw: st.DrawFn) -> Message:
        message = message_class()
        for field in message_class.DESCRIPTOR.fields:
            if not draw(st.booleans()):
                continue
            value_type = field.message_type
            if value_type is not None and value_type.GetOptions().map_entry:
                keys = _SCALARS[value_type.fields_by_name["key"].type](seeded)
                values = _SCALARS[value_type.fields_by_name["value"].type](seeded)
                getattr(message, field.name).update(draw(st.dictionaries(keys, values, max_size=3)))
                continue
            if value_type is not None:
                if depth >= NESTING_MAX:
                    continue
                item_class = _message_class(value_type.full_name)
                item = random_messages(item_class, seeded, depth + 1)
                if field.is_repeated:
                    getattr(message, field.name).extend(draw(st.lists(item, max_size=4)))
                else:
                    getattr(message, field.name).CopyFrom(draw(item))
                continue
            values = _SCALARS[field.type](seeded)
            if field.is_repeated:
                getattr(message, field.name).extend(draw(st.lists(values, max_size=4)))
            else:
                setattr(message, field.name, draw(values))
        return message

    return build()


def _message_class(full_name: str) -> type[Message]:
    name = full_name.rsplit(".", 1)[-1]
    for module in (produce_pb2, consume_pb2, admin_pb2, common_pb2):
        found = getattr(module, name, None)
        if found is not None:
            return found  # type: ignore[no-any-return]
    raise AssertionError(full_name)


SHUTDOWN = ("Administration", "ShutdownBroker")
SERVER_BROKER_ID = 0  # the single node's: a ShutdownBroker naming it stops the server, as it should


def _another_broker(request: Message) -> Message:
    """A ShutdownBroker request for any broker but the server's own."""
    assert isinstance(request, admin_pb2.ShutdownBrokerRequest)
    if request.broker_id == SERVER_BROKER_ID:
        request.broker_id = SERVER_BROKER_ID + 1
    return request


def _not_a_shutdown_of_the_server(raw: bytes) -> bool:
    try:
        request = admin_pb2.ShutdownBrokerRequest.FromString(raw)
    except Exception:  # DecodeError: refused as unparsable
        return True
    return request.broker_id != SERVER_BROKER_ID


def random_calls(seeded: Seed) -> st.SearchStrategy[Call]:
    def for_method(method: tuple[str, str]) -> st.SearchStrategy[Call]:
        messages = random_messages(METHODS[method], seeded)
        if method == SHUTDOWN:
            messages = messages.map(_another_broker)
        if method in STREAMING:
            return call_of(*method, st.lists(messages, min_size=1, max_size=5), True, "random")
        return call_of(*method, messages, True, "random")

    return st.sampled_from(sorted(METHODS)).flatmap(for_method)


def raw_calls() -> st.SearchStrategy[Call]:
    def for_method(method: tuple[str, str]) -> st.SearchStrategy[Call]:
        raw = st.binary(max_size=300)
        if method == SHUTDOWN:
            raw = raw.filter(_not_a_shutdown_of_the_server)
        if method in STREAMING:
            return call_of(*method, st.lists(raw, min_size=1, max_size=5), True, "random bytes")
        return call_of(*method, raw, True, "random bytes")

    return st.sampled_from(sorted(METHODS)).flatmap(for_method)


# --- servers ---------------------------------------------------------------------------------------


def start_server(directory: Path, *extra_arguments: str) -> ServerProcess:
    """A server whose soft open-files limit is SERVER_OPEN_FILES (set around the fork)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(SERVER_OPEN_FILES, hard), hard))
    try:
        return ServerProcess(directory / "data", *SERVER_ARGUMENTS, *extra_arguments).start()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.fixture(scope="module")
def hostile_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ServerProcess, Seed]]:
    server = start_server(tmp_path_factory.mktemp("hostile"))
    try:
        with RemoteBroker(server.address) as remote:
            seeded = seed(remote)
        yield server, seeded
        assert server.stop() == 0, server.log()[-5000:]
    finally:
        server.kill()


HYPOTHESIS = {
    "deadline": None,
    "database": None,  # the examples depend on this module's seeded server
    # No shrinking: the server's state outlives an example, so the first failure is the one
    # to report (a shrunk example could fail only because of what an earlier one did).
    "phases": [Phase.explicit, Phase.generate],
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,
        HealthCheck.large_base_example,
    ],
}


def _server_trouble(server: ServerProcess) -> str:
    lines = [line for line in server.log().splitlines() if "Traceback" in line or "ERROR" in line]
    return "\n".join(lines[-20:])


def test_hostile_requests_change_nothing(hostile_server: tuple[ServerProcess, Seed]) -> None:
    server, seeded = hostile_server
    data_dir = server.data_dir
    client = Client(server.address)
    # The last writes of seeding have landed (a copy's MARK_APPLIED a background round
    # writes tens of milliseconds after the commit among them) before the state is read.
    stats_before = settled_file_stats(data_dir)
    with RemoteBroker(server.address) as remote:
        seen_before = visible_state(remote, seeded)
    checksum_before = checksum(data_dir)
    sent: list[Call] = []

    @settings(max_examples=HOSTILE_EXAMPLES, **HYPOTHESIS)  # type: ignore[arg-type]
    @given(hostile_calls(seeded))
    def send_one(call: Call) -> None:
        sent.append(call)
        client.send(call)
        assert server.process is not None and server.process.poll() is None, server.log()[-5000:]
        changed = differences(stats_before, file_stats(data_dir))
        # A write may land after its request's answer (a transaction completes in the
        # background): name the requests before it too.
        earlier = "\n".join(repr(c) for c in sent[-4:-1])
        assert not changed, f"{call!r} changed {changed[:8]}; the requests before it:\n{earlier}"

    @settings(max_examples=1, **HYPOTHESIS)  # type: ignore[arg-type]
    @given(st.data())
    def send_one_of_each_untried(data: st.DataObject) -> None:
        # The random draw above may miss a method (one kind in about forty): every
        # method is tried at least once, drawn from its own kinds.
        tried = {c.method for c in sent}
        for kind in hostile_call_kinds(seeded):
            call = data.draw(kind)
            if call.method not in tried:
                send_one.hypothesis.inner_test(call)  # type: ignore[attr-defined]
                tried.add(call.method)

    try:
        send_one()
        send_one_of_each_untried()
    finally:
        client.close()
    assert checksum(data_dir) == checksum_before
    with RemoteBroker(server.address) as remote:
        assert visible_state(remote, seeded) == seen_before
    assert {c.method for c in sent} == {m for _, m in METHODS}, "some methods were never tried"
    assert "Traceback" not in server.log(), _server_trouble(server)


def test_random_requests_get_clear_statuses(tmp_path: Path) -> None:
    server = start_server(tmp_path)
    try:
        with RemoteBroker(server.address) as remote:
            seeded = seed(remote)
        client = Client(server.address)

        @settings(max_examples=RANDOM_EXAMPLES, **HYPOTHESIS)  # type: ignore[arg-type]
        @given(random_calls(seeded))
        def send_random(call: Call) -> None:
            client.send(call)
            assert server.process is not None and server.process.poll() is None

        @settings(max_examples=RAW_EXAMPLES, **HYPOTHESIS)  # type: ignore[arg-type]
        @given(raw_calls())
        def send_raw(call: Call) -> None:
            client.send(call)
            assert server.process is not None and server.process.poll() is None

        try:
            send_random()
            send_raw()
        finally:
            client.close()
        assert "Traceback" not in server.log(), _server_trouble(server)
        with RemoteBroker(server.address) as remote:  # still serves a whole transaction
            name = "after-the-storm"
            if name not in remote.list_topics():
                remote.create_topic(name, 1)
            identity = remote.init_producer("after-the-storm")
            producer = (identity.producer_id, identity.producer_generation)
            txn = remote.begin_transaction(*producer)
            remote.produce(
                name, 0, txn_batch(txn, producer, 0, [b"still", b"here"]), transaction_id=txn
            )
            remote.commit_transaction(txn, *producer, wait_for_applied=True)
            assert remote.fetch(name, 0, 0).log_end_offset == 2
        assert server.stop() == 0, server.log()[-5000:]
    finally:
        server.kill()


def test_each_bug_found_stays_fixed(hostile_server: tuple[ServerProcess, Seed]) -> None:
    """The requests that broke the server once, each checked by name (hypothesis found them)."""
    server, seeded = hostile_server
    client = Client(server.address)
    victim_batch = txn_batch(seeded.open_txn, seeded.victim, seeded.open_txn_sequence_next, [b"v"])
    refusals = {
        # bytes that are not protobuf: was INTERNAL "Exception deserializing request!"
        "undecodable": (
            Call("Consuming", "Fetch", (b"\x0a\x01\xff",), False, "bad UTF-8"),
            "InvalidConfigError",
        ),
        # a batch with bytes after it: was journaled, and its commit could never be applied
        "trailing bytes": (
            Call(
                "Producing",
                "Produce",
                (
                    produce_pb2.ProduceRequest(
                        topic="known", partition=1, batch=victim_batch + b"\x00"
                    ),
                ),
                False,
                "trailing bytes",
            ),
            "CorruptBatchError",
        ),
        # a client batch in the internal offsets topic: once committed, the broker could
        # neither complete the transaction nor open its data directory again
        "offsets topic": (
            Call(
                "Producing",
                "Produce",
                (
                    produce_pb2.ProduceRequest(
                        topic="__consumer_offsets", partition=0, batch=victim_batch
                    ),
                ),
                False,
                "internal topic",
            ),
            "InvalidConfigError",
        ),
        # a made-up transaction id "committing" offsets an open transaction holds: aborted
        # the holder (KIP-447 fencing ran before the request's own transaction was checked)
        "impostor offsets": (
            Call(
                "Producing",
                "SendOffsetsToTransaction",
                (
                    produce_pb2.SendOffsetsToTransactionRequest(
                        transaction=produce_pb2.TransactionRef(
                            transaction_id=seeded.open_txn + 256,
                            producer_id=seeded.victim[0],
                            producer_generation=seeded.victim[1],
                        ),
                        group_id=HELD_GROUP,
                        offsets=[common_pb2.PartitionOffset(topic="known", partition=0, offset=9)],
                    ),
                ),
                False,
                "impostor",
            ),
            "UnknownTransactionError",
        ),
        # more partitions than open files allow: exhausted the server's descriptors (EMFILE
        # everywhere, INTERNAL) and recorded a topic the broker could not reopen
        "open files": (
            Call(
                "Administration",
                "CreateTopic",
                (admin_pb2.CreateTopicRequest(name="too-many", partitions=SERVER_OPEN_FILES),),
                False,
                "too many partitions",
            ),
            "NotEnoughResourcesError",
        ),
    }
    stub_errors: dict[str, str] = {}
    try:
        for what, (call, _) in refusals.items():
            method = (
                client.channel.unary_unary(call.path)
                if isinstance(call.requests[0], bytes)
                else getattr(client.stubs[call.service], call.method)
            )
            with pytest.raises(grpc.RpcError) as caught:
                method(call.requests[0], timeout=CALL_TIMEOUT_S)
            check_refusal(call, caught.value)
            metadata = dict(caught.value.trailing_metadata() or ())  # type: ignore[attr-defined]
            stub_errors[what] = metadata[NAME_KEY]
    finally:
        client.close()
    assert stub_errors == {what: expected for what, (_, expected) in refusals.items()}
    with RemoteBroker(server.address) as remote:  # the holder is still open, still holding
        (held,) = remote.list_transactions()
        assert held.transaction_id == seeded.open_txn and held.groups == (HELD_GROUP,)


# --- records checked at the door --------------------------------------------------------------

DOOR_CASES: dict[str, tuple[Callable[[], bytes], int, int, bool, str]] = {
    # name: (section, record count, codec, section already compressed, the answer)
    "garbage records": (lambda: b"\x00" * 30, 3, CODEC_NONE, False, INVALID_RECORD),
    "garbage records, zstd": (lambda: b"\xff\x01" * 40, 2, CODEC_ZSTD, False, INVALID_RECORD),
    "offset deltas backwards": (
        lambda: records_with_deltas([2, 1, 0]),
        3,
        CODEC_NONE,
        False,
        INVALID_RECORD,
    ),
    "offset deltas repeated": (
        lambda: records_with_deltas([0, 1, 1, 1]),
        4,
        CODEC_ZSTD,
        False,
        INVALID_RECORD,
    ),
    "record count too high": (
        lambda: records_with_deltas(range(2)),
        5,
        CODEC_NONE,
        False,
        INVALID_RECORD,
    ),
    "record count too low": (
        lambda: records_with_deltas(range(4)),
        2,
        CODEC_ZSTD,
        False,
        INVALID_RECORD,
    ),
    "zstd bomb": (lambda: zstd_bomb_section(256 * MEBIBYTE), 1, CODEC_ZSTD, True, TOO_LARGE),
    "two million tiny records": (
        lambda: records_with_deltas(range(0, 2_000_000, 125_000)),
        2_000_000,
        CODEC_ZSTD,
        False,
        TOO_LARGE,
    ),
}
SERVER_PEAK_RSS_BYTES_MAX = 256 * MEBIBYTE  # the bomb declares this much: none of it is made


def peak_rss_bytes(pid: int) -> int:
    """The process's peak resident set (VmHWM, Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for process {pid}")


def test_records_are_checked_at_the_door(hostile_server: tuple[ServerProcess, Seed]) -> None:
    """Each batch whose CRC holds and whose records do not, plain and in the open transaction
    at its next sequence, by Produce and ProduceStream: refused with its typed error, the
    server alive and within its memory, and not one file changed."""
    server, seeded = hostile_server
    assert server.process is not None
    data_dir = server.data_dir
    stats_before = settled_file_stats(data_dir)  # as above: settled, then read
    with RemoteBroker(server.address) as remote:
        seen_before = visible_state(remote, seeded)
    checksum_before = checksum(data_dir)
    owners = {
        "plain": (("known", 0), None),
        "in the open transaction": (
            ("known", 1),
            (seeded.open_txn, seeded.victim, seeded.open_txn_sequence_next),
        ),
    }
    client = Client(server.address)
    try:
        for what, (section, count, codec, compressed, expected) in DOOR_CASES.items():
            for whose, ((topic, partition), owner) in owners.items():
                batch = forged_batch(section(), count, codec, owner, compressed)
                assert len(batch) < MAX_BATCH_BYTES, what  # small: only its records are wrong
                request = produce_pb2.ProduceRequest(topic=topic, partition=partition, batch=batch)
                for method in ("Produce", "ProduceStream"):
                    call = Call("Producing", method, (request,), False, f"{what}, {whose}")
                    refusals = len(client.refusals)
                    client.send(call)
                    assert client.refusals[refusals:] == [expected], f"{call!r}"
                    assert server.process.poll() is None, server.log()[-5000:]
                    changed = differences(stats_before, file_stats(data_dir))
                    assert not changed, f"{call!r} changed {changed[:8]}"
    finally:
        client.close()
    assert checksum(data_dir) == checksum_before
    with RemoteBroker(server.address) as remote:
        assert visible_state(remote, seeded) == seen_before
    peak = peak_rss_bytes(server.process.pid)
    print(f"server peak RSS after the door cases: {peak / MEBIBYTE:.0f} MiB")
    assert peak < SERVER_PEAK_RSS_BYTES_MAX, f"peak RSS {peak / MEBIBYTE:.0f} MiB"
    assert "Traceback" not in server.log(), _server_trouble(server)


# --- a second principal with ACLs on ------------------------------------------------------------

VICTIM_TOKEN = "victim-token-2b8d4f6a0c1e"
MALLORY_TOKEN = "mallory-token-9e7c5a3b1d2f"
ACL_TOKENS = f"{VICTIM_TOKEN} victim\n{MALLORY_TOKEN} mallory\n"
# Mallory may read and write every topic users made and use her own transactional ids and
# groups: nothing that lets her touch the victim's groups, producers or transactions.
ACL_GRANTS = """
victim all *
victim all group:*
victim write transactional-id:*
mallory write *
mallory read *
mallory write transactional-id:mallory-*
mallory read group:mallory-*
"""


def cross_principal_calls(
    seeded: Seed, mallory_txn: int, mallory: tuple[int, int]
) -> dict[str, Call]:
    """Each attack of one principal on another's group, producer id or the internal topic."""
    mallory_ref = produce_pb2.TransactionRef(
        transaction_id=mallory_txn, producer_id=mallory[0], producer_generation=mallory[1]
    )

    def offsets_into_mallorys_txn(group: str) -> produce_pb2.SendOffsetsToTransactionRequest:
        return produce_pb2.SendOffsetsToTransactionRequest(
            transaction=mallory_ref,
            group_id=group,
            offsets=[common_pb2.PartitionOffset(topic="known", partition=0, offset=0)],
        )

    def as_victim(generation: int, base_sequence: int) -> produce_pb2.ProduceRequest:
        builder = RecordBatchBuilder(
            "none",
            producer_id=seeded.plain_producer[0],
            producer_generation=generation,
            base_sequence=base_sequence,
        )
        builder.append(b"mallory as the victim", key=b"p")
        return produce_pb2.ProduceRequest(topic="known", partition=0, batch=builder.build())

    calls = {
        # (a) KIP-447 would abort the victim's older open transaction holding g-held.
        "abort through the group": Call(
            "Producing",
            "SendOffsetsToTransaction",
            (offsets_into_mallorys_txn(HELD_GROUP),),
            False,
            "another's group, held",
        ),
        # (a') Mallory's younger transaction taking g-plain first fences the victim's next.
        "fence through the group": Call(
            "Producing",
            "SendOffsetsToTransaction",
            (offsets_into_mallorys_txn(PLAIN_GROUP),),
            False,
            "another's group, free",
        ),
        # (b) a plain commit overwrites the victim's position; a fetch reveals it.
        "commit another's group": Call(
            "Consuming",
            "CommitOffsets",
            (
                consume_pb2.CommitOffsetsRequest(
                    group_id=PLAIN_GROUP,
                    offsets=[common_pb2.PartitionOffset(topic="known", partition=0, offset=0)],
                ),
            ),
            False,
            "another's group",
        ),
        "fetch another's group": Call(
            "Consuming",
            "FetchOffsets",
            (
                consume_pb2.FetchOffsetsRequest(
                    group_id=PLAIN_GROUP,
                    partitions=[common_pb2.TopicPartition(topic="known", partition=0)],
                ),
            ),
            False,
            "another's group",
        ),
        # (c) the victim's idempotent producer id, read off her batch header.
        "next sequence as the victim": Call(
            "Producing", "Produce", (as_victim(0, 3),), False, "another's producer id"
        ),
        "newer generation as the victim": Call(
            "Producing", "Produce", (as_victim(1, 0),), False, "another's producer id"
        ),
        "streamed as the victim": Call(
            "Producing", "ProduceStream", (as_victim(0, 3),), False, "another's producer id"
        ),
    }
    # Mallory grants herself the victim's groups (ACL administration needs ALTER on the
    # cluster), or removes the victim's own grant.
    everything = admin_pb2.AclGrant(
        principal="mallory", operation="read", resource_type="group", name="*"
    )
    calls["grant oneself"] = Call(
        "Administration",
        "CreateAcls",
        (admin_pb2.CreateAclsRequest(grants=[everything]),),
        False,
        "ACL administration",
    )
    calls["revoke another"] = Call(
        "Administration",
        "DeleteAcls",
        (
            admin_pb2.DeleteAclsRequest(
                grants=[
                    admin_pb2.AclGrant(
                        principal="victim", operation="all", resource_type="topic", name="*"
                    )
                ]
            ),
        ),
        False,
        "ACL administration",
    )
    for partition in range(4):  # every group's offsets, through 'read *'
        calls[f"list offsets-{partition}"] = Call(
            "Consuming",
            "Fetch",
            (consume_pb2.FetchRequest(topic="__consumer_offsets", partition=partition),),
            False,
            "internal topic",
        )
    return calls


def test_a_principal_cannot_reach_anothers_groups_or_producer_ids(tmp_path: Path) -> None:
    (tmp_path / "tokens").write_text(ACL_TOKENS)
    (tmp_path / "acl").write_text(ACL_GRANTS)
    server = start_server(
        tmp_path, "--tokens-file", str(tmp_path / "tokens"), "--acl-file", str(tmp_path / "acl")
    )
    try:
        victim_options = ConnectionOptions(token=VICTIM_TOKEN, request_timeout_ms=10_000)
        with RemoteBroker(server.address, victim_options) as remote:
            seeded = seed(remote)
        mallory_options = ConnectionOptions(token=MALLORY_TOKEN, request_timeout_ms=10_000)
        with RemoteBroker(server.address, mallory_options) as remote:
            identity = remote.init_producer("mallory-app", OPEN_TXN_TIMEOUT_MS)
            mallory = (identity.producer_id, identity.producer_generation)
            mallory_txn = remote.begin_transaction(*mallory)  # younger than the victim's
        stats_before = settled_file_stats(server.data_dir)  # settled, then read
        with RemoteBroker(server.address, victim_options) as remote:
            seen_before = visible_state(remote, seeded)
        checksum_before = checksum(server.data_dir)
        client = Client(server.address, token=MALLORY_TOKEN)
        try:
            for what, call in cross_principal_calls(seeded, mallory_txn, mallory).items():
                client.send(call)
                assert client.refusals[-1] == "AuthorizationError", f"{what}: {call!r}"
                changed = differences(stats_before, file_stats(server.data_dir))
                assert not changed, f"{what}: {call!r} changed {changed[:8]}"
        finally:
            client.close()
        assert checksum(server.data_dir) == checksum_before
        with RemoteBroker(server.address, victim_options) as remote:
            assert visible_state(remote, seeded) == seen_before
            held = [t for t in remote.list_transactions() if t.transaction_id == seeded.open_txn]
            assert [t.groups for t in held] == [(HELD_GROUP,)]
        assert "Traceback" not in server.log(), _server_trouble(server)
        assert server.stop() == 0, server.log()[-5000:]
    finally:
        server.kill()
