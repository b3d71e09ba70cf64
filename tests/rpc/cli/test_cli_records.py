"""Every byte through the ``twinlog`` command, against a real server: exact JSON both ways,
delivery failures counted and named, Ctrl-C bounded, a stalled server never a hang."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from process_sockets import wait_connected
from server_process import ROOT, ServerProcess, environment, run_cli
from tcp_proxy import UP, HoldingProxy

from twinlog.engine.base.errors import TwinlogError
from twinlog.rpc.cli import main as cli_main
from twinlog.rpc.client import Admin, Consumer, Producer

pytestmark = pytest.mark.slow  # every test starts processes (server and CLI)

# Binary keys and values, a null key, an empty value, a null value, duplicate headers
# with a null and an empty value, bytes that are not UTF-8 and a backslash.
RECORDS = [
    (b"\x00\xffkey", b"\xfe\xed\\value\n", (("h", b"1"), ("h", b"\x80"), ("h", None))),
    (None, b"", (("e", b""),)),
    (b"", None, ()),
    ("clé".encode(), "värde".encode(), (("dup", b"a"), ("dup", b"a"))),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(tmp_path_factory.mktemp("cli-records") / "data") as process:
        yield process


def create(server: ServerProcess, topic: str, partitions: int = 1) -> None:
    with Admin(server.address) as admin:
        admin.create_topic(topic, partitions)


def read_back(server: ServerProcess, topic: str, count: int) -> list[tuple]:
    with Consumer(server.address) as consumer:
        consumer.assign([(topic, 0)])
        consumer.seek_to_beginning()
        records: list = []
        deadline_s = time.monotonic() + 20
        while len(records) < count and time.monotonic() < deadline_s:
            records.extend(consumer.poll(timeout_ms=500))
    return [(r.key, r.value, r.headers, r.timestamp_ms) for r in records]


def read_to_end(server: ServerProcess, topic: str) -> list[tuple]:
    """Every record a reader gets from partition 0, up to the partition's end now: what
    ``read_back`` would wait for in vain when nothing may be read."""
    with Consumer(server.address) as consumer:
        consumer.assign([(topic, 0)])
        consumer.seek_to_end()
        end = consumer.position((topic, 0))
        consumer.seek_to_beginning()
        records: list = []
        deadline_s = time.monotonic() + 20
        while consumer.position((topic, 0)) < end:
            assert time.monotonic() < deadline_s, f"{topic} not read up to offset {end}"
            records.extend(consumer.poll(timeout_ms=500))
    return [(r.key, r.value, r.headers, r.timestamp_ms) for r in records]


def decode(value: str | None) -> bytes | None:
    return None if value is None else base64.b64decode(value, validate=True)


def test_json_output_keeps_every_byte_and_copies_a_topic(server: ServerProcess) -> None:
    s = ("--server", server.address)
    create(server, "bytes")
    with Producer(server.address) as producer:
        for index, (key, value, headers) in enumerate(RECORDS):
            producer.send("bytes", value, key=key, partition=0, headers=headers,
                          timestamp_ms=1_700_000_000_000 + index)  # fmt: skip
    consumed = run_cli("consume", "bytes", "--from-beginning", "--format", "json",
                       "--max-messages", str(len(RECORDS)), *s)  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    documents = [json.loads(line) for line in consumed.stdout.splitlines()]
    assert [
        (
            decode(d["key"]),
            decode(d["value"]),
            tuple((k, decode(v)) for k, v in d["headers"]),
        )
        for d in documents
    ] == RECORDS
    assert [d["offset"] for d in documents] == [0, 1, 2, 3]
    # consume --format json | produce --format json: the same records in another topic.
    create(server, "bytes-copy")
    for encoding in ("base64", "text"):
        source = run_cli("consume", "bytes", "--from-beginning", "--format", "json",
                         "--encoding", encoding, "--max-messages", "4", *s)  # fmt: skip
        copied = run_cli("produce", "bytes-copy", "--format", "json", "--encoding", encoding,
                         *s, stdin=source.stdout)  # fmt: skip
        assert copied.returncode == 0, copied.stderr
        assert copied.stderr == "produced 4 records to bytes-copy\n"
    original = read_back(server, "bytes", 4)
    assert read_back(server, "bytes-copy", 8) == original + original


def test_text_output_shows_kafkas_columns(server: ServerProcess) -> None:
    s = ("--server", server.address)
    create(server, "columns")
    produced = run_cli("produce", "columns", "--key-separator", ":", "--header", "a=1",
                       "--header", "a=2", *s, stdin="k1:v1\nnokey\n")  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    consumed = run_cli("consume", "columns", "--from-beginning", "--max-messages", "2",
                       "--print-partition", "--print-offset", "--print-headers", "--print-key",
                       "--null-literal", "<null>", *s)  # fmt: skip
    assert consumed.stdout.splitlines() == [
        "Partition:0\tOffset:0\ta:1,a:2\tk1\tv1",
        "Partition:0\tOffset:1\ta:1,a:2\t<null>\tnokey",
    ]


def test_a_bad_json_line_is_one_line_with_its_number(server: ServerProcess) -> None:
    s = ("--server", server.address)
    create(server, "bad-lines")
    lines = '{"value": "YQ=="}\n{"value": "b"}\n{"value": "Yw=="}\n'
    stopped = run_cli("produce", "bad-lines", "--format", "json", *s, stdin=lines)
    assert stopped.returncode == 2
    assert stopped.stderr.splitlines() == [
        "produced 1 record to bad-lines",
        "error: input line 2: \"value\": 'b' is not base64 (use --encoding text?)",
    ]
    skipped = run_cli("produce", "bad-lines", "--format", "json", "--skip-bad-lines", *s,
                      stdin=lines)  # fmt: skip
    assert skipped.returncode == 0, skipped.stderr
    assert skipped.stderr.splitlines()[1].startswith("skipped 1 bad input lines (first: 2): ")


def test_records_the_server_refuses_are_counted_and_named(server: ServerProcess) -> None:
    s = ("--server", server.address)
    create(server, "refused")
    lines = "".join(f"{i}\n" for i in range(1, 8))
    refused = run_cli("produce", "refused", "--partition", "7", "--delivery-timeout-ms",
                      "3000", *s, stdin=lines)  # fmt: skip
    assert refused.returncode == 1
    # A send naming a partition the topic lacks is refused at once (the producer looks
    # the topic up first), so the first line stops the run and nothing is sent.
    assert refused.stderr.splitlines()[0] == (
        "stopped at input line 1: it and the lines after it were not sent"
    )
    assert "UnknownTopicOrPartitionError" in refused.stderr
    assert "there is no partition 7" in refused.stderr
    assert read_to_end(server, "refused") == []
    # In a transaction, the failed send aborts it: none of its records is read.
    json_lines = '{"value": "YQ==", "partition": 0}\n{"value": "Yg==", "partition": 7}\n'
    aborted = run_cli("produce", "refused", "--format", "json", "--transactional-id", "refuser",
                      *s, stdin=json_lines)  # fmt: skip
    assert aborted.returncode == 1
    first = aborted.stderr.splitlines()[0]
    # The bad partition stops the run at its line (2): only line 1's record was sent.
    assert first.startswith("aborted transaction ") and "its one record is not read" in first
    assert "UnknownTopicOrPartitionError" in aborted.stderr
    assert read_to_end(server, "refused") == []


def test_ctrl_c_on_consume_exits_130_within_a_second(server: ServerProcess) -> None:
    create(server, "waiting")
    process = subprocess.Popen(
        [sys.executable, "-m", "twinlog.rpc.cli", "consume", "waiting", "--server",
         server.address],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=environment(),
    )  # fmt: skip
    # Connected, so polling a moment later (a fixed 2 s was not enough on a busy machine:
    # the Ctrl-C came while the command was still importing its modules).
    try:
        wait_connected(process.pid, server.port)
    except AssertionError:
        process.kill()
        process.communicate()
        raise
    time.sleep(0.5)
    started_s = time.monotonic()
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=10)
    elapsed_s = time.monotonic() - started_s
    assert process.returncode == 130, stderr  # was 0
    assert stderr == "interrupted: consumed 0 records\n"
    assert elapsed_s < 1.5, elapsed_s


def test_ctrl_c_while_a_command_starts_exits_130_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C before the command took over its own handling (its modules still being
    imported, as build_parser imports them) is one line and 130 too."""

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_main, "build_parser", interrupted)
    assert cli_main.main(["consume", "waiting", "--server", "127.0.0.1:1"]) == 130
    assert capsys.readouterr().err == "interrupted\n"


