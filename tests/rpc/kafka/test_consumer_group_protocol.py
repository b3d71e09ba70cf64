"""KIP-848's consumer group protocol on the Kafka listener: ConsumerGroupHeartbeat and
ConsumerGroupDescribe, their codec pinned against bytes laid out from Kafka's schema,
the coordinator's rules as Kafka answers them on the wire (epochs, revocation before
reassignment, leave, session expiry, the classic/consumer conflict, ACLs), ListGroups'
type filter, and a real confluent-kafka consumer group with group.protocol=consumer on a
secured broker (SASL and ACLs)."""

from __future__ import annotations

import logging
import struct
import time
import uuid
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import confluent_kafka.admin
import pytest
from kafka.protocol.admin import ListGroupsRequest, ListGroupsResponse
from kafka.protocol.api_header import RequestHeader
from kafka.protocol.consumer import JoinGroupRequest, JoinGroupResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.broker.broker import Broker
from twinlog.engine.groups.group_membership import TOPICS_MAX_AGE_S
from twinlog.rpc.client import Admin, Producer
from twinlog.rpc.kafka.error_codes import (
    FENCED_MEMBER_EPOCH,
    GROUP_ID_NOT_FOUND,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_REQUEST,
    NONE,
    STALE_MEMBER_EPOCH,
    UNKNOWN_MEMBER_ID,
    UNSUPPORTED_VERSION,
)
from twinlog.rpc.kafka.listener import KafkaListener
from twinlog.rpc.kafka.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from twinlog.rpc.kafka.settings import KafkaListenerSettings
from twinlog.rpc.policy.audit import AUDIT_LOGGER
from twinlog.rpc.policy.auth import Acl, Guard, TokenTable
from twinlog.tests.rpc.kafka.conftest import RawConnection

TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
GROUP_AUTHORIZATION_FAILED = 30
UNRELEASED_INSTANCE_ID = 111
INVALID_REGULAR_EXPRESSION = 128
SESSION_TIMEOUT_MS = 1_000  # the coordinator's floor: expiry within a test's patience
Heartbeat = ConsumerGroupHeartbeatRequest
Answer = ConsumerGroupHeartbeatResponse


# --- the codec, against bytes laid out by hand from Kafka's schema -----------------------


def test_heartbeat_request_v1_encodes_as_the_schema_lays_it_out() -> None:
    request = Heartbeat(
        version=1,
        group_id="g",
        member_id="m",
        member_epoch=5,
        instance_id=None,
        rack_id=None,
        rebalance_timeout_ms=-1,
        subscribed_topic_names=None,
        subscribed_topic_regex="",
        server_assignor="uniform",
        topic_partitions=[Heartbeat.TopicPartitions(topic_id=TOPIC_ID, partitions=[0, 2])],
    )
    expected = (
        b"\x02g"  # GroupId: compact string (length + 1)
        + b"\x02m"  # MemberId
        + struct.pack(">i", 5)  # MemberEpoch
        + b"\x00\x00"  # InstanceId, RackId: null
        + struct.pack(">i", -1)  # RebalanceTimeoutMs
        + b"\x00"  # SubscribedTopicNames: null compact array
        + b"\x01"  # SubscribedTopicRegex (v1+): ""
        + b"\x08uniform"  # ServerAssignor
        + b"\x02"  # TopicPartitions: one
        + TOPIC_ID.bytes
        + b"\x03"
        + struct.pack(">ii", 0, 2)
        + b"\x00"  # the topic's tagged fields
        + b"\x00"  # the request's tagged fields
    )
    assert bytes(request.encode(version=1)) == expected
    decoded = Heartbeat.decode(expected, version=1)
    assert decoded.topic_partitions[0].topic_id == TOPIC_ID
    assert decoded.subscribed_topic_names is None and decoded.member_epoch == 5
    # v0 has no regex field
    v0 = bytes(
        Heartbeat(
            version=0, group_id="g", member_id="", member_epoch=0, rebalance_timeout_ms=300_000
        ).encode(version=0)
    )
    assert v0 == b"\x02g\x01" + struct.pack(">i", 0) + b"\x00\x00" + struct.pack(">i", 300_000) + (
        b"\x00" * 4
    )


