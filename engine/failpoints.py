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

Example: ``TWINLOG_FAILPOINTS="copier.after_batch=crash@3"`` kills the process
right after the copier appended its third batch.
"""

from __future__ import annotations

import errno
import os
import signal
import threading

ENVIRONMENT_VARIABLE = "TWINLOG_FAILPOINTS"


class FailpointError(Exception):
    """Raised by a failpoint armed with ``raise`` (a test's injected failure)."""


_lock = threading.Lock()
_armed: dict[str, tuple[str, int]] = {}  # name -> (action, on which hit)
_hits: dict[str, int] = {}
enabled = False  # read by hit() before anything else: the zero-cost path


def _parse(specification: str) -> dict[str, tuple[str, int]]:
    armed: dict[str, tuple[str, int]] = {}
    for item in specification.split(";"):
        item = item.strip()
        if not item:
            continue
        name, separator, action = item.partition("=")
        if not separator:
            raise ValueError(f"failpoint item {item!r} is not name=action")
        action, _, count_text = action.partition("@")
        if action not in ("crash", "raise", "enospc"):
            raise ValueError(
                f"failpoint {name!r}: unknown action {action!r} (crash, raise, enospc)"
            )
        armed[name.strip()] = (action, int(count_text) if count_text else 1)
    return armed


def arm(name: str, action: str = "raise", on_hit: int = 1) -> None:
    """Arm one failpoint in this process."""
    global enabled
    with _lock:
        _parse(f"{name}={action}@{on_hit}")  # validates
        _armed[name] = (action, on_hit)
        _hits.pop(name, None)
        enabled = True


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
    action, on_hit = armed
    if count != on_hit:
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
