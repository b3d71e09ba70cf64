"""The embedded broker: the floor that composes the data log, the journals and the copier.

``Broker`` owns partitions (``partition``), the transaction coordinators
(``coordinator``, states in ``txn_state``), idempotent producer state, topics and
group offsets. It runs in a Python process without gRPC.
"""

from twinlog.engine.broker.broker import Broker

__all__ = ["Broker"]