def test_heartbeat_response_encodes_its_nullable_assignment_as_kafka() -> None:
    assignment = Answer.Assignment(
        topic_partitions=[Answer.Assignment.TopicPartitions(topic_id=TOPIC_ID, partitions=[1])]
    )
    fields: dict[str, Any] = dict(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        member_id="m",
        member_epoch=3,
        heartbeat_interval_ms=5_000,
    )
    head = struct.pack(">ih", 0, 0) + b"\x00" + b"\x02m" + struct.pack(">ii", 3, 5_000)
    given = Answer(version=0, assignment=assignment, **fields)
    assert bytes(given.encode(version=0)) == (
        head + b"\x01" + b"\x02" + TOPIC_ID.bytes + b"\x02" + struct.pack(">i", 1) + b"\x00\x00\x00"
    )
    assert bytes(Answer(version=0, assignment=None, **fields).encode(version=0)) == (
        head + b"\xff\x00"  # a null struct: int8 -1
    )


def test_consumer_group_describe_request_encodes_as_the_schema_lays_it_out() -> None:
    request = ConsumerGroupDescribeRequest(
        version=0, group_ids=["a", "bc"], include_authorized_operations=True
    )
    assert bytes(request.encode(version=0)) == b"\x03\x02a\x03bc\x01\x00"


# --- the coordinator's rules, on the wire -----------------------------------------------


def seen_topic(kafka_server: Any, partitions: int) -> str:
    """A new topic, once the coordinator sees it: it reads the topics at most every
    TOPICS_MAX_AGE_S, and a join before that is assigned nothing yet (a real consumer
    heartbeats on and gets it; these tests look at the first answers)."""
    topic: str = kafka_server.topic(partitions=partitions)
    time.sleep(TOPICS_MAX_AGE_S)
    return topic


def _heartbeat(raw: RawConnection, version: int = 1, **fields: Any) -> Any:
    defaults: dict[str, Any] = dict(
        member_id="",
        member_epoch=0,
        instance_id=None,
        rack_id=None,
        rebalance_timeout_ms=-1,
        subscribed_topic_names=None,
        server_assignor=None,
        topic_partitions=None,
    )
    if version >= 1:
        defaults["subscribed_topic_regex"] = None
    defaults.update(fields)
    return raw.call(Heartbeat(**defaults), Answer, version)


def _join(raw: RawConnection, group: str, topics: list[str], member_id: str) -> Any:
    return _heartbeat(
        raw,
        group_id=group,
        member_id=member_id,
        member_epoch=0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=topics,
        topic_partitions=[],
    )


def _assigned(answer: Any) -> list[tuple[uuid.UUID, list[int]]]:
    if answer.assignment is None:
        return []
    return [(t.topic_id, sorted(t.partitions)) for t in answer.assignment.topic_partitions]


def _owned(topic_id: uuid.UUID, partitions: list[int]) -> list[Any]:
    return [Heartbeat.TopicPartitions(topic_id=topic_id, partitions=partitions)]


def test_apiversions_lists_the_new_keys(raw: RawConnection) -> None:
    from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

    answer = raw.call(ApiVersionsRequest(), ApiVersionsResponse, 3)
    listed = {e.api_key: (e.min_version, e.max_version) for e in answer.api_keys}
    assert listed[68] == (0, 1) and listed[69] == (0, 0)


