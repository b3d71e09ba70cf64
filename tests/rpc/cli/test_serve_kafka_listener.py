"""``twinlog serve --kafka-listener``: its settings are KafkaListenerSettings, built and
checked by their rules when the flags are read, before the broker opens."""

from __future__ import annotations

import pytest

from twinlog.rpc.cli.serve import kafka_listener_opener
from twinlog.rpc.server.config import ServerConfig


@pytest.mark.parametrize("value", [0, -3])
def test_a_connection_limit_below_one_is_refused_by_the_listener_s_rules(value: int) -> None:
    with pytest.raises(SystemExit) as refused:
        kafka_listener_opener("127.0.0.1:0", ServerConfig(), connections_per_address_max=value)
    assert str(refused.value.code) == (
        "twinlog serve: Kafka listener setting connections_per_address_max (twinlog serve "
        f"--kafka-connections-per-address-max) is {value}, expected 1 or more"
    )


def test_a_limit_of_one_is_taken() -> None:
    assert callable(kafka_listener_opener("127.0.0.1:0", ServerConfig(), None, 1))
