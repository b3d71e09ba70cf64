"""Ending the transactions that touch a topic before the topic is deleted.

An open transaction's batches for a topic wait in the local data journal under
the partition's name ("t-0"). Were they kept past the topic's deletion, a
commit would copy them into a new topic created under the same name. So
deleting a topic first ends every transaction that touches it, as Kafka does
(its controller aborts them, and their producers learn it at commit):

    ONGOING                        aborted (its batches everywhere are dropped)
    PREPARE_COMMIT / PREPARE_ABORT waited for: the decision is durable and its
                                   copy under way; a copy that does not finish
                                   in time refuses the deletion (retriable)

Aborting rather than refusing while a transaction is open: a hanging
transaction (a producer that never ends it) would otherwise make the topic
undeletable until it times out, and its records could never be committed to
the deleted topic anyway. The producer's commit then fails with
InvalidTxnStateError (the transaction was aborted) and it begins again.

The caller closes the topic's partitions' send gates first (send_gate.py), so
no transaction can touch the topic after this ran.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from twinlog.engine.base.errors import (
    ConcurrentTransactionsError,
    InvalidTxnStateError,
    UnknownTransactionError,
)
from twinlog.engine.base.types import TransactionState
from twinlog.engine.transactions.coordinator import Coordinator

log = logging.getLogger(__name__)

DECIDED_WAIT_S = 5.0  # how long a deletion waits for a decided transaction's copy


def end_transactions_touching(topic: str, coordinators: Iterable[Coordinator]) -> list[int]:
    """Abort the open transactions that touch ``topic``, wait for the decided ones; return
    the ids aborted. Raises ConcurrentTransactionsError if one is still being completed."""
    aborted = []
    for coordinator in coordinators:
        for described in coordinator.list_transactions():
            txn = coordinator.transaction(described.transaction_id)
            if txn is None or not any(p.topic == topic for p in txn.partitions):
                continue
            if txn.state is TransactionState.ONGOING:
                try:
                    coordinator.admin_abort(txn.transaction_id)
                except UnknownTransactionError:
                    continue  # it completed meanwhile
                except InvalidTxnStateError:
                    pass  # its producer decided meanwhile: wait for that below
                else:
                    log.warning(
                        "aborted transaction %d: it wrote to topic %s, which is being deleted",
                        txn.transaction_id,
                        topic,
                    )
                    aborted.append(txn.transaction_id)
                    continue
            if not coordinator.wait_complete(txn, DECIDED_WAIT_S):
                raise ConcurrentTransactionsError(
                    f"topic {topic!r} was not deleted: transaction {txn.transaction_id}, which "
                    f"wrote to it, is still being completed ({txn.state.value}) after "
                    f"{DECIDED_WAIT_S:.0f} s; retry the deletion"
                )
    return aborted