def test_a_partition_moves_only_after_its_owner_gave_it_up(
    kafka_server: Any, raw: RawConnection
) -> None:
    topic = seen_topic(kafka_server, partitions=2)
    group = f"{topic}-g"
    first = _join(raw, group, [topic], "member-a")
    assert first.error_code == NONE and first.member_id == "member-a"
    (topic_id, partitions) = _assigned(first)[0]
    assert partitions == [0, 1] and first.member_epoch >= 1
    # the assignment's topic id is the one Metadata answers for it, by name and by id
    by_id = raw.call(
        MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=None, topic_id=topic_id)]
        ),
        MetadataResponse,
        12,
    )
    assert by_id.topics[0].error_code == NONE and by_id.topics[0].name == topic
    second = _join(raw, group, [topic], "member-b")
    assert second.error_code == NONE and _assigned(second) == []  # A still holds both
    # A is told to give one up (same epoch while it revokes)...
    a_epoch = first.member_epoch
    revoke = _heartbeat(raw, group_id=group, member_id="member-a", member_epoch=a_epoch,
                        topic_partitions=_owned(topic_id, [0, 1]))  # fmt: skip
    assert revoke.error_code == NONE and revoke.member_epoch == a_epoch
    kept = _assigned(revoke)[0][1]
    assert len(kept) == 1
    # ...B gets nothing while A's heartbeats still hold it
    waiting = _heartbeat(raw, group_id=group, member_id="member-b",
                         member_epoch=second.member_epoch, topic_partitions=[])  # fmt: skip
    assert _assigned(waiting) == []
    released = _heartbeat(raw, group_id=group, member_id="member-a", member_epoch=a_epoch,
                          topic_partitions=_owned(topic_id, kept))  # fmt: skip
    assert released.error_code == NONE and released.member_epoch > a_epoch
    given = _heartbeat(raw, group_id=group, member_id="member-b",
                       member_epoch=waiting.member_epoch, topic_partitions=[])  # fmt: skip
    assert _assigned(given) == [(topic_id, sorted({0, 1} - set(kept)))]
    # a stale or future epoch is fenced; an unknown member is told so; leaving is -1
    fenced = _heartbeat(raw, group_id=group, member_id="member-b", member_epoch=999,
                        topic_partitions=[])  # fmt: skip
    assert fenced.error_code == FENCED_MEMBER_EPOCH and fenced.error_message
    unknown = _heartbeat(raw, group_id=group, member_id="member-b", member_epoch=1)
    assert unknown.error_code == UNKNOWN_MEMBER_ID
    left = _heartbeat(raw, group_id=group, member_id="member-a", member_epoch=-1)
    assert left.error_code == NONE and left.member_epoch == -1


def test_v0_join_gets_a_member_id_from_the_coordinator(
    kafka_server: Any, raw: RawConnection
) -> None:
    topic = kafka_server.topic(partitions=1)
    answer = _heartbeat(
        raw,
        version=0,
        group_id=f"{topic}-g",
        member_epoch=0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=[topic],
        topic_partitions=[],
    )
    assert answer.error_code == NONE and uuid.UUID(answer.member_id)
    _heartbeat(raw, version=0, group_id=f"{topic}-g", member_id=answer.member_id, member_epoch=-1)


def test_kafkas_invalid_requests_and_a_bad_regex_are_refused_with_a_reason(
    kafka_server: Any, raw: RawConnection
) -> None:
    topic = kafka_server.topic(partitions=1)
    no_id = _heartbeat(raw, group_id="g", member_id="", member_epoch=0,
                       rebalance_timeout_ms=1, subscribed_topic_names=[topic],
                       topic_partitions=[])  # fmt: skip
    assert no_id.error_code == INVALID_REQUEST and "MemberId" in no_id.error_message
    owned_at_join = _heartbeat(raw, group_id="g", member_id="x", member_epoch=0,
                               rebalance_timeout_ms=1, subscribed_topic_names=[topic],
                               topic_partitions=_owned(TOPIC_ID, [0]))  # fmt: skip
    assert owned_at_join.error_code == INVALID_REQUEST
    regex = _heartbeat(raw, group_id="g", member_id="x", member_epoch=0,
                       rebalance_timeout_ms=1, subscribed_topic_names=[],
                       subscribed_topic_regex="(topic-.*", topic_partitions=[])  # fmt: skip
    assert regex.error_code == INVALID_REGULAR_EXPRESSION
    assert "missing )" in regex.error_message


