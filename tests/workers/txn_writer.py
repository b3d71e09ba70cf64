"""Crash-test worker: runs transactions against an embedded broker and reports each commit.

    python -m tests.workers.txn_writer DATA_DIR TRANSACTIONS

Prints ``COMMITTED <n>`` (flushed) after commit_transaction(n) returns, i.e. after
the broker promised the commit. Values are ``t<n>-p<partition>-<i>``. Meant to be
killed: by a failpoint or by the test's SIGKILL. ``TXN_WRITER_FAILPOINTS`` (the syntax
of TWINLOG_FAILPOINTS) is armed once the broker is open and the topic created, so a
failpoint's count is the count of its hits in the transactions.
"""

from __future__ import annotations

import os
import sys

from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import TopicExistsError
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_builder import RecordBatchBuilder

TOPIC = "crash"
PARTITIONS = 3
FAILPOINTS_VARIABLE = "TXN_WRITER_FAILPOINTS"


def main() -> None:
    data_dir, transactions = sys.argv[1], int(sys.argv[2])
    broker = Broker.open(data_dir)
    try:
        broker.create_topic(TOPIC, partitions=PARTITIONS)
    except TopicExistsError:
        pass
    identity = broker.init_producer("crash-writer")
    failpoints.arm_specification(os.environ.get(FAILPOINTS_VARIABLE, ""))
    start = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    for number in range(start, start + transactions):
        txn_id = broker.begin_transaction(identity.producer_id, identity.producer_generation)
        # Transaction n writes to partitions n % 3 and (n + 1) % 3, two batches each.
        for partition in sorted({number % PARTITIONS, (number + 1) % PARTITIONS}):
            for batch_number in range(2):
                builder = RecordBatchBuilder(
                    "zstd",
                    producer_id=identity.producer_id,
                    producer_generation=identity.producer_generation,
                    base_sequence=batch_number * 3,
                    transactional=True,
                )
                for i in range(3):
                    builder.append(f"t{number}-p{partition}-{batch_number * 3 + i}".encode())
                broker.produce(TOPIC, partition, builder.build(), transaction_id=txn_id)
        broker.commit_transaction(txn_id, identity.producer_id, identity.producer_generation)
        print(f"COMMITTED {number}", flush=True)
    broker.close()
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
