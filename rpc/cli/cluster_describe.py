"""``twinlog cluster describe``: brokers, controller, and every partition's leader, epoch,
replicas, ISR and high watermark (kafka-topics.sh --describe, and its
--under-replicated-partitions), from ZooKeeper (``--zookeeper``) or any broker (``--server``).

The high watermark is asked of each partition's leader (``list_offset(..., "latest")``
answers it there). A leader that does not answer within ``--timeout-request-ms`` is
asked nothing more; its partitions show ``?`` and the command ends with status 1 after
printing everything else, so a script notices. ZooKeeper that does not answer is an
error (status 1) within the same bound.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from twinlog.engine.base.errors import TwinlogError
from twinlog.rpc.cli.common import (
    connection_options,
    print_json,
    print_table,
    zookeeper_client_quiet,
)
from twinlog.rpc.client.broker_pool import BrokerPool
from twinlog.rpc.client.cluster import ClusterBroker
from twinlog.rpc.client.cluster_report import (
    ClusterReport,
    gather,
    registered_leader,
    report_of,
)
from twinlog.rpc.client.connection_options import ConnectionOptions

UNKNOWN = "?"


def from_zookeeper(
    connect: str,
    options: ConnectionOptions,
    topics: list[str],
    auth_file: str | None = None,
) -> ClusterReport:
    """``auth_file``: the brokers' ZooKeeper credentials file, for a locked cluster."""
    from twinlog.engine.zookeeper.cluster_view import read_cluster_metadata
    from twinlog.engine.zookeeper.credentials import load_zookeeper_credential
    from twinlog.engine.zookeeper.session import ZooKeeperSession

    timeout_ms = options.request_timeout_ms
    credential = None if auth_file is None else load_zookeeper_credential(auth_file)
    with (
        zookeeper_client_quiet(),
        ZooKeeperSession(  # read-only: a mistyped chroot is reported, not created
            connect,
            connect_timeout_ms=timeout_ms,
            request_timeout_ms=timeout_ms,
            create_chroot=False,
            credential=credential,
        ) as session,
    ):
        metadata = read_cluster_metadata(session, topics or None, timeout_ms)
    if not metadata.cluster_id and not metadata.brokers:
        raise TwinlogError(
            f"no twinlog cluster at {connect}: no broker has registered there and it has no "
            "cluster_id; is the chroot right (the one given to twinlog serve --zookeeper)?"
        )
    with BrokerPool(options) as pool:
        return gather(metadata, registered_leader(metadata), pool)


def from_servers(servers: str, options: ConnectionOptions, topics: list[str]) -> ClusterReport:
    with ClusterBroker(servers + ",", options) as cluster:  # "," : a list, even of one
        return report_of(cluster, topics)


def run(args: argparse.Namespace) -> int:
    options = connection_options(args)
    topics = list(args.topic or [])
    if args.zookeeper:
        report = from_zookeeper(args.zookeeper, options, topics, args.zookeeper_auth_file)
    else:
        report = from_servers(args.server, options, topics)
    if args.format == "json":
        print_json(as_json(report))
    else:
        print_text(report)
    for address, why in sorted(report.unreachable.items()):
        print(
            f"warning: the leader at {address} did not answer ({why}); its partitions' high "
            "watermarks are shown as ?",
            file=sys.stderr,
        )
    return 1 if report.unreachable else 0


def _ids(ids: tuple[int, ...]) -> str:
    return ",".join(str(broker_id) for broker_id in ids) or "-"


def print_text(report: ClusterReport) -> None:
    metadata = report.metadata
    if metadata.standalone:
        print("single-node server (not a cluster): broker 0 leads every partition")
    else:
        controller = metadata.controller_id if metadata.controller_id >= 0 else "none"
        print(f"cluster {metadata.cluster_id or '(no id yet)'}, controller: broker {controller}")
    print_table(
        [[str(broker.broker_id), broker.address] for broker in metadata.brokers],
        ["broker", "address"],
    )
    print()
    rows = []
    for topic in metadata.topics:
        for item in topic.partitions:
            high_watermark = report.high_watermarks.get((topic.name, item.partition))
            flags = (
                "offline" if item.offline else "under-replicated" if item.under_replicated else ""
            )
            rows.append(
                [
                    topic.name,
                    str(item.partition),
                    "none" if item.offline else str(item.leader_id),
                    str(item.leader_epoch),
                    _ids(item.replicas),
                    _ids(item.isr),
                    UNKNOWN if high_watermark is None else str(high_watermark),
                    flags,
                ]
            )
    print_table(rows, ["topic", "partition", "leader", "epoch", "replicas", "isr", "hw", ""])
    lagging = report.under_replicated()
    names = ", ".join(f"{topic}-{item.partition}" for topic, item in lagging)
    print(
        f"\nunder-replicated or offline partitions: {len(lagging)}"
        + (f" ({names})" if names else "")
    )


def as_json(report: ClusterReport) -> dict[str, Any]:
    metadata = report.metadata
    return {
        "cluster_id": metadata.cluster_id,
        "standalone": metadata.standalone,
        "controller_id": metadata.controller_id,
        "brokers": [
            {"id": broker.broker_id, "host": broker.host, "port": broker.port}
            for broker in metadata.brokers
        ],
        "topics": [
            {
                "name": topic.name,
                "partitions": [
                    {
                        "partition": item.partition,
                        "leader": item.leader_id,
                        "leader_epoch": item.leader_epoch,
                        "replicas": list(item.replicas),
                        "isr": list(item.isr),
                        "high_watermark": report.high_watermarks.get((topic.name, item.partition)),
                        "under_replicated": item.under_replicated,
                        "offline": item.offline,
                    }
                    for item in topic.partitions
                ],
            }
            for topic in metadata.topics
        ],
        "under_replicated": [
            {"topic": topic, "partition": item.partition}
            for topic, item in report.under_replicated()
        ],
        "unreachable_leaders": dict(sorted(report.unreachable.items())),
    }
