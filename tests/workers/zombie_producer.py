"""Zombie-test worker: a transactional producer against a ``twinlog serve`` process.

    python -m tests.workers.zombie_producer zombie SERVER TOPIC TXN_ID TIMEOUT_MS
    python -m tests.workers.zombie_producer successor SERVER TOPIC TXN_ID

``zombie``: begins a transaction, sends ``zombie-early-*`` records to every
partition, flushes, prints ``READY <transaction id>`` and sleeps 3 seconds (the
test SIGSTOPs it there, past its transaction timeout, and SIGCONTs it later).
Then it carries on as if nothing happened: sends ``zombie-late-*`` records and
commits through the Producer, then retries at the wire level what an old client
would (produce, add partitions, commit, abort, begin with its old identity).
Prints ``REFUSED <action> <ErrorClass>`` or ``ACCEPTED <action>`` for each
attempt, then ``DONE``.

``successor``: initialises the same transactional id (fencing the zombie),
commits one transaction of ``successor-1-*`` records (``COMMITTED 1``), begins a
second one, sends ``successor-2-*`` records, prints ``OPEN 2`` and waits for a
line on stdin before committing it (``COMMITTED 2``), so that the zombie's late
requests land while the successor has a transaction open. Then ``DONE``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.records.batch_builder import build_batch
from twinlog.rpc.client import Producer
from twinlog.rpc.client.remote import RemoteBroker

RECORDS_PER_PARTITION = 3
PAUSE_POINT_S = 3.0  # asleep here when the test stops the process (long: a busy machine)


def say(line: str) -> None:
    print(line, flush=True)


def attempt(action: str, call: Callable[[], object]) -> None:
    try:
        call()
    except TwinlogError as error:
        say(f"REFUSED {action} {type(error).__name__}")
    else:
        say(f"ACCEPTED {action}")


def send_records(producer: Producer, topic: str, prefix: str) -> None:
    for partition in range(producer.partitions_for(topic)):
        for number in range(RECORDS_PER_PARTITION):
            producer.send(topic, f"{prefix}-{partition}-{number}".encode(), partition=partition)


def zombie(server: str, topic: str, transactional_id: str, timeout_ms: int) -> None:
    producer = Producer(
        server, transactional_id=transactional_id, transaction_timeout_ms=timeout_ms, linger_ms=0
    )
    identity = producer.init_transactions()
    transaction_id = producer.begin_transaction()
    send_records(producer, topic, "zombie-early")
    producer.flush()
    say(f"READY {transaction_id}")
    time.sleep(PAUSE_POINT_S)  # stopped here; after SIGCONT the sleep is long over
    say("AWAKE")
    partitions = producer.partitions_for(topic)
    for partition in range(partitions):
        for number in range(RECORDS_PER_PARTITION):
            value = f"zombie-late-{partition}-{number}".encode()
            try:
                future = producer.send(topic, value, partition=partition)
                producer.flush()
                future.result(timeout=30)
            except TwinlogError as error:
                say(f"REFUSED send {type(error).__name__}")
            else:
                say("ACCEPTED send")
    attempt("commit", producer.commit_transaction)
    # An old or careless client does not stop there: the same requests, on the wire.
    old = (identity.producer_id, identity.producer_generation)
    with RemoteBroker(server) as broker:
        late = build_batch(
            [b"zombie-raw"],
            compression="none",
            producer_id=old[0],
            producer_generation=old[1],
            base_sequence=RECORDS_PER_PARTITION,
            transactional=True,
        )
        for partition in range(partitions):
            attempt(
                "raw-produce",
                lambda p=partition: broker.produce(topic, p, late, transaction_id=transaction_id),
            )
        attempt(
            "raw-add-partitions",
            lambda: broker.add_partitions_to_transaction(
                transaction_id, *old, [TopicPartition(topic, 0)]
            ),
        )
        attempt("raw-commit", lambda: broker.commit_transaction(transaction_id, *old))
        attempt("raw-abort", lambda: broker.abort_transaction(transaction_id, *old))
        began: list[int] = []
        attempt("raw-begin", lambda: began.append(broker.begin_transaction(*old)))
        for fresh in began:  # not fenced (its transaction only timed out): a legal new start
            broker.abort_transaction(fresh, *old)
    producer.close(timeout_ms=5_000)
    say("DONE")


def successor(server: str, topic: str, transactional_id: str) -> None:
    with Producer(server, transactional_id=transactional_id, linger_ms=0) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        send_records(producer, topic, "successor-1")
        producer.commit_transaction()
        say("COMMITTED 1")
        producer.begin_transaction()
        send_records(producer, topic, "successor-2")
        producer.flush()
        say("OPEN 2")
        sys.stdin.readline()  # the test lets the zombie loose meanwhile
        producer.commit_transaction(wait_for_applied=True)
        say("COMMITTED 2")
    say("DONE")


def main() -> None:
    role, server, topic, transactional_id = sys.argv[1:5]
    if role == "zombie":
        zombie(server, topic, transactional_id, int(sys.argv[5]))
    elif role == "successor":
        successor(server, topic, transactional_id)
    else:
        raise SystemExit(f"unknown role {role!r}; use zombie or successor")


if __name__ == "__main__":
    main()
