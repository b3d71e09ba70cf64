"""Exactly-once read-process-write worker, as a member of a consumer group.

    python -m tests.workers.group_transformer SERVER GROUP TRANSACTIONAL_ID [--stop-self-after N]

Subscribes to ``in``; for each poll, in one transaction, writes every record's value to
the same partition of ``out`` and sends the consumed offsets with the consumer's
``group_metadata()`` (KIP-447). An abortable failure aborts and rewinds the consumer to the
group's committed offsets. Prints one line per event on stdout:

    member ID         its member id, once it has records to copy
    committed N       N transactions committed so far
    paused            about to SIGSTOP itself, records sent, offsets not yet (--stop-self-after)
    fenced NAME       send_offsets_to_transaction refused with error class NAME: aborted
    aborted NAME      another abortable failure (commit refused, ...): aborted

``--stop-self-after N``: after N committed transactions, the next transaction stops the
process itself (SIGSTOP) between its sends and its offsets: a zombie, mid-transaction,
whose test resumes it (SIGCONT) once the group has moved its partitions elsewhere.
SIGTERM closes it cleanly (it leaves the group).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

from twinlog import Consumer, Producer, TopicPartition, TwinlogError

PROCESSING_PAUSE_S = 0.03  # per transaction: keeps the run long enough to disturb


def say(line: str) -> None:
    print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("server")
    parser.add_argument("group")
    parser.add_argument("transactional_id")
    parser.add_argument("--stop-self-after", type=int)
    args = parser.parse_args()
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    consumer = Consumer(
        args.server,
        group_id=args.group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=3_000,
        max_poll_records=5,
    )
    producer = Producer(
        args.server, transactional_id=args.transactional_id, transaction_timeout_ms=10_000
    )
    producer.init_transactions()
    consumer.subscribe(["in"])
    committed = 0
    stop_after = args.stop_self_after
    named = False
    while not stopping:
        records = consumer.poll(timeout_ms=200)
        if not records:
            continue
        if not named:
            named = True
            say(f"member {consumer.group_metadata().member_id}")
        producer.begin_transaction()
        try:
            offsets: dict[TopicPartition, int] = {}
            for record in records:
                producer.send("out", value=record.value, partition=record.partition)
                tp = TopicPartition(record.topic, record.partition)
                offsets[tp] = record.offset + 1
            producer.flush()
            if stop_after is not None and committed >= stop_after:
                stop_after = None
                say("paused")
                os.kill(os.getpid(), signal.SIGSTOP)  # resumed by the test's SIGCONT
            metadata = consumer.group_metadata()
            try:
                producer.send_offsets_to_transaction(offsets, metadata)
            except TwinlogError as error:
                if not error.abortable:
                    raise
                say(f"fenced {type(error).__name__}")
                raise
            time.sleep(PROCESSING_PAUSE_S)
            producer.commit_transaction()
            committed += 1
            say(f"committed {committed}")
        except TwinlogError as error:
            if not error.abortable:
                raise
            say(f"aborted {type(error).__name__}")
            producer.abort_transaction()
            rewind(consumer)
    consumer.close()
    producer.close()


def rewind(consumer: Consumer) -> None:
    """Back to the group's committed offsets: the aborted records are read again (by this
    member if it still owns them, else by their new owner)."""
    owned = consumer.assignment()
    if not owned:
        return
    committed = consumer.committed(owned)
    beginnings = consumer.beginning_offsets(owned)
    for tp in owned:
        offset = committed.get(tp)
        consumer.seek(tp, beginnings[tp] if offset is None else offset)


if __name__ == "__main__":
    sys.exit(main())
