"""``twinlog demo``: transactions end to end, in a few seconds, checking its own result.

An embedded broker in a temporary directory (or ``--data-dir``) is served on a
free loopback port, because one act of the play needs a second process:

1. create topic ``payments`` with 3 partitions;
2. commit three transactions, each spread over every partition;
3. abort one;
4. start a producer process, let it begin a transaction and send records, kill it
   with SIGKILL, and watch the broker's timeout abort its transaction;
5. read the topic with a vanilla consumer: the committed records only, in order;
6. list the transactions (none left in flight);
7. read the topic with the Spark connector too, when pyspark and Java are there
   (``--no-spark`` skips it). Spark starts on a background thread as the demo
   begins (``twinlog.rpc.cli.demo_spark``), so its start-up overlaps acts 1-6.
8. with ``--serve``, keep the broker running for ``twinlog console``, with a consumer
   group behind and a transaction left open (``twinlog.rpc.cli.demo_serve``).

Exit status 0 when the consumer read exactly the committed records.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from twinlog.rpc.cli import demo_serve
from twinlog.rpc.cli.common import add_command, print_table
from twinlog.rpc.cli.demo_spark import SparkStarter, act_spark, unavailable_reason
from twinlog.rpc.cli.txn import TRANSACTION_HEADER, transaction_rows
from twinlog.rpc.client import Admin, Consumer, Producer
from twinlog.rpc.client.connection_options import TOKEN_ENVIRONMENT

TOPIC = "payments"
PARTITIONS = 3
ZOMBIE_TIMEOUT_MS = 2_000
TIMEOUT_CHECK_INTERVAL_MS = 200
READ_WAIT_MS = 5_000
INDENT = "   "

EXAMPLE = (
    "twinlog demo\ntwinlog demo --data-dir /tmp/twinlog-demo --keep\n"
    "twinlog demo --cluster      # three brokers; the coordinator's is killed mid-commit\n"
    "twinlog demo --serve        # then keep the broker running for `twinlog console`"
)

# The zombie: begins a transaction, sends records, says so, then waits to be killed.
ZOMBIE_SOURCE = """
import sys, time
from twinlog.rpc.client import Producer
producer = Producer(sys.argv[1], transactional_id="zombie", transaction_timeout_ms=int(sys.argv[3]))
producer.init_transactions()
transaction_id = producer.begin_transaction()
for partition in range(3):
    producer.send(sys.argv[2], b"zombie record, never read", key=b"zombie", partition=partition)
