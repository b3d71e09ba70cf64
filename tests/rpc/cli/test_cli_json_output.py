"""``--format json`` of ``topics list``, ``topics describe`` and ``txn list``, read back as
a script would, against a real server with a transaction left open."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from server_process import ServerProcess, run_cli

from twinlog.rpc.client import Producer

pytestmark = pytest.mark.slow  # a server and several CLI processes


def _json(*arguments: str) -> object:
    result = run_cli(*arguments, "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_topics_and_transactions_as_json(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "data") as server:
        s = ["--server", server.address]
        assert run_cli("topics", "create", "j", "--partitions", "2", *s).returncode == 0
        assert _json("txn", "list", *s) == []
        with Producer(server.address, transactional_id="json-app") as producer:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send("j", b"pending", partition=1)
            producer.flush()
            listed = _json("topics", "list", *s)
            assert isinstance(listed, list) and "j" in listed
            described = _json("topics", "describe", "j", *s)
            assert isinstance(described, dict)
            assert described["name"] == "j" and re.fullmatch(r"[0-9a-f]{32}", described["topic_id"])
            partitions = described["partitions"]
            assert [p["partition"] for p in partitions] == [0, 1]
            settings = {item["name"]: item for item in described["settings"]}
            assert settings["cleanup.policy"] == {
                "name": "cleanup.policy",
                "value": "delete",
                "source": "broker default",
            }
            assert partitions[1]["journal_entries_pending"] == 1  # journaled, not yet copied
            assert partitions[1]["log_end_offset"] == 0
            transactions = _json("txn", "list", *s)
            assert isinstance(transactions, list) and len(transactions) == 1
            (open_one,) = transactions
            assert open_one["transactional_id"] == "json-app"
            assert open_one["partitions"] == [{"topic": "j", "partition": 1}]
            assert open_one["state"] == "ONGOING" and open_one["timeout_ms"] > 0
            producer.abort_transaction()
        assert _json("txn", "list", *s) == []
