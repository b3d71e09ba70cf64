"""docs/grafana/twinlog.json queries only metrics a real broker exports: a ``twinlog serve``
with the Kafka listener and metrics on (and tokens on both doors) is scraped, and every
metric name in every panel's query and variable is one of its families' series."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest
from checkout import ROOT
from server_process import ServerProcess

pytestmark = pytest.mark.slow  # a server process

DASHBOARD = ROOT / "docs" / "grafana" / "twinlog.json"
METRICS_LINE = re.compile(r"metrics on (http://\S+/metrics)")
TYPE_LINE = re.compile(r"^# TYPE (\S+) (\S+)$", re.MULTILINE)
# A metric name in PromQL: a word not followed by "(" (a function) nor inside a label
# matcher, braces or a range; functions, keywords and labels are filtered below.
NAME = re.compile(r"\b(?:twinlog|process|python)_[a-z_]+\b")
HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")
TOKEN = "grafana-test-token-6c1e8b2f"
METRICS_TOKEN = "grafana-metrics-token-9a4d7e3c1b"


def exported_names(exposition: str) -> set[str]:
    names = set()
    for family, kind in TYPE_LINE.findall(exposition):
        names.add(family)
        if kind == "histogram":
            names.update(family + suffix for suffix in HISTOGRAM_SERIES)
    return names


def queries(dashboard: dict[str, object]) -> list[str]:
    found = []
    for panel in dashboard["panels"]:  # type: ignore[attr-defined]
        found += [target["expr"] for target in panel.get("targets", [])]
    for variable in dashboard["templating"]["list"]:  # type: ignore[index]
        found.append(variable["definition"])
    return found


def test_every_metric_the_dashboard_queries_is_exported(tmp_path: Path) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["__inputs"][0]["pluginId"] == "prometheus"  # Grafana asks for it on import
    (tmp_path / "tokens").write_text(f"{TOKEN} ops\n")
    (tmp_path / "metrics-token").write_text(METRICS_TOKEN + "\n")
    with ServerProcess(
        tmp_path / "data",
        "--tokens-file", str(tmp_path / "tokens"),
        "--metrics-port", "0", "--metrics-token-file", str(tmp_path / "metrics-token"),
        "--kafka-listener", "127.0.0.1:0",
    ) as server:  # fmt: skip
        url = METRICS_LINE.search(server.log())
        assert url is not None, server.log()
        request = urllib.request.Request(
            url.group(1), headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            exposition = answer.read().decode()
    exported = exported_names(exposition)
    assert "twinlog_open_transactions" in exported and "twinlog_kafka_bytes_total" in exported
    used = {name for expr in queries(dashboard) for name in NAME.findall(expr)}
    assert len(used) >= 20, sorted(used)
    assert not used - exported, f"queried but not exported: {sorted(used - exported)}"
    # The list, each on some panel.
    for needed in (
        "twinlog_rpc_requests_total", "twinlog_rpc_duration_seconds_bucket",
        "twinlog_rpc_received_bytes_total", "twinlog_rpc_sent_bytes_total",
        "twinlog_open_transactions", "twinlog_oldest_open_transaction_age_seconds",
        "twinlog_commit_latency_seconds_bucket", "twinlog_apply_latency_seconds_bucket",
        "twinlog_journal_used_bytes", "twinlog_log_size_bytes",
        "twinlog_fsync_duration_seconds_bucket", "twinlog_consumer_group_lag",
        "twinlog_under_replicated_partitions",
    ):  # fmt: skip
        assert needed in used, needed
