"""The journals: the local data journal (LMDB, per broker) and the transaction journal.

The local data journal's public surface is re-exported here (``JournalLogs``: the
registry of the per-partition journal logs, ``journal_log`` and ``journal_log_replicated``,
in front of the one LMDB, ``LocalJournal``, that they are applied to); the transaction
journal lives in ``twinlog.journal.txn_journal``, ``twinlog.journal.txn_records`` and
``twinlog.journal.txn_checkpoint``.

Names: one transaction on one partition of the local journal is a *copy* (``CopyState``,
``CopyRecord``); ``Transaction*`` is the coordinator's whole transaction, and a record of
the transaction journal is a ``CoordinatorRecord``.
"""

from twinlog.journal.journal_logs import JournalLogs
from twinlog.journal.local_config import JournalConfig
from twinlog.journal.local_format import CopyRecord, CopyState
from twinlog.journal.local_journal import JournalEntry, JournalStatistics, LocalJournal

__all__ = [
    "CopyRecord",
    "CopyState",
    "JournalConfig",
    "JournalEntry",
    "JournalLogs",
    "JournalStatistics",
    "LocalJournal",
]