def test_a_classic_group_and_a_consumer_group_refuse_each_other(
    kafka_server: Any, raw: RawConnection
) -> None:
    topic = kafka_server.topic(partitions=1)
    consumer_group = f"{topic}-new"
    assert _join(raw, consumer_group, [topic], "new-1").error_code == NONE
    classic = _classic_join(raw, consumer_group, topic, "")
    assert classic.error_code == INCONSISTENT_GROUP_PROTOCOL
    described = raw.call(
        ConsumerGroupDescribeRequest(
            group_ids=[consumer_group], include_authorized_operations=False
        ),
        ConsumerGroupDescribeResponse,
        0,
    )
    group = described.groups[0]
    assert group.error_code == NONE and group.group_state in ("Stable", "Reconciling")
    assert group.authorized_operations == -(2**31)  # not asked: not computed
    asked = raw.call(
        ConsumerGroupDescribeRequest(
            group_ids=[consumer_group], include_authorized_operations=True
        ),
        ConsumerGroupDescribeResponse,
        0,
    )
    # READ, DELETE and DESCRIBE (bits 3, 6, 8): no ACLs here
    assert asked.groups[0].authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)
    assert [m.member_id for m in group.members] == ["new-1"]
    assert group.members[0].subscribed_topic_names == [topic]
    listed = raw.call(
        ListGroupsRequest(states_filter=[], types_filter=["consumer"]), ListGroupsResponse, 5
    )
    assert consumer_group in {g.group_id for g in listed.groups}
    assert {g.group_type for g in listed.groups} == {"consumer"}
    classic_only = raw.call(
        ListGroupsRequest(states_filter=[], types_filter=["classic"]), ListGroupsResponse, 5
    )
    assert consumer_group not in {g.group_id for g in classic_only.groups}
    _heartbeat(raw, group_id=consumer_group, member_id="new-1", member_epoch=-1)

    # and the other way: a classic group refuses a KIP-848 member, and is not described
    classic_group = f"{topic}-old"
    joined = _classic_join(raw, classic_group, topic, "old-1")
    assert joined.error_code == NONE
    refused = _join(raw, classic_group, [topic], "new-2")
    assert refused.error_code == GROUP_ID_NOT_FOUND
    assert "classic" in refused.error_message
    not_consumer = raw.call(
        ConsumerGroupDescribeRequest(
            group_ids=[classic_group], include_authorized_operations=False
        ),
        ConsumerGroupDescribeResponse,
        0,
    )
    assert not_consumer.groups[0].error_code == GROUP_ID_NOT_FOUND


def _classic_join(raw: RawConnection, group: str, topic: str, member_id: str) -> Any:
    protocol = JoinGroupRequest.JoinGroupRequestProtocol(
        name="range", metadata=_subscription(topic)
    )
    request = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[protocol],
        reason=None,
    )
    return raw.call(request, JoinGroupResponse, 9)


def _subscription(topic: str) -> bytes:
    from kafka.protocol.consumer import ConsumerProtocolSubscription

    subscription = ConsumerProtocolSubscription(version=0, topics=[topic], user_data=None)
    return bytes(subscription.encode(version=0))


