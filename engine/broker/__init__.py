"""The embedded broker: the floor that composes the data log, the journals and the copier.

``Broker`` (``broker``) is the facade and the start-up; the parts it opens own the state:
the partitions, each a data log, a journal log and a copier, with their roles and the
followers' fetches (``partition_manager``, ``partition``), topics (``topic_manager``), the
transaction coordinators it runs (``coordinator_manager``; their floor is
``twinlog.engine.transactions``) and the group coordinators (``group_coordinators``,
over ``twinlog.engine.groups``), the seam's in-process ends (``seam_adapters``), and
idempotent producer state and group offsets. Background rounds are ``scheduler``'s
tasks; KIP-447 offset fencing is ``group_offset_fencing``. It imports neither gRPC nor
kazoo, so it runs embedded in any Python process (docs/design.md).

It serves every floor above: ``engine.zookeeper`` gives a cluster broker its metadata
and ids, ``rpc.replication`` and ``rpc.server`` put it on the network, ``rpc.kafka``
speaks Kafka's protocol to it, and the Spark connector and the command line may open one
embedded.
"""

from twinlog.engine.broker.broker import Broker

__all__ = ["Broker"]
