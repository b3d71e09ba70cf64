"""The SQLite baseline: the same rows (``records_per_transaction`` x ``record_bytes``
random bytes, over ``partitions`` partition numbers) committed by one writer, WAL with
synchronous=FULL, one ``executemany`` per transaction (``bench.e2e.sqlite_baseline``).

A short first run (also its warm-up) gives the rate; the second commits as many
transactions as that rate fits in ``sqlite_seconds``, and is the figure.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from bench.e2e.sqlite_baseline import run_sqlite
from bench.e2e.workload import Workload
from bench.scale.settings import ScaleSettings

CALIBRATION_TRANSACTIONS = 50
TRANSACTIONS_MIN = 50
TRANSACTIONS_MAX = 200_000


def sqlite_baseline(directory: Path, settings: ScaleSettings) -> dict[str, Any]:
    size = settings.records_per_transaction
    workload = Workload(
        transactions=CALIBRATION_TRANSACTIONS,
        warmup_transactions=1,
        records_per_transaction=size,
        record_bytes=settings.record_bytes,
        partitions=settings.partitions,
    )
    calibration_dir = directory / "calibration"
    calibration_dir.mkdir(parents=True)
    rate = run_sqlite(calibration_dir, workload, size)["records_per_s"] / size
    transactions = round(rate * settings.sqlite_seconds)
    workload = dataclasses.replace(
        workload, transactions=max(TRANSACTIONS_MIN, min(TRANSACTIONS_MAX, transactions))
    )
    result = run_sqlite(directory, workload, size)
    return {
        "transactions": workload.transactions,
        "elapsed_s": result["elapsed_s"],
        "transactions_per_s": result["records_per_s"] / size,
        "records_per_s": result["records_per_s"],
    }