def test_a_silent_member_expires_after_the_session_timeout(tmp_path: Any) -> None:
    broker = Broker.open(tmp_path / "data")
    Admin(broker).create_topic("expiring", partitions=1)
    time.sleep(TOPICS_MAX_AGE_S)  # the coordinator sees it at its next read of the topics
    settings = KafkaListenerSettings(group_consumer_session_timeout_ms=SESSION_TIMEOUT_MS)
    listener = KafkaListener(broker, "127.0.0.1", 0, settings)
    listener.start()
    raw = RawConnection(listener.port)
    try:
        joined = _join(raw, "expiring-g", ["expiring"], "quiet")
        assert joined.error_code == NONE and _assigned(joined)
        deadline = time.monotonic() + 10
        answer = joined
        while time.monotonic() < deadline:
            time.sleep(0.5)
            answer = _heartbeat(raw, group_id="expiring-g", member_id="quiet",
                                member_epoch=joined.member_epoch)  # fmt: skip
            if answer.error_code != NONE:
                break
            time.sleep(SESSION_TIMEOUT_MS / 1000 + 0.5)  # now silent past its session
        assert answer.error_code == UNKNOWN_MEMBER_ID
    finally:
        raw.close()
        listener.stop(grace_ms=1_000)
        broker.close()


def test_a_group_reader_is_needed_and_a_refusal_is_audited(
    guarded_server: Any, guarded_raw: RawConnection, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    Admin(guarded_server.broker).create_topic("readable-848", partitions=1)
    answer = _join(guarded_raw, "no-grant-group", ["readable-848"], "m")
    assert answer.error_code == GROUP_AUTHORIZATION_FAILED
    lines = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    assert any("acl.denied" in line and "door=kafka" in line and "no-grant-group" in line
               for line in lines)  # fmt: skip


# --- what is not served: the documented answer and a log line, never silence ------------


def test_an_api_not_served_is_answered_and_logged(
    raw: RawConnection, caplog: pytest.LogCaptureFixture
) -> None:
    from kafka.protocol.admin import DescribeQuorumRequest, DescribeQuorumResponse

    caplog.set_level(logging.INFO, logger="twinlog.kafka")
    answer = raw.call(DescribeQuorumRequest(topics=[]), DescribeQuorumResponse, 0)
    assert answer.error_code == UNSUPPORTED_VERSION
    assert any("DescribeQuorumRequest v0" in r.getMessage() and "not served" in r.getMessage()
               for r in caplog.records)  # fmt: skip


def test_an_api_key_the_codec_does_not_know_closes_with_a_log_line(
    raw: RawConnection, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="twinlog.kafka")
    header = RequestHeader(
        request_api_key=999, request_api_version=0, correlation_id=7, client_id="future"
    )
    body = bytes(header.encode(flexible=False)) + b"\x00"
    raw.send_bytes(struct.pack(">i", len(body)) + body)
    assert raw.read_frame() == b""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any(
        "API key 999" in r.getMessage() for r in caplog.records
    ):
        time.sleep(0.05)
    assert any(
        "API key 999" in r.getMessage() and "not served" in r.getMessage() for r in caplog.records
    )


# --- a real client: confluent-kafka with group.protocol=consumer -------------------------

TOKEN = "consumer-848-token"
ACL = """
reader  read   orders848*
reader  write  orders848*
reader  read   group:team848*
"""


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Broker, KafkaListener]]:
    directory = tmp_path_factory.mktemp("kip848")
    (directory / "acl.txt").write_text(ACL)
    guard = Guard(TokenTable([(TOKEN, "reader")]), Acl.load(directory / "acl.txt"), False)
    broker = Broker.open(directory / "data")
    listener = KafkaListener(broker, "127.0.0.1", 0, guard=guard)
    listener.start()
    try:
        yield broker, listener
    finally:
        listener.stop(grace_ms=2_000)
        broker.close()


def _consumer(listener: KafkaListener, group: str, name: str) -> confluent_kafka.Consumer:
    return confluent_kafka.Consumer(
        {
            "bootstrap.servers": f"127.0.0.1:{listener.port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "reader",
            "sasl.password": TOKEN,
            "group.id": group,
            "group.protocol": "consumer",
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "socket.timeout.ms": 10_000,
        }
    )


