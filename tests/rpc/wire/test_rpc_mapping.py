"""Server <-> client mapping over a real gRPC server around a small fake broker.

Fast checks of the rpc layer alone (no disk); tests/test_rpc_e2e.py repeats the
important paths against the real broker in a server subprocess.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from rpc_fakes import FakeBroker, fake_server

from twinlog.engine.base.errors import (
    AuthenticationError,
    AuthorizationError,
    BatchTooLargeError,
    CorruptBatchError,
    NotEnoughResourcesError,
    OffsetOutOfRangeError,
    ProducerFencedError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from twinlog.engine.base.types import ProduceResult, TopicPartition
from twinlog.engine.records.batch_builder import build_batch
from twinlog.rpc.client import Admin, Consumer, Producer
from twinlog.rpc.client.partitioner import partition_for_key
from twinlog.rpc.client.remote import RemoteBroker


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[FakeBroker, str]]:
    with fake_server() as pair:
        yield pair


def _read_all(target: object, topic: str, partitions: int, count: int) -> list:
    with Consumer(target, auto_offset_reset="earliest") as consumer:  # type: ignore[arg-type]
        consumer.assign([(topic, p) for p in range(partitions)])
        got: list = []
        deadline = time.monotonic() + 5
        while len(got) < count and time.monotonic() < deadline:
            got.extend(consumer.poll(timeout_ms=200))
        return got


def test_admin_round_trip_and_typed_errors(served: tuple[FakeBroker, str]) -> None:
    _, address = served
    with Admin(address) as admin:
        description = admin.create_topic("admin-topic", 3, {"retention.ms": "1000"})
        assert [p.partition for p in description.partitions] == [0, 1, 2]
        assert description.config == {"retention.ms": "1000"}
        assert "admin-topic" in admin.list_topics()
        with pytest.raises(TopicExistsError, match="exists"):
            admin.create_topic("admin-topic")
        admin.delete_topic("admin-topic")
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.describe_topic("admin-topic")


def test_keyed_records_round_trip_in_order(served: tuple[FakeBroker, str]) -> None:
    _, address = served
    Admin(address).create_topic("keyed", 4)
    with Producer(address, linger_ms=2, batch_bytes=512) as producer:
        futures = [
            producer.send(
                "keyed", f"v{i}".encode(), key=f"k{i % 7}".encode(), headers=[("h", b"1")]
            )
            for i in range(200)
        ]
        producer.flush()
        metadata = [future.result(timeout=5) for future in futures]
    for i, item in enumerate(metadata):
        assert item.partition == partition_for_key(f"k{i % 7}".encode(), 4)
    records = _read_all(address, "keyed", 4, 200)
    assert len(records) == 200
    for partition in range(4):
        values = [r.value for r in records if r.partition == partition]
        offsets = [r.offset for r in records if r.partition == partition]
        assert offsets == list(range(len(offsets)))
        sent = [f"v{i}".encode() for i in range(200) if metadata[i].partition == partition]
        assert values == sent
    assert records[0].headers == (("h", b"1"),)


def test_transaction_commits_and_aborts(served: tuple[FakeBroker, str]) -> None:
    _, address = served
    Admin(address).create_topic("txn", 2)
    with Producer(address, transactional_id="app") as producer:
        producer.init_transactions()
        with producer.transaction():
            producer.send("txn", b"committed-0", partition=0)
            producer.send("txn", b"committed-1", partition=1)
        with pytest.raises(RuntimeError), producer.transaction():
            producer.send("txn", b"aborted", partition=0)
            producer.flush()
            raise RuntimeError("the application failed")
    values = sorted(r.value for r in _read_all(address, "txn", 2, 2))
    assert values == [b"committed-0", b"committed-1"]


def test_fencing_over_the_wire(served: tuple[FakeBroker, str]) -> None:
    _, address = served
    Admin(address).create_topic("fence", 1)
    old = Producer(address, transactional_id="fenced-app")
    old.init_transactions()
    old.begin_transaction()
    new = Producer(address, transactional_id="fenced-app")
    new.init_transactions()
    future = old.send("fence", b"zombie", partition=0)
    with pytest.raises(ProducerFencedError):
        future.result(timeout=5)
    with pytest.raises(ProducerFencedError):
        old.commit_transaction()
    with pytest.raises(ProducerFencedError):
        old.send("fence", b"again")
    old.close()
    new.close()


def test_stream_item_error_fails_only_its_record(served: tuple[FakeBroker, str]) -> None:
    _, address = served
    admin = Admin(address)
    admin.create_topic("stream", 6)
    with Producer(address) as producer:
        producer.send("stream", b"w", partition=5).result(timeout=5)
        admin.delete_topic("stream")  # made again with one partition: the producer knows 6
        admin.create_topic("stream", 1)
        bad = producer.send("stream", b"x", partition=5)
        good = producer.send("stream", b"y", partition=0)
        producer.flush()
        with pytest.raises(UnknownTopicOrPartitionError):
            bad.result(timeout=5)
        assert good.result(timeout=5).offset == 0


def test_corrupt_batch_is_refused_with_its_class(served: tuple[FakeBroker, str]) -> None:
    _, address = served
    Admin(address).create_topic("corrupt", 1)
    batch = bytearray(build_batch([b"payload"]))
    batch[-1] ^= 0xFF
    with RemoteBroker(address) as remote, pytest.raises(CorruptBatchError):
        remote.produce("corrupt", 0, bytes(batch))


def test_offset_out_of_range_keeps_its_attributes(served: tuple[FakeBroker, str]) -> None:
    _, address = served
    Admin(address).create_topic("range", 1)
    with RemoteBroker(address) as remote:
        with pytest.raises(OffsetOutOfRangeError) as caught:
            remote.fetch("range", 0, 42)
        assert (caught.value.log_start_offset, caught.value.log_end_offset) == (0, 0)


def test_long_poll_wakes_up_on_produce(served: tuple[FakeBroker, str]) -> None:
    broker, address = served
    broker.create_topic("poll", 1)

    def produce_later() -> None:
        time.sleep(0.3)
        broker.produce("poll", 0, build_batch([b"late"]))

    with RemoteBroker(address) as remote:
        thread = threading.Thread(target=produce_later)
        started = time.monotonic()
        thread.start()
        result = remote.fetch("poll", 0, 0, max_wait_ms=5_000)
        elapsed = time.monotonic() - started
        thread.join()
    assert result.records, "the long poll returned without the record"
    assert 0.25 < elapsed < 2.0


def test_consumer_positions_seek_and_group_offsets(served: tuple[FakeBroker, str]) -> None:
    broker, address = served
    broker.create_topic("positions", 1)
    for i in range(5):
        broker.produce("positions", 0, build_batch([f"r{i}".encode()]))
    tp = TopicPartition("positions", 0)
    # enable_auto_commit=False: the positions here are only the ones committed by hand
    with Consumer(
        address, group_id="g1", auto_offset_reset="latest", enable_auto_commit=False
    ) as latest:
        latest.assign([tp])  # Kafka's default: no committed offset, so the log end
        assert latest.position(tp) == 5
    with Consumer(
        address, group_id="g1", auto_offset_reset="earliest", enable_auto_commit=False
    ) as consumer:
        consumer.assign([tp])
        assert consumer.position(tp) == 0
        assert [r.offset for r in consumer.poll(1000)] == [0, 1, 2, 3, 4]
        assert consumer.position(tp) == 5
        consumer.commit({tp: 3})
        assert consumer.committed([tp]) == {tp: 3}
        consumer.seek(tp, 1)
        assert [r.value for r in consumer.poll(1000)][:1] == [b"r1"]
        consumer.seek_to_end()
        assert consumer.position(tp) == 5
    with Consumer(address, group_id="g1") as again:
        again.assign([("positions", 0)])
        assert again.position(("positions", 0)) == 3  # starts at the group's offset


def test_embedded_target_same_api() -> None:
    broker = FakeBroker()
    Admin(broker).create_topic("embedded", 2)
    with Producer(broker, transactional_id="embedded-app") as producer:
        producer.init_transactions()
        with producer.transaction():
            producer.send("embedded", b"a", partition=0)
            producer.send("embedded", b"b", partition=1)
    assert sorted(r.value for r in _read_all(broker, "embedded", 2, 2)) == [b"a", b"b"]
    assert not broker.closed  # not the client's to close


class FlakyBroker(FakeBroker):
    """Refuses the first ``failures`` produces with a retriable error."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def produce(
        self,
        topic: str,
        partition: int,
        batch: bytes,
        attempt: str = "",
        transaction_id: int = -1,
        current_leader_epoch: int = -1,
    ) -> ProduceResult:
        if self.failures > 0:
            self.failures -= 1
            raise NotEnoughResourcesError("busy; retry later")
        return super().produce(topic, partition, batch, attempt, transaction_id)


