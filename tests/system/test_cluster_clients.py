"""Clients that follow a real cluster (one ZooKeeper, three ``twinlog serve --broker-id N``
processes; ``tests/support/cluster_support.py``): a ``Producer`` and a ``Consumer`` given
the bootstrap list write and read a replication-factor-3 topic while its leader is
SIGKILLed, with nothing lost and nothing twice; ``twinlog topics create
--replication-factor 3`` and ``twinlog cluster describe`` (from ZooKeeper and from the
brokers, text and JSON); ``twinlog cluster up`` starts and stops a whole cluster (with Kafka
listeners, which a Kafka client finds through any one of them)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import kafka
import pytest
from checkout import ROOT
from cluster_support import LocalCluster, wait_for
from server_process import environment, run_cli

from twinlog.rpc.client import Admin, Consumer, Producer
from twinlog.rpc.client.records import RecordMetadata

pytestmark = [pytest.mark.slow, pytest.mark.crash]

RECORDS = 300
KILL_AFTER = 100  # records acknowledged before the leader of partition 0 is killed
SEND_INTERVAL_S = 0.01


def test_topics_create_with_a_replication_factor_and_cluster_describe(
    cluster: LocalCluster,
) -> None:
    created = run_cli(
        "topics", "create", "rf3", "--partitions", "2", "--replication-factor", "3",
        "--server", cluster.bootstrap, *cluster.cli_arguments(),
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert "replication factor 3" in created.stdout
    # The cluster is secured (cluster_support): without a token nothing is created.
    refused = run_cli(
        "topics", "create", "rf3-anonymous", "--partitions", "1", "--server", cluster.bootstrap
    )  # fmt: skip
    assert refused.returncode != 0 and "rf3-anonymous" not in refused.stdout, refused.stdout
    states = cluster.wait_for_full_isr("rf3", 2, 3)
    with Producer(cluster.bootstrap, **cluster.client_arguments()) as producer:
        for number in range(10):
            producer.send("rf3", b"r%d" % number, partition=number % 2)
        producer.flush(timeout_ms=30_000)

    described = run_cli(
        "cluster", "describe", *cluster.zookeeper_cli_arguments(), *cluster.cli_arguments(),
        "--format", "json",
    )  # fmt: skip
    assert described.returncode == 0, described.stderr
    report = json.loads(described.stdout)
    assert [broker["id"] for broker in report["brokers"]] == [1, 2, 3]
    assert report["controller_id"] in (1, 2, 3) and report["cluster_id"]
    [topic] = [topic for topic in report["topics"] if topic["name"] == "rf3"]
    for item in topic["partitions"]:
        state = states[item["partition"]]
        assert item["leader"] == state.leader and item["leader_epoch"] == state.leader_epoch
        assert sorted(item["replicas"]) == [1, 2, 3] and sorted(item["isr"]) == [1, 2, 3]
        assert item["high_watermark"] == 5 and not item["under_replicated"]
    assert report["under_replicated"] == []

    text = run_cli(
        "cluster", "describe", "--server", cluster.bootstrap, *cluster.cli_arguments(),
        "--topic", "rf3",
    )  # fmt: skip
    assert text.returncode == 0, text.stderr
    rows = [line.split() for line in text.stdout.splitlines() if line.startswith("rf3 ")]
    assert [(row[1], row[2], row[6]) for row in rows] == [
        ("0", str(states[0].leader), "5"),
        ("1", str(states[1].leader), "5"),
    ]
    assert all(sorted(row[4].split(",")) == ["1", "2", "3"] for row in rows)
    assert "under-replicated or offline partitions: 0" in text.stdout


def test_a_producer_and_a_consumer_follow_a_killed_leader(cluster: LocalCluster) -> None:
    bootstrap = cluster.bootstrap
    credentials = cluster.client_arguments()
    with Admin(bootstrap, **credentials) as admin:
        admin.create_topic("flow", 2, {"replication.factor": "3"})
    before = cluster.wait_for_full_isr("flow", 2, 3)[0]

    read: list[tuple[int, int, bytes | None]] = []
    reading_done = threading.Event()

    def consume() -> None:
        with Consumer(bootstrap, request_timeout_ms=10_000, **credentials) as consumer:
            consumer.assign([("flow", 0), ("flow", 1)])
            consumer.seek_to_beginning()
            deadline = time.monotonic() + 90
            while len(read) < RECORDS and time.monotonic() < deadline:
                for record in consumer.poll(200):
                    read.append((record.partition, record.offset, record.value))
        reading_done.set()

    reader = threading.Thread(target=consume, name="test-consumer")
    reader.start()
    acked_at: dict[int, float] = {}
    killed_at = 0.0
    futures: list[Future[RecordMetadata]] = []
    with Producer(bootstrap, linger_ms=0, request_timeout_ms=10_000, **credentials) as producer:
        for number in range(RECORDS):
            if number == KILL_AFTER:
                wait_for("the first records acknowledged", lambda: len(acked_at) >= KILL_AFTER)
                killed_at = time.monotonic()
                cluster.kill(before.leader)  # SIGKILL, mid-stream
            future = producer.send("flow", b"v%d" % number, partition=number % 2)
            future.add_done_callback(
                lambda done, number=number: acked_at.setdefault(number, time.monotonic())
            )
            futures.append(future)
            time.sleep(SEND_INTERVAL_S)
        producer.flush(timeout_ms=60_000)
    offsets = {number: future.result(timeout=0) for number, future in enumerate(futures)}
    after = cluster.wait_for_new_leader("flow", 0, before, timeout_s=5)
    assert after.leader_epoch > before.leader_epoch and before.leader not in after.isr_ids
    first_ack_after_kill = min(
        at for number, at in acked_at.items() if number >= KILL_AFTER and number % 2 == 0
    )
    print(f"failover seen by the producer: {first_ack_after_kill - killed_at:.2f} s")

    reader.join(timeout=100)
    assert reading_done.is_set()
    assert len(read) == RECORDS, f"read {len(read)} of {RECORDS}"
    for partition in (0, 1):
        mine = [(offset, value) for p, offset, value in read if p == partition]
        sent = [b"v%d" % number for number in range(partition, RECORDS, 2)]
        assert [value for _offset, value in mine] == sent  # everything, once, in order
        assert [offset for offset, _value in mine] == list(range(len(sent)))
        assert [offsets[number].offset for number in range(partition, RECORDS, 2)] == list(
            range(len(sent))
        )


def test_cluster_up_starts_a_cluster_and_stops_it_on_sigterm(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [
            sys.executable, "-m", "twinlog.rpc.cli", "cluster", "up", "--brokers", "3",
            "--data-dir", str(tmp_path / "dev"), "--zookeeper-session-timeout-ms", "4000",
            "--kafka-listeners",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env=environment(),
    )  # fmt: skip
    assert process.stdout is not None
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 90
        bootstrap = kafka_bootstrap = ""
        while not kafka_bootstrap and time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("bootstrap servers: "):
                bootstrap = line.split(": ", 1)[1].strip()
            if line.startswith("Kafka bootstrap servers: "):
                kafka_bootstrap = line.split(": ", 1)[1].strip()
        assert bootstrap.count(",") == 2, "".join(lines)
        # The bootstrap line comes once the internal topics exist and every leader answers:
        # describe finds nothing missing at once (it warned and exited 1 when the line came
        # before the internal topics were created).
        described = run_cli("cluster", "describe", "--server", bootstrap, "--format", "json")
        assert described.returncode == 0, described.stderr
        assert [broker["id"] for broker in json.loads(described.stdout)["brokers"]] == [1, 2, 3]
        # --kafka-listeners: a Kafka client bootstrapped at one listener is told of all three
        assert kafka_bootstrap.count(",") == 2, "".join(lines)
        client = kafka.KafkaAdminClient(
            bootstrap_servers=kafka_bootstrap.split(",")[0], request_timeout_ms=10_000
        )
        try:
            kafka_brokers = client.describe_cluster()["brokers"]
        finally:
            client.close()
        assert {f"{b['host']}:{b['port']}" for b in kafka_brokers} == set(
            kafka_bootstrap.split(",")
        )
        # A broker that crashes is started again by cluster up, on its own ports, at once
        # (it waits out its old ZooKeeper session itself).
        second = bootstrap.split(",")[1]
        os.kill(_serve_pid(tmp_path / "dev" / "broker-2"), signal.SIGKILL)
        while time.monotonic() < deadline + 60:
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("broker 2: serving again at "):
                assert line.split(" at ", 1)[1].strip() == second, "".join(lines)
                break
        assert any("broker 2 exited with status -9; starting it again" in x for x in lines), (
            "".join(lines)
        )
        assert any(x.startswith("broker 2: serving again") for x in lines), "".join(lines)
        assert (
            "previous run's registration expired" in (tmp_path / "dev" / "broker-2.log").read_text()
        )
        described = run_cli("cluster", "describe", "--server", second, "--format", "json")
        assert described.returncode == 0, described.stderr
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=90)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    lines.append(output)
    assert process.returncode == 0, "".join(lines)
    assert "ZooKeeper stopped" in output
    for broker_id in (1, 2, 3):
        assert f"broker {broker_id} stopped (status 0)" in output
        assert "stopped cleanly" in (tmp_path / "dev" / f"broker-{broker_id}.log").read_text()


def _serve_pid(data_dir: Path) -> int:
    """The pid of the ``twinlog serve`` process whose data directory is ``data_dir``."""
    wanted = str(data_dir)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            arguments = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile
        if b"serve" in arguments and wanted.encode() in arguments:
            return int(entry.name)
    raise AssertionError(f"no twinlog serve process runs with --data-dir {wanted}")
