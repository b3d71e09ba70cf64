"""The producers' transactional ids, and the coordinators they reach.

A transactional id's coordinator is CRC-32C(id) mod the journal partitions
(``coordinator_partition_of_transactional_id``). By default the ids are what an
application would name its producers, ``bench-scale-0``, ``bench-scale-1``, ...; CRC-32C
being linear, ids that differ in one trailing digit reach exactly two of four
coordinators, whatever their prefix, and ``-10`` to ``-15`` then reach the other two or
the same two, depending on the prefix (this one: the other two). So each row says how
many its producers reach. The prefix is fixed, so every run maps its producers alike.
``spread=True`` gives producer n the first id ``bench-scale-n-k`` whose coordinator is
n mod the coordinator count: every coordinator gets its share.
"""

from __future__ import annotations

from collections.abc import Sequence

from twinlog.engine.broker.internal_topics import coordinator_partition_of_transactional_id

PREFIX = "bench-scale"
SUFFIXES_MAX = 10_000  # a coordinator out of 256 is found within a few hundred


def transactional_ids(count: int, coordinators: int, spread: bool) -> list[str]:
    if not spread:
        return [f"{PREFIX}-{number}" for number in range(count)]
    ids = []
    for number in range(count):
        wanted = number % coordinators
        ids.append(
            next(
                candidate
                for candidate in (f"{PREFIX}-{number}-{k}" for k in range(SUFFIXES_MAX))
                if coordinator_partition_of_transactional_id(candidate, coordinators) == wanted
            )
        )
    return ids


def coordinators_reached(ids: Sequence[str], coordinators: int) -> int:
    """How many coordinators ``ids`` reach."""
    return len({coordinator_partition_of_transactional_id(i, coordinators) for i in ids})
