"""One internal-topic rule: a name starting with ``__`` is the broker's own, for the
engine, the ACLs and the Kafka listener alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.internal_topics import INTERNAL_TOPICS, is_internal
from twinlog.engine.records.batch_builder import build_batch
from twinlog.rpc.policy.auth import Acl, Operation, Principal, parse_grant


def test_the_rule_names_the_brokers_topics_and_any_double_underscore_name() -> None:
    assert all(is_internal(name) for name in INTERNAL_TOPICS)
    assert is_internal("__audit") and not is_internal("_audit") and not is_internal("audit__")


def test_no_client_creates_deletes_or_produces_to_an_internal_topic(tmp_path: Path) -> None:
    with Broker.open(tmp_path / "data") as broker:
        with pytest.raises(InvalidConfigError, match=r"__audit is internal.*create"):
            broker.create_topic("__audit")
        with pytest.raises(InvalidConfigError, match=r"__consumer_offsets is internal.*delete"):
            broker.delete_topic("__consumer_offsets")
        with pytest.raises(InvalidConfigError, match="commit offsets instead"):
            broker.produce("__consumer_offsets", 0, build_batch([b"x"]))
        assert all(not is_internal(name) for name in broker.list_topics())


def test_an_acl_glob_reaches_an_internal_topic_only_when_it_names_the_prefix() -> None:
    alice = Principal("alice")
    everything = Acl([parse_grant("alice read *".split(), "test")])
    assert everything.allows(alice, Operation.READ, "orders")
    assert not everything.allows(alice, Operation.READ, "__audit")
    internal = Acl([parse_grant("alice read __*".split(), "test")])
    assert internal.allows(alice, Operation.READ, "__audit")
