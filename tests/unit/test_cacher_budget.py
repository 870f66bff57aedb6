"""The watch cache's byte budget (apiserver/cacher.py), on random streams of events fed to its ingest
step as its etcd watch would deliver them: what the ring charges is never less than what it really
keeps alive (objects no longer in the store, and the watch lines made for its events), the ring stays
within its count and its bytes (the newest event always stays), and a deleted object's bytes go once
its events have left the ring. The etcd side is tested in tests/faults/test_watch_cache_memory.py."""

from __future__ import annotations

import random
from typing import Any

import pytest

from apiserver.cacher import MAX_PENDING, CacheWatcher, WatchCache, WatchEvent
from apiserver.storage import StorageEvent
from kubelab import kinds


def configmap(key: str, payload: dict[str, Any], revision: int) -> dict[str, Any]:
    return {"metadata": {"name": key.rsplit("/", 1)[-1], "resourceVersion": str(revision),
                         "labels": {"pick": payload["pick"]}}, "data": payload}


def retained(cache: WatchCache, sizes: dict[int, int]) -> int:
    """What the ring really keeps alive: each payload reachable from a ring event (its object, the
    object before it) that the store no longer holds, once, and each watch view made for an event."""
    in_store = {id(obj["data"]) for obj in cache.store.values()}
    held: set[int] = set()
    lines = 0
    for event in cache.ring:
        for obj in (event.obj, event.prev):
            if obj is not None and id(obj["data"]) not in in_store:
                held.add(id(obj["data"]))
        lines += event.views * event.size
    return sum(sizes[i] for i in held) + lines


@pytest.mark.parametrize("seed", range(12))
def test_the_ring_counts_at_least_what_it_keeps_and_stays_in_its_bounds(seed: int) -> None:
    rng = random.Random(seed)
    cache = WatchCache(None, kinds.CONFIGMAPS, capacity=rng.choice([5, 50, 1000]),  # type: ignore[arg-type]
                       budget=rng.choice([1_000, 20_000, 200_000]))
    cache._ready = True
    picky = CacheWatcher("/registry/configmaps/", lambda obj: obj["metadata"]["labels"]["pick"] == "yes",
                         max_bytes=10**12)
    everyone = CacheWatcher("/registry/configmaps/", None, max_bytes=10**12)
    cache.watchers.update({picky, everyone})
    sizes: dict[int, int] = {}
    live: set[str] = set()
    revision = 1
    for _ in range(600):
        revision += 1
        key = f"/registry/configmaps/ns/cm-{rng.randrange(8)}"
        if key in live and rng.random() < 0.2:
            cache._ingest(StorageEvent("DELETE", key, None, None, revision, False))
            live.discard(key)
        else:
            payload = {"pick": rng.choice(["yes", "no"]), "blob": "x"}
            size = rng.choice([10, 100, 1_000, 5_000])
            sizes[id(payload)] = size
            cache._ingest(StorageEvent("PUT", key, configmap(key, payload, revision), None, revision,
                                       key not in live, size))
            live.add(key)
        for watcher in (picky, everyone):
            while watcher.pending:
                watcher.pop()
        assert len(cache.ring) <= cache.capacity
        assert cache.bytes <= cache.budget or len(cache.ring) == 1
        assert cache.bytes >= retained(cache, sizes)
        assert cache.ring[-1].revision == revision or cache.ring[-1].type == "DELETE"
        assert cache.floor < cache.ring[0].revision


def test_a_deleted_objects_bytes_go_once_its_events_leave_the_ring() -> None:
    cache = WatchCache(None, kinds.CONFIGMAPS, capacity=10_000, budget=10_000)  # type: ignore[arg-type]
    cache._ready = True
    key = "/registry/configmaps/ns/big"
    for revision in range(2, 602):  # 600 updates of a "1 MB" object, at 1/1000 scale
        cache._ingest(StorageEvent("PUT", key, configmap(key, {"pick": "no"}, revision), None, revision,
                                   revision == 2, 1_000))
        assert cache.bytes <= cache.budget
    cache._ingest(StorageEvent("DELETE", key, None, None, 602, False))
    assert cache.bytes <= cache.budget and key not in cache.store and key not in cache.sizes
    for revision in range(603, 1200):  # later small events push the deleted object's events out
        small = f"/registry/configmaps/ns/small-{revision}"
        cache._ingest(StorageEvent("PUT", small, configmap(small, {"pick": "no"}, revision), None, revision, True, 10))
    assert all(event.key != key for event in cache.ring)
    assert cache.bytes == sum(event.size * (1 + event.lines) + event.carried for event in cache.ring)
    assert cache.floor >= 602


def test_a_watcher_that_stops_reading_is_closed_after_its_bytes_and_lets_them_go() -> None:
    watcher = CacheWatcher("/registry/configmaps/", None, max_bytes=10_000)
    pushed = 0
    while watcher.push(WatchEvent("MODIFIED", {}, "k", pushed, 1_000)):
        pushed += 1
        assert pushed < MAX_PENDING
    assert pushed == 5  # 5 events of 1,000 bytes, each an object and its line: 10,000
    assert watcher.closed and watcher.pending_bytes == 0 and len(watcher.pending) == 1
