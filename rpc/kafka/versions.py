"""The API versions the listener serves: those of one Kafka release, for every API it serves.

twinlog answers as Kafka ``KAFKA_RELEASE`` (the release before 3.9, the last with
ZooKeeper, as twinlog's clusters are): for each API key it serves, ApiVersions lists
that release's whole range, the old versions included, and each of them is answered.
The ranges are the release's ``clients/src/main/resources/common/message/*Request.json``
``validVersions`` (the test pins them). A client probing the broker sees a 3.8 broker,
and a client pinned to any 3.x (or older) release finds every version it may send.

What a version in the range is answered with, where it is not simply the newer one's
answer, is the handler's (``docs/kafka-protocol.md`` argues each):

- Produce 0-2 and Fetch 0-3 carry message formats v0/v1 (``produce`` and ``fetch``);
- AddPartitionsToTxn 4-5 is Kafka's broker-to-broker batch of transactions, answered
  CLUSTER_AUTHORIZATION_FAILED as Kafka answers a client without ClusterAction.

APIs of the release that are not served (inter-broker and KRaft ones, quotas,
delegation tokens, ...) are not listed; ``dispatch`` answers them UNSUPPORTED_VERSION or
closes the connection with a log line.
"""

from __future__ import annotations

KAFKA_RELEASE = "3.8.0"

# API key -> (lowest, highest) version of KAFKA_RELEASE, for the APIs served here.
RELEASE_VERSIONS: dict[int, tuple[int, int]] = {
    0: (0, 11),  # Produce
    1: (0, 16),  # Fetch
    2: (0, 8),  # ListOffsets
    3: (0, 12),  # Metadata
    8: (0, 9),  # OffsetCommit
    9: (0, 9),  # OffsetFetch
    10: (0, 5),  # FindCoordinator
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 5),  # DescribeGroups
    16: (0, 5),  # ListGroups
    17: (0, 1),  # SaslHandshake
    18: (0, 3),  # ApiVersions
    19: (0, 7),  # CreateTopics
    20: (0, 6),  # DeleteTopics
    21: (0, 2),  # DeleteRecords
    22: (0, 5),  # InitProducerId
    23: (0, 4),  # OffsetForLeaderEpoch
    24: (0, 5),  # AddPartitionsToTxn
    25: (0, 4),  # AddOffsetsToTxn
    26: (0, 4),  # EndTxn
    28: (0, 4),  # TxnOffsetCommit
    29: (0, 3),  # DescribeAcls
    30: (0, 3),  # CreateAcls
    31: (0, 3),  # DeleteAcls
    32: (0, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    35: (0, 4),  # DescribeLogDirs
    36: (0, 2),  # SaslAuthenticate
    37: (0, 3),  # CreatePartitions
    42: (0, 2),  # DeleteGroups
    43: (0, 2),  # ElectLeaders
    44: (0, 1),  # IncrementalAlterConfigs
    45: (0, 0),  # AlterPartitionReassignments
    46: (0, 0),  # ListPartitionReassignments
    47: (0, 0),  # OffsetDelete
    50: (0, 0),  # DescribeUserScramCredentials
    51: (0, 0),  # AlterUserScramCredentials
    60: (0, 1),  # DescribeCluster
    61: (0, 0),  # DescribeProducers
    65: (0, 0),  # DescribeTransactions
    66: (0, 1),  # ListTransactions
    68: (0, 1),  # ConsumerGroupHeartbeat (v1 ahead of the release: AHEAD_OF_RELEASE)
    69: (0, 0),  # ConsumerGroupDescribe
}


# Versions served beyond KAFKA_RELEASE's, each because a client needs it: librdkafka
# (confluent-kafka) 2.10+ sends ConsumerGroupHeartbeat only in v1 (Kafka 4.0's), so with
# 3.8.0's v0 alone group.protocol=consumer never joins.
AHEAD_OF_RELEASE: dict[int, tuple[int, int]] = {68: (0, 1)}


def versions_of(api_key: int) -> tuple[int, int]:
    """The release's (lowest, highest) version of a served API."""
    return RELEASE_VERSIONS[api_key]
