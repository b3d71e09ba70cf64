"""Kafka's authorized-operations bitfields (KIP-430): what the caller may do with a topic,
a group or the cluster, as Metadata (v8+), DescribeCluster, DescribeGroups (v3+) and
ConsumerGroupDescribe answer when the request asks (Kafka UIs show them; the admin
clients' ``include_authorized_operations``).

Bit n is set when the caller may perform Kafka's operation code n on the resource
(READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, DESCRIBE_CONFIGS 10,
ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12), by the same rules as every check
(``policy.auth``: the grants, and what a grant implies). Without an ACL file every
authenticated principal may do all of them. CLUSTER_ACTION (9) is never set: twinlog's
brokers prove themselves with the cluster's credential, never a client's grant. A request
that does not ask gets Kafka's "not computed" (INT32_MIN). The messages take a bitfield as
the set of its bits' positions, None for "not computed" (kafka-python's ``BitField``).
"""

from __future__ import annotations

from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.policy.auth import IMPLIES_DESCRIBE, OPERATIONS_ON, Operation, Resource

KAFKA_CODE = {
    Operation.READ: 3,
    Operation.WRITE: 4,
    Operation.CREATE: 5,
    Operation.DELETE: 6,
    Operation.ALTER: 7,
    Operation.DESCRIBE: 8,
    Operation.DESCRIBE_CONFIGS: 10,
    Operation.ALTER_CONFIGS: 11,
    Operation.IDEMPOTENT_WRITE: 12,
}


def authorized_operations(
    context: KafkaContext, resource: Resource, name: str, asked: bool = True
) -> set[int] | None:
    """The operation codes the connection's principal may perform on ``name`` (the
    bitfield's set bits); None (not computed) unless ``asked``."""
    if not asked:
        return None
    guard, principal = context.guard, context.connection.principal
    bits: set[int] = set()
    for operation, code in KAFKA_CODE.items():
        if operation not in OPERATIONS_ON[resource]:
            continue
        if guard.acl is None:
            allowed = True
        elif operation is Operation.DESCRIBE and resource in IMPLIES_DESCRIBE:
            allowed = guard.may_describe(principal, name, resource)
        else:
            allowed = guard.acl.allows(principal, operation, name, resource)
        if allowed:
            bits.add(code)
    return bits


NOT_COMPUTED = -(2**31)  # Kafka's INT32_MIN, where a message carries the bitfield as int32


def as_int32(bits: set[int] | None) -> int:
    """The bitfield as an int32, for a message whose schema types it so (twinlog's own
    KIP-848 messages, ``rpc/kafka/messages``)."""
    if bits is None:
        return NOT_COMPUTED
    return sum(1 << bit for bit in bits)