ANSWER_SETTLE_S = 0.5  # for a written record's answer to leave a running server


class Stall:
    """A server the CLI reaches at ``address`` and that can stall: SIGSTOPped (a GC pause, a
    hung disk), or behind a proxy that holds every byte (a partition). ``server`` is
    reached directly, to set up and to read back."""

    def __init__(self, server: ServerProcess, how: str) -> None:
        self.server = server
        self.how = how
        self.proxy = HoldingProxy(server.port) if how == "proxy" else None
        self.address = self.proxy.address if self.proxy else server.address

    def stall(self) -> None:
        """Nothing sent from now on is answered; answers already on their way arrive.

        Records read back from the log may still have their answers in flight (the server
        writes, then answers): a stall that swallowed those answers would fail records
        the test counts as delivered. So the proxy holds only what the client sends, and
        the server is stopped only once the answers it owes have had time to leave.
        """
        if self.proxy is not None:
            self.proxy.hold(UP)
        else:
            assert self.server.process is not None
            time.sleep(ANSWER_SETTLE_S)
            self.server.process.send_signal(signal.SIGSTOP)

    def end(self) -> None:
        if self.proxy is not None:
            self.proxy.close()
        assert self.server.process is not None
        self.server.process.send_signal(signal.SIGCONT)
        # Serving again before it is asked to stop: a server resumed from a long pause has
        # every timer and every held request due at once, and on a loaded machine that
        # backlog, not the stop, is what the fixture's stop would be waiting on.
        deadline_s = time.monotonic() + 30
        while True:
            try:
                with Admin(self.server.address, request_timeout_ms=2_000) as admin:
                    admin.list_topics()
                return
            except TwinlogError:
                assert time.monotonic() < deadline_s, "the server did not serve again"
                time.sleep(0.2)