def test_retriable_errors_are_retried_without_duplicates() -> None:
    broker = FlakyBroker(failures=3)
    with fake_server(broker) as (_, address):
        Admin(address).create_topic("flaky", 1)
        with Producer(address, linger_ms=0) as producer:
            futures = [producer.send("flaky", f"{i}".encode(), partition=0) for i in range(20)]
            producer.flush()
            assert all(f.result(timeout=10).offset >= 0 for f in futures)
        values = [r.value for r in _read_all(address, "flaky", 1, 20)]
    assert values == [f"{i}".encode() for i in range(20)]


def test_the_server_holds_requests_to_request_bytes_max_and_batches_to_the_broker() -> None:
    with fake_server(request_bytes_max=64 * 1024) as (broker, address):
        broker.create_topic("limits", 1)
        with RemoteBroker(address) as remote:
            # Within request_bytes_max a batch is the broker's to judge (its topic's limit):
            # the server keeps no batch limit of its own.
            remote.produce("limits", 0, build_batch([b"x" * 50_000], compression="none"))
            assert broker.produce_calls == 1
            # Just over request_bytes_max: the server names its config key, with metadata.
            with pytest.raises(
                BatchTooLargeError, match=r"request_bytes_max=65536 \(server config key"
            ):
                remote.produce("limits", 0, build_batch([b"x" * 100_000], compression="none"))
            # Over gRPC's own limit too: no metadata, but the same advice.
            with pytest.raises(BatchTooLargeError, match="server config key request_bytes_max"):
                remote.produce("limits", 0, build_batch([b"x" * 200_000], compression="none"))
        assert broker.produce_calls == 1  # neither request reached the broker


