"""Config keys renamed to put units and ``max`` last still work under their older names."""

from __future__ import annotations

from pathlib import Path

import pytest

from twinlog.engine.base.errors import BatchTooLargeError
from twinlog.engine.base.renamed_keys import RENAMED_KEYS, canonical_key
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.config import BrokerConfig
from twinlog.engine.log.config import LogConfig
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.rpc.client import Producer
from twinlog.rpc.server.config import server_config_from, split_config


def test_every_new_name_puts_max_last() -> None:
    for old, new in RENAMED_KEYS.items():
        assert old.startswith("max_") or "_max_" in old
        assert new.endswith("_max") and "max_" not in new, new
        assert canonical_key(old) == new and canonical_key(new) == new


def test_broker_log_and_server_configs_take_both_names() -> None:
    assert BrokerConfig.from_mapping({"max_open_transactions": "7"}).open_transactions_max == 7
    assert BrokerConfig.from_mapping({"open_transactions_max": 7}).open_transactions_max == 7
    assert LogConfig.from_mapping({"max_batch_bytes": 4096}).batch_bytes_max == 4096
    assert LogConfig.from_mapping({"max.message.bytes": 4096}).batch_bytes_max == 4096
    server, broker = split_config({"max_request_bytes": "65536", "max-batch-bytes": "4096"})
    assert server_config_from(server).request_bytes_max == 65536
    assert list(server) == ["request_bytes_max"]  # the batch limit is the broker's alone
    assert BrokerConfig.from_mapping(broker).batch_bytes_max == 4096
    assert server_config_from({"fetch.max.wait.ms.max": "500"}).fetch_wait_ms_max == 500


def test_a_data_directory_and_a_producer_keep_the_old_names(tmp_path: Path) -> None:
    with Broker.open(tmp_path / "data", max_open_transactions=3) as broker:
        assert broker.config.open_transactions_max == 3
        broker.create_topic("small", partitions=1, config={"max_batch_bytes": "4096"})
        builder = RecordBatchBuilder("none")
        builder.append(b"x" * 5000)
        with pytest.raises(BatchTooLargeError, match="its topic's limit of 4096 bytes"):
            broker.produce("small", 0, builder.build())
        producer = Producer(broker, max_batch_bytes=8192, batch_bytes=4096)
        assert producer.batch_bytes_max == 8192
        producer.close()


def test_unknown_keys_are_still_refused() -> None:
    with pytest.raises(Exception, match="unknown"):
        BrokerConfig.from_mapping({"max_open_transaction": 3})
