"""How much work each phase does. Every figure comes from a fixed amount of work, and
every wait is bounded by ``phase_timeout_s``."""

from __future__ import annotations

import random
from dataclasses import dataclass

from twinlog.engine.base.units import MEBIBYTE

PAYLOAD_POOL = 256  # distinct random payloads, reused in turn (incompressible)
MIB = MEBIBYTE  # the unit under the short name this bench's modules use


@dataclass(frozen=True)
class BenchSettings:
    record_bytes: int = 1024
    plain_records: int = 50_000
    transactions: int = 300
    records_per_transaction: int = 10
    latency_samples: int = 500
    warmup_records: int = 500  # sent first, not measured: connections, first batches
    failover_rounds: int = 3  # SIGKILL and graceful failovers each; the medians are shown
    catch_up_mib: int = 100
    # transactions left open at the coordinator killed by the coordinator failover phase,
    # one round per count
    open_transactions: tuple[int, ...] = (0, 1000)
    compare_fsync: bool = True
    session_timeout_ms: int = 4000  # the tests' value; Kafka's default is 18 s
    zookeeper_tick_ms: int = 500  # expiry is checked per tick: sessions end within one
    phase_timeout_s: float = 120.0

    @property
    def transactional_records(self) -> int:
        return self.transactions * self.records_per_transaction

    def payloads(self) -> list[bytes]:
        generator = random.Random(13)
        return [generator.randbytes(self.record_bytes) for _ in range(PAYLOAD_POOL)]


TINY = BenchSettings(
    plain_records=500,
    transactions=10,
    latency_samples=20,
    warmup_records=20,
    catch_up_mib=2,
    failover_rounds=1,
    open_transactions=(20,),  # one round: it runs every step a round has
)
