"""What one run of ``bench.scale`` does: the transaction's shape, the producer counts, how
long each count runs, and the bounds of every wait."""

from __future__ import annotations

from dataclasses import dataclass

TOPIC = "bench-scale"


@dataclass(frozen=True)
class ScaleSettings:
    producers: tuple[int, ...] = (1, 2, 4, 8, 16)
    seconds: float = 10.0  # each producer count, on each deployment
    records_per_transaction: int = 10
    record_bytes: int = 1024
    partitions: int = 4  # the records of a transaction go round them: 3, 3, 2, 2
    warmup_transactions: int = 3  # per producer process, once, before any count is timed
    sqlite_seconds: float = 5.0  # about how long the SQLite baseline commits
    idle_seconds: float = 3.0  # the servers' cost without transactions, once per deployment
    settle_timeout_s: float = 120.0  # before it, the warm-ups' completions end within this
    cluster: bool = True
    spread_ids: bool = False  # transactional ids chosen to reach every coordinator in turn
    # bench.scale.security's modes, each run on every deployment; the default is what
    # docs/operations.md "Securing a cluster" sets up: tokens and ACLs, no client TLS
    security: tuple[str, ...] = ("tokens",)
    session_timeout_ms: int = 4000  # the cluster's, as bench.cluster's
    zookeeper_tick_ms: int = 500
    call_timeout_ms: int = 30_000  # each client call (init, begin, flush, commit)
    start_timeout_s: float = 180.0  # every producer process started and warmed up

    @property
    def round_timeout_s(self) -> float:
        """A count's run: its seconds, then the last transaction's calls at their longest."""
        return self.seconds + 4 * self.call_timeout_ms / 1000 + 30


TINY = ScaleSettings(
    producers=(1, 2),
    seconds=1.0,
    warmup_transactions=1,
    sqlite_seconds=0.5,
    idle_seconds=0.5,
)
