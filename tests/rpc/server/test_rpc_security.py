"""TLS (a CA and certificates made at test time: ``pki_support``), tokens and ACLs, end to end.

Transactional ids are ACL resources (``twinlog.rpc.policy.auth``): bob, who may write the same
topic as alice, can neither fence, begin, send into, commit nor abort alice's
transactions, nor see them listed; what he tries changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pki_support import make_pki
from server_process import ServerProcess, run_cli

from twinlog.engine.base.errors import (
    AuthenticationError,
    AuthorizationError,
    BrokerUnavailableError,
    InvalidPartitionsError,
    InvalidRequestError,
)
from twinlog.engine.base.types import TopicPartition, TransactionState
from twinlog.engine.broker.leader_elections import ElectionOutcome
from twinlog.engine.records.batch_builder import build_batch
from twinlog.rpc.client import Admin, Consumer, Producer
from twinlog.rpc.client.connection import ConnectionOptions
from twinlog.rpc.client.remote import RemoteBroker
from twinlog.rpc.generated.twinlog.v1 import produce_pb2

pytestmark = [
    pytest.mark.slow,
]

ALICE = "alice-token-8c1e0f2a9b7d"
OPS = "ops-token-5d3b8e6f1a2c4"
BOB = "bob-token-7e2a9c4d1f6b3"
TOKENS = f"{ALICE} alice\n{OPS} ops\n{BOB} bob\n"
ACL = """
alice write shared*
alice read *
alice write transactional-id:alice-*
bob write shared*
bob read *
bob write transactional-id:bob-*
ops all *
"""


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ca.pem; server.pem/.key for 127.0.0.1 and localhost; client.pem/.key (CN=alice)."""
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_server(
    certificates: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    c = certificates
    with ServerProcess(
        tmp_path_factory.mktemp("tls") / "data",
        "--tls-cert", str(c / "server.pem"), "--tls-key", str(c / "server.key"),
        "--tls-client-ca", str(c / "ca.pem"),
    ) as process:  # fmt: skip
        yield process


def test_mutual_tls(tls_server: ServerProcess, certificates: Path) -> None:
    c = certificates
    options = {
        "tls_ca_file": str(c / "ca.pem"),
        "tls_cert_file": str(c / "client.pem"),
        "tls_key_file": str(c / "client.key"),
        "request_timeout_ms": 5_000,
    }
    with Admin(tls_server.address, **options) as admin:
        admin.create_topic("tls-topic", 1)
    with Producer(tls_server.address, **options) as producer:
        producer.send("tls-topic", b"over TLS", partition=0).result(timeout=10)
    with Consumer(tls_server.address, **options) as consumer:
        consumer.assign([("tls-topic", 0)])
        consumer.seek_to_beginning()
        assert [r.value for r in consumer.poll(5_000)] == [b"over TLS"]
    assert "TLS with client certificates" in tls_server.log()


def test_plaintext_or_certificate_less_client_is_refused(
    tls_server: ServerProcess, certificates: Path
) -> None:
    fast = {"request_timeout_ms": 3_000}
    from twinlog.rpc.client.connection import ConnectionOptions
    from twinlog.rpc.client.remote import RemoteBroker

    with RemoteBroker(tls_server.address, ConnectionOptions(**fast)) as plain:
        with pytest.raises(BrokerUnavailableError):
            plain.list_topics()
    no_certificate = ConnectionOptions(tls_ca_file=str(certificates / "ca.pem"), **fast)
    with RemoteBroker(tls_server.address, no_certificate) as remote:
        with pytest.raises(BrokerUnavailableError):
            remote.list_topics()


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("tokens")
    (directory / "tokens").write_text(TOKENS)
    (directory / "acl").write_text(ACL)
    with ServerProcess(
        directory / "data",
        "--tokens-file", str(directory / "tokens"), "--acl-file", str(directory / "acl"),
    ) as process:  # fmt: skip
        yield process
    assert ALICE not in process.log() and OPS not in process.log() and BOB not in process.log()


def test_missing_and_wrong_token(token_server: ServerProcess) -> None:
    with pytest.raises(AuthenticationError, match="requires a bearer token"):
        Admin(token_server.address).list_topics()
    with pytest.raises(AuthenticationError, match="not known"):
        Admin(token_server.address, token="not-a-real-token-at-all").list_topics()
    assert Admin(token_server.address, token=ALICE).list_topics() is not None


def test_a_stranger_is_refused_before_its_request_is_judged(token_server: ServerProcess) -> None:
    """Authentication first: a unary Produce carrying more batches (ProduceStream's field)
    is refused as malformed to a known principal only; a stranger learns nothing of how
    its request would be judged."""
    unary = produce_pb2.ProduceRequest(topic="shared", partition=0, batch=build_batch([b"x"]))
    unary.more.add(topic="shared", partition=0, batch=build_batch([b"y"]))
    with RemoteBroker(token_server.address) as stranger:
        with pytest.raises(AuthenticationError, match="requires a bearer token"):
            stranger._call(stranger.producing.Produce, unary)
    with RemoteBroker(token_server.address, ConnectionOptions(token=ALICE)) as alice:
        with pytest.raises(InvalidRequestError, match="ProduceStream only"):
            alice._call(alice.producing.Produce, unary)


def test_elect_leaders_needs_alter_and_a_single_node_leads_everything_already(
    token_server: ServerProcess,
) -> None:
    ops = Admin(token_server.address, token=OPS)
    ops.create_topic("elected", 2)
    with pytest.raises(AuthorizationError, match="may not alter 'elected'"):
        Admin(token_server.address, token=ALICE).elect_preferred_leaders([("elected", 0)])
    with pytest.raises(AuthorizationError, match="may not alter"):
        Admin(token_server.address, token=ALICE).elect_preferred_leaders()
    named = ops.elect_preferred_leaders([("elected", 1), ("elected", 7)])
    assert [(r.outcome, r.leader, r.preferred) for r in named] == [
        (ElectionOutcome.NOT_NEEDED, 0, 0),
        (ElectionOutcome.UNKNOWN_PARTITION, -1, -1),
    ]
    # Every partition of the topics ops may alter: not the internal ones ('all *' does
    # not name them).
    every = ops.elect_preferred_leaders()
    assert {(r.topic, r.partition) for r in every} >= {("elected", 0), ("elected", 1)}
    assert all(not r.topic.startswith("__") for r in every)
    assert all(r.outcome is ElectionOutcome.NOT_NEEDED for r in every)
    assert "leaders.elect principal=ops" in token_server.log()
    cli = run_cli(
        "cluster", "elect-leaders", "--preferred", "--topic", "elected",
        "--server", token_server.address, "--token", OPS,
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    assert "elected-0: not needed" in cli.stdout and "0 moved, 2 led already, 0 not moved" in (
        cli.stdout
    )


def test_topics_grow_with_alter_from_the_cli_and_the_admin_client(
    token_server: ServerProcess,
) -> None:
    ops = Admin(token_server.address, token=OPS)
    ops.create_topic("growing", 1)
    with pytest.raises(AuthorizationError, match="may not alter 'growing'"):
        Admin(token_server.address, token=ALICE).create_partitions("growing", 3)
    assert len(ops.create_partitions("growing", 2).partitions) == 2
    with pytest.raises(InvalidPartitionsError, match="has 2 partitions; it can only grow"):
        ops.create_partitions("growing", 2)
    cli = run_cli(
        "topics", "alter", "growing", "--partitions", "4",
        "--server", token_server.address, "--token", OPS,
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    assert "growing has 4 partitions now; records with a key may go to another" in cli.stdout
    assert len(ops.describe_topic("growing").partitions) == 4
    assert "topic.alter principal=ops" in token_server.log()


def test_principal_denied_a_topic_writes_nothing(token_server: ServerProcess) -> None:
    ops = Admin(token_server.address, token=OPS)
    ops.create_topic("shared", 1)
    ops.create_topic("payroll", 1)
    with pytest.raises(AuthorizationError, match="may not create"):
        Admin(token_server.address, token=ALICE).create_topic("alice-own", 1)
    producer = Producer(token_server.address, token=ALICE, transactional_id="alice-app")
    producer.init_transactions()
    with pytest.raises(AuthorizationError, match="may not write 'payroll'"):
        with producer.transaction():
            producer.send("shared", b"fine", partition=0)
            producer.send("payroll", b"denied", partition=0)
    with producer.transaction():
        producer.send("shared", b"fine again", partition=0)
    producer.close()
    assert ops.describe_topic("payroll").partitions[0].log_end_offset == 0
    assert ops.describe_topic("payroll").partitions[0].journal_entries_pending == 0
    assert "alice-own" not in ops.list_topics()
    with Consumer(token_server.address, token=ALICE) as consumer:
        consumer.assign([("shared", 0)])
        consumer.seek_to_beginning()
        values = []
        for _ in range(10):
            values.extend(r.value for r in consumer.poll(300))
            if values:
                break
        assert values == [b"fine again"]
    with pytest.raises(AuthorizationError, match="may not abort"):
        Admin(token_server.address, token=ALICE).abort_transaction(12345)


def _read_values(address: str, token: str, topic: str, count: int) -> list[bytes | None]:
    with Consumer(address, token=token) as consumer:
        consumer.assign([(topic, 0)])
        consumer.seek_to_beginning()
        values: list[bytes | None] = []
        for _ in range(20):
            values.extend(r.value for r in consumer.poll(300))
            if len(values) >= count:
                break
        values.extend(r.value for r in consumer.poll(300))  # nothing more may come
        return values


def _bob_tries_everything(address: str, producer_id: int, generation: int, txn: int) -> None:
    """Every way bob could end, join or fence alice's transaction; each must be refused."""
    with RemoteBroker(address, ConnectionOptions(token=BOB, request_timeout_ms=5_000)) as bob:
        with pytest.raises(AuthorizationError, match="may not write transactional id 'alice-app'"):
            bob.init_producer("alice-app")  # would fence alice and abort her transaction
        refused = "may not write the transactional id of producer"
        with pytest.raises(AuthorizationError, match=refused):
            bob.abort_transaction(txn, producer_id, generation)
        with pytest.raises(AuthorizationError, match=refused):
            bob.commit_transaction(txn, producer_id, generation)
        with pytest.raises(AuthorizationError, match=refused):
            bob.begin_transaction(producer_id, generation)
        with pytest.raises(AuthorizationError, match=refused):
            bob.add_partitions_to_transaction(
                txn, producer_id, generation, [TopicPartition("shared-txn", 0)]
            )
        with pytest.raises(AuthorizationError, match=refused):
            bob.send_offsets_to_transaction(
                txn, producer_id, generation, "g", {TopicPartition("shared-txn", 0): 1}
            )
        injected = build_batch(
            [b"from bob"],
            producer_id=producer_id,
            producer_generation=generation,
            base_sequence=5,
            transactional=True,
        )
        with pytest.raises(AuthorizationError, match=refused):
            bob.produce("shared-txn", 0, injected)
        with pytest.raises(AuthorizationError, match="may not abort"):
            bob.admin_abort_transaction(txn)
        # Bob sees neither alice's transaction nor her producer id.
        assert [t.transactional_id for t in bob.list_transactions()] == []
        assert bob.describe_producers("shared-txn", 0) == []


def test_bob_cannot_abort_fence_or_join_alices_transaction(token_server: ServerProcess) -> None:
    address = token_server.address
    ops = Admin(address, token=OPS)
    ops.create_topic("shared-txn", 1)
    with pytest.raises(AuthorizationError, match="may not write transactional id 'alice-app'"):
        Producer(address, token=BOB, transactional_id="alice-app").init_transactions()
    alice = Producer(address, token=ALICE, transactional_id="alice-app", linger_ms=0)
    identity = alice.init_transactions()
    txn = alice.begin_transaction()
    alice.send("shared-txn", b"alice 1", partition=0)
    alice.flush()
    _bob_tries_everything(address, identity.producer_id, identity.producer_generation, txn)
    # Nothing changed: the transaction is still alice's, open, same generation...
    (listed,) = [t for t in ops.list_transactions() if t.transaction_id == txn]
    assert (listed.state, listed.producer_generation) == (
        TransactionState.ONGOING,
        identity.producer_generation,
    )
    assert [t.transaction_id for t in Admin(address, token=ALICE).list_transactions()] == [txn]
    described = Admin(address, token=ALICE).describe_producers("shared-txn", 0)
    assert [p.producer_id for p in described] == [identity.producer_id]
    # ...she commits it, and readers see her record only.
    alice.send("shared-txn", b"alice 2", partition=0)
    alice.commit_transaction(wait_for_applied=True)
    alice.close()
    assert _read_values(address, ALICE, "shared-txn", 2) == [b"alice 1", b"alice 2"]
    # Bob's own transactional id works as usual.
    with Producer(address, token=BOB, transactional_id="bob-app") as bob:
        bob.init_transactions()
        with bob.transaction():
            bob.send("shared-txn", b"bob", partition=0)


def test_transactional_id_acl_holds_across_a_restart(tmp_path: Path) -> None:
    """The producer id -> transactional id link is the broker's, on disk: after a restart
    alice goes on without a new init, and bob is still refused."""
    (tmp_path / "tokens").write_text(TOKENS)
    (tmp_path / "acl").write_text(ACL)
    server = ServerProcess(
        tmp_path / "data",
        "--tokens-file", str(tmp_path / "tokens"), "--acl-file", str(tmp_path / "acl"),
    ).start()  # fmt: skip
    try:
        Admin(server.address, token=OPS).create_topic("shared-txn", 1)
        with RemoteBroker(server.address, ConnectionOptions(token=ALICE)) as alice:
            identity = alice.init_producer("alice-app")
        assert server.stop() == 0
        server.start(port=server.port)
        alice_options = ConnectionOptions(token=ALICE, request_timeout_ms=5_000)
        with RemoteBroker(server.address, alice_options) as alice:
            txn = alice.begin_transaction(identity.producer_id, identity.producer_generation)
            _bob_tries_everything(
                server.address, identity.producer_id, identity.producer_generation, txn
            )
            alice.abort_transaction(txn, identity.producer_id, identity.producer_generation)
    finally:
        server.kill()
