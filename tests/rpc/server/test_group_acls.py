"""Consumer groups, producer ids and internal topics are guarded with ACLs on, end to end.

Bob may read alice's input topic, write the shared topic and use his own transactional id.
None of that lets him touch alice's group ``alice-billing`` (its offsets, or her
transaction holding them: KIP-447 fencing would abort or fence whoever held them), write
with her idempotent producer id, or read every group's offsets from ``__consumer_offsets``.
Each refusal is an AuthorizationError and changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from server_process import ServerProcess

from twinlog.engine.base.errors import AuthorizationError
from twinlog.engine.base.types import TopicPartition, TransactionState
from twinlog.engine.records.batch_builder import build_batch
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.rpc.client.connection import ConnectionOptions
from twinlog.rpc.client.remote import RemoteBroker

pytestmark = [pytest.mark.slow]

ALICE = "alice-token-8c1e0f2a9b7d"
BOB = "bob-token-7e2a9c4d1f6b3"
OPS = "ops-token-5d3b8e6f1a2c4"
AUDIT = "audit-token-3f9a1c7e5b2d8"
TOKENS = f"{ALICE} alice\n{BOB} bob\n{OPS} ops\n{AUDIT} audit\n"
ACL = """
alice write shared*
alice read *
alice write transactional-id:alice-*
alice read group:alice-*
bob write shared*
bob read *
bob write transactional-id:bob-*
bob read group:bob-*
ops all *
ops all group:*
ops read __consumer_offsets
audit describe transactional-id:*
"""
GROUP = "alice-billing"
INPUT = TopicPartition("input", 0)


def connect(address: str, token: str) -> RemoteBroker:
    return RemoteBroker(address, ConnectionOptions(token=token, request_timeout_ms=5_000))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("groups")
    (directory / "tokens").write_text(TOKENS)
    (directory / "acl").write_text(ACL)
    with ServerProcess(
        directory / "data",
        "--tokens-file", str(directory / "tokens"), "--acl-file", str(directory / "acl"),
    ) as process:  # fmt: skip
        with connect(process.address, OPS) as ops:
            for topic in ("input", "shared-out", "shared"):
                ops.create_topic(topic, 1)
        yield process


def _transaction_state(address: str, transaction_id: int) -> TransactionState | None:
    with connect(address, OPS) as ops:
        found = [t.state for t in ops.list_transactions() if t.transaction_id == transaction_id]
    return found[0] if found else None


def test_bob_cannot_abort_alices_transaction_through_her_group(server: ServerProcess) -> None:
    """(a) KIP-447 aborts the older holder of a group's offsets, whoever asks."""
    with connect(server.address, ALICE) as alice, connect(server.address, BOB) as bob:
        mine = alice.init_producer("alice-app")
        alice_txn = alice.begin_transaction(mine.producer_id, mine.producer_generation)
        alice.send_offsets_to_transaction(
            alice_txn, mine.producer_id, mine.producer_generation, GROUP, {INPUT: 3}
        )
        his = bob.init_producer("bob-app")
        bob_txn = bob.begin_transaction(his.producer_id, his.producer_generation)
        with pytest.raises(AuthorizationError, match=f"may not read group '{GROUP}'"):
            bob.send_offsets_to_transaction(
                bob_txn, his.producer_id, his.producer_generation, GROUP, {INPUT: 99}
            )
        assert _transaction_state(server.address, alice_txn) is TransactionState.ONGOING
        alice.commit_transaction(
            alice_txn, mine.producer_id, mine.producer_generation, wait_for_applied=True
        )
        bob.abort_transaction(bob_txn, his.producer_id, his.producer_generation)
        assert alice.fetch_offsets(GROUP, [INPUT]) == {INPUT: 3}


