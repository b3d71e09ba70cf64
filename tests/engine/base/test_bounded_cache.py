"""``BoundedCache``: never more than ``entries_max`` entries, the oldest put dropped first,
from any number of threads."""

from __future__ import annotations

import threading

import pytest

from twinlog.engine.base.bounded_cache import BoundedCache


def test_a_cache_keeps_what_fits() -> None:
    cache: BoundedCache[int, str] = BoundedCache(3)
    assert cache.get(1) is None
    for key in (1, 2, 3):
        cache.put(key, f"v{key}")
    assert len(cache) == 3
    assert [cache.get(key) for key in (1, 2, 3)] == ["v1", "v2", "v3"]


def test_the_oldest_put_is_dropped_first() -> None:
    cache: BoundedCache[int, str] = BoundedCache(3)
    for key in range(1, 6):
        cache.put(key, f"v{key}")
        assert len(cache) == min(key, 3)
    assert cache.get(1) is None and cache.get(2) is None
    assert [cache.get(key) for key in (3, 4, 5)] == ["v3", "v4", "v5"]


def test_a_read_does_not_keep_an_entry_longer() -> None:
    cache: BoundedCache[str, int] = BoundedCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # read, but still the oldest put
    cache.put("c", 3)
    assert cache.get("a") is None
    assert (cache.get("b"), cache.get("c")) == (2, 3)


def test_putting_a_known_key_again_does_not_grow_the_cache() -> None:
    cache: BoundedCache[str, int] = BoundedCache(2)
    for _ in range(5):
        cache.put("a", 1)
    cache.put("b", 2)
    assert len(cache) == 2
    assert (cache.get("a"), cache.get("b")) == (1, 2)


def test_one_entry_is_a_cache_too() -> None:
    cache: BoundedCache[int, int] = BoundedCache(1)
    cache.put(1, 10)
    cache.put(2, 20)
    assert (len(cache), cache.get(1), cache.get(2)) == (1, None, 20)


@pytest.mark.parametrize("entries_max", [0, -1])
def test_a_cache_without_room_is_refused(entries_max: int) -> None:
    with pytest.raises(ValueError, match="entries_max must be positive"):
        BoundedCache(entries_max)


def test_the_bound_holds_under_many_threads() -> None:
    cache: BoundedCache[tuple[int, int], int] = BoundedCache(64)
    sizes: list[int] = []
    start = threading.Barrier(8)

    def writer(thread: int) -> None:
        start.wait(timeout=10)
        for key in range(2000):
            cache.put((thread, key), key)
            if key % 100 == 0:
                sizes.append(len(cache))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive()
    assert len(cache) == 64
    assert max(sizes) <= 64
