"""The cluster client's copy of the cluster's metadata, and how it is refreshed.

``MetadataCache.current(topic)`` gives the metadata to route by, fetching it first when
there is none yet, when it was marked stale (``invalidate``: a call met a broker that
no longer leads, or none at all), when it is older than ``max_age_ms``, or when it
does not name ``topic``. Refreshes are rate-limited (``refresh_backoff_ms`` between
two) and single-flight: threads that need one while another runs wait for its answer
instead of asking again.

A refresh asks one broker at a time, each within ``attempt_timeout_ms``: first the one
that answered last, then the other live brokers of the metadata, then the bootstrap
list, brokers that failed in the last ``SUSPECT_MS`` last of all (a failed refresh, or
any call that met an unreachable or stalled broker: ``suspect``). A single-node server
answers without a cluster id (``ClusterMetadata.standalone``): its advertised address
may not be reachable from here (``--host 0.0.0.0``, a proxy), so only the addresses the
client was given are asked again, and every call goes to the one that answered.

``home`` is the first address that answered: the broker asked first for an idempotent
producer's id and for topic administration, asked for ``list_transactions``, and sent
coordinator calls when the servers name no coordinator (older ones). Transaction and
group coordinators are found per key (``coordinator_cache``, ``cluster``).

Thread rule: any thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from twinlog.engine.base.cluster_metadata import ClusterMetadata
from twinlog.engine.base.errors import BrokerUnavailableError, RequestTimedOutError, TwinlogError
from twinlog.rpc.client.broker_pool import BrokerPool
from twinlog.rpc.client.call_deadline import deadline_passed, sent_nothing

log = logging.getLogger("twinlog.client")

REFRESH_BACKOFF_MS = 100  # Kafka's retry.backoff.ms: at most ten refreshes a second
MAX_AGE_MS = 300_000  # Kafka's metadata.max.age.ms: refresh at least this often
ATTEMPT_TIMEOUT_MS = 5_000  # one broker's answer; a paused one costs no more than this
SUSPECT_MS = 10_000  # a broker that failed to answer is asked last for this long


@dataclass(frozen=True)
class Snapshot:
    metadata: ClusterMetadata
    answered_by: str  # the address that gave it


class MetadataCache:
    def __init__(
        self,
        bootstrap: list[str],
        pool: BrokerPool,
        *,
        refresh_backoff_ms: int = REFRESH_BACKOFF_MS,
        max_age_ms: int = MAX_AGE_MS,
        attempt_timeout_ms: int = ATTEMPT_TIMEOUT_MS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.bootstrap = list(bootstrap)
        self.pool = pool
        self.refresh_backoff_ms = refresh_backoff_ms
        self.max_age_ms = max_age_ms
        self.attempt_timeout_ms = min(attempt_timeout_ms, pool.options.request_timeout_ms)
        self._clock = clock
        self._lock = threading.Lock()  # the fields below
        self._refreshing = threading.Lock()  # held by the one thread that refreshes
        self._snapshot: Snapshot | None = None
        self._fetched_s = 0.0  # the last successful refresh: the metadata's age
        self._attempted_s = float("-inf")  # the last refresh, answered or not: the rate limit
        self._stale = False
        self._refreshes = 0  # completed refreshes: tells a waiter that one ran meanwhile
        self._topics: set[str] = set()  # topics routed so far: what a refresh asks for
        self._suspects: dict[str, float] = {}  # address -> when it last failed
        self._home: str | None = None

    # --- reading ---------------------------------------------------------------------

    def current(self, topic: str | None = None) -> Snapshot:
        """Metadata to route by, refreshed first when needed (see the module's text).

        Raises BrokerUnavailableError when there is none and no broker answers.
        """
        with self._lock:
            if topic is not None:
                self._topics.add(topic)
            snapshot = self._snapshot
            refreshes = self._refreshes
            wanted = snapshot is None or self._stale or self._too_old() or self._lacks(topic)
            if snapshot is not None and wanted and self._refreshed_recently():
                wanted = False  # rate-limited: route by what is known
        if not wanted:
            assert snapshot is not None
            return snapshot
        try:
            return self._refresh(refreshes)
        except TwinlogError:
            if snapshot is None:
                raise
            return snapshot  # every broker failed to answer: the call itself will say more

    def refresh(self) -> Snapshot:
        """Fetch now (rate limits aside): for callers that show the metadata itself."""
        with self._lock:
            refreshes = self._refreshes
        return self._refresh(refreshes, forced=True)

    def invalidate(self) -> None:
        """The next ``current`` refreshes (rate limits allowing)."""
        with self._lock:
            self._stale = True

    def refresh_wait_s(self) -> float:
        """How long until a refresh is allowed again (0: now): a caller that met a moved
        leader waits this long, rather than asking the same broker again in vain."""
        with self._lock:
            ready_s = self._attempted_s + self.refresh_backoff_ms / 1000
            return max(0.0, ready_s - self._clock())

    def suspect(self, address: str) -> None:
        """``address`` failed to answer a call (unreachable, or timed out: paused): ask it
        last, for metadata and for a coordinator, for ``SUSPECT_MS``."""
        with self._lock:
            self._suspects[address] = self._clock()

    def home(self) -> str:
        """The first address that answered (a fetch first, when none has)."""
        if self._home is None:
            self.current()
        assert self._home is not None
        return self._home

    def addresses(self) -> list[str]:
        """Every address worth trying for a call any broker can answer, best first."""
        with self._lock:
            return self._candidates()

    def _too_old(self) -> bool:
        return (self._clock() - self._fetched_s) * 1000 >= self.max_age_ms

    def _refreshed_recently(self) -> bool:
        return (self._clock() - self._attempted_s) * 1000 < self.refresh_backoff_ms

    def _lacks(self, topic: str | None) -> bool:
        snapshot = self._snapshot
        return (
            topic is not None
            and snapshot is not None
            and not snapshot.metadata.standalone
            and snapshot.metadata.topic(topic) is None
        )

    # --- fetching ----------------------------------------------------------------------

    def _refresh(self, refreshes_seen: int, forced: bool = False) -> Snapshot:
        with self._refreshing:
            with self._lock:
                if self._refreshes != refreshes_seen and self._snapshot is not None and not forced:
                    return self._snapshot  # another thread refreshed while this one waited
                candidates = self._candidates()
                topics = sorted(self._topics)
                self._attempted_s = self._clock()
            snapshot = self._fetch(candidates, topics)
            with self._lock:
                self._snapshot = snapshot
                self._fetched_s = self._clock()
                self._stale = False
                self._refreshes += 1
                if self._home is None:
                    self._home = snapshot.answered_by
            return snapshot

    def _candidates(self) -> list[str]:
        """Lock held. The last to answer, the live brokers, the bootstrap list; suspects last."""
        ordered: list[str] = []
        snapshot = self._snapshot
        if snapshot is not None:
            ordered.append(snapshot.answered_by)
            if not snapshot.metadata.standalone:
                ordered.extend(broker.address for broker in snapshot.metadata.brokers)
        ordered.extend(self.bootstrap)
        unique = list(dict.fromkeys(ordered))
        now_s = self._clock()
        recent = {
            address
            for address, failed_s in self._suspects.items()
            if (now_s - failed_s) * 1000 < SUSPECT_MS
        }
        return [a for a in unique if a not in recent] + [a for a in unique if a in recent]

    def _fetch(self, candidates: list[str], topics: list[str]) -> Snapshot:
        failures: list[str] = []
        for address in candidates:
            if deadline_passed():
                # The rest would fail unsent: not suspects (that would undo the order).
                raise RequestTimedOutError(
                    "the call's deadline passed while asking for the cluster's metadata ("
                    + ("; ".join(failures) or "no broker asked yet")
                    + "); retry it, with a larger timeout if brokers are slow to answer"
                )
            try:
                metadata = self.pool.get(address).cluster_metadata(
                    topics or None, self.attempt_timeout_ms
                )
            except TwinlogError as error:
                if not error.retriable:
                    raise  # a bad token, a server too old for Metadata: asking others won't help
                if not sent_nothing(error):
                    with self._lock:
                        self._suspects[address] = self._clock()
                failures.append(f"{address}: {type(error).__name__}: {error}")
                log.debug("metadata from %s failed: %s", address, error)
                continue
            with self._lock:
                self._suspects.pop(address, None)
            return Snapshot(metadata, address)
        raise BrokerUnavailableError(
            f"no broker answered for the cluster's metadata (asked {', '.join(candidates)}): "
            + "; ".join(failures)
            + ". Is the cluster running, and is the bootstrap list right?"
        )
