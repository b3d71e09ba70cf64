"""The console's view-models and pages against a real broker behind a real gRPC server
with tokens and ACLs on (no browser: Flask's test client renders the pages)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from server_process import run_cli

from twinlog.engine.broker.broker import Broker
from twinlog.rpc.client import Admin, Producer
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.group_offsets import ResetTo
from twinlog.rpc.console.app import create_app
from twinlog.rpc.console.broker_metrics import MetricsSource
from twinlog.rpc.console.groups_view import build_group, build_groups, reset_offsets
from twinlog.rpc.console.messages_view import build_messages
from twinlog.rpc.console.overview_view import build_overview
from twinlog.rpc.console.session import ClusterSession, ConsoleTarget
from twinlog.rpc.console.throughput import ThroughputHistory
from twinlog.rpc.console.topics_view import build_topic, build_topics
from twinlog.rpc.console.transactions_view import (
    TransactionTally,
    abort_transaction,
    build_transactions,
)
from twinlog.rpc.server.config import ServerConfig
from twinlog.rpc.server.server import RpcServer

OPS = "ops-token-views-7c2e9a1f4b"
VIEWER = "viewer-token-views-3d8b6e2a5c"
ACL = """
ops all *
ops all group:*
ops all transactional-id:*
viewer read orders*
"""
TOPIC = "orders"
GROUP = "billing"


@dataclass
class Served:
    address: str
    ops: ClusterSession
    viewer: ClusterSession
    transaction_id: int
    metrics_url: str


def form_token_of(page: bytes) -> str:
    return page.split(b'name="csrf_token" value="')[1].split(b'"')[0].decode()


def session(address: str, token: str) -> ClusterSession:
    return ClusterSession(ConsoleTarget(address, ConnectionOptions(token=token)))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("console-views")
    (folder / "tokens").write_text(f"{OPS} ops\n{VIEWER} viewer\n")
    (folder / "acl").write_text(ACL)
    config = ServerConfig(
        port=0, tokens_file=str(folder / "tokens"), acl_file=str(folder / "acl"), metrics_port=0
    )
    with Broker.open(folder / "data") as broker:
        server = RpcServer(broker, config)
        server.start()
        address = f"127.0.0.1:{server.port}"
        options = ConnectionOptions(token=OPS)
        try:
            with Admin(address, connection=options) as admin:
                admin.create_topic(TOPIC, 2)
                with Producer(address, connection=options) as producer:
                    for value in (b'{"n": 1}', b"\x00\x01\x02", None):
                        producer.send(TOPIC, value, key=b"k", partition=0)
                    producer.flush()
                admin.reset_group_offsets(GROUP, [(TOPIC, 0)], ResetTo.offset(1))
            with Producer(
                address, transactional_id="stuck", transaction_timeout_ms=600_000,
                connection=options,
            ) as stuck:  # fmt: skip
                stuck.init_transactions()
                transaction_id = stuck.begin_transaction()
                stuck.send(TOPIC, b"never read", partition=1)
                stuck.flush()
                ops, viewer = session(address, OPS), session(address, VIEWER)
                assert server.metrics_endpoint is not None
                yield Served(address, ops, viewer, transaction_id, server.metrics_endpoint.url)
                ops.close()
                viewer.close()
        finally:
            server.stop(grace_ms=0)


def test_the_overview_counts_brokers_partitions_transactions_and_lag(served: Served) -> None:
    history = ThroughputHistory()
    view = build_overview(served.ops, history)
    assert view.problems == []
    assert view.standalone and [b.broker_id for b in view.brokers if b.live] == [0]
    assert view.brokers[0].controller
    assert view.topics == 1 and view.partitions == 2  # a cluster's internal ones apart
    assert view.open_transactions == 1
    assert [(row.group_id, row.lag) for row in view.groups] == [(GROUP, 2)]
    assert "collecting" in view.written_chart  # one sample so far: no rate yet
    for _ in range(2):  # a rate between each two samples, a line through two rates
        time.sleep(0.6)
        view = build_overview(served.ops, history)
    assert "<polyline" in view.written_chart and TOPIC in view.written_chart
    assert "<polyline" in view.lag_chart and GROUP in view.lag_chart


def test_topics_and_a_topic(served: Served) -> None:
    listing = build_topics(served.ops, show_internal=False)
    assert [
        (row.name, row.partitions, row.replication_factor, row.records) for row in listing.rows
    ] == [(TOPIC, 2, 1, 3)]
    topic = build_topic(served.ops, TOPIC)
    assert [
        (row.partition, row.high_watermark, row.log_end_offset) for row in topic.partitions
    ] == [
        (0, 3, 3),
        (1, 0, 0),
    ]
    assert ("cleanup.policy", "delete", False) in topic.settings
    missing = build_topic(served.ops, "nope")
    assert missing.partitions == [] and missing.problems[0].kind == "not-found"
    page = create_app(served.ops).test_client().get("/topics/nope")
    assert page.status_code == 404 and page.data.count(b"Not found") == 1
    # One broker is "1 broker", never "1 brokers" (the count and its noun agree).
    overview = create_app(served.ops).test_client().get("/").data.decode()
    assert "</span> broker live" in overview and "brokers live" not in overview


def test_sizes_and_bytes_written_come_from_the_brokers_metrics(served: Served) -> None:
    options = ConnectionOptions(token=OPS)
    metered = ClusterSession(
        ConsoleTarget(served.address, options, MetricsSource((served.metrics_url,)))
    )
    try:
        [row] = build_topics(metered, show_internal=False).rows
        assert row.size_bytes is not None and row.size_bytes > 0
        topic = build_topic(metered, TOPIC)
        assert topic.partitions[0].size_bytes == row.size_bytes  # partition 1 holds nothing
        history = ThroughputHistory()
        assert build_overview(metered, history).bytes_chart  # a chart (collecting, so far)
        assert build_overview(served.ops, history).bytes_chart == ""  # no --metrics: none
        before = build_transactions(metered, TransactionTally()).commits_decided
        assert before is not None
        with Producer(served.address, transactional_id="counted", connection=options) as producer:
            producer.init_transactions()
            with producer.transaction():
                producer.send("counted", b"counted")  # a topic of its own, made on first use
        assert build_transactions(metered, TransactionTally()).commits_decided == before + 1
        assert build_transactions(served.ops, TransactionTally()).commits_decided is None
    finally:
        metered.close()
    unreachable = ClusterSession(
        ConsoleTarget(served.address, options, MetricsSource(("http://127.0.0.1:1/metrics",)))
    )
    try:
        listing = build_topics(unreachable, show_internal=False)
        [row] = [row for row in listing.rows if row.name == TOPIC]
        assert row.size_bytes is None and row.records == 3
        assert "did not answer" in listing.problems[0].message
    finally:
        unreachable.close()


def test_messages_from_the_beginning_the_end_an_offset_and_a_time(served: Served) -> None:
    view = build_messages(served.ops, TOPIC, 0, "beginning", "", 10, "json")
    assert [row.value.kind for row in view.records] == ["json", "binary", "null"]
    assert json.loads(view.records[0].value.text) == {"n": 1}
    assert view.records[1].value.text == "\\x00\\x01\\x02"
    assert view.stopped_because == "the end of the partition"
    last = build_messages(served.ops, TOPIC, 0, "end", "", 1, "hex")
    assert [row.offset for row in last.records] == [2]
    from_offset = build_messages(served.ops, TOPIC, 0, "offset", "1", 1, "hex")
    assert from_offset.records[0].value.text.startswith("00000000  00 01 02")
    assert from_offset.stopped_because == "1 records"
    from_time = build_messages(served.ops, TOPIC, 0, "time", "2000-01-01T00:00:00", 5, "text")
    assert [row.offset for row in from_time.records] == [0, 1, 2]
    no_partition = build_messages(served.ops, TOPIC, 7, "beginning", "", 5, "text")
    assert no_partition.problems[0].kind == "not-found"
    bad_time = build_messages(served.ops, TOPIC, 0, "time", "yesterday", 5, "text")
    assert "not a time" in bad_time.problems[0].message


def test_a_groups_lag_and_a_dry_run_reset_that_commits_nothing(served: Served) -> None:
    assert [row.group_id for row in build_groups(served.ops).rows] == [GROUP]
    view = build_group(served.ops, GROUP)
    assert view.total_lag == 2 and "<rect" in view.lag_chart
    rows = reset_offsets(served.ops, GROUP, TOPIC, ResetTo.earliest(), dry_run=True)
    assert [(r.partition, r.previous_offset, r.new_offset) for r in rows] == [
        (0, 1, 0),
        (1, None, 0),
    ]
    assert build_group(served.ops, GROUP).total_lag == 2  # nothing was committed


def test_a_token_without_grants_is_told_it_is_not_permitted(served: Served) -> None:
    assert build_groups(served.viewer).rows == []  # the list holds the groups it may see
    group = build_group(served.viewer, GROUP)
    assert group.members == [] and group.problems[0].kind == "not-permitted"
    assert "Not permitted" in group.problems[0].message
    page = create_app(served.viewer).test_client().get(f"/groups/{GROUP}")
    assert page.status_code == 403 and b"Not permitted" in page.data
    client = create_app(served.viewer).test_client()
    token = form_token_of(client.get("/topics").data)
    refused = client.post(
        f"/transactions/{served.transaction_id}/abort", data={"csrf_token": token}
    )
    assert refused.status_code == 403 and b"Not permitted" in refused.data
    assert [t.transaction_id for t in served.ops.admin.list_transactions()] == [
        served.transaction_id
    ]


def test_a_post_without_the_form_token_changes_nothing(served: Served) -> None:
    client = create_app(served.ops).test_client()
    page = client.get("/topics")
    assert "default-src 'none'" in page.headers["Content-Security-Policy"]
    assert page.headers["X-Frame-Options"] == "DENY"
    refused = client.post(f"/topics/{TOPIC}/delete", data={"confirm_name": TOPIC})
    assert refused.status_code == 400 and b"token" in refused.data
    assert TOPIC in served.ops.admin.list_topics()
    token = form_token_of(client.get(f"/topics/{TOPIC}/delete").data)
    wrong_name = client.post(
        f"/topics/{TOPIC}/delete", data={"csrf_token": token, "confirm_name": "other"}
    )
    assert wrong_name.status_code == 400 and TOPIC in served.ops.admin.list_topics()


def test_transactions_and_the_admin_abort(served: Served) -> None:
    tally = TransactionTally()
    view = build_transactions(served.ops, tally)
    [row] = view.rows
    assert (row.transactional_id, row.state, row.partitions) == (
        "stuck",
        row.state,
        (f"{TOPIC}-1",),
    )
    assert row.timeout_s == 600 and not row.overdue
    abort_transaction(served.ops, row.transaction_id, tally)
    after = build_transactions(served.ops, tally)
    assert after.rows == [] and after.finished_seen == 1 and after.aborted_here == 1
    assert build_messages(served.ops, TOPIC, 1, "beginning", "", 5, "text").records == []


@pytest.mark.slow  # each page waits out its whole budget
def test_every_page_answers_within_its_budget_when_the_server_does_not(tmp_path: Path) -> None:
    """A port that accepts connections and never answers (a stalled broker). The pages are
    given a 1 s budget (the default is 4 s, for 5 s a page) so seven pages take 7 s, not 28:
    what is checked is that the budget, whatever it is, bounds every page."""
    budget_ms = 1_000
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        target = ConsoleTarget(
            address, ConnectionOptions(), page_budget_ms=budget_ms, call_timeout_ms=600
        )
        stalled = ClusterSession(target)
        client = create_app(stalled).test_client()
        try:
            for path in ("/", "/topics", "/topics/orders", "/messages?topic=orders", "/groups",
                         "/groups/billing", "/transactions"):  # fmt: skip
                started_s = time.monotonic()
                page = client.get(path)
                elapsed_s = time.monotonic() - started_s
                print(f"{path}: {page.status_code} in {elapsed_s:.2f} s")
                assert elapsed_s < budget_ms / 1000 + 1, (path, elapsed_s)
                assert b"Traceback" not in page.data
                assert b"No answer" in page.data or b"Cannot reach" in page.data, page.data[-800:]
        finally:
            stalled.close()


def test_the_command_has_help_with_an_example() -> None:
    from twinlog.rpc.cli.main import build_parser

    parser = build_parser()
    with pytest.raises(SystemExit) as ended:
        parser.parse_args(["console", "--help"])
    assert ended.value.code == 0
    arguments = parser.parse_args(["console", "--server", "127.0.0.1:7070"])
    assert (arguments.host, arguments.port) == ("127.0.0.1", 8080)  # this machine only


def test_a_port_in_use_is_one_error_line(served: Served, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(OPS + "\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = str(taken.getsockname()[1])
        ended = run_cli("console", "--server", served.address, "--token-file", str(token_file),
                        "--port", port, timeout_s=30)  # fmt: skip
    assert ended.returncode == 1
    assert ended.stderr.strip().splitlines() == [
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use (--port N takes "
        "another port; --port 0 picks a free one)"
    ]
