"""``ClusterMetadata`` <-> ``MetadataResponse``: every field survives the round trip, and a
single node's missing cluster id stays missing (not an empty string)."""

from __future__ import annotations

from dataclasses import fields

from hypothesis import given
from hypothesis import strategies as st

from twinlog.engine.base.cluster_metadata import (
    BrokerEndpoint,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
)
from twinlog.rpc.generated.twinlog.v1 import admin_pb2
from twinlog.rpc.wire.cluster_convert import metadata_from_proto, metadata_to_proto

int32s = st.integers(-(2**31), 2**31 - 1)
broker_ids = st.integers(-1, 2**31 - 1)
partitions = st.builds(
    PartitionMetadata,
    int32s,
    broker_ids,
    int32s,
    st.lists(broker_ids, max_size=5).map(tuple),
    st.lists(broker_ids, max_size=5).map(tuple),
)
metadata = st.builds(
    ClusterMetadata,
    st.one_of(st.none(), st.just(""), st.text(max_size=32)),
    broker_ids,
    st.lists(
        st.builds(
            BrokerEndpoint,
            broker_ids,
            st.text(max_size=20),
            int32s,
            st.text(max_size=20),  # its Kafka listener's host and port
            int32s,
        ),
        max_size=4,
    ).map(tuple),
    st.lists(
        st.builds(TopicMetadata, st.text(max_size=20), st.lists(partitions, max_size=4).map(tuple)),
        max_size=3,
    ).map(tuple),
)


@given(metadata)
def test_metadata_round_trips(value: ClusterMetadata) -> None:
    wire = admin_pb2.MetadataResponse.FromString(metadata_to_proto(value).SerializeToString())
    assert metadata_from_proto(wire) == value


def test_a_single_node_has_no_cluster_id_and_an_empty_one_is_kept() -> None:
    single = ClusterMetadata(None, 0, (BrokerEndpoint(0, "h", 1),), ())
    assert metadata_from_proto(metadata_to_proto(single)).standalone
    young = ClusterMetadata("", -1, (), ())  # a cluster no broker has joined yet
    assert not metadata_from_proto(metadata_to_proto(young)).standalone


def test_every_dataclass_field_has_a_wire_field() -> None:
    pairs = [
        (ClusterMetadata, admin_pb2.MetadataResponse),
        (BrokerEndpoint, admin_pb2.BrokerEndpoint),
        (TopicMetadata, admin_pb2.TopicMetadata),
        (PartitionMetadata, admin_pb2.PartitionMetadata),
    ]
    for dataclass_type, message_type in pairs:
        names = {field.name for field in fields(dataclass_type)}
        assert names == set(message_type.DESCRIPTOR.fields_by_name), dataclass_type.__name__