def _poll_into(
    consumer: confluent_kafka.Consumer, seen: list[tuple[int, int]], errors: list[Any]
) -> None:
    message = consumer.poll(0.1)
    if message is None:
        return
    if message.error() is not None:
        errors.append(message.error())
        return
    seen.append((message.partition(), int(message.value())))
    consumer.commit(message, asynchronous=False)


def _admin_sees_the_group(listener: KafkaListener, group: str, assignments: list[Any]) -> None:
    """confluent-kafka's AdminClient describes it with ConsumerGroupDescribe and lists it
    as a consumer group (ListGroups v5's type filter)."""
    admin = confluent_kafka.admin.AdminClient(
        {
            "bootstrap.servers": f"127.0.0.1:{listener.port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "reader",
            "sasl.password": TOKEN,
        }
    )
    description = admin.describe_consumer_groups([group])[group].result(10)
    assert description.type == confluent_kafka.ConsumerGroupType.CONSUMER
    assert description.partition_assignor == "uniform"
    described = sorted(
        tuple(sorted(tp.partition for tp in member.assignment.topic_partitions))
        for member in description.members
    )
    assert described == sorted(tuple(sorted(given)) for given in assignments)
    consumer_type = {confluent_kafka.ConsumerGroupType.CONSUMER}
    listed = admin.list_consumer_groups(types=consumer_type).result(10)
    assert group in {g.group_id for g in listed.valid}


def test_confluent_consumers_share_a_topic_commit_and_take_over(secured: Any) -> None:
    broker, listener = secured
    topic, group = "orders848", "team848"
    Admin(broker).create_topic(topic, partitions=4)
    with Producer(broker) as producer:
        for number in range(40):
            producer.send(topic, str(number).encode(), partition=number % 4)
    consumers = [_consumer(listener, group, f"c{n}") for n in range(2)]
    seen: list[tuple[int, int]] = []
    errors: list[Any] = []
    try:
        for consumer in consumers:
            consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (
            len(seen) >= 40 and all(len(c.assignment()) == 2 for c in consumers)
        ):
            for consumer in consumers:
                _poll_into(consumer, seen, errors)
        assert errors == []
        assignments = [{tp.partition for tp in c.assignment()} for c in consumers]
        assert assignments[0] and assignments[1] and not assignments[0] & assignments[1]
        assert assignments[0] | assignments[1] == {0, 1, 2, 3}
        assert sorted(value for _, value in seen) == list(range(40))  # each once
        _admin_sees_the_group(listener, group, assignments)

        # one leaves: the other gets its partitions, from the offsets committed
        consumers[0].close()
        survivor = consumers[1]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(survivor.assignment()) < 4:
            _poll_into(survivor, seen, errors)
        assert {tp.partition for tp in survivor.assignment()} == {0, 1, 2, 3}
        with Producer(broker) as producer:
            for number in range(40, 60):
                producer.send(topic, str(number).encode(), partition=number % 4)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(seen) < 60:
            _poll_into(survivor, seen, errors)
        for _ in range(10):  # anything read twice would come now
            _poll_into(survivor, seen, errors)
        assert errors == []
        assert sorted(value for _, value in seen) == list(range(60))
        committed = survivor.committed(
            [confluent_kafka.TopicPartition(topic, p) for p in range(4)], timeout=10
        )
        assert sum(tp.offset for tp in committed) == 60
    finally:
        for consumer in consumers:
            try:
                consumer.close()
            except RuntimeError:  # closed already
                pass


def test_the_session_timeout_is_the_server_config_key_kafka_names() -> None:
    from twinlog.rpc.server.config import server_config_from, split_config

    server_values, broker_values = split_config({"group.consumer.session.timeout.ms": "6000"})
    assert broker_values == {}
    assert server_config_from(server_values).group_consumer_session_timeout_ms == 6_000
    with pytest.raises(InvalidConfigError, match=r"1000\.\.300000"):
        server_config_from({"group_consumer_session_timeout_ms": "10"})


