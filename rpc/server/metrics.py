"""The server's Prometheus metrics: one registry per server (tests run several at once).

Request figures are counted as requests pass (``request_observer``); the broker's
are read at scrape time (``engine_collector``). ``twinlog serve --metrics-port N``
serves the registry on ``http://HOST:N/metrics`` (``metrics_endpoint``). Names,
types and labels: docs/operations.md.

Thread rule: prometheus_client's metrics take any thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

from twinlog.engine.broker.broker_stats import BrokerStats
from twinlog.rpc.server.engine_collector import EngineCollector

# Request latency buckets in seconds: a fetch long poll may wait fetch_wait_ms_max (30 s).
REQUEST_BUCKETS_S = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
)
RPC_LABELS = ("service", "method", "code")


def split_method(full_method: str) -> tuple[str, str]:
    """``/twinlog.v1.Producing/Produce`` -> (``twinlog.v1.Producing``, ``Produce``)."""
    service, _, method = full_method.lstrip("/").rpartition("/")
    return service or "unknown", method


class ServerMetrics:
    def __init__(self, stats: Callable[[], BrokerStats] | None = None) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "twinlog_rpc_requests",
            "RPCs served, by service, method and gRPC status code (a stream counts once)",
            RPC_LABELS,
            registry=self.registry,
        )
        self.request_duration = Histogram(
            "twinlog_rpc_duration_seconds",
            "RPC duration, by service, method and gRPC status code (a stream: its lifetime)",
            RPC_LABELS,
            buckets=REQUEST_BUCKETS_S,
            registry=self.registry,
        )
        self.bytes_in = Counter(
            "twinlog_rpc_received_bytes",
            "Produce request bytes received: record batches and their topic and ids (Produce, ProduceStream)",
            ("service", "method"),
            registry=self.registry,
        )
        self.bytes_out = Counter(
            "twinlog_rpc_sent_bytes",
            "Fetch response bytes sent: records and their offsets (Fetch)",
            ("service", "method"),
            registry=self.registry,
        )
        # The Kafka listener's requests, when the server has one (``observe_kafka``). Labels
        # only from what is served: API names and versions from its table, error names from
        # Kafka's (the codes are the listener's own).
        self.kafka_requests = Counter(
            "twinlog_kafka_requests",
            "Kafka requests, by API, version and outcome (answered; error: a top-level error "
            "code; unanswered: a Produce with acks=0; closed: the connection was closed)",
            ("api", "version", "outcome"),
            registry=self.registry,
        )
        self.kafka_request_duration = Histogram(
            "twinlog_kafka_request_duration_seconds",
            "Kafka request duration, by API and version (a Fetch's long poll included)",
            ("api", "version"),
            buckets=REQUEST_BUCKETS_S,
            registry=self.registry,
        )
        self.kafka_bytes = Counter(
            "twinlog_kafka_bytes",
            "Kafka request and answer frame bytes, by API, version and direction (in, out)",
            ("api", "version", "direction"),
            registry=self.registry,
        )
        self.kafka_errors = Counter(
            "twinlog_kafka_errors",
            "Kafka answers carrying an error, by API, version and Kafka error name (each name "
            "once per answer, whether top-level or a topic's or partition's)",
            ("api", "version", "error"),
            registry=self.registry,
        )
        self.registry.register(EngineCollector(stats))
        # The process's own figures (CPU seconds, resident and virtual memory, open and
        # maximum file descriptors, start time), the interpreter's version and its garbage
        # collector's counts: the library's collectors, under their standard names.
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        # (method, code) -> its two labelled children: labels() costs a lock and a lookup
        # per call, this a dict read (a lost race only makes the same children twice).
        self._children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._bytes_by_method: dict[str, tuple[Any, Any]] = {}

    def observe_kafka(
        self,
        api: str,
        version: str,
        outcome: str,
        duration_s: float,
        bytes_in: int,
        bytes_out: int,
        errors: Iterable[str] = (),
    ) -> None:
        """One Kafka request (labels bounded by the caller: served APIs and versions, Kafka's
        error names)."""
        self.kafka_requests.labels(api, version, outcome).inc()
        self.kafka_request_duration.labels(api, version).observe(duration_s)
        self.kafka_bytes.labels(api, version, "in").inc(bytes_in)
        if bytes_out:
            self.kafka_bytes.labels(api, version, "out").inc(bytes_out)
        for error in errors:
            self.kafka_errors.labels(api, version, error).inc()

    def observe(self, full_method: str, code: str, duration_s: float) -> None:
        children = self._children.get((full_method, code))
        if children is None:  # first call of this method with this code
            labels = (*split_method(full_method), code)
            children = self.requests.labels(*labels), self.request_duration.labels(*labels)
            self._children[(full_method, code)] = children
        count, duration = children
        count.inc()
        duration.observe(duration_s)

    def received(self, full_method: str, size_bytes: int) -> None:
        if size_bytes:
            self._bytes_children(full_method)[0].inc(size_bytes)

    def sent(self, full_method: str, size_bytes: int) -> None:
        if size_bytes:
            self._bytes_children(full_method)[1].inc(size_bytes)

    def _bytes_children(self, full_method: str) -> tuple[Any, Any]:
        """(bytes in, bytes out) of a method: counted per message of a stream, so cached too."""
        children = self._bytes_by_method.get(full_method)
        if children is None:
            labels = split_method(full_method)
            children = self.bytes_in.labels(*labels), self.bytes_out.labels(*labels)
            self._bytes_by_method[full_method] = children
        return children

    def exposition(self) -> bytes:
        """The text format a scrape gets."""
        return generate_latest(self.registry)
