"""Named failpoints: places where tests make the process crash or fail on purpose.

Code marks a point with ``failpoints.hit("copier.after_log_fsync")``. It costs
one global boolean test when no failpoint is armed (the normal case).

Arm them with the environment variable ``TWINLOG_FAILPOINTS`` (read at import)
or with ``arm()`` in-process. The variable holds ``name=action`` items joined
by ``;``:

    crash        SIGKILL this process at the point (a real kill -9: no atexit, no flush)
    crash@K      SIGKILL on the K-th time the point is reached (1-based)
    raise        raise FailpointError at the point
    raise@K      raise on the K-th time
    enospc       raise OSError(ENOSPC) at the point (a full disk)

Any action takes a window or a condition:

    ACTION@K*N   fire on hits K .. K+N-1, then never again (a disk full for N writes)
    ACTION*N     the same from the first hit
    ACTION?PATH  fire on every hit while the file PATH exists (a test "fills the
                 disk" of a server process by creating PATH and frees it by
                 deleting it)

Example: ``TWINLOG_FAILPOINTS="copier.after_batch=crash@3"`` kills the process
right after the copier appended its third batch;
``"log.before_write=enospc?/tmp/full;journal.before_sync=enospc?/tmp/full"``
makes every data log and journal write fail while /tmp/full exists; add
``file.before_write=enospc?/tmp/full`` for the small files (ids, topic metadata,
checkpoints, producer-state snapshots: ``atomic_file.replace_file``).

The journal logs (``journal/journal_log.py`` and ``journal/journal_log_replicated.py``)
have two: ``journal_log.before_append`` (nothing of the record written yet) and
``journal_log.before_apply`` (the record is in the journal log, LMDB has not applied
it: a crash there is replayed at open).
"""

from __future__ import annotations

import errno
import os
import signal
import threading
from typing import NamedTuple

ENVIRONMENT_VARIABLE = "TWINLOG_FAILPOINTS"


class FailpointError(Exception):
    """Raised by a failpoint armed with ``raise`` (a test's injected failure)."""


class _Armed(NamedTuple):
    action: str
    on_hit: int  # first hit that fires (1-based)
    times: int  # how many consecutive hits fire
    while_exists: str | None  # fire on every hit while this file exists (then on_hit/times unused)


_lock = threading.Lock()
_armed: dict[str, _Armed] = {}
_hits: dict[str, int] = {}
enabled = False  # read by hit() before anything else: the zero-cost path


def _parse(specification: str) -> dict[str, _Armed]:
    armed: dict[str, _Armed] = {}
    for item in specification.split(";"):
        item = item.strip()
        if not item:
            continue
        name, separator, action = item.partition("=")
        if not separator:
            raise ValueError(f"failpoint item {item!r} is not name=action")
        action, question, path = action.partition("?")
        action, star, times_text = action.partition("*")
        action, _, count_text = action.partition("@")
        if action not in ("crash", "raise", "enospc"):
            raise ValueError(
                f"failpoint {name!r}: unknown action {action!r} (crash, raise, enospc)"
            )
        if question and (not path or star or count_text):
            raise ValueError(f"failpoint {name!r}: use ACTION?PATH alone, with a file path")
        armed[name.strip()] = _Armed(
            action,
            int(count_text) if count_text else 1,
            int(times_text) if star else 1,
            path if question else None,
        )
    return armed


def arm(
    name: str,
    action: str = "raise",
    on_hit: int = 1,
    times: int = 1,
    while_exists: str | os.PathLike[str] | None = None,
) -> None:
    """Arm one failpoint in this process: it fires on hits ``on_hit`` .. ``on_hit + times - 1``,
    or, with ``while_exists``, on every hit while that file exists."""
    global enabled
    specification = (
        f"{name}={action}?{os.fspath(while_exists)}"
        if while_exists is not None
        else f"{name}={action}@{on_hit}*{times}"
    )
    with _lock:
        _armed[name] = _parse(specification)[name]  # validates
        _hits.pop(name, None)
        enabled = True


def arm_specification(specification: str) -> None:
    """Arm every ``name=action`` item of ``specification`` (the environment variable's
    syntax) in this process now: a worker that arms its failpoints once set up counts
    only the hits of the work it is meant to crash in."""
    global enabled
    parsed = _parse(specification)
    with _lock:
        for name, armed in parsed.items():
            _armed[name] = armed
            _hits.pop(name, None)
        enabled = enabled or bool(parsed)


def disarm_all() -> None:
    global enabled
    with _lock:
        _armed.clear()
        _hits.clear()
        enabled = False


def hits(name: str) -> int:
    """How often an armed failpoint has been reached (0 for unarmed ones)."""
    return _hits.get(name, 0)


def hit(name: str) -> None:
    """Mark a failpoint. Does nothing unless ``name`` is armed."""
    if not enabled:
        return
    with _lock:
        armed = _armed.get(name)
        if armed is None:
            return
        count = _hits[name] = _hits.get(name, 0) + 1
    action, on_hit, times, while_exists = armed
    if while_exists is not None:
        if not os.path.exists(while_exists):
            return
    elif not on_hit <= count < on_hit + times:
        return
    if action == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "enospc":
        raise OSError(errno.ENOSPC, f"No space left on device (failpoint {name})")
    raise FailpointError(f"failpoint {name} reached (hit {count})")


def _arm_from_environment() -> None:
    global enabled
    specification = os.environ.get(ENVIRONMENT_VARIABLE, "")
    if specification:
        _armed.update(_parse(specification))
        enabled = True


_arm_from_environment()