def test_a_request_over_the_clients_own_limit_is_refused_before_sending(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from twinlog.rpc.client import request_size
    from twinlog.rpc.wire.errors import error_from_status

    monkeypatch.setattr(request_size, "MESSAGE_BYTES_MAX", 50_000)
    batch = build_batch([b"x" * 60_000], compression="none")
    with fake_server() as (broker, address):
        broker.create_topic("limits", 1)
        with RemoteBroker(address) as remote:
            with pytest.raises(BatchTooLargeError, match="larger than this client sends"):
                remote.produce("limits", 0, batch)
            with pytest.raises(BatchTooLargeError, match="larger than this client sends"):
                remote.open_produce_stream().submit("limits", 0, batch).result(timeout=5)
        assert broker.produce_calls == 0
    # gRPC's own refusals say which side refused; the advice follows.
    client_side = error_from_status(
        grpc.StatusCode.RESOURCE_EXHAUSTED, "CLIENT: Sent message larger than max (9 vs. 8)", {}
    )
    assert "this client" in str(client_side) and "server config" not in str(client_side)
    server_side = error_from_status(
        grpc.StatusCode.RESOURCE_EXHAUSTED, "SERVER: Received message larger than max", {}
    )
    assert "server config key request_bytes_max" in str(server_side)


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_tokens_and_acls(tmp_path: Path) -> None:
    tokens = _write(
        tmp_path / "tokens",
        "# token principal\nalice-token-0123456789 alice\nops-token-0123456789ab ops\n",
    )
    acl = _write(
        tmp_path / "acl",
        "alice write public*\nalice read *\nops all *\n",
    )
    with fake_server(tokens_file=tokens, acl_file=acl) as (broker, address):
        with pytest.raises(AuthenticationError, match="requires a bearer token"):
            Admin(address).list_topics()
        with pytest.raises(AuthenticationError, match="not known"):
            Admin(address, token="wrong-token-0123456789").list_topics()
        ops = Admin(address, token="ops-token-0123456789ab")
        ops.create_topic("public", 1)
        ops.create_topic("secret", 1)
        alice = Admin(address, token="alice-token-0123456789")
        with pytest.raises(AuthorizationError, match="may not create"):
            alice.create_topic("mine", 1)
        with Producer(address, token="alice-token-0123456789") as producer:
            allowed = producer.send("public", b"ok", partition=0)
            denied = producer.send("secret", b"no", partition=0)
            producer.flush()
            assert allowed.result(timeout=5).offset == 0
            with pytest.raises(AuthorizationError, match="may not write 'secret'"):
                denied.result(timeout=5)
        assert broker.ends[TopicPartition("secret", 0)] == 0
        assert "mine" not in broker.list_topics()


def test_unreachable_server_is_retriable_unavailable() -> None:
    from twinlog.engine.base.errors import BrokerUnavailableError

    with RemoteBroker("127.0.0.1:1") as remote, pytest.raises(BrokerUnavailableError) as caught:
        remote.list_topics()
    assert caught.value.retriable
    assert "is the server running" in str(caught.value)


def test_exposure_rules() -> None:
    from twinlog.engine.base.errors import InvalidConfigError
    from twinlog.rpc.server.config import ServerConfig

    assert ServerConfig(host="127.0.0.1").check_exposure() is None
    assert ServerConfig(host="::1").check_exposure() is None
    with pytest.raises(InvalidConfigError, match="not a loopback address"):
        ServerConfig(host="0.0.0.0").check_exposure()
    warning = ServerConfig(host="0.0.0.0", insecure=True).check_exposure()
    assert warning is not None and "--insecure" in warning
    tokens_only = ServerConfig(host="0.0.0.0", tokens_file="t").check_exposure()
    assert tokens_only is not None and "TLS" in tokens_only
    assert (
        ServerConfig(
            host="0.0.0.0", tokens_file="t", tls_cert_file="c", tls_key_file="k"
        ).check_exposure()
        is None
    )


def test_token_table_and_acl_files(tmp_path: Path) -> None:
    from twinlog.engine.base.errors import InvalidConfigError
    from twinlog.rpc.policy.auth import Acl, Operation, Principal, TokenTable

    table = TokenTable.load(_write(tmp_path / "t", "abcdefghijklmnop alice\n"))
    assert table.principal_of("abcdefghijklmnop") == Principal("alice")
    assert table.principal_of("abcdefghijklmnoq") is None
    with pytest.raises(InvalidConfigError, match="shorter than 16"):
        TokenTable.load(_write(tmp_path / "short", "short alice\n"))
    with pytest.raises(InvalidConfigError, match="line 1"):
        TokenTable.load(_write(tmp_path / "bad", "only-one-word-here\n"))
    acl = Acl.load(_write(tmp_path / "acl", "alice read orders.*\n* read public\n"))
    alice, bob = Principal("alice"), Principal("bob")
    assert acl.allows(alice, Operation.READ, "orders.eu")
    assert not acl.allows(alice, Operation.WRITE, "orders.eu")
    assert acl.allows(bob, Operation.READ, "public")
    assert not acl.allows(bob, Operation.READ, "orders.eu")
    with pytest.raises(InvalidConfigError, match="operation 'fly'"):
        Acl.load(_write(tmp_path / "acl2", "alice fly *\n"))


def test_transactional_id_grants(tmp_path: Path) -> None:
    from twinlog.engine.base.errors import InvalidConfigError
    from twinlog.rpc.policy.auth import Acl, Guard, Operation, Principal, Resource

    text = (
        "alice write transactional-id:loader-*\nalice write orders\n"
        "audit describe transactional-id:*\nops abort *\nroot all *\n"
    )
    acl = Acl.load(_write(tmp_path / "acl", text))
    alice, audit, ops, root = (Principal(n) for n in ("alice", "audit", "ops", "root"))
    tid = Resource.TRANSACTIONAL_ID
    assert acl.allows(alice, Operation.WRITE, "loader-1", tid)
    assert not acl.allows(alice, Operation.WRITE, "loader-1")  # a topic of that name: no
    assert not acl.allows(alice, Operation.WRITE, "orders", tid)  # topic grants name topics only
    assert not acl.allows(audit, Operation.WRITE, "loader-1", tid)
    assert acl.allows(ops, Operation.ABORT, "anything", tid)  # abort names transactional ids
    assert not acl.allows(root, Operation.WRITE, "loader-1", tid)  # 'all *' is topics (+ abort)
    guard = Guard(None, acl, mutual_tls=False)
    assert [guard.may_describe_transactional_id(p, "loader-1") for p in (alice, audit, ops)] == [
        True,
        True,
        True,
    ]
    assert not guard.may_describe_transactional_id(alice, "other")
    assert Guard(None, None, mutual_tls=False).may_describe_transactional_id(alice, "other")
    for line, message in (
        ("alice read transactional-id:x\n", "'read' does not apply to transactional ids"),
        (
            "alice write group:orders\n",
            "write 'alice write orders' or 'alice write transactional-id:orders'",
        ),
        ("alice write transactional-id:\n", "pattern is empty"),
    ):
        with pytest.raises(InvalidConfigError, match=message):
            Acl.load(_write(tmp_path / "bad", line))
