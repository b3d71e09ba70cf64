"""Crash-test worker: leaves transactions ONGOING, PREPARE_COMMIT and PREPARE_ABORT, then waits.

    python -m tests.workers.three_states DATA_DIR

Journals the batches of four transactions, then makes every local-journal sync
fail (the ``journal.before_sync`` failpoint, armed in-process), commits one and
aborts another: their decisions are durable in the transaction journal, but no
completion can finish. Prints one JSON line describing the four and waits to be
SIGKILLed. The other two stay ONGOING: one with a long timeout, one short.
"""

from __future__ import annotations

import json
import sys
import time

from twinlog.engine.base import failpoints
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_builder import RecordBatchBuilder

TOPIC = "states"
LONG_TIMEOUT_MS = 600_000
SHORT_TIMEOUT_MS = 3_000


def main() -> None:
    broker = Broker.open(sys.argv[1], transaction_check_interval_ms=100)
    broker.create_topic(TOPIC, partitions=2)
    described = {}
    for name, timeout_ms in (
        ("ongoing", LONG_TIMEOUT_MS),
        ("expiring", SHORT_TIMEOUT_MS),
        ("committing", LONG_TIMEOUT_MS),
        ("aborting", LONG_TIMEOUT_MS),
    ):
        identity = broker.init_producer(name, timeout_ms)
        txn_id = broker.begin_transaction(identity.producer_id, identity.producer_generation)
        for partition in (0, 1):
            builder = RecordBatchBuilder(
                "none",
                producer_id=identity.producer_id,
                producer_generation=identity.producer_generation,
                base_sequence=0,
                transactional=True,
            )
            builder.append(f"{name}-{partition}".encode())
            broker.produce(TOPIC, partition, builder.build(), transaction_id=txn_id)
        described[name] = {
            "transaction_id": txn_id,
            "producer_id": identity.producer_id,
            "producer_generation": identity.producer_generation,
        }
    failpoints.arm("journal.before_sync", "raise", times=1_000_000)  # no completion can land
    committing, aborting = described["committing"], described["aborting"]
    broker.commit_transaction(
        committing["transaction_id"], committing["producer_id"], committing["producer_generation"]
    )
    broker.abort_transaction(
        aborting["transaction_id"], aborting["producer_id"], aborting["producer_generation"]
    )
    print(json.dumps(described), flush=True)
    time.sleep(3600)  # the test SIGKILLs this process


if __name__ == "__main__":
    main()