producer.flush()
print(transaction_id, flush=True)
time.sleep(600)
"""


def register(subparsers: Any) -> None:
    parser = add_command(
        subparsers, "demo", "commit, abort and time out transactions; read the result", EXAMPLE, []
    )
    parser.add_argument("--data-dir", help="broker directory (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument(
        "--spark",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="end by reading the topic with the Spark connector, when pyspark and Java are "
        "installed (default; --no-spark skips it)",
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="a local ZooKeeper and three broker processes instead: transactions cross "
        "brokers, the coordinator's broker is killed in the middle of a commit, and the "
        "commit still gets its answer (Java 17; no Spark act)",
    )
    parser.add_argument(
        "--serve",
        action="store_true",
        help="then keep the broker running (a group with lag, one transaction left open) and "
        "print the `twinlog console` command that shows it; Ctrl-C stops it (no Spark act)",
    )
    parser.set_defaults(run=run)


def say(text: str = "") -> None:
    print(text, flush=True)


@contextlib.contextmanager
def data_directory(chosen: str | None, keep: bool) -> Iterator[Path]:
    if chosen:
        yield Path(chosen)
        return
    path = Path(tempfile.mkdtemp(prefix="twinlog-demo-"))
    try:
        yield path
    finally:
        if keep:
            say(f"(kept {path})")
        else:
            shutil.rmtree(path, ignore_errors=True)


def run(args: argparse.Namespace) -> int:
    if args.cluster:
        from twinlog.rpc.cli import demo_cluster

        return demo_cluster.run(args, data_directory)
    started_s = time.monotonic()
    skipped_because = "--no-spark" if not args.spark else unavailable_reason()
    if args.serve:
        skipped_because = "--serve"
    # First of all: the JVM takes longer to start than acts 1-6 take to run.
    starter = SparkStarter().start() if skipped_because is None else None
    with data_directory(args.data_dir, args.keep) as directory:
        status = play(directory, starter, skipped_because, args.serve)
    say(f"\ndone in {time.monotonic() - started_s:.1f} s")
    return status


def play(
    directory: Path, starter: SparkStarter | None, skipped_because: str | None, serve: bool = False
) -> int:
    from twinlog.engine.broker.broker import Broker
    from twinlog.rpc.server.config import ServerConfig
    from twinlog.rpc.server.server import RpcServer

    say(f"twinlog demo: an embedded broker in {directory}")
    directory.mkdir(parents=True, exist_ok=True)
    token, token_file, tokens_file = demo_serve.write_token(directory) if serve else (None,) * 3
    settings: dict[str, Any] = dict(demo_serve.BROKER_SETTINGS) if serve else {}
    broker = Broker.open(
        directory, transaction_check_interval_ms=TIMEOUT_CHECK_INTERVAL_MS, **settings
    )
    # --serve: the broker outlives the demo's few seconds, so it asks for the demo's token.
    config = ServerConfig(port=0)
    if serve:  # and a metrics endpoint behind the same token, for the console's sizes
        config = ServerConfig(
            port=0, tokens_file=str(tokens_file), metrics_port=0, metrics_token_file=str(token_file)
        )
    server = RpcServer(broker, config)
    server.start()
    try:
        expected = act_transactions(broker, starter, server.address)
        act_zombie(broker, server.address, token)
        status = act_read(broker, expected)
        say("\n7. the Spark connector reads the same topic:")
        spark_status = act_spark(server.address, TOPIC, expected, starter, skipped_because, INDENT)
        if serve and token_file is not None and not status:
            producer = demo_serve.leave_for_the_console(broker, TOPIC, PARTITIONS)
            metrics_url = server.metrics_endpoint.url if server.metrics_endpoint else None
            demo_serve.hold(say, server.address, token_file, producer, metrics_url)
        return status or spark_status
    finally:
        server.stop(grace_ms=1_000)
        broker.close()


def act_transactions(
    broker: Any, starter: SparkStarter | None, address: str
) -> list[tuple[int, str]]:
    """Acts 1-3; return the (partition, value) pairs that must be read."""
    admin = Admin(broker)
    if TOPIC not in admin.list_topics():
        admin.create_topic(TOPIC, PARTITIONS)
    if starter is not None:
        starter.warm_up(address, TOPIC)
    say(f"\n1. topic {TOPIC!r} with {PARTITIONS} partitions")
    expected: list[tuple[int, str]] = []
    with Producer(broker, transactional_id="payments-app", linger_ms=0) as producer:
        producer.init_transactions()
        say("\n2. three transactions, each over every partition, committed:")
        for number in range(1, 4):
            with producer.transaction():
                transaction_id = producer.transaction_id
                for partition in range(PARTITIONS):
                    value = f"txn {number} -> partition {partition}"
                    producer.send(
                        TOPIC, value.encode(), key=f"t{number}".encode(), partition=partition
                    )
                    expected.append((partition, value))
            say(f"   transaction {transaction_id}: {PARTITIONS} records, committed")
        say("\n3. one more, aborted:")
        producer.begin_transaction()
        transaction_id = producer.transaction_id
        for partition in range(PARTITIONS):
            producer.send(TOPIC, b"aborted, never read", partition=partition)
        producer.flush()
        producer.abort_transaction()
        say(f"   transaction {transaction_id}: {PARTITIONS} records sent, then aborted")
    return expected


def act_zombie(broker: Any, address: str, token: str | None = None) -> None:
    say("\n4. a producer process begins a transaction, sends, and is killed with SIGKILL:")
    environment = dict(os.environ)
    if token is not None:
        environment[TOKEN_ENVIRONMENT] = token
    root = str(Path(__file__).resolve().parent.parent)
    environment["PYTHONPATH"] = root + os.pathsep + environment.get("PYTHONPATH", "")
    zombie = subprocess.Popen(
        [sys.executable, "-c", ZOMBIE_SOURCE, address, TOPIC, str(ZOMBIE_TIMEOUT_MS)],
        stdout=subprocess.PIPE,
        text=True,
        env=environment,
    )
    assert zombie.stdout is not None
    with zombie.stdout:  # closed with the process, whatever happens
        line = zombie.stdout.readline().strip()
        if not line:
            zombie.kill()
            zombie.wait()
            raise RuntimeError(
                "the zombie producer process exited before beginning its transaction"
            )
        zombie.send_signal(signal.SIGKILL)
        zombie.wait()
    say(f"   process {zombie.pid} began transaction {line}, sent {PARTITIONS} records, was killed")
    say("   transactions in flight right after:")
    print_table(transaction_rows(Admin(broker).list_transactions()), TRANSACTION_HEADER, INDENT)
    waited_s = time.monotonic()
    deadline_s = waited_s + ZOMBIE_TIMEOUT_MS / 1000 + 5
    while time.monotonic() < deadline_s:
        if not any(item.transactional_id == "zombie" for item in Admin(broker).list_transactions()):
            break
        time.sleep(0.1)
    say(
        f"   the broker's transaction timeout ({ZOMBIE_TIMEOUT_MS} ms) aborted it after "
        f"{time.monotonic() - waited_s:.1f} s more"
    )


def act_read(broker: Any, expected: list[tuple[int, str]]) -> int:
    say("\n5. a vanilla consumer reads (no transaction logic; committed data only, in order):")
    read: list[tuple[int, int, str]] = []
    with Consumer(broker) as consumer:
        consumer.assign([(TOPIC, partition) for partition in range(PARTITIONS)])
        consumer.seek_to_beginning()
        deadline_s = time.monotonic() + READ_WAIT_MS / 1000
        while len(read) < len(expected) and time.monotonic() < deadline_s:
            for record in consumer.poll(timeout_ms=200):
                read.append((record.partition, record.offset, (record.value or b"").decode()))
        read.extend(
            (record.partition, record.offset, (record.value or b"").decode())
            for record in consumer.poll(timeout_ms=300)
        )
    read.sort()
    print_table([[str(p), str(o), v] for p, o, v in read], ["partition", "offset", "value"], INDENT)
    wanted = sorted(expected)
    got = [(partition, value) for partition, _, value in read]
    ok = got == wanted
    say(
        f"   {len(read)} records read; expected {len(wanted)} committed records: "
        + ("exactly those, in order" if ok else "MISMATCH")
    )
    say("\n6. transactions in flight now:")
    left = Admin(broker).list_transactions()
    if left:
        print_table(transaction_rows(left), TRANSACTION_HEADER, INDENT)
    else:
        say("   none")
    return 0 if ok else 1
