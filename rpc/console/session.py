"""The console's one connection to the cluster, and the time a page may spend on it.

One ``ClusterBroker`` (a bootstrap list, even of one address) serves every page: a
single-node server answers its metadata as a cluster of one, and a cluster's calls go to
each partition's leader. Every page's calls run under ``bounded()``, one deadline for the
whole page, so a slow or partly failed cluster costs a page at most ``page_budget_ms``
and never a hung browser tab.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass

from twinlog.rpc.client.admin import Admin
from twinlog.rpc.client.call_deadline import deadline_at
from twinlog.rpc.client.cluster import ClusterBroker
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.consumer import Consumer
from twinlog.rpc.client.retry import RetryPolicy
from twinlog.rpc.console.broker_metrics import LogSizes, MetricsSource

# Every page answers within 5 s: 4 s for the cluster, the rest for rendering.
PAGE_BUDGET_MS = 4_000
# One call may take this long, so that one stalled leader leaves time for the others.
CALL_TIMEOUT_MS = 2_500


@dataclass(frozen=True)
class ConsoleTarget:
    """What ``twinlog console`` was told to reach, and how."""

    server: str
    options: ConnectionOptions
    metrics: MetricsSource | None = None  # the brokers' /metrics, for sizes in bytes
    page_budget_ms: int = PAGE_BUDGET_MS
    call_timeout_ms: int = CALL_TIMEOUT_MS


class ClusterSession:
    """Thread rule: any thread (pages are served on several)."""

    def __init__(self, target: ConsoleTarget) -> None:
        self.target = target
        servers = target.server if "," in target.server else target.server + ","
        self.cluster = ClusterBroker(servers, target.options)
        self.admin = Admin(
            self.cluster,
            default_api_timeout_ms=target.call_timeout_ms,
            retry=RetryPolicy(timeout_ms=target.call_timeout_ms),
        )

    @contextlib.contextmanager
    def bounded(self) -> Iterator[None]:
        """Every client call in the block ends by the page's deadline."""
        with deadline_at(time.monotonic() + self.target.page_budget_ms / 1000):
            yield

    def log_sizes(self) -> LogSizes | None:
        """Each partition's size from the brokers' metrics; None without ``--metrics``."""
        return None if self.target.metrics is None else self.target.metrics.log_sizes()

    def consumer(self) -> Consumer:
        """A consumer without a group, for browsing: it commits nothing and joins nothing."""
        return Consumer(
            self.cluster,
            enable_auto_commit=False,
            default_api_timeout_ms=self.target.call_timeout_ms,
            fetch_max_wait_ms=200,
            retry=RetryPolicy(timeout_ms=self.target.call_timeout_ms),
        )

    def close(self) -> None:
        self.admin.close()
        self.cluster.close()