def test_offset_fetch_v9_checks_a_kip848_member_and_its_epoch(
    kafka_server: Any, raw: RawConnection
) -> None:
    from kafka.protocol.consumer import OffsetFetchRequest, OffsetFetchResponse

    topic = kafka_server.topic(partitions=1)
    group = f"{topic}-fetching"
    joined = _join(raw, group, [topic], "fetcher")

    def fetch(member_id: str | None, member_epoch: int) -> int:
        Group = OffsetFetchRequest.OffsetFetchRequestGroup
        request = OffsetFetchRequest(
            groups=[
                Group(group_id=group, member_id=member_id, member_epoch=member_epoch, topics=None)
            ],
            require_stable=False,
        )
        answer: Any = raw.call(request, OffsetFetchResponse, 9)
        return int(answer.groups[0].error_code)

    assert fetch("fetcher", joined.member_epoch) == NONE
    assert fetch("fetcher", joined.member_epoch - 1) == STALE_MEMBER_EPOCH
    assert fetch("stranger", joined.member_epoch) == UNKNOWN_MEMBER_ID
    assert fetch(None, -1) == NONE  # a tool's fetch names no member
    _heartbeat(raw, group_id=group, member_id="fetcher", member_epoch=-1)


def test_a_regex_subscription_follows_the_topics_it_matches(secured: Any) -> None:
    """confluent-kafka subscribes by regular expression (sent as KIP-848's
    SubscribedTopicRegex): it reads the matching topics it may read, not the others, and a
    matching topic created later is assigned to it at a later heartbeat."""
    broker, listener = secured
    admin = Admin(broker)
    names = ("orders848-re-a", "orders848-re-b", "orders848-other", "secret848-re-a")
    for name in names:
        admin.create_topic(name, partitions=1)
    with Producer(broker) as producer:
        for name in names:
            producer.send(name, name.encode(), partition=0)
    consumer = _consumer(listener, "team848-regex", "regex")
    topics_read: list[str] = []
    errors: list[Any] = []

    def poll_until(done: Any) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not done():
            message = consumer.poll(0.1)
            if message is None:
                continue
            if message.error() is not None:
                errors.append(message.error())
            else:
                topics_read.append(message.topic())

    try:
        consumer.subscribe(["^.*848-re-.*"])  # secret848-re-a matches, but it may not read it
        poll_until(lambda: len(topics_read) >= 2)
        admin.create_topic("orders848-re-c", partitions=1)
        with Producer(broker) as producer:
            producer.send("orders848-re-c", b"late", partition=0)
        poll_until(lambda: "orders848-re-c" in topics_read)
        for _ in range(10):  # a record of a topic it does not match would come now
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                topics_read.append(message.topic())
    finally:
        consumer.close()
    assert errors == []
    assert sorted(topics_read) == ["orders848-re-a", "orders848-re-b", "orders848-re-c"]


def test_a_static_member_keeps_its_partitions_through_a_restart(
    kafka_server: Any, raw: RawConnection
) -> None:
    topic = seen_topic(kafka_server, partitions=2)
    group = f"{topic}-static"

    def join_as(member_id: str) -> Any:
        return _heartbeat(raw, group_id=group, member_id=member_id, member_epoch=0,
                          instance_id="host-1", rebalance_timeout_ms=30_000,
                          subscribed_topic_names=[topic], topic_partitions=[])  # fmt: skip

    first = join_as("before-restart")
    assert first.error_code == NONE and len(_assigned(first)[0][1]) == 2
    left = _heartbeat(raw, group_id=group, member_id="before-restart", member_epoch=-2,
                      instance_id="host-1")  # fmt: skip
    assert left.error_code == NONE and left.member_epoch == -2
    again = join_as("after-restart")  # its partitions waited for it: same epoch, no rebalance
    assert again.error_code == NONE and again.member_epoch == first.member_epoch
    assert _assigned(again) == _assigned(first)
    # Another consumer with the instance id of a running one is refused, as Kafka's KIP-848
    # coordinator refuses it; the running one is untouched.
    newcomer = join_as("newcomer")
    assert newcomer.error_code == UNRELEASED_INSTANCE_ID
    assert "host-1" in newcomer.error_message
    still = _heartbeat(raw, group_id=group, member_id="after-restart",
                       member_epoch=again.member_epoch)  # fmt: skip
    assert still.error_code == NONE
    _heartbeat(raw, group_id=group, member_id="after-restart", member_epoch=-1)
    assert join_as("newcomer").error_code == NONE  # released by its leave