@pytest.fixture(params=["sigstop", "proxy"])
def stalled(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Stall]:
    """A server of its own that stalls, resumed and stopped at the end."""
    with ServerProcess(tmp_path / "data") as process:
        stall = Stall(process, request.param)
        try:
            yield stall
        finally:
            stall.end()


def test_a_stalled_server_fails_the_records_it_never_answered(
    stalled: Stall,
) -> None:
    # The session: records 1-100 delivered, the server paused (a GC pause, a hung
    # disk), records 101-200 sent to it. They were lost without a word; now they are named.
    create(stalled.server, "stalled")
    process = subprocess.Popen(
        [sys.executable, "-m", "twinlog.rpc.cli", "produce", "stalled", "--server",
         stalled.address, "--delivery-timeout-ms", "2000"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=ROOT, env=environment(),
    )  # fmt: skip
    assert process.stdin is not None
    process.stdin.write("".join(f"{i}\n" for i in range(1, 101)))
    process.stdin.flush()
    deadline_s = time.monotonic() + 20
    while len(read_back(stalled.server, "stalled", 100)) < 100:
        assert time.monotonic() < deadline_s, "the first 100 records were not delivered"
    stalled.stall()
    started_s = time.monotonic()
    _, stderr = process.communicate("".join(f"{i}\n" for i in range(101, 201)), timeout=30)
    elapsed_s = time.monotonic() - started_s
    assert process.returncode == 1, stderr
    assert stderr.splitlines() == [
        "produced 100 records to stalled",
        "100 records not delivered (first failing lines: 101, 102, 103, 104, 105): "
        + stderr.splitlines()[-1].split("105): ", 1)[1],
    ]
    assert "RequestTimedOutError" in stderr
    assert elapsed_s < 15, elapsed_s


def test_ctrl_c_against_a_stalled_server_still_exits_within_a_second(
    stalled: Stall,
) -> None:
    create(stalled.server, "stalled-txn")
    process = subprocess.Popen(
        [sys.executable, "-m", "twinlog.rpc.cli", "produce", "stalled-txn", "--server",
         stalled.address, "--transactional-id", "stalled", "--records-per-txn", "1000"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=ROOT, env=environment(),
    )  # fmt: skip
    try:
        assert process.stdin is not None
        process.stdin.write("one\ntwo\n")
        process.stdin.flush()  # stdin stays open: the transaction stays open
        with Admin(stalled.server.address) as admin:
            deadline_s = time.monotonic() + 20
            while not any(t.transactional_id == "stalled" for t in admin.list_transactions()):
                assert time.monotonic() < deadline_s and process.poll() is None
                time.sleep(0.1)
        time.sleep(0.5)  # the two records sent
        stalled.stall()
        started_s = time.monotonic()
        process.send_signal(signal.SIGINT)
        process.wait(timeout=10)
        elapsed_s = time.monotonic() - started_s
        assert process.stderr is not None
        stderr = process.stderr.read()
        process.stdin.close()
        assert process.returncode == 130, stderr
        assert stderr.startswith("interrupted: could not abort transaction "), stderr
        assert stderr.endswith(
            " within 0.5 s; the broker aborts it when it times out; "
            "0 records delivered, 2 not delivered\n"
        ), stderr
        assert elapsed_s < 1.5, elapsed_s
    finally:  # reaped and its three pipes closed, whatever the test saw
        if process.poll() is None:
            process.kill()
        process.wait()
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
