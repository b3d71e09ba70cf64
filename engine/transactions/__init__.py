"""The transaction coordinator: the floor that decides every transaction, below the broker.

It owns the coordinator of one transaction-journal partition (``coordinator``): the
requests it answers, the memory rebuilt from its journal (``coordinator_replay``,
per-transaction records in ``transaction_metadata``, states in the ``txn_state`` table),
the completion worker that carries a decision to the partitions
(``coordinator_completion``), the slots that follow the journal topic's leadership
(``coordinator_slots``), the calls across the coordinator <-> partition seam
(``partition_calls``), where producer and transaction ids come from (``id_source``,
``id_allocator``), and how long commits take (``transaction_timings``).

It stands on the transaction journal (``twinlog.journal``) and serves the broker
(``twinlog.engine.broker``), which gives each coordinator its journal and the partition
leaders it calls; it knows nothing of partitions' data logs, the network or ZooKeeper.
Above the broker, ``rpc.replication`` carries the seam's calls between brokers,
``engine.zookeeper`` gives coordinators their ids, and clients route by the coordinator
partition an id carries.
"""
