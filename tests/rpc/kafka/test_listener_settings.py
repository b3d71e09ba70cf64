"""KafkaListenerSettings' rules: every limit at least 1, refused in one line naming it."""

from __future__ import annotations

import dataclasses
import re

import pytest

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.rpc.kafka.settings import RULES, KafkaListenerSettings

NAMES = [item.name for item in dataclasses.fields(KafkaListenerSettings)]


@pytest.mark.parametrize("name", NAMES)
def test_every_limit_below_one_is_refused_naming_it(name: str) -> None:
    with pytest.raises(InvalidConfigError) as refused:
        KafkaListenerSettings(**{name: 0})
    assert (
        str(refused.value) == f"Kafka listener setting {RULES.label(name)} is 0, expected 1 or more"
    )


@pytest.mark.parametrize("name", NAMES)
def test_every_limit_must_be_an_integer(name: str) -> None:
    message = f"{RULES.label(name)} is '5', expected an integer 1 or more"
    with pytest.raises(InvalidConfigError, match=re.escape(message)):
        KafkaListenerSettings(**{name: "5"})


def test_the_limit_set_by_a_serve_flag_is_named_by_it() -> None:
    with pytest.raises(InvalidConfigError, match="--kafka-connections-per-address-max"):
        KafkaListenerSettings(connections_per_address_max=0)


def test_one_of_each_is_taken() -> None:
    settings = KafkaListenerSettings(connections_max=1, connections_per_address_max=1)
    assert settings.connections_max == settings.connections_per_address_max == 1