def test_a_regex_is_resolved_at_every_heartbeat_beside_the_names(
    kafka_server: Any, raw: RawConnection
) -> None:
    prefix = f"re-{uuid.uuid4().hex[:8]}"
    Admin(kafka_server.broker).create_topic(f"{prefix}-1", partitions=1)
    named = kafka_server.topic(partitions=1)
    group = f"{prefix}-g"

    def subscription() -> tuple[list[str], str | None]:
        described = raw.call(
            ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
            ConsumerGroupDescribeResponse,
            0,
        )
        member = described.groups[0].members[0]
        return sorted(member.subscribed_topic_names), member.subscribed_topic_regex

    joined = _heartbeat(raw, group_id=group, member_id="m", member_epoch=0,
                        rebalance_timeout_ms=30_000, subscribed_topic_names=[named],
                        subscribed_topic_regex=f"{prefix}-.*", topic_partitions=[])  # fmt: skip
    assert joined.error_code == NONE
    assert subscription() == (sorted([f"{prefix}-1", named]), f"{prefix}-.*")
    Admin(kafka_server.broker).create_topic(f"{prefix}-2", partitions=1)
    kept = _heartbeat(raw, group_id=group, member_id="m", member_epoch=joined.member_epoch)
    assert kept.error_code == NONE  # nothing said: the member's expression, resolved again
    assert subscription() == (sorted([f"{prefix}-1", f"{prefix}-2", named]), f"{prefix}-.*")
    cleared = _heartbeat(raw, group_id=group, member_id="m", member_epoch=kept.member_epoch,
                         subscribed_topic_regex="")  # fmt: skip
    assert cleared.error_code == NONE
    assert subscription() == ([named], None)
    everything = _heartbeat(raw, group_id=group, member_id="m", member_epoch=-1)
    assert everything.error_code == NONE
    rejoined = _heartbeat(raw, group_id=group, member_id="all", member_epoch=0,
                          rebalance_timeout_ms=30_000, subscribed_topic_names=[],
                          subscribed_topic_regex=".*", topic_partitions=[])  # fmt: skip
    assert rejoined.error_code == NONE
    described = raw.call(
        ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
        ConsumerGroupDescribeResponse,
        0,
    )
    names = described.groups[0].members[0].subscribed_topic_names
    assert named in names and not [n for n in names if n.startswith("__")]  # never internal
    _heartbeat(raw, group_id=group, member_id="all", member_epoch=-1)


def test_a_topic_it_may_not_read_is_refused_and_audited(
    secured: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    broker, listener = secured
    Admin(broker).create_topic("secret848-denied", partitions=1)
    consumer = _consumer(listener, "team848-denied", "denied")
    errors: list[Any] = []
    try:
        consumer.subscribe(["secret848-denied"])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not errors:
            message = consumer.poll(0.2)
            if message is not None and message.error() is not None:
                errors.append(message.error())
    finally:
        consumer.close()
    assert errors, "the consumer was told nothing"
    assert errors[0].code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "secret848-denied" in errors[0].str()
    lines = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    assert any(
        "acl.denied" in line and "door=kafka" in line and "secret848-denied" in line
        for line in lines
    )
