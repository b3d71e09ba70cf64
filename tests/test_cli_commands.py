"""The ``twinlog`` command line, through ``subprocess``, against a real server."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from test_rpc_process import ServerProcess, run_cli

COMMANDS = [
    ["serve"],
    ["topics"],
    ["topics", "create"],
    ["topics", "list"],
    ["topics", "describe"],
    ["topics", "delete"],
    ["produce"],
    ["consume"],
    ["txn"],
    ["txn", "list"],
    ["txn", "abort"],
    ["demo"],
    ["bench"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_has_help_with_an_example(command: list[str]) -> None:
    result = run_cli(*command, "--help")
    assert result.returncode == 0, result.stderr
    assert "example:" in result.stdout
    assert "twinlog " + command[0] in result.stdout.split("example:", 1)[1]


def test_unreachable_server_is_a_clear_error() -> None:
    result = run_cli("topics", "list", "--server", "127.0.0.1:1", "--timeout-request-ms", "2000")
    assert result.returncode == 1
    assert result.stderr.startswith("error: BrokerUnavailableError")
    assert "is the server running" in result.stderr


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(tmp_path_factory.mktemp("cli") / "data") as process:
        yield process


def test_topics_produce_consume(server: ServerProcess) -> None:
    s = ("--server", server.address)
    created = run_cli("topics", "create", "cli-orders", "--partitions", "2", *s)
    assert created.returncode == 0, created.stderr
    assert "created topic cli-orders with 2 partitions" in created.stdout
    duplicate = run_cli("topics", "create", "cli-orders", *s)
    assert duplicate.returncode == 1 and "TopicExistsError" in duplicate.stderr
    assert "cli-orders" in run_cli("topics", "list", *s).stdout.split()
    lines = "".join(f"k{i}:v{i}\n" for i in range(10))
    produced = run_cli("produce", "cli-orders", "--key-separator", ":", *s, stdin=lines)
    assert produced.returncode == 0, produced.stderr
    assert "produced 10 records" in produced.stderr
    consumed = run_cli(
        "consume", "cli-orders", "--from-beginning", "--max-messages", "10", "--format", "json", *s
    )
    assert consumed.returncode == 0, consumed.stderr
    records = [json.loads(line) for line in consumed.stdout.splitlines()]
    assert sorted(r["value"] for r in records) == sorted(f"v{i}" for i in range(10))
    assert {r["key"] for r in records} == {f"k{i}" for i in range(10)}
    described = run_cli("topics", "describe", "cli-orders", *s)
    assert described.returncode == 0
    ends = [int(line.split()[2]) for line in described.stdout.splitlines()[2:]]
    assert sum(ends) == 10
    one = run_cli(
        "consume",
        "cli-orders",
        "--partition",
        "0",
        "--offset",
        "0",
        "--idle-timeout-ms",
        "500",
        "--print-offset",
        *s,
    )
    assert one.returncode == 0 and all(line.startswith("0:") for line in one.stdout.splitlines())


def test_transactional_produce_and_group_consume(server: ServerProcess) -> None:
    s = ("--server", server.address)
    assert run_cli("topics", "create", "cli-txn", "--partitions", "3", *s).returncode == 0
    produced = run_cli(
        "produce",
        "cli-txn",
        "--transactional-id",
        "cli-loader",
        "--records-per-txn",
        "4",
        *s,
        stdin="".join(f"{i}\n" for i in range(10)),
    )
    assert produced.returncode == 0, produced.stderr
    assert "produced 10 records to cli-txn in 3 transactions" in produced.stderr
    first = run_cli(
        "consume", "cli-txn", "--group", "cli-group", "--from-beginning", "--max-messages", "6", *s
    )
    assert first.returncode == 0, first.stderr
    rest = run_cli("consume", "cli-txn", "--group", "cli-group", "--idle-timeout-ms", "1000", *s)
    assert rest.returncode == 0, rest.stderr
    values = first.stdout.split() + rest.stdout.split()
    assert sorted(values, key=int) == [str(i) for i in range(10)]


def test_txn_list_and_abort(server: ServerProcess) -> None:
    from rpc.client import Producer

    s = ("--server", server.address)
    assert run_cli("topics", "create", "cli-hang", *s).returncode == 0
    producer = Producer(server.address, transactional_id="cli-hanging")
    producer.init_transactions()
    transaction_id = producer.begin_transaction()
    producer.send("cli-hang", b"hanging", partition=0)
    producer.flush()
    listed = run_cli("txn", "list", *s)
    assert listed.returncode == 0
    assert str(transaction_id) in listed.stdout and "ONGOING" in listed.stdout
    aborted = run_cli("txn", "abort", str(transaction_id), *s)
    assert aborted.returncode == 0, aborted.stderr
    deadline = time.monotonic() + 5
    while str(transaction_id) in run_cli("txn", "list", *s).stdout:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    unknown = run_cli("txn", "abort", str(transaction_id), *s)
    assert unknown.returncode == 1 and "UnknownTransactionError" in unknown.stderr
    producer.close()
    assert run_cli("topics", "delete", "cli-hang", *s).returncode == 0
    assert "cli-hang" not in run_cli("topics", "list", *s).stdout.split()


@pytest.mark.slow
def test_demo_runs_clean() -> None:
    # How long it took is measured (and quoted in the notes), not asserted: a slow,
    # shared machine must not fail the test. The timeout only catches a hang.
    result = run_cli("demo", timeout_s=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "exactly those, in order" in result.stdout
    assert "aborted it after" in result.stdout
    assert "add --spark" in result.stdout


@pytest.mark.slow
@pytest.mark.spark
def test_demo_with_spark_reads_the_same_committed_records() -> None:
    result = run_cli("demo", "--spark", timeout_s=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Spark read 9 rows" in result.stdout, result.stdout
    assert "the same committed records" in result.stdout, result.stdout
