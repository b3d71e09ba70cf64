"""ACL grants on the gRPC wire (``twinlog.v1.AclGrant``), both ways: the Administration
service and the client's RemoteBroker speak ``AclEntry``."""

from __future__ import annotations

from twinlog.rpc.generated.twinlog.v1 import admin_pb2
from twinlog.rpc.policy.acl_bindings import AclEntry


def entry_to_proto(entry: AclEntry) -> admin_pb2.AclGrant:
    return admin_pb2.AclGrant(
        principal=entry.principal,
        operation=entry.operation,
        resource_type=entry.resource_type,
        name=entry.name,
        pattern_type=entry.pattern_type,
        source=entry.source,
    )


def entry_of_proto(grant: admin_pb2.AclGrant) -> AclEntry:
    return AclEntry(
        grant.principal,
        grant.operation,
        grant.resource_type,
        grant.name,
        grant.pattern_type or "literal",
        grant.source or "store",
    )
