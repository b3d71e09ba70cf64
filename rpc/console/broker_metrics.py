"""What only the brokers' Prometheus endpoints tell: each partition's data log size, and
how many commits the coordinators have decided.

The client's answers have offsets but no bytes; ``twinlog console --metrics URL`` (one
per broker) lets the Topics pages show sizes and the Overview chart bytes written per
topic. Each scrape is bounded by the page's deadline (and ``SCRAPE_TIMEOUT_S``); an
endpoint that fails is a problem on the page, not an error. With several brokers a
partition is reported by each of its replicas: the largest is taken (the leader holds at
least what a follower does, give or take what it has not fetched yet).
"""

from __future__ import annotations

import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from twinlog.rpc.client.call_deadline import current_deadline_s
from twinlog.rpc.console.problems import Problem

SCRAPE_TIMEOUT_S = 1.5
LOG_SIZE = "twinlog_log_size_bytes"
COMMIT_LATENCY = "twinlog_commit_latency_seconds"


@dataclass
class LogSizes:
    """Bytes per (topic, partition); ``problems``: the endpoints that did not answer."""

    sizes: dict[tuple[str, int], int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    def of_topic(self, topic: str) -> int | None:
        found = [size for (name, _), size in self.sizes.items() if name == topic]
        return sum(found) if found else None


@dataclass(frozen=True)
class MetricsSource:
    """The brokers' ``/metrics`` URLs, and how to reach them (their token file's token,
    the CA of their TLS certificate). Thread rule: any thread."""

    urls: tuple[str, ...]
    token: str | None = None
    tls_ca_file: str | None = None

    def log_sizes(self) -> LogSizes:
        found = LogSizes()
        for sample in self._samples(LOG_SIZE, "sizes", found.problems):
            key = (sample.labels["topic"], int(sample.labels["partition"]))
            found.sizes[key] = max(found.sizes.get(key, 0), int(sample.value))
        return found

    def commits_decided(self, problems: list[Problem]) -> int | None:
        """Commits the brokers' coordinators decided since each started (the count of
        ``twinlog_commit_latency_seconds``); None when no endpoint answered."""
        samples = list(self._samples(COMMIT_LATENCY, "the commit count", problems))
        counts = [s.value for s in samples if s.name == COMMIT_LATENCY + "_count"]
        return int(sum(counts)) if counts else None

    def _samples(self, family_name: str, what: str, problems: list[Problem]) -> Iterator[Any]:
        for url in self.urls:
            try:
                text = self._scrape(url)
            except (OSError, ValueError) as error:
                problems.append(
                    Problem(
                        "unreachable",
                        f"The metrics at {url} did not answer ({error}): {what} left out.",
                    )
                )
                continue
            for family in text_string_to_metric_families(text):
                if family.name == family_name:
                    yield from family.samples

    def _scrape(self, url: str) -> str:
        deadline_s = current_deadline_s()
        timeout_s = SCRAPE_TIMEOUT_S
        if deadline_s is not None:
            timeout_s = min(timeout_s, deadline_s - time.monotonic())
        if timeout_s <= 0:
            raise TimeoutError("no time left on this page")
        request = urllib.request.Request(url)
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        context = (
            ssl.create_default_context(cafile=self.tls_ca_file) if url.startswith("https") else None
        )
        with urllib.request.urlopen(request, timeout=timeout_s, context=context) as answer:
            body: bytes = answer.read()
        return body.decode()
