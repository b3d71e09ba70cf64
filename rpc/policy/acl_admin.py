"""ACL administration, as both doors serve it (the gRPC Administration service and the
Kafka listener's CreateAcls, DescribeAcls, DeleteAcls): list the grants in force, add
grants to the store, remove stored ones.

Listing needs DESCRIBE on the cluster (ALTER implies it), adding and removing ALTER on the
cluster, as Kafka asks (the caller checks: each door answers a refusal its own way). A
change is audited (``acl.create``, ``acl.delete``, one line per grant) by the broker that
made it; every broker audits applying it (``acl.applied``, ``acl_view``). A removal that
names a grant of the ACL file is refused (``FileGrantError``): the file is changed by
editing it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.rpc.policy.acl_bindings import (
    AclFilter,
    Source,
    check_binding,
    describe_grant,
    exact_filter,
    file_form,
    matching,
)
from twinlog.rpc.policy.acl_view import LiveAcl
from twinlog.rpc.policy.audit import audited
from twinlog.rpc.policy.auth import Grant, Guard

NO_ACLS = (
    "this server has no ACLs (every authenticated principal may do everything), so there "
    "is nothing to administer: start it with --acl-file FILE (an empty file will do) to "
    "turn them on"
)
NO_STORE = "this server keeps no ACL store (its broker has no data directory)"


class AclsDisabledError(InvalidConfigError):
    """ACL administration on a server without ACLs (Kafka's SECURITY_DISABLED)."""


class FileGrantError(InvalidConfigError):
    """A removal of a grant the ACL file makes."""


@dataclass(frozen=True)
class Listed:
    grant: Grant
    source: Source


def acl_in_force(guard: Guard) -> LiveAcl:
    """The server's grants, or AclsDisabledError (no ACL file, or no store to keep
    grants in)."""
    if guard.acl is None:
        raise AclsDisabledError(NO_ACLS)
    if not isinstance(guard.acl, LiveAcl):
        raise AclsDisabledError(NO_STORE)
    return guard.acl


def list_acls(acl: LiveAcl, filter_: AclFilter) -> list[Listed]:
    return [Listed(grant, acl.source_of(grant)) for grant in matching(acl.grants, filter_)]


def create_acls(acl: LiveAcl, grants: Sequence[Grant], principal: str, peer: str) -> list[Grant]:
    """Store ``grants`` (all checked first); the ones that were not stored already."""
    for grant in grants:
        check_binding(grant)
    with audited(
        "acl.create",
        principal=principal,
        peer=peer,
        grants="; ".join(describe_grant(grant) for grant in grants),
    ):
        return acl.store.add(grants)


def file_grant_refusal(acl: LiveAcl, grant: Grant) -> str:
    return (
        f"the grant '{file_form(grant)}' comes from the ACL file {acl.acl_file}: it cannot be "
        "removed at run time; remove its line from the file and restart the broker"
    )


@dataclass(frozen=True)
class Deleted:
    """What one filter of a removal matched: the stored grants removed, and the ACL file's
    grants it named, which stay."""

    removed: list[Grant]
    from_file: list[Grant]


def delete_acls(
    acl: LiveAcl, filters: Sequence[AclFilter], principal: str, peer: str
) -> list[Deleted]:
    """Remove the stored grants each filter matches (all in one change)."""
    found = [matching(acl.grants, filter_) for filter_ in filters]
    stored = [
        [grant for grant in grants if acl.source_of(grant) is Source.STORE] for grants in found
    ]
    every = list(dict.fromkeys(grant for grants in stored for grant in grants))
    if every:
        with audited(
            "acl.delete",
            principal=principal,
            peer=peer,
            grants="; ".join(describe_grant(grant) for grant in every),
        ):
            gone = set(acl.store.remove(every))
    else:
        gone = set()
    return [
        Deleted(
            [grant for grant in kept if grant in gone],
            [grant for grant in grants if acl.source_of(grant) is Source.FILE],
        )
        for grants, kept in zip(found, stored, strict=True)
    ]


def delete_stored_acls(
    acl: LiveAcl, grants: Sequence[Grant], principal: str, peer: str
) -> list[Grant]:
    """Remove these grants, each named exactly as stored (``twinlog acls remove``):
    FileGrantError for one the ACL file makes, InvalidConfigError for one not stored;
    nothing is removed then."""
    for grant in grants:
        named = exact_filter(grant)
        if not any(named.matches(stored) for stored in acl.stored):
            from_file = [g for g in acl.file_grants if named.matches(g)]
            if from_file:
                raise FileGrantError(file_grant_refusal(acl, from_file[0]))
            raise InvalidConfigError(
                f"no stored grant '{describe_grant(grant)}'; 'twinlog acls list' shows the "
                "grants in force"
            )
    deleted = delete_acls(acl, [exact_filter(grant) for grant in grants], principal, peer)
    return list(dict.fromkeys(grant for item in deleted for grant in item.removed))
