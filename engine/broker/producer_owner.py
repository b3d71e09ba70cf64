"""Which principal an idempotent producer id was given to, kept in its transactional id.

An idempotent (non-transactional) producer gets its id under a transactional id the
broker makes up, ``__idempotent__<n>``, which the transaction journal's INIT_PRODUCER
record and checkpoint keep with the id. When the caller is authenticated, the name
also carries its principal, ``__idempotent__<n>@<principal>``: the id's owner is then
on disk with the id, in the existing formats, and survives restarts as the id does.
The server refuses a batch carrying an id whose owner is not the caller, so a writer
who read the id off another's batch header cannot write her next sequence first.

Thread rule: pure functions.
"""

from __future__ import annotations

IDEMPOTENT_PRODUCER_PREFIX = "__idempotent__"  # non-transactional producers get ids too
OWNER_SEPARATOR = "@"  # after the number, which holds no "@": the principal may


def idempotent_transactional_id(number: int, owner: str | None = None) -> str:
    """The transactional id of idempotent producer ``number``, naming ``owner`` if any."""
    name = f"{IDEMPOTENT_PRODUCER_PREFIX}{number}"
    return f"{name}{OWNER_SEPARATOR}{owner}" if owner else name


def is_idempotent(transactional_id: str) -> bool:
    """Was this id made up for an idempotent producer (no client may choose one)?"""
    return transactional_id.startswith(IDEMPOTENT_PRODUCER_PREFIX)


def owner_of(transactional_id: str) -> str | None:
    """The principal an idempotent producer's id was given to; None when none was
    recorded (initialised without authentication, or before owners were recorded)."""
    if not is_idempotent(transactional_id):
        return None
    _, separator, owner = transactional_id.partition(OWNER_SEPARATOR)
    return owner if separator and owner else None
