"""The journals: the local data journal (LMDB, per broker) and the transaction journal.

The local data journal's public surface is re-exported here; the transaction
journal lives in ``journal.txn_journal``, ``journal.txn_records`` and
``journal.txn_checkpoint``.
"""

from journal.local_config import JournalConfig
from journal.local_format import TransactionRecord, TransactionState
from journal.local_journal import JournalEntry, JournalStatistics, LocalJournal

__all__ = [
    "JournalConfig",
    "JournalEntry",
    "JournalStatistics",
    "LocalJournal",
    "TransactionRecord",
    "TransactionState",
]
