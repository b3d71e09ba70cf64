"""The journals: the partitions' journal logs, their LMDB index, and the transaction journal.

Each partition's journal log (``journal_log``, and ``journal_log_replicated`` on a cluster;
``logs/T-P/journal/``) is the durable store of its transactions' batches and of the
copier's marks. The broker's one LMDB (``LocalJournal``, the local data journal) is the
index applied from those logs (its rows name ENTRY records, linked in reverse per
transaction and partition) and can be rebuilt from them. ``JournalLogs`` is the registry
in front of both: it opens the journal logs and routes each partition's calls. The
transaction journal (``txn_journal``, ``txn_records``, ``txn_checkpoint``) is the
coordinator's log.

The public surface of the journal logs and LMDB is re-exported here (``JournalLogs``,
``LocalJournal``, ``JournalConfig``, ...); the transaction journal is imported from its
modules.

It stands on ``engine.base``, ``engine.records`` and ``engine.log`` (the journal logs and
the transaction journal are segmented logs). The copier, ``engine.transactions`` (the
coordinator's journal), ``engine.broker`` and ``engine.zookeeper`` (checkpoint pointers
kept in ZooKeeper) use it.

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
