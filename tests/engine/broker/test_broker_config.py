"""BrokerConfig's rules: each limit refused in one line naming the key, the value and
what is allowed; keys in any spelling; unknown keys refused with the nearest ones."""

from __future__ import annotations

import re

import pytest

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.broker.config import BrokerConfig


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"journal_partitions": 0}, "broker config journal_partitions is 0, expected 1..256"),
        ({"journal_partitions": 257}, "journal_partitions is 257, expected 1..256"),
        ({"offsets_partitions": 1025}, "offsets_partitions is 1025, expected 1..1024"),
        ({"open_transactions_max": 0}, "open_transactions_max is 0, expected 1 or more"),
        ({"transaction_check_interval_ms": -1}, "transaction_check_interval_ms is -1"),
        ({"checkpoint_interval_ms": 0}, "checkpoint_interval_ms is 0, expected 1 or more"),
        ({"retention_check_interval_ms": 0}, "retention_check_interval_ms is 0"),
        ({"compaction_check_interval_ms": 0}, "compaction_check_interval_ms is 0"),
        ({"offsets_segment_bytes": 0}, "offsets_segment_bytes is 0"),
        ({"group_heartbeat_interval_ms": 0}, "group_heartbeat_interval_ms is 0"),
        ({"group_session_check_interval_ms": 0}, "group_session_check_interval_ms is 0"),
        ({"batch_records_max": 0}, "batch_records_max is 0"),
        ({"batch_decompressed_bytes_max": 0}, "batch_decompressed_bytes_max is 0"),
        ({"min_insync_replicas": 0}, "min_insync_replicas is 0"),
        ({"default_replication_factor": 0}, "default_replication_factor is 0"),
        ({"replica_lag_time_max_ms": 0}, "replica_lag_time_max_ms is 0"),
        ({"replica_ack_timeout_ms": 0}, "replica_ack_timeout_ms is 0"),
        (
            {"batch_bytes_max": 60},
            "broker config batch_bytes_max (message.max.bytes) is 60, expected 61..",
        ),
        ({"journal_map_bytes_initial": 4096}, "journal_map_bytes_initial is 4096, expected 65536"),
        ({"journal_sync_mode": "sometimes"}, "journal_sync_mode is 'sometimes', expected one of"),
        ({"journal_entry_batches": "disk"}, "journal_entry_batches is 'disk', expected one of"),
        ({"log_flush_policy": "never"}, "log_flush_policy is 'never', expected one of every"),
        ({"log_retention_ms": -2}, "log_retention_ms is -2, expected 0..9223372036854775807 or -1"),
        ({"log_segment_bytes": 10}, "log_segment_bytes is 10, expected 61..2147483647"),
        ({"replica_fsync": "maybe"}, "replica_fsync is 'maybe', expected true or false"),
        (
            {"journal_partitions": "four"},
            "journal_partitions is 'four', expected an integer 1..256",
        ),
        ({"journal_partitions": True}, "journal_partitions is True, expected an integer"),
        (
            {"transaction_timeout_ms_default": 2_000, "transaction_timeout_ms_max": 1_000},
            "transaction_timeout_ms_default is 2000, expected at most "
            "transaction_timeout_ms_max (1000)",
        ),
        (
            {"batch_decompressed_bytes_max": 100, "decompressed_bytes_in_flight_max": 99},
            "decompressed_bytes_in_flight_max is 99, expected at least "
            "batch_decompressed_bytes_max (100): one batch must fit",
        ),
    ],
)
def test_each_limit_is_refused_in_one_line(values: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=re.escape(message)) as refused:
        BrokerConfig.from_mapping(values)
    assert "\n" not in str(refused.value)


def test_keys_may_use_dots_dashes_and_old_names_and_values_text() -> None:
    config = BrokerConfig.from_mapping(
        {
            "transaction.timeout.ms.default": "5000",
            "replica-fsync": "false",
            "max_open_transactions": "7",
            "accept.journal.loss": "TRUE",
        }
    )
    assert config.transaction_timeout_ms_default == 5_000
    assert (config.replica_fsync, config.accept_journal_loss) == (False, True)
    assert config.open_transactions_max == 7


def test_an_unknown_key_is_refused_with_the_nearest_known_ones() -> None:
    with pytest.raises(InvalidConfigError) as refused:
        BrokerConfig.from_mapping({"journal_partition": 3})
    message = str(refused.value)
    assert message.startswith(
        "unknown broker config key 'journal_partition' (did you mean journal_partitions"
    )
    known = "; known keys: accept_journal_loss, auto_create_topics_enable, auto_leader_rebalance"
    assert known in message


def test_the_edges_are_taken() -> None:
    config = BrokerConfig(journal_partitions=256, offsets_partitions=1024, log_retention_ms=-1)
    assert (config.journal_partitions, config.offsets_partitions) == (256, 1024)
    equal = BrokerConfig(transaction_timeout_ms_default=1_000, transaction_timeout_ms_max=1_000)
    assert equal.transaction_timeout_ms_default == equal.transaction_timeout_ms_max
