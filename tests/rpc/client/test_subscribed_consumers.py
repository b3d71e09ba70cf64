"""Subscribed consumers against a real ``twinlog serve`` process: the group shares the
partitions out, moves them as members come and go (listener called, offsets kept), keeps a
static member's partitions over its restart, follows a pattern, and the consumer's other
Kafka calls (auto-commit, pause, offsets lookups, iteration)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from server_process import ServerProcess

from twinlog.engine.base.errors import InvalidConfigError, NonEmptyGroupError
from twinlog.engine.base.types import TopicPartition
from twinlog.rpc.client import Admin, Consumer, ConsumerRebalanceListener, Producer
from twinlog.rpc.client.consumer_offsets_lookup import OffsetAndTimestamp

WAIT_S = 20.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("groups")
    with ServerProcess(
        directory / "data", "--config", "group_heartbeat_interval_ms=300"
    ) as running:
        yield running


_topics = iter(range(1_000))


def new_topic(server: ServerProcess, partitions: int, records: int = 0) -> str:
    name = f"t{next(_topics)}"
    with Admin(server.address) as admin:
        admin.create_topic(name, partitions=partitions)
    if records:
        with Producer(server.address) as producer:
            for index in range(records):
                producer.send(name, value=b"%d" % index, partition=index % partitions)
            producer.flush()
    return name


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, list[TopicPartition]]] = []

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.events.append(("assigned", assigned))

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.events.append(("revoked", revoked))

    def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        self.events.append(("lost", lost))


def poll_until(
    consumers: list[Consumer], done: Callable[[], bool], timeout_s: float = WAIT_S
) -> dict[int, list[bytes | None]]:
    """Poll every consumer in turn until ``done()``; the values each one got."""
    got: dict[int, list[bytes | None]] = {i: [] for i in range(len(consumers))}
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "the group did not settle in time"
        for index, consumer in enumerate(consumers):
            got[index].extend(r.value for r in consumer.poll(timeout_ms=50))
    return got


def consumer(server: ServerProcess, group: str, **settings: object) -> Consumer:
    settings.setdefault("auto_offset_reset", "earliest")
    return Consumer(server.address, group_id=group, **settings)  # type: ignore[arg-type]


def test_two_members_share_a_topic_and_read_each_record_once(server: ServerProcess) -> None:
    topic = new_topic(server, partitions=4, records=40)
    first, second = consumer(server, "share"), consumer(server, "share")
    listeners = [Recorder(), Recorder()]
    try:
        first.subscribe([topic], listener=listeners[0])
        second.subscribe([topic], listener=listeners[1])
        seen: list[bytes | None] = []
        deadline = time.monotonic() + WAIT_S
        while len(seen) < 40 or len(first.assignment()) != 2 or len(second.assignment()) != 2:
            assert time.monotonic() < deadline, (len(seen), first.assignment())
            for member in (first, second):
                seen += [r.value for r in member.poll(timeout_ms=50)]
        for member in (first, second):  # nothing more comes: no record is read twice
            seen += [r.value for r in member.poll(timeout_ms=300)]
        assert sorted(seen, key=lambda v: int(v or b"0")) == [b"%d" % i for i in range(40)]
        assert set(first.assignment()).isdisjoint(second.assignment())
        assert any(kind == "assigned" for kind, _ in listeners[1].events)
    finally:
        first.close()
        second.close()


def test_a_member_that_leaves_hands_its_partitions_over_from_its_commits(
    server: ServerProcess,
) -> None:
    topic = new_topic(server, partitions=2, records=10)
    leaving, staying = consumer(server, "handover"), consumer(server, "handover")
    recorder = Recorder()
    leaving.subscribe([topic], listener=recorder)
    staying.subscribe([topic])
    got = poll_until(
        [leaving, staying],
        lambda: len(leaving.assignment()) == 1 and len(staying.assignment()) == 1,
    )
    seen = got[0] + got[1]
    leaving.close()  # auto-commit of what it read, on-revoked, leave
    assert recorder.events[-1][0] == "revoked"
    deadline = time.monotonic() + WAIT_S
    while len(seen) < 10 or len(staying.assignment()) != 2:
        assert time.monotonic() < deadline, (seen, staying.assignment())
        seen += [r.value for r in staying.poll(timeout_ms=50)]
    seen += [r.value for r in staying.poll(timeout_ms=300)]  # nothing is read twice
    staying.close()
    assert sorted(seen, key=lambda v: int(v or b"0")) == [b"%d" % i for i in range(10)]


def test_a_static_member_restarts_without_moving_anyone(server: ServerProcess) -> None:
    topic = new_topic(server, partitions=4)
    steady = consumer(server, "static", group_instance_id="host-2")
    restarting = consumer(server, "static", group_instance_id="host-1")
    steady.subscribe([topic])
    restarting.subscribe([topic])
    poll_until(
        [steady, restarting],
        lambda: len(steady.assignment()) == 2 and len(restarting.assignment()) == 2,
    )
    before = set(restarting.assignment())
    steady_before = list(steady.assignment())
    with Admin(server.address) as admin:
        epoch_before = admin.describe_group("static").group_epoch
    restarting.close()  # leaves as a static member: its partitions wait for it
    again = consumer(server, "static", group_instance_id="host-1")
    try:
        again.subscribe([topic])
        poll_until([steady, again], lambda: len(again.assignment()) == 2)
        assert set(again.assignment()) == before
        assert steady.assignment() == steady_before
        with Admin(server.address) as admin:
            assert admin.describe_group("static").group_epoch == epoch_before
    finally:
        steady.close()
        again.close()


def test_a_pattern_subscription_picks_up_a_topic_created_later(server: ServerProcess) -> None:
    prefix = f"pat{next(_topics)}-"
    with Admin(server.address) as admin:
        admin.create_topic(prefix + "a", partitions=1)
    reader = consumer(server, "patterns", metadata_max_age_ms=200)
    try:
        reader.subscribe(pattern=prefix + ".*")
        poll_until([reader], lambda: reader.assignment() == [TopicPartition(prefix + "a", 0)])
        with Admin(server.address) as admin:
            admin.create_topic(prefix + "b", partitions=1)
            admin.create_topic("x" + prefix + "c", partitions=1)  # matches only in part
        poll_until([reader], lambda: len(reader.assignment()) == 2)
        assert reader.subscription() == {prefix + "a", prefix + "b"}
    finally:
        reader.close()


def test_auto_commit_commits_what_was_returned_and_close_commits_the_rest(
    server: ServerProcess,
) -> None:
    topic = new_topic(server, partitions=1, records=5)
    tp = TopicPartition(topic, 0)
    reader = consumer(server, "auto", auto_commit_interval_ms=100, max_poll_records=2)
    reader.subscribe([topic])
    got: list[bytes | None] = []
    deadline = time.monotonic() + WAIT_S
    while len(got) < 2:
        assert time.monotonic() < deadline
        got += [r.value for r in reader.poll(timeout_ms=100)]
    time.sleep(0.2)
    got += [r.value for r in reader.poll(timeout_ms=0)]  # due: commits what earlier ones returned
    with Admin(server.address) as admin:
        while dict(admin.describe_group("auto").committed).get(tp) != 2:
            assert time.monotonic() < deadline, admin.describe_group("auto")
            time.sleep(0.05)
    reader.close()  # commits the positions
    with Admin(server.address) as admin:
        assert dict(admin.describe_group("auto").committed) == {tp: len(got)}


def test_a_reset_is_refused_while_the_group_has_members(server: ServerProcess) -> None:
    topic = new_topic(server, partitions=1)
    member = consumer(server, "busy")
    member.subscribe([topic])
    poll_until([member], lambda: bool(member.assignment()))
    outsider = consumer(server, "busy", enable_auto_commit=False)
    outsider.assign([(topic, 0)])
    with pytest.raises(NonEmptyGroupError, match="active member"):
        outsider.commit({TopicPartition(topic, 0): 0})
    outsider.close()
    member.close()


def test_pause_offsets_lookups_and_iteration(server: ServerProcess) -> None:
    topic = new_topic(server, partitions=2, records=6)
    reader = consumer(server, "misc", enable_auto_commit=False, consumer_timeout_ms=1_000)
    reader.assign([(topic, 0), (topic, 1)])
    reader.pause([(topic, 1)])
    got = list(reader)  # stops after a second without records
    assert [r.partition for r in got] == [0, 0, 0]
    assert reader.paused() == {TopicPartition(topic, 1)}
    reader.resume([(topic, 1)])
    assert {r.partition for r in reader} == {1}
    partitions = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    assert reader.beginning_offsets(partitions) == dict.fromkeys(partitions, 0)
    assert reader.end_offsets(partitions) == dict.fromkeys(partitions, 3)
    found = reader.offsets_for_times({partitions[0]: 0, partitions[1]: 2**62})
    assert isinstance(found[partitions[0]], OffsetAndTimestamp)
    assert found[partitions[0]].offset == 0  # type: ignore[union-attr]
    assert found[partitions[1]] is None
    with pytest.raises(InvalidConfigError, match=r"assign\(\[\]\) first"):
        reader.subscribe([topic])
    reader.close()


def test_subscribe_refuses_bad_arguments(server: ServerProcess) -> None:
    with Consumer(server.address) as no_group:
        with pytest.raises(InvalidConfigError, match="needs a group"):
            no_group.subscribe(["x"])
    with consumer(server, "g") as reader:
        with pytest.raises(InvalidConfigError, match="regular expression"):
            reader.subscribe(pattern="(")
        with pytest.raises(InvalidConfigError, match="one of them"):
            reader.subscribe(["x"], pattern="x.*")
