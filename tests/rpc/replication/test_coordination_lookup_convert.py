"""``LookupProducer`` and its answer through protobuf, bytes on the wire included: a
transactional id of "" is not "never issued", an open transaction 0 is not "none"."""

from __future__ import annotations

from dataclasses import fields

import pytest

from twinlog.engine.transactions.partition_calls import IssuedProducer, LookupProducer
from twinlog.rpc.generated.twinlog.v1 import coordination_pb2
from twinlog.rpc.replication.coordination_convert import (
    issued_from_proto,
    issued_to_proto,
    lookup_from_proto,
    lookup_to_proto,
)


def test_lookup_producer_round_trips() -> None:
    request = LookupProducer(producer_id=(1 << 40) + 3, producer_generation=9)
    message = lookup_to_proto(request)
    decoded = lookup_from_proto(
        coordination_pb2.LookupProducerRequest.FromString(message.SerializeToString())
    )
    assert decoded == request
    assert type(decoded) is LookupProducer


@pytest.mark.parametrize(
    "answer",
    [
        IssuedProducer(None),
        IssuedProducer("loader"),
        IssuedProducer("loader-é", (1 << 41) + 5),
        IssuedProducer(""),
        IssuedProducer("loader", 0),
        IssuedProducer("", 0),
    ],
    ids=["never-issued", "issued", "ongoing", "empty-id", "ongoing-zero", "empty-and-zero"],
)
def test_issued_producer_round_trips(answer: IssuedProducer) -> None:
    message = issued_to_proto(answer)
    decoded = issued_from_proto(
        coordination_pb2.LookupProducerResponse.FromString(message.SerializeToString())
    )
    assert decoded == answer
    assert (decoded.transactional_id is None) == (answer.transactional_id is None)
    assert (decoded.ongoing_transaction_id is None) == (answer.ongoing_transaction_id is None)


def test_never_issued_and_empty_differ_on_the_wire() -> None:
    never = issued_to_proto(IssuedProducer(None)).SerializeToString()
    empty = issued_to_proto(IssuedProducer("")).SerializeToString()
    assert never != empty


def test_every_lookup_field_has_a_wire_field() -> None:
    request_names = {field.name for field in fields(LookupProducer)}
    assert request_names == set(coordination_pb2.LookupProducerRequest.DESCRIPTOR.fields_by_name)
    answer_names = {field.name for field in fields(IssuedProducer)}
    assert answer_names <= set(coordination_pb2.LookupProducerResponse.DESCRIPTOR.fields_by_name)
