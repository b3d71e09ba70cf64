"""The ``twinlog`` command line, through ``subprocess``, against a real server."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_process import ROOT, ServerProcess, environment, run_cli

pytestmark = pytest.mark.slow  # every test starts processes (server and CLI)

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
    ["groups"],
    ["groups", "list"],
    ["groups", "describe"],
    ["groups", "delete"],
    ["groups", "reset-offsets"],
    ["dump"],
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


def test_wrong_server_fails_fast_with_one_readable_line() -> None:
    # The default retry budget is 10 s; a refused connection must not wait for it, nor
    # print the client's log lines (produce used to add "producer sequence broken by").
    started_s = time.monotonic()
    result = run_cli("produce", "t", "--server", "127.0.0.1:1", "--partition", "0", stdin="x\n")
    assert time.monotonic() - started_s < 8, "waited for the whole retry budget"
    assert result.returncode == 1
    assert result.stderr.splitlines() == [result.stderr.strip()], result.stderr
    assert result.stderr.startswith("error: BrokerUnavailableError: cannot reach 127.0.0.1:1")


def test_client_certificate_without_key_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "client.pem").write_text("not read: the flags are checked first\n")
    result = run_cli("topics", "list", "--tls-cert", str(tmp_path / "client.pem"))
    assert result.returncode == 1, result  # was -6: gRPC aborted the process (SIGABRT)
    assert "tls_key_file (--tls-key) is not" in result.stderr


def test_serve_refuses_a_bad_data_dir_or_security_file_without_a_traceback(
    tmp_path: Path,
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory\n")
    result = run_cli("serve", "--data-dir", str(a_file), "--port", "0", timeout_s=30)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert f"error: InvalidConfigError: cannot use '{a_file}' as the data directory" in (
        result.stderr
    )
    # The tokens file is read before the broker opens (and creates its directory).
    fresh = tmp_path / "never-created"
    missing = run_cli(
        "serve", "--data-dir", str(fresh), "--port", "0",
        "--tokens-file", str(tmp_path / "no-such-tokens"), timeout_s=30,
    )  # fmt: skip
    assert missing.returncode == 1 and "cannot read tokens file" in missing.stderr
    assert not fresh.exists()
    # So are the CPUs to run on: a list naming a CPU this process may not use.
    beyond = max(os.sched_getaffinity(0)) + 1
    pinned = run_cli(
        "serve", "--data-dir", str(fresh), "--port", "0", "--config", f"cpu_affinity={beyond}",
        timeout_s=30,
    )  # fmt: skip
    assert pinned.returncode == 1 and "Traceback" not in pinned.stderr
    assert f"cpu_affinity '{beyond}' names CPU {beyond}, which this process may not use" in (
        pinned.stderr
    )
    unknown = run_cli(
        "serve", "--data-dir", str(fresh), "--port", "0", "--cpu-affinity", "most",
        timeout_s=30,
    )  # fmt: skip
    assert unknown.returncode == 1 and "Traceback" not in unknown.stderr
    assert "cpu_affinity" in unknown.stderr and "one, all, or a list of CPUs" in unknown.stderr
    assert not fresh.exists()


def test_usage_errors() -> None:
    alone = run_cli("produce", "t", "--records-per-txn", "5", stdin="x\n")
    assert alone.returncode == 2 and "needs --transactional-id" in alone.stderr
    both = run_cli("topics", "list", "--token", "t" * 20, "--token-file", "f")
    assert both.returncode == 2 and "not allowed with" in both.stderr


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(tmp_path_factory.mktemp("cli") / "data") as process:
        yield process


def test_topics_produce_consume(server: ServerProcess) -> None:
    s = ("--server", server.address)
    assert "crc32c: google-crc32c (hardware)" in server.log()  # the start-up line says which CRC
    assert "hot loops: compiled (record decoder, batch builder)" in server.log()  # and which
    assert "start-up objects frozen" in server.log()  # and that full collections stay short
    # and the CPU its threads run on: one, the last it may use (a single node's turn is 0)
    last = max(os.sched_getaffinity(0))
    assert f"cpu: one CPU, {last} of " in server.log()
    assert server.process is not None
    threads = os.listdir(f"/proc/{server.process.pid}/task")
    assert len(threads) > 5 and all(
        os.sched_getaffinity(int(thread)) == {last} for thread in threads
    )
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
        "consume", "cli-orders", "--from-beginning", "--max-messages", "10", "--format", "json",
        "--encoding", "text", *s,
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    records = [json.loads(line) for line in consumed.stdout.splitlines()]
    assert sorted(r["value"] for r in records) == sorted(f"v{i}" for i in range(10))
    assert {r["key"] for r in records} == {f"k{i}" for i in range(10)}
    described = run_cli("topics", "describe", "cli-orders", *s)
    assert described.returncode == 0
    assert re.match(r"topic cli-orders \(id [0-9a-f]{32}\): 2 partitions", described.stdout)
    lines = described.stdout.splitlines()
    assert "  retention.ms=604800000 (broker default)" in lines  # every setting in effect
    table = lines[next(i for i, line in enumerate(lines) if line.startswith("partition")) + 1 :]
    ends = [int(line.split()[2]) for line in table]
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
        "--print-partition",
        "--print-offset",
        *s,
    )
    assert one.returncode == 0 and one.stdout, one.stderr
    assert all(
        re.fullmatch(r"Partition:0\tOffset:\d+\tv\d", line) for line in one.stdout.splitlines()
    ), one.stdout


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
    # As in Kafka, --from-beginning applies only where the group has no committed offset.
    again = run_cli(
        "consume", "cli-txn", "--group", "cli-group", "--from-beginning",
        "--idle-timeout-ms", "1000", *s,
    )  # fmt: skip
    assert again.returncode == 0 and again.stdout == "", again.stdout
    fresh = run_cli(
        "consume", "cli-txn", "--group", "cli-fresh", "--from-beginning",
        "--max-messages", "10", *s,
    )  # fmt: skip
    assert sorted(fresh.stdout.split(), key=int) == [str(i) for i in range(10)]


def test_partitions_below_one_are_refused(server: ServerProcess) -> None:
    s = ("--server", server.address)
    zero = run_cli("topics", "create", "cli-zero", "--partitions", "0", *s)
    assert zero.returncode == 1 and "InvalidConfigError" in zero.stderr, zero.stderr
    assert "partitions is 0" in zero.stderr
    assert "cli-zero" not in run_cli("topics", "list", *s).stdout.split()


def test_ctrl_c_aborts_the_open_transaction_and_exits_130(server: ServerProcess) -> None:
    from twinlog.rpc.client import Admin

    s = ("--server", server.address)
    assert run_cli("topics", "create", "cli-interrupted", *s).returncode == 0
    process = subprocess.Popen(
        [sys.executable, "-m", "twinlog.rpc.cli", "produce", "cli-interrupted", *s,
         "--transactional-id", "cli-interrupted", "--records-per-txn", "1000"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=ROOT, env=environment(),
    )  # fmt: skip
    assert process.stdin is not None
    process.stdin.write("one\ntwo\n")
    process.stdin.flush()  # stdin stays open: the transaction stays ONGOING
    admin = Admin(server.address)

    def open_ones() -> list[int]:
        return [
            t.transaction_id
            for t in admin.list_transactions()
            if t.transactional_id == "cli-interrupted"
        ]

    deadline = time.monotonic() + 20
    while not open_ones():
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    assert "aborted transaction" in stderr
    deadline = time.monotonic() + 5  # not the transaction timeout (60 s): aborted at once
    while open_ones():
        assert time.monotonic() < deadline, "the transaction was left ONGOING"
        time.sleep(0.1)
    admin.close()


def test_txn_list_and_abort(server: ServerProcess) -> None:
    from twinlog.rpc.client import Producer

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
    # Whatever coordinator its low bits name (255: none on this broker), the same answer.
    for made_up in (255, (123_456 << 8) | 255, (123_456 << 8) | 1):
        unknown = run_cli("txn", "abort", str(made_up), *s)
        assert unknown.returncode == 1, unknown.stderr
        assert unknown.stderr.startswith("error: UnknownTransactionError"), unknown.stderr
        assert "twinlog txn list" in unknown.stderr
    producer.close()
    assert run_cli("topics", "delete", "cli-hang", *s).returncode == 0
    assert "cli-hang" not in run_cli("topics", "list", *s).stdout.split()


@pytest.mark.slow
def test_demo_without_java_says_so_in_one_line_and_succeeds(tmp_path: Path) -> None:
    # How long it took is measured (and quoted in the notes), not asserted: a slow,
    # shared machine must not fail the test. The timeout only catches a hang.
    env = environment()
    env.pop("JAVA_HOME", None)
    env["PATH"] = str(tmp_path)  # no java on it (the demo runs sys.executable by its path)
    result = subprocess.run(
        [sys.executable, "-m", "twinlog.rpc.cli", "demo"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "exactly those, in order" in result.stdout
    assert "aborted it after" in result.stdout
    skipped = [line for line in result.stdout.splitlines() if "skipped" in line]
    assert len(skipped) == 1 and "Java is not installed" in skipped[0], result.stdout


@pytest.mark.slow
@pytest.mark.spark
def test_demo_reads_with_spark_by_default() -> None:
    result = run_cli("demo", timeout_s=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Spark read 9 rows" in result.stdout, result.stdout
    assert "the same committed records" in result.stdout, result.stdout
    # Spark's JVM writes to its own log file, not into the demo's output.
    assert "log4j" not in result.stdout + result.stderr, result.stderr
