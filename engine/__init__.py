"""twinlog's engine: the floors a broker is made of, each a folder.

The README's "Layout" table is the one list of the floors, highest first (``setup.cfg``
states it as the import contract). The engine floors (these folders, with ``journal/``
and ``copier/``) run embedded in any Python process: no network code, and no ZooKeeper
client below ``engine/zookeeper``, the only one with kazoo. Nothing is imported here:
import from the floor you need.
"""
