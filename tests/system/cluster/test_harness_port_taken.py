"""The fault harness itself: a broker whose port another process took before it bound it
moves to a fresh port behind the same proxies, instead of failing the test's set-up.

CI once lost an ensemble test this way: the port picked for a broker was an outgoing
connection's ephemeral port by the time the broker started ("cannot listen on
127.0.0.1:47937: the port is in use").
"""

from __future__ import annotations

import socket
import uuid
from pathlib import Path

from cluster_faults import FaultCluster

from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper


def test_a_broker_whose_port_was_taken_starts_on_another(
    tmp_path: Path, zookeeper: LocalZooKeeper
) -> None:
    cluster = FaultCluster(tmp_path / "cluster", zookeeper.connect_string, uuid.uuid4().hex[:12])
    taken_port = cluster.brokers[1].port
    with socket.create_server(("127.0.0.1", taken_port)):  # taken until the cluster serves
        try:
            cluster.start()
            broker = cluster.brokers[1]
            assert broker.port != taken_port and broker.alive
            assert "the port is in use" in broker.log()  # it did meet the taken port
            assert broker.client_inbound.target == ("127.0.0.1", broker.port)
            state = cluster.create_topic(f"port-{uuid.uuid4().hex[:8]}")
            assert {member.broker_id for member in state.isr} == {
                1,
                2,
                3,
            }  # its peers reach it through the proxy
        finally:
            cluster.close()
