"""The spellings Kafka's console tools use: ``--bootstrap-server`` for ``--server`` and
``--topic NAME`` for the positional topic, through a real server and the real CLI; and
counts that agree with their nouns there and in the server's log."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from server_process import ServerProcess, run_cli

pytestmark = pytest.mark.slow  # a server and several CLI processes


def test_kafka_spellings_create_produce_describe_consume_and_delete(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "data") as server:
        bootstrap = ["--bootstrap-server", server.address]
        created = run_cli("topics", "create", "--topic", "console", "--partitions", "2", *bootstrap)
        assert created.returncode == 0, created.stderr
        sent = run_cli(
            "produce", "--topic", "console", "--partition", "1", *bootstrap, stdin="a\nb\n"
        )
        assert sent.returncode == 0, sent.stderr
        described = run_cli("topics", "describe", "--topic", "console", *bootstrap)
        assert described.returncode == 0 and "console" in described.stdout, described.stderr
        read = run_cli(
            "consume", "--topic", "console", "--from-beginning", "--max-messages", "2", *bootstrap
        )
        assert read.returncode == 0 and read.stdout.split() == ["a", "b"], read.stderr
        deleted = run_cli("topics", "delete", "--topic", "console", *bootstrap)
        assert deleted.returncode == 0, deleted.stderr
        listed = run_cli("topics", "list", *bootstrap)
        assert listed.returncode == 0 and "console" not in listed.stdout.split(), listed.stdout
        single = run_cli("topics", "create", "single", *bootstrap)
        assert single.stdout == "created topic single with 1 partition\n", single.stdout
        one = run_cli("produce", "single", *bootstrap, stdin="only\n")
        assert "produced 1 record to single" in one.stderr, one.stderr
        log = server.log()
    # What a person reads says "1 partition", and names a log kind, not a Python enum.
    assert "created topic single with 1 partition\n" in log, log
    assert not re.search(r"<[A-Z]\w*\.[A-Z_]+: ", log), log


def test_a_topic_given_twice_or_not_at_all_is_a_usage_error() -> None:
    unreachable = ["--bootstrap-server", "127.0.0.1:1"]
    twice = run_cli("produce", "one", "--topic", "other", *unreachable, stdin="x\n")
    assert twice.returncode == 2 and "given twice" in twice.stderr, twice.stderr
    same = run_cli("topics", "describe", "one", "--topic", "one", "--server", "127.0.0.1:1")
    assert "given twice" not in same.stderr  # the same name twice is one topic
    missing = run_cli("topics", "create", *unreachable)
    assert missing.returncode == 2 and "--topic NAME" in missing.stderr, missing.stderr
    neither = run_cli("consume", *unreachable)
    assert neither.returncode == 2 and "--include" in neither.stderr, neither.stderr
