"""The cluster's metadata in ZooKeeper, through kazoo: the adapters above the broker.

``session`` (a kazoo session: chroot, bounded connect, connection states) <-
``metadata_store`` (``MetadataStore``: cluster id, topics, checkpoint pointers in
``checkpoint_pointer``) and ``id_source`` (``IdSource``: id blocks), over the znodes
of ``znodes``. Cluster membership and leadership: ``broker_registration`` (live
brokers, broker epochs), ``partition_state`` (a partition's leader, epoch and ISR),
``controller`` (every broker runs one; the elected one decides, by the rules of
``leader_election``, in multis fenced by ``controller_epoch``), ``partition_roles`` (a
broker's view of its partitions, and a leader's ISR write), ``controlled_shutdown``,
and ``session_gate`` (what a worker may do per session state). Reads for clients:
``cluster_view`` (the Metadata call's). Joining safely: ``credentials`` (a locked-down
chroot), ``join_check`` and ``data_dir_identity`` (``DATA_DIR/identity``: a data
directory never joins another cluster). Starting a ZooKeeper server (a JVM) is not this
floor's: ``twinlog.rpc.cli.local_zookeeper`` does it. The floors below never import
kazoo: the embedded broker runs without ZooKeeper.

It stands on the broker's Protocols (``MetadataStore``, ``IdSource``, the checkpoint
pointer store) and serves ``rpc.cluster`` (``cluster_member`` joins a broker to its
cluster; the Metadata and FindCoordinator answers), ``rpc.replication`` (where leaders
are, who may call) and ``rpc.cli`` (``twinlog cluster describe``, ``cluster up``'s
credential). Nothing is imported here.
"""
