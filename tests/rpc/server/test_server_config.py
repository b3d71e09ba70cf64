"""ServerConfig's rules: each limit refused in one line naming the key, the value and
what is allowed; ``--config`` keys in any spelling; unknown keys refused with the
nearest known ones."""

from __future__ import annotations

import re

import pytest

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.rpc.server.config import ServerConfig, server_config_from, split_config


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"fetch_wait_ms_max": "0"}, "server config fetch_wait_ms_max is 0, expected 1 or more"),
        ({"request_bytes_max": 0}, "request_bytes_max is 0, expected 1 or more"),
        ({"fetch_bytes_max": -1}, "fetch_bytes_max is -1, expected 1 or more"),
        ({"long_poll_slice_ms": 0}, "long_poll_slice_ms is 0, expected 1 or more"),
        ({"worker_threads": 0}, "worker_threads is 0, expected 1 or more"),
        ({"worker_threads": "many"}, "worker_threads is 'many', expected an integer 1 or more"),
        ({"long_polls_max": -2}, "long_polls_max is -2, expected 0 or more, or -1 (auto)"),
        ({"long_polls_per_principal_max": -2}, "long_polls_per_principal_max is -2, expected 0"),
        ({"long_polls_per_connection_max": -2}, "long_polls_per_connection_max is -2, expected"),
        ({"produce_streams_max": -2}, "produce_streams_max is -2, expected 0 or more, or -1"),
        (
            {"worker_threads": 8, "produce_streams_max": 8},
            "produce_streams_max is 8, expected -1 (auto) or 0..7 (below worker_threads",
        ),
        (
            {"worker_threads": 8, "produce_streams_max": 4, "long_polls_max": 4},
            "long_polls_max is 4, expected -1 (auto) or 0..3: with produce_streams_max (4) it "
            "stays below worker_threads (8)",
        ),
        ({"shutdown_grace_ms": -1}, "shutdown_grace_ms is -1, expected 0 or more"),
        ({"request_log_slow_ms": -1}, "request_log_slow_ms is -1, expected 0 or more"),
        ({"port": 65536}, "port is 65536, expected a TCP port 0..65535 (0 picks a free one)"),
        ({"port": "x"}, "port is 'x', expected a TCP port 0..65535"),
        ({"metrics_port": -2}, "metrics_port is -2, expected a TCP port 0..65535 (0 picks a"),
        ({"metrics_host": "[]"}, "metrics_host is '[]', expected an address"),
        ({"insecure": "maybe"}, "server config insecure is 'maybe', expected true or false"),
    ],
)
def test_each_limit_is_refused_in_one_line(values: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=re.escape(message)) as refused:
        server_config_from(values)
    assert "\n" not in str(refused.value)


def test_the_edges_and_auto_are_taken() -> None:
    config = server_config_from(
        {"worker_threads": "8", "produce_streams_max": "4", "long_polls_max": "3", "port": "0"}
    )
    assert (config.produce_streams_limit, config.long_polls_limit) == (4, 3)
    assert ServerConfig(metrics_port=-1, shutdown_grace_ms=0, request_log_slow_ms=0).port == 7070
    assert ServerConfig(port=65535, metrics_port=0).metrics_port == 0


def test_keys_may_use_dots_dashes_and_old_names() -> None:
    config = server_config_from(
        {"fetch.wait.ms.max": "100", "long-poll-slice-ms": "5", "max_request_bytes": "4096"}
    )
    assert (config.fetch_wait_ms_max, config.long_poll_slice_ms) == (100, 5)
    assert config.request_bytes_max == 4096
    assert server_config_from({"insecure": "yes"}).insecure is True


def test_an_unknown_server_key_is_refused_with_the_nearest_known_ones() -> None:
    with pytest.raises(InvalidConfigError) as refused:
        server_config_from({"fetch_wait_max_ms": "5"})
    message = str(refused.value)
    assert message.startswith(
        "unknown server config key 'fetch_wait_max_ms' (did you mean fetch_wait_ms_max"
    )
    assert "; known keys: acl_file, cpu_affinity, fetch_bytes_max," in message


def test_a_key_neither_side_knows_is_refused_naming_both_sides_keys() -> None:
    with pytest.raises(InvalidConfigError) as refused:
        split_config({"nope": "1"})
    message = str(refused.value)
    assert message.startswith("unknown server or broker config key 'nope'; known keys: ")
    assert "journal_partitions" in message and "worker_threads" in message
    with pytest.raises(InvalidConfigError, match="did you mean worker_threads"):
        split_config({"worker.thread": "1"})


def test_keys_go_to_their_side() -> None:
    server, broker = split_config({"worker-threads": "4", "journal.partitions": "2"})
    assert server == {"worker_threads": "4"} and broker == {"journal.partitions": "2"}
