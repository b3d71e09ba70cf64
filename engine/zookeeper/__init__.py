"""The cluster's metadata in ZooKeeper, through kazoo: the adapters above the broker.

``session`` (a kazoo session: chroot, bounded connect, connection states) <-
``metadata_store`` (``MetadataStore``: cluster id, topics, checkpoint pointers in
``checkpoint_pointer``) and ``id_source`` (``IdSource``: id blocks), over the znodes
of ``znodes``. ``local_server`` starts a standalone ZooKeeper from PySpark's jars for
tests and trying things out. The floors below never import kazoo: the embedded broker
runs without ZooKeeper. Nothing is imported here.
"""
