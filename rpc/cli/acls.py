"""``twinlog acls list|add|remove``: the grants a server enforces, as Kafka's
``kafka-acls.sh --list|--add|--remove``.

A server's grants are its ``--acl-file``'s and those added here (or by a Kafka client's
CreateAcls), which the server keeps in its store: durable across restarts, and on a
cluster every broker's at once (in ZooKeeper). ``list`` shows both, each with its source;
``remove`` removes stored grants only (a file grant is changed by editing the file).
Listing needs DESCRIBE on the cluster, adding and removing ALTER (``cluster:*`` in the
ACL file). A grant is LITERAL (the name itself; ``*`` every name) unless ``--prefixed``
(every name starting so). A principal may be written ``User:alice`` as Kafka's tools do.
"""

from __future__ import annotations

import argparse
from typing import Any

from twinlog.rpc.cli.common import (
    add_command,
    connection_parser,
    output_parser,
    print_json,
    print_table,
)
from twinlog.rpc.cli.groups import open_admin
from twinlog.rpc.client import AclEntry
from twinlog.rpc.policy.acl_bindings import OPERATION_WORDS, RESOURCE_WORDS
from twinlog.rpc.policy.auth import CLUSTER_NAME

KAFKA_PRINCIPAL_PREFIX = "User:"
ADD_EXAMPLE = """\
twinlog acls add --principal alice --operation write --topic orders
twinlog acls add --principal alice --operation read --topic orders- --prefixed
twinlog acls add --principal alice --operation read --group billing
twinlog acls add --principal loader --operation write --transactional-id loader- --prefixed
twinlog acls add --principal ops --operation alter --cluster"""


def _principal(text: str) -> str:
    return text.removeprefix(KAFKA_PRINCIPAL_PREFIX)


def _resource_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--principal",
        required=True,
        type=_principal,
        help="who: a principal (alice, or Kafka's User:alice); '*' every authenticated one",
    )
    parser.add_argument("--operation", required=True, choices=OPERATION_WORDS, type=str.lower)
    resource = parser.add_mutually_exclusive_group(required=True)
    resource.add_argument("--topic", metavar="NAME", help="a topic ('*': every topic)")
    resource.add_argument("--group", metavar="ID", help="a consumer group")
    resource.add_argument("--transactional-id", metavar="ID", help="a transactional id")
    resource.add_argument(
        "--cluster", action="store_true", help="the cluster (SCRAM users, ACLs themselves)"
    )
    resource.add_argument("--broker", metavar="ID", help="a broker, by id (stopping it)")
    parser.add_argument(
        "--prefixed",
        action="store_true",
        help="the grant covers every name starting with NAME (Kafka's PREFIXED)",
    )


def register(subparsers: Any) -> None:
    connection = connection_parser()
    acls = add_command(
        subparsers,
        "acls",
        "ACL grants: list the ones in force, add and remove grants at run time",
        "twinlog acls list\n" + ADD_EXAMPLE.splitlines()[0],
        [],
    )
    commands = acls.add_subparsers(dest="acls_command", required=True, metavar="COMMAND")
    listing = add_command(
        commands,
        "list",
        "list the grants in force, the ACL file's and the stored ones",
        "twinlog acls list\ntwinlog acls list --principal alice --resource-type topic\n"
        "twinlog acls list --format json",
        [connection, output_parser()],
    )
    listing.add_argument("--principal", type=_principal, help="only this principal's grants")
    listing.add_argument(
        "--resource-type", choices=tuple(RESOURCE_WORDS), help="only grants on this kind"
    )
    listing.set_defaults(run=run_list)
    add = add_command(
        commands,
        "add",
        "grant an operation on a resource (kept by the server, durable)",
        ADD_EXAMPLE,
        [connection],
    )
    _resource_arguments(add)
    add.set_defaults(run=run_add)
    remove = add_command(
        commands,
        "remove",
        "remove a stored grant, named as 'acls list' shows it",
        "twinlog acls remove --principal alice --operation write --topic orders\n"
        "twinlog acls remove --principal alice --operation read --topic orders- --prefixed",
        [connection],
    )
    _resource_arguments(remove)
    remove.set_defaults(run=run_remove)


def entry_of(args: argparse.Namespace) -> AclEntry:
    kinds = {
        "topic": args.topic,
        "group": args.group,
        "transactional-id": args.transactional_id,
        "broker": args.broker,
        "cluster": CLUSTER_NAME if args.cluster else None,
    }
    kind, name = next((kind, name) for kind, name in kinds.items() if name is not None)
    pattern = "prefixed" if args.prefixed else "literal"
    return AclEntry(args.principal, args.operation, kind, name, pattern)


def _phrase(entry: AclEntry) -> str:
    how = " (prefixed)" if entry.pattern_type == "prefixed" else ""
    return f"{entry.principal} {entry.operation} {entry.resource_type} {entry.name}{how}"


def run_list(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        entries = admin.list_acls(args.principal, args.resource_type)
    if args.format == "json":
        print_json([vars(entry) for entry in entries])
        return 0
    if not entries:
        print("no grants; add one with 'twinlog acls add'")
        return 0
    rows = [
        [e.principal, e.operation, e.resource_type, e.name, e.pattern_type, e.source]
        for e in entries
    ]
    print_table(rows, ["PRINCIPAL", "OPERATION", "RESOURCE", "NAME", "PATTERN", "SOURCE"])
    return 0


def run_add(args: argparse.Namespace) -> int:
    entry = entry_of(args)
    with open_admin(args) as admin:
        created = admin.create_acls([entry])
    print(f"{'granted' if created else 'already granted'}: {_phrase(entry)}")
    return 0


def run_remove(args: argparse.Namespace) -> int:
    entry = entry_of(args)
    with open_admin(args) as admin:
        admin.delete_acls([entry])
    print(f"removed: {_phrase(entry)}")
    return 0
