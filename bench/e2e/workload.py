"""The work every contender does: the same 1 KiB payloads, in transactions of 1,000
records spread over 4 partitions (250 records each)."""

from __future__ import annotations

import random
from dataclasses import dataclass

RECORD_BYTES = 1024
RECORDS_PER_TRANSACTION = 1000
PARTITIONS = 4
PAYLOAD_POOL = 1024  # distinct payloads, reused in turn (random, so incompressible)


@dataclass(frozen=True)
class Workload:
    transactions: int = 20
    warmup_transactions: int = 2
    records_per_transaction: int = RECORDS_PER_TRANSACTION
    record_bytes: int = RECORD_BYTES
    partitions: int = PARTITIONS

    @property
    def records(self) -> int:
        return self.transactions * self.records_per_transaction

    @property
    def payload_bytes(self) -> int:
        return self.records * self.record_bytes

    def payloads(self) -> list[bytes]:
        generator = random.Random(7)
        return [generator.randbytes(self.record_bytes) for _ in range(PAYLOAD_POOL)]


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` in 0..1); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[rank]