def test_bob_cannot_fence_alices_producer_through_her_group(server: ServerProcess) -> None:
    """(a') Bob's younger transaction taking her group's offsets first makes hers the zombie."""
    with connect(server.address, ALICE) as alice, connect(server.address, BOB) as bob:
        mine = alice.init_producer("alice-loader")
        alice_txn = alice.begin_transaction(mine.producer_id, mine.producer_generation)
        his = bob.init_producer("bob-loader")
        bob_txn = bob.begin_transaction(his.producer_id, his.producer_generation)
        with pytest.raises(AuthorizationError, match=f"may not read group '{GROUP}'"):
            bob.send_offsets_to_transaction(
                bob_txn, his.producer_id, his.producer_generation, GROUP, {INPUT: 7}
            )
        alice.send_offsets_to_transaction(  # not fenced: bob holds nothing
            alice_txn, mine.producer_id, mine.producer_generation, GROUP, {INPUT: 5}
        )
        alice.commit_transaction(
            alice_txn, mine.producer_id, mine.producer_generation, wait_for_applied=True
        )
        bob.abort_transaction(bob_txn, his.producer_id, his.producer_generation)
        assert alice.fetch_offsets(GROUP, [INPUT]) == {INPUT: 5}


def test_bob_cannot_commit_or_fetch_alices_group_offsets(server: ServerProcess) -> None:
    """(b) A plain commit would overwrite her group's position; a fetch would reveal it."""
    with connect(server.address, ALICE) as alice, connect(server.address, BOB) as bob:
        alice.commit_offsets(GROUP, {INPUT: 11})
        with pytest.raises(AuthorizationError, match=f"may not read group '{GROUP}'"):
            bob.commit_offsets(GROUP, {INPUT: 0})
        with pytest.raises(AuthorizationError, match=f"may not read group '{GROUP}'"):
            bob.fetch_offsets(GROUP, [INPUT])
        assert alice.fetch_offsets(GROUP, [INPUT]) == {INPUT: 11}
        bob.commit_offsets("bob-group", {INPUT: 1})  # his own group works as before
        assert bob.fetch_offsets("bob-group", [INPUT]) == {INPUT: 1}


def test_read_star_does_not_list_every_groups_offsets(server: ServerProcess) -> None:
    """``read *`` names topics users made; ``__consumer_offsets`` needs a grant naming it."""
    with connect(server.address, ALICE) as alice:
        alice.commit_offsets(GROUP, {INPUT: 12})
    with connect(server.address, BOB) as bob:
        for partition in range(4):
            with pytest.raises(AuthorizationError, match="may not read '__consumer_offsets'"):
                bob.fetch("__consumer_offsets", partition, 0)
            with pytest.raises(AuthorizationError, match="may not read '__consumer_offsets'"):
                bob.list_offset("__consumer_offsets", partition, "latest")
            with pytest.raises(AuthorizationError, match="may not read '__consumer_offsets'"):
                bob.describe_producers("__consumer_offsets", partition)
    with connect(server.address, OPS) as ops:  # an admin's explicit grant still reads it
        found = sum(len(ops.fetch("__consumer_offsets", p, 0).records) for p in range(4))
        assert found > 0


def test_groups_in_listed_transactions_need_describe(server: ServerProcess) -> None:
    """Seeing a transaction (describe on its transactional id) shows only the groups one may
    describe (read implies describe): audit, who may describe no group, sees none."""
    with connect(server.address, BOB) as bob, connect(server.address, ALICE) as alice:
        his = bob.init_producer("bob-lister")
        his_txn = bob.begin_transaction(his.producer_id, his.producer_generation)
        bob.send_offsets_to_transaction(
            his_txn, his.producer_id, his.producer_generation, "bob-group", {INPUT: 2}
        )
        mine = alice.init_producer("alice-lister")
        my_txn = alice.begin_transaction(mine.producer_id, mine.producer_generation)
        alice.send_offsets_to_transaction(
            my_txn, mine.producer_id, mine.producer_generation, "alice-other", {INPUT: 2}
        )
        with connect(server.address, AUDIT) as audit:
            groups = {t.transaction_id: t.groups for t in audit.list_transactions()}
        assert (groups[his_txn], groups[my_txn]) == ((), ())
        (listed,) = [t for t in bob.list_transactions() if t.transaction_id == his_txn]
        assert listed.groups == ("bob-group",)
        with connect(server.address, OPS) as ops:
            groups = {t.transaction_id: t.groups for t in ops.list_transactions()}
        assert (groups[his_txn], groups[my_txn]) == (("bob-group",), ("alice-other",))
        bob.abort_transaction(his_txn, his.producer_id, his.producer_generation)
        alice.abort_transaction(my_txn, mine.producer_id, mine.producer_generation)


