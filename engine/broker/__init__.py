"""The embedded broker: the floor that composes the data log, the journals and the copier.

``Broker`` owns partitions (``partition``), hosts the transaction coordinators (their
floor is ``twinlog.engine.transactions``) and the group coordinators
(``twinlog.engine.groups``), and keeps idempotent producer state, topics and group
offsets. It runs in a Python process without gRPC.

The broker's background rounds are ``scheduler``'s tasks; KIP-447 offset fencing is
``group_offset_fencing``.
"""

from twinlog.engine.broker.broker import Broker

__all__ = ["Broker"]
