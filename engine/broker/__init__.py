"""The embedded broker: the floor that composes the data log, the journals and the copier.

``Broker`` owns partitions (``partition``), the transaction coordinators
(``coordinator``, states in ``txn_state``), idempotent producer state, topics and
group offsets. It runs in a Python process without gRPC.

A coordinator is the request API (``coordinator``) over memory rebuilt from its
journal (``coordinator_replay``), a completion worker (``coordinator_completion``)
and per-transaction records (``transaction_metadata``). The broker's background
rounds are ``scheduler``'s tasks; KIP-447 offset fencing is ``group_offset_fencing``.
"""

from twinlog.engine.broker.broker import Broker

__all__ = ["Broker"]
