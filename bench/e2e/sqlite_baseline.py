"""SQLite doing the same work in-process: WAL, synchronous=FULL, one table, one
INSERT per record, ``records_per_transaction`` inserts per transaction: all of a
transaction's rows in one ``executemany`` call, or (``per_row``) one ``execute``
call per row in a Python loop, as the embedded broker's ``send`` per record."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from bench.e2e.workload import Workload


def run_sqlite(
    directory: Path,
    workload: Workload,
    records_per_transaction: int,
    progress: Callable[[int, int], None] | None = None,
    per_row: bool = False,
) -> dict[str, float]:
    payloads = workload.payloads()
    pool = len(payloads)
    partitions = workload.partitions
    insert = "INSERT INTO records (partition, key, value) VALUES (?, ?, ?)"
    name = "execute" if per_row else "executemany"
    path = directory / f"bench-{name}-{records_per_transaction}.sqlite"
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        connection.execute(
            "CREATE TABLE records (id INTEGER PRIMARY KEY, partition INTEGER, key BLOB, value BLOB)"
        )
        transactions = workload.records // records_per_transaction
        warmup = max(
            1,
            workload.warmup_transactions
            * workload.records_per_transaction
            // records_per_transaction,
        )
        index = 0
        started_s = 0.0
        for number in range(warmup + transactions):
            if number == warmup:
                started_s = time.monotonic()
            connection.execute("BEGIN")
            if per_row:
                for i in range(index, index + records_per_transaction):
                    connection.execute(insert, (i % partitions, None, payloads[i % pool]))
            else:
                connection.executemany(
                    insert,
                    (
                        ((index + i) % partitions, None, payloads[(index + i) % pool])
                        for i in range(records_per_transaction)
                    ),
                )
            connection.execute("COMMIT")
            index += records_per_transaction
            if progress is not None:
                progress(number + 1, warmup + transactions)
        elapsed_s = time.monotonic() - started_s
    finally:
        connection.close()
    records = transactions * records_per_transaction
    return {
        "records_per_s": records / elapsed_s,
        "mib_per_s": records * workload.record_bytes / elapsed_s / (1 << 20),
        "elapsed_s": elapsed_s,
    }
