"""Crash-test worker: consume topic ``input``, write ``out-<value>`` to ``output`` and commit
the consumed offset in the same transaction (Kafka's read-process-write loop).

    python -m tests.workers.read_process_write DATA_DIR

Runs until the input is consumed; meant to be SIGKILLed at random points and
restarted. Its position comes only from the group's committed offset, so a
restart resumes exactly where the last committed transaction left off.
"""

from __future__ import annotations

import sys
import time

from twinlog.engine.base.errors import PendingTransactionError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.engine.records.batch_reader import iter_batches

INPUT = TopicPartition("input", 0)
GROUP = "rpw-group"
RECORDS_PER_TRANSACTION = 3


def committed_position(broker: Broker) -> int:
    while True:
        try:
            offset = broker.fetch_offsets(GROUP, [INPUT])[INPUT]
            return max(offset, 0)
        except PendingTransactionError:
            time.sleep(0.01)  # a committed transaction is still being applied


def main() -> None:
    broker = Broker.open(sys.argv[1])
    identity = broker.init_producer("rpw")
    end = broker.list_offset(INPUT.topic, INPUT.partition, "latest")
    position = committed_position(broker)
    while position < end:
        fetched = broker.fetch(INPUT.topic, INPUT.partition, position, max_bytes=1 << 20)
        records = [
            r for b in iter_batches(fetched.records) for r in b.records() if r.offset >= position
        ]
        chunk = records[:RECORDS_PER_TRANSACTION]
        txn_id = broker.begin_transaction(identity.producer_id, identity.producer_generation)
        builder = RecordBatchBuilder(
            "none",
            producer_id=identity.producer_id,
            producer_generation=identity.producer_generation,
            base_sequence=0,
            transactional=True,
        )
        for record in chunk:
            builder.append(b"out-" + (record.value or b""))
        broker.produce("output", 0, builder.build(), transaction_id=txn_id)
        position = chunk[-1].offset + 1
        broker.send_offsets_to_transaction(
            txn_id, identity.producer_id, identity.producer_generation, GROUP, {INPUT: position}
        )
        broker.commit_transaction(txn_id, identity.producer_id, identity.producer_generation)
        print(f"POSITION {position}", flush=True)
    broker.close()
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