def _alices_last_batch(address: str) -> tuple[int, int, int]:
    """What any reader of ``shared`` learns from her batch header: id, generation, next seq."""
    with connect(address, BOB) as bob:
        records = bob.fetch("shared", 0, 0, max_bytes=1 << 20).records
    last = list(iter_batches(records))[-1].header
    return last.producer_id, last.producer_generation, last.base_sequence + last.record_count


def test_bob_cannot_write_with_alices_idempotent_producer_id(server: ServerProcess) -> None:
    """(c) Her next sequence written first would make her next record a 'duplicate'."""
    with connect(server.address, ALICE) as alice, connect(server.address, BOB) as bob:
        mine = alice.init_producer(None)
        first = build_batch(
            [b"alice 0"], producer_id=mine.producer_id, producer_generation=0, base_sequence=0
        )
        assert alice.produce("shared", 0, first).base_offset >= 0
        producer_id, generation, next_sequence = _alices_last_batch(server.address)
        assert producer_id == mine.producer_id
        end = alice.list_offset("shared", 0, "latest")
        for forged_generation in (generation, generation + 1):
            forged = build_batch(
                [b"bob as alice"],
                producer_id=producer_id,
                producer_generation=forged_generation,
                base_sequence=next_sequence if forged_generation == generation else 0,
            )
            with pytest.raises(AuthorizationError, match=f"producer id {producer_id}"):
                bob.produce("shared", 0, forged)
        assert alice.list_offset("shared", 0, "latest") == end  # nothing was written
        second = build_batch(
            [b"alice 1"],
            producer_id=mine.producer_id,
            producer_generation=0,
            base_sequence=next_sequence,
        )
        result = alice.produce("shared", 0, second)
        assert (result.base_offset, result.duplicate) == (end, False)
        # A batch naming an id this server never gave anyone is refused the same way.
        unknown = build_batch([b"x"], producer_id=987_654, producer_generation=0, base_sequence=0)
        with pytest.raises(AuthorizationError, match="producer id 987654"):
            bob.produce("shared", 0, unknown)
        # Bob's own idempotent producer works as before.
        his = bob.init_producer(None)
        own = build_batch([b"bob"], producer_id=his.producer_id, producer_generation=0)
        assert bob.produce("shared", 0, own).base_offset == end + 1


def test_bob_cannot_write_plain_batches_with_alices_transactional_producer_id(
    server: ServerProcess,
) -> None:
    """A transactional producer's id in a plain batch still needs WRITE on its transactional id."""
    with connect(server.address, ALICE) as alice, connect(server.address, BOB) as bob:
        mine = alice.init_producer("alice-plain")
        forged = build_batch(
            [b"bob"], producer_id=mine.producer_id, producer_generation=mine.producer_generation
        )
        with pytest.raises(AuthorizationError, match=f"producer {mine.producer_id}"):
            bob.produce("shared", 0, forged)


def test_idempotent_producer_ids_stay_bound_across_a_restart(tmp_path: Path) -> None:
    """The owner is on disk with the producer id: alice goes on after a restart, bob does not."""
    (tmp_path / "tokens").write_text(TOKENS)
    (tmp_path / "acl").write_text(ACL)
    process = ServerProcess(
        tmp_path / "data",
        "--tokens-file", str(tmp_path / "tokens"), "--acl-file", str(tmp_path / "acl"),
    ).start()  # fmt: skip
    try:
        with connect(process.address, OPS) as ops:
            ops.create_topic("shared", 1)
        with connect(process.address, ALICE) as alice:
            mine = alice.init_producer(None)
            first = build_batch(
                [b"a"], producer_id=mine.producer_id, producer_generation=0, base_sequence=0
            )
            alice.produce("shared", 0, first)
        assert process.stop() == 0
        process.start(port=process.port)
        forged = build_batch(
            [b"b"], producer_id=mine.producer_id, producer_generation=0, base_sequence=1
        )
        with connect(process.address, BOB) as bob:
            with pytest.raises(AuthorizationError, match=f"producer id {mine.producer_id}"):
                bob.produce("shared", 0, forged)
        with connect(process.address, ALICE) as alice:
            assert alice.produce("shared", 0, forged).base_offset == 1
    finally:
        process.kill()
