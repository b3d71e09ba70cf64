"""Keeping the garbage collector's full collections short: start-up objects frozen.

CPython's cyclic collector walks every tracked object in a full (generation 2)
collection. ``twinlog serve`` holds about 43,000 of them from start-up alone
(modules, classes, functions, gRPC and protobuf descriptors) besides what it makes
while serving, and a full collection stopped every thread for ≈ 18 ms, once every few hundred
transactions: the longest produce-to-visible waits of ``python -m bench`` were such
pauses, in the server and in the client process.

``freeze_startup_objects()`` collects once, then moves every object alive to the
collector's permanent generation (``gc.freeze``), which no collection walks again:
a full collection then walks only what was made since. A frozen object is still
freed when its last reference goes; only a reference cycle among frozen objects is
never collected. So it is called once, when start-up is done, whose objects live
as long as the process anyway. It is a process-wide setting, so the engine never
makes it on its own: ``twinlog serve`` calls it once it serves, and an application
embedding a ``Broker`` or a client may call it after its own start-up.
"""

from __future__ import annotations

import gc


def freeze_startup_objects() -> str:
    """Collect, then freeze every object alive; return what was done, for the log."""
    gc.collect()  # what start-up left as garbage is freed, not frozen forever
    gc.freeze()
    return f"gc: {gc.get_freeze_count():,} start-up objects frozen"
