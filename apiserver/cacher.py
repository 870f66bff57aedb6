"""The watch cache: one etcd watch per resource, fanned out to every HTTP watcher of it.

kube-apiserver's cacher (k8s.io/apiserver/pkg/storage/cacher) in small. For each resource the first
watch lists `/registry/<plural>/` once and opens one etcd watch from the list's revision; from then
on the cache keeps

* `store`: every object of the resource as of `revision` (what a fresh watch starts from), and
* `ring`: the most recent events, oldest first; every event after `floor` is in it,

and hands each event to the watchers whose namespace and selectors it concerns, in the dispatch loop
itself, so a hundred watchers cost one etcd stream and one decode per event. Events keep their JSON
line per type, so an event sent to a hundred watchers is encoded once.

The ring is bounded by count (`capacity`) and by bytes (`budget`): each event is charged the stored
size of its object and of every JSON line made for it, and the oldest events go until both bounds
hold (the newest event always stays). Without the byte bound, 600 updates of a 1 MB ConfigMap held
1.2 GB for as long as the cache lived, deleted object or not. An event's object stays alive after the
event leaves the ring when the next event of the same key still points at it as its previous version
(selectors need it to tell MODIFIED from ADDED); the charge moves to that event, so what the ring
keeps alive, and no more, is what it counts. A watch from a resourceVersion the ring no longer holds
is 410 Expired (`too old resource version`), as kube's watch cache answers.

A watch from resourceVersion R is served from the ring when R >= floor; when R is newer than what
the cache has seen, the cache asks etcd for a progress notification (WatchProgressRequest) and waits
until it has caught up to R (kube's waitUntilFreshAndBlock, 3 s). A watch from an older R, or one the
cache cannot catch up with in time, is not this module's: the registry falls back to a watch on etcd
itself, which answers 410 Gone for a compacted revision, as kube-apiserver does. A watch without a
resourceVersion starts from the cache's state once it has caught up to etcd's current revision (the
consistent read kube does with ConsistentListFromCache).

A watcher that falls more than `MAX_PENDING` events, or `budget` bytes, behind is closed, as kube
closes a watcher whose buffer stays full; its client resumes from the last resourceVersion it saw. A
client that stops reading therefore holds at most one budget of events, not every event since. When the etcd watch
fails, every watcher gets the error and the cache starts over (a new list) on the next watch.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import deque
from collections.abc import AsyncGenerator, Callable
from typing import Any

from kubelab.kinds import ResourceType

from .codecs import encode_json
from .storage import Compacted, Storage, StorageEvent

log = logging.getLogger(__name__)

DEFAULT_CAPACITY = 10_000  # events kept per resource
DEFAULT_BUDGET = 64 * 1024 * 1024  # bytes of events kept per resource, and a watcher may fall behind by
MAX_PENDING = 100_000  # events a watcher may fall behind before it is closed
FRESHNESS_TIMEOUT = 3.0  # kube's blockTimeout for a resourceVersion the cache has not reached
VERSION_RECHECK = 30.0  # seconds before asking etcd's version again after it did not answer

Matcher = Callable[[dict[str, Any]], bool]


class NotServable(Exception):
    """The cache cannot serve this watch (a revision from before it started, or it could not catch up
    in time): the registry watches etcd instead."""


class TooOld(Exception):
    """The watch's resourceVersion was in the cache and has left it: 410 Expired, as kube's cache says."""

    def __init__(self, since: int, floor: int) -> None:
        super().__init__(f"too old resource version: {since} ({floor})")


class WatchEvent:
    """One event as a watcher sees it. `line()` is its JSON watch line, encoded once and shared by every
    watcher that receives the same event; `size` is the stored size of its object (what a watcher's
    backlog is counted in)."""

    __slots__ = ("_line", "key", "object", "revision", "size", "type")

    def __init__(self, type: str, object: dict[str, Any], key: str = "", revision: int = 0, size: int = 0) -> None:
        self.type = type
        self.object = object
        self.key = key
        self.revision = revision
        self.size = size
        self._line: bytes | None = None

    def line(self) -> bytes:
        if self._line is None:
            self._line = encode_json({"type": self.type, "object": self.object})
        return self._line

    def __repr__(self) -> str:
        return f"WatchEvent({self.type}, {self.key}@{self.revision})"


class CacheEvent:
    """A change as the cache received it: the new object (or, for a delete, the last one with the
    deletion's resourceVersion), the one before it, and the watch events it becomes, made once.

    `size` is the stored size of the object; `lines` how many watch lines (one per view) the cache has
    charged the event for, and `carried` the size of an object the event keeps alive as `prev` that no
    event in the ring holds any more."""

    __slots__ = ("_views", "carried", "created", "key", "lines", "next", "obj", "prev", "revision", "size", "type")

    def __init__(self, type: str, key: str, obj: dict[str, Any], prev: dict[str, Any] | None,
                 revision: int, created: bool, size: int = 0) -> None:
        self.type = type  # PUT | DELETE
        self.key = key
        self.obj = obj
        self.prev = prev
        self.revision = revision
        self.created = created
        self.size = size
        self.lines = 0
        self.carried = 0
        self.next: CacheEvent | None = None  # the key's next event in the ring
        self._views: dict[str, WatchEvent] = {}

    @property
    def views(self) -> int:
        return len(self._views)

    def view(self, kind: str, obj: dict[str, Any]) -> WatchEvent:
        event = self._views.get(kind)
        if event is None:
            event = self._views[kind] = WatchEvent(kind, obj, self.key, self.revision, self.size)
        return event

    def convert(self, matches: Matcher | None) -> WatchEvent | None:
        """What a watcher with this filter sees (the registry's rules: moving into or out of the
        selection is ADDED or DELETED, as the watch cache's filtering reports it)."""
        if self.type == "DELETE":
            if matches is not None and not matches(self.obj):
                return None
            return self.view("DELETED", self.obj)
        if matches is None:
            return self.view("MODIFIED" if self.prev is not None and not self.created else "ADDED", self.obj)
        now_matches = matches(self.obj)
        before = self.prev is not None and not self.created and matches(self.prev)
        if now_matches:
            return self.view("MODIFIED" if before else "ADDED", self.obj)
        if before:
            return self.view("DELETED", self.obj)
        return None


class _Closed:
    def __init__(self, error: BaseException | None) -> None:
        self.error = error


class CacheWatcher:
    __slots__ = ("closed", "matches", "max_size", "pending", "pending_bytes", "prefix", "since", "wakeup")

    def __init__(self, prefix: str, matches: Matcher | None, max_bytes: int = DEFAULT_BUDGET, since: int = 0) -> None:
        self.prefix = prefix
        self.matches = matches
        # Events up to `since` are in what the client already has: never sent, even when they reach the
        # cache after the watch began (an etcd whose progress notification overtook them).
        self.since = since
        # Each pending event holds its object and its line (2 x size): `max_bytes` is half that in sizes.
        self.max_size = max_bytes // 2
        self.pending: deque[WatchEvent | _Closed] = deque()
        self.pending_bytes = 0
        self.wakeup = asyncio.Event()
        self.closed = False

    def push(self, event: WatchEvent) -> bool:
        """Queue an event (the dispatch loop's hot path); False once the watcher is closed."""
        if self.closed:
            return False
        pending_bytes = self.pending_bytes + event.size
        if pending_bytes > self.max_size or len(self.pending) >= MAX_PENDING:
            # Too far behind: closed, and what it held goes (the client resumes from its last event).
            self.pending.clear()
            self.pending_bytes = 0
            self.close(None)
            return False
        self.pending_bytes = pending_bytes
        self.pending.append(event)
        self.wakeup.set()
        return True

    def close(self, error: BaseException | None) -> None:
        if not self.closed:
            self.closed = True
            self.pending.append(_Closed(error))
            self.wakeup.set()

    def pop(self) -> WatchEvent | _Closed:
        item = self.pending.popleft()
        if isinstance(item, WatchEvent):
            self.pending_bytes -= item.size
        return item


def _with_revision(obj: dict[str, Any], revision: int) -> dict[str, Any]:
    return {**obj, "metadata": {**(obj.get("metadata") or {}), "resourceVersion": str(revision)}}


class CachedList:
    """A LIST answered from the cache: the items, the revision they are the state of, their stored size,
    and for a page with more after it the key of its last item; `total` counts every key under the
    prefix (what remainingItemCount is computed from)."""

    __slots__ = ("items", "last_key", "revision", "size", "total")

    def __init__(self, items: list[dict[str, Any]], revision: int, size: int, last_key: str, total: int) -> None:
        self.items = items
        self.revision = revision
        self.size = size
        self.last_key = last_key
        self.total = total


class WatchCache:
    """The cache of one resource (all namespaces). Started by the first watch, see `Cacher`."""

    def __init__(self, storage: Storage, rt: ResourceType, *, capacity: int = DEFAULT_CAPACITY,
                 budget: int = DEFAULT_BUDGET, metrics: Any = None,
                 progress_reliable: Callable[[], bool] = lambda: False) -> None:
        self.storage = storage
        self.progress_reliable = progress_reliable
        self.rt = rt
        self.prefix = rt.storage_path
        self.capacity = capacity
        self.budget = budget
        self.metrics = metrics
        # This resource's metric children, labelled once (labels() costs a lock and lookups per call).
        self._received = metrics.cache_received.labels(rt.plural) if metrics is not None else None
        self._dispatched = metrics.cache_dispatched.labels(rt.plural) if metrics is not None else None
        self._rv = metrics.cache_rv.labels(rt.plural) if metrics is not None else None
        self.store: dict[str, dict[str, Any]] = {}
        self.sizes: dict[str, int] = {}  # the stored size of each object in `store`
        self.ring: deque[CacheEvent] = deque()
        self.bytes = 0  # what the ring's events are charged, see CacheEvent
        self.last_in_ring: dict[str, CacheEvent] = {}  # each key's newest event in the ring
        self.revision = 0  # every event up to here is in `store`: what a LIST from the cache may claim
        self.progress_revision = 0  # what etcd's last progress notification named, see _progressed
        self.floor = 0
        self.started_at = 0  # the revision the cache listed at: older ones were never in the ring
        self.watchers: set[CacheWatcher] = set()
        self._ready = False
        self._starting: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._progress: asyncio.Queue[None] = asyncio.Queue()
        self._progress_asked = False
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._closed: list[CacheWatcher] = []

    @property
    def ready(self) -> bool:
        return self._ready

    # --- life ------------------------------------------------------------------------------------

    async def ensure_started(self) -> None:
        if self._ready:
            return
        if self._starting is None or self._starting.done():
            self._starting = asyncio.ensure_future(self._start())
        await asyncio.shield(self._starting)

    async def _start(self) -> None:
        items, revision = await self.storage.list(self.prefix)
        self.store = {s.key: s.obj for s in items}
        self.sizes = {s.key: s.size for s in items}
        self._clear_ring()
        self.revision = self.floor = self.started_at = self.progress_revision = revision
        self._progress = asyncio.Queue()
        self._progress_asked = False
        self._ready = True
        if self.metrics is not None:
            self.metrics.cache_inits.labels(self.rt.plural).inc()
        if self._rv is not None:
            self._rv.set(revision)
        self._task = asyncio.create_task(self._follow(revision + 1), name=f"watch-cache-{self.rt.plural}")

    async def _follow(self, start: int) -> None:
        try:
            async for event in self.storage.watch(self.prefix, start, progress_requests=self._progress,
                                                  prev_kv=False):
                self._ingest(event)
        except asyncio.CancelledError:
            self._reset(None)
            raise
        except Compacted as exc:
            log.info("watch cache %s: %s; starting over", self.rt.plural, exc)
            self._reset(None)
        except Exception as exc:  # noqa: BLE001 - every watcher hears of it; the next watch starts over
            log.warning("watch cache %s: etcd watch failed: %s", self.rt.plural, exc)
            self._reset(exc)

    def _clear_ring(self) -> None:
        self.ring.clear()
        self.last_in_ring.clear()
        self.bytes = 0

    def _reset(self, error: BaseException | None) -> None:
        self._ready = False
        self.store = {}
        self.sizes = {}
        self._clear_ring()
        for watcher in list(self.watchers):
            watcher.close(error)
        self.watchers.clear()
        for _, waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(NotServable("the watch cache is restarting"))
        self._waiters.clear()
        self._update_watcher_gauge()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    # --- events in -------------------------------------------------------------------------------

    def _ingest(self, event: StorageEvent) -> None:
        if event.type == "PROGRESS":
            self._progress_asked = False
            self._progressed(event.revision)
            return
        key = event.key
        if event.type == "DELETE":
            prev = self.store.pop(key, None)
            if prev is None:
                self._advance(event.revision)
                return
            # The deleted object leaves the store; only the ring (within its budget) still holds it.
            size = self.sizes.pop(key, 0)
            cached = CacheEvent("DELETE", key, _with_revision(prev, event.revision), prev, event.revision, False, size)
        else:
            assert event.obj is not None
            prev = self.store.get(key)
            self.store[key] = event.obj
            prev_size = self.sizes.get(key, 0)
            size = self.sizes[key] = event.size
            cached = CacheEvent("PUT", key, event.obj, prev, event.revision, event.created, size)
        last = self.last_in_ring.get(key)
        if last is not None:
            last.next = cached
        elif prev is not None and event.type == "PUT":
            # The previous version came from the list, or its event left the ring: this event alone keeps
            # it alive now.
            cached.carried = prev_size
        self.last_in_ring[key] = cached
        self.ring.append(cached)
        # The object and one watch line, charged up front (_charge_lines adds any further view's line).
        cached.lines = 1
        self.bytes += 2 * size + cached.carried
        if self._received is not None:
            self._received.inc()
        dispatched = 0
        for watcher in self.watchers:
            if not cached.key.startswith(watcher.prefix) or cached.revision <= watcher.since:
                continue
            converted = cached.convert(watcher.matches)
            if converted is not None:
                if not watcher.push(converted):
                    self._closed.append(watcher)
                dispatched += 1
        if self._closed:
            for watcher in self._closed:
                self.watchers.discard(watcher)
            self._closed.clear()
            self._update_watcher_gauge()
        if dispatched and self._dispatched is not None:
            self._dispatched.inc(dispatched)
        if len(cached._views) > 1:
            self._charge_lines(cached)  # filtered watchers made a second view
        if len(self.ring) > self.capacity or self.bytes > self.budget:
            self._evict()
        self._advance(event.revision)

    def _charge_lines(self, cached: CacheEvent) -> None:
        """An event is charged one JSON line from the start (the line its first watcher will encode), and
        one more for every other view of it that a filtered watcher or a replay made."""
        lines = max(1, cached.views)
        if lines > cached.lines:
            self.bytes += (lines - cached.lines) * cached.size
            cached.lines = lines

    def _evict(self) -> None:
        """Drop the oldest events until the ring is within its count and its bytes (the newest stays)."""
        ring = self.ring
        while len(ring) > self.capacity or (self.bytes > self.budget and len(ring) > 1):
            oldest = ring.popleft()
            self.floor = oldest.revision
            self.bytes -= oldest.lines * oldest.size + oldest.carried
            successor, oldest.next, oldest.prev = oldest.next, None, None
            if successor is not None:
                # The key's next event still points at this object as its previous version: it stays
                # alive, and charged, until that event goes too.
                successor.carried = oldest.size
            else:
                del self.last_in_ring[oldest.key]
                self.bytes -= oldest.size

    def _progressed(self, revision: int) -> None:
        """etcd says this watch has seen every change up to `revision`. An etcd older than 3.4.31 / 3.5.13
        may say so before it has sent those changes (see progress_requests_reliable): then the store is not
        known to hold them, so `revision` (what LISTs may claim) stays where the events put it; a watch may
        still start (events up to its own resourceVersion are never sent to it, see CacheWatcher.since)."""
        if self.progress_reliable():
            self._advance(revision)
            return
        self.progress_revision = max(self.progress_revision, revision)
        self._wake(self.progress_revision)

    def _advance(self, revision: int) -> None:
        if revision <= self.revision:
            return
        self.revision = revision
        self.progress_revision = max(self.progress_revision, revision)
        if self._rv is not None:
            self._rv.set(revision)
        self._wake(revision)

    def _wake(self, revision: int) -> None:
        if self._waiters:
            still = []
            for wanted, waiter in self._waiters:
                if wanted <= revision:
                    if not waiter.done():
                        waiter.set_result(None)
                else:
                    still.append((wanted, waiter))
            self._waiters = still

    async def wait_fresh(self, revision: int, timeout: float = FRESHNESS_TIMEOUT) -> None:
        """Wait until the cache has seen every change up to `revision` (on an etcd whose progress
        notifications are not reliable: until etcd said so, see _progressed); NotServable after `timeout`."""
        if revision <= self.progress_revision:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((revision, waiter))
        if not self._progress_asked:
            # etcd answers with the store's current revision once this stream has sent every event
            # before it (one request covers every waiter that arrives before the answer).
            self._progress_asked = True
            self._progress.put_nowait(None)
        try:
            await asyncio.wait_for(waiter, timeout)
        except TimeoutError:
            self._progress_asked = False
            raise NotServable(f"the watch cache of {self.rt.plural} is at {self.revision}, not {revision}") from None

    def _update_watcher_gauge(self) -> None:
        if self.metrics is not None:
            self.metrics.registered_watchers.labels(self.rt.group, self.rt.version, self.rt.kind).set(
                len(self.watchers))

    # --- watchers out ----------------------------------------------------------------------------

    def _check_window(self, since: int) -> None:
        if since < self.started_at:
            # Before the cache began (it starts on the first watch): etcd still knows, unless compacted.
            raise NotServable(f"resourceVersion {since} is older than the watch cache of {self.rt.plural} "
                              f"({self.started_at})")
        if since < self.floor:
            raise TooOld(since, self.floor)

    def get(self, key: str) -> dict[str, Any] | None:
        """The cached object at `key`, if the cache is running and has one (it may be stale)."""
        if not self._ready:
            return None
        return self.store.get(key)

    def list(self, prefix: str, matches: Matcher | None, limit: int = 0) -> CachedList | None:
        """The objects under `prefix` as of `revision`, in key order (etcd's), filtered by `matches`; with a
        `limit`, at most that many and the key of the last one when more follow. None when the cache is
        not running. Nothing awaits here: the answer is one revision's state."""
        if not self._ready:
            return None
        store, sizes = self.store, self.sizes
        keys = sorted(k for k in store if k.startswith(prefix))
        items: list[dict[str, Any]] = []
        size, last, more = 0, "", False
        for key in keys:
            obj = store[key]
            if matches is not None and not matches(obj):
                continue
            if limit and len(items) >= limit:
                more = True
                break
            items.append(obj)
            size += sizes.get(key, 0)
            last = key
        return CachedList(items, self.revision, size, last if more else "", len(keys))

    async def watch(self, prefix: str, since: int | None, matches: Matcher | None, *,
                    current_revision: Callable[[], Any]) -> AsyncGenerator[WatchEvent, None]:
        """Events under `prefix` after `since` (None: the current objects as ADDED first).
        NotServable (before anything is yielded) when the registry should watch etcd instead: `since` is
        older than the cache itself, or the cache could not catch up with it in time. TooOld when
        `since` was in the ring and has been evicted from it (410 Expired)."""
        await self.ensure_started()
        if since is None:
            await self.wait_fresh(await current_revision())
        elif since > self.progress_revision:
            await self.wait_fresh(since)
        else:
            self._check_window(since)
            if since < self.revision and await self.storage.compacted(since + 1):
                # kube's cacher would replay this from its window; kubelab keeps etcd's answer, 410 Gone.
                raise NotServable(f"resourceVersion {since} was compacted in etcd")
        if not self._ready:
            raise NotServable("the watch cache is restarting")
        if since is not None:
            self._check_window(since)  # the ring may have moved on while this watch waited
        # From here to the registration nothing awaits: the snapshot or replay and the live events
        # join without a gap or an overlap.
        watcher = CacheWatcher(prefix, matches, self.budget, since or 0)
        first: deque[WatchEvent] = deque()
        if since is None:
            for key in sorted(k for k in self.store if k.startswith(prefix)):
                obj = self.store[key]
                if matches is None or matches(obj):
                    first.append(WatchEvent("ADDED", obj, key, int(obj["metadata"]["resourceVersion"]),
                                            self.sizes.get(key, 0)))
        else:
            for cached in self.ring:
                if cached.revision > since and cached.key.startswith(prefix):
                    converted = cached.convert(matches)
                    if converted is not None:
                        first.append(converted)
                        self._charge_lines(cached)
            self._evict()
        self.watchers.add(watcher)
        self._update_watcher_gauge()
        try:
            # popleft: an event's line is let go once it is sent, not when the whole replay is.
            while first:
                yield first.popleft()
            pending = watcher.pending
            while True:
                while pending:
                    item = pending.popleft()  # CacheWatcher.pop, inlined: this runs per event per watcher
                    if item.__class__ is _Closed:
                        assert isinstance(item, _Closed)
                        if item.error is not None:
                            raise item.error
                        return
                    assert isinstance(item, WatchEvent)
                    watcher.pending_bytes -= item.size
                    yield item
                watcher.wakeup.clear()
                await watcher.wakeup.wait()
        finally:
            self.watchers.discard(watcher)
            self._update_watcher_gauge()


_DIGITS = re.compile(r"[0-9]+", re.ASCII)


def progress_requests_reliable(version: str) -> bool:
    """Whether an etcd of this version answers a WatchProgressRequest only after every event before the
    revision it names (kube's endpointSupportsRequestWatchProgress): etcd-io/etcd#15220, fixed in 3.4.25
    and 3.5.8, and #17507, fixed in 3.4.31 and 3.5.13. An older etcd may send the progress notification
    ahead of those events (it answered a fresh watch's request at once, before the watch had caught up), so
    a cache that trusts it calls itself fresh while it misses writes. A version that does not parse is
    not trusted either."""
    text = version.strip().removeprefix("v")
    core, pre = text, False
    for mark in ("+", "-"):  # build metadata, then a pre-release (which sorts before its release)
        if mark in core:
            core, rest = core.split(mark, 1)
            pre = pre or (mark == "-" and bool(rest))
    parts = core.split(".")
    if len(parts) != 3 or not all(_DIGITS.fullmatch(p) for p in parts):
        return False
    ver = (*(int(p) for p in parts), 0 if pre else 1)
    # kube: not supported when ver < 3.4.31, or 3.5.0 <= ver < 3.5.13.
    return not (ver < (3, 4, 31, 1) or (3, 5, 0, 1) <= ver < (3, 5, 13, 1))


class Cacher:
    """The watch caches of one API server, one per resource, started on demand."""

    def __init__(self, storage: Storage, *, capacity: int = DEFAULT_CAPACITY, budget: int = DEFAULT_BUDGET,
                 metrics: Any = None) -> None:
        self.storage = storage
        self.capacity = capacity
        self.budget = budget
        self.metrics = metrics
        self.caches: dict[ResourceType, WatchCache] = {}
        self._progress_reliable: bool | None = None  # None: not known yet
        self._checking: asyncio.Future[bool] | None = None
        self._checked_at = float("-inf")

    async def progress_reliable(self) -> bool:
        """Whether every etcd server answers progress requests reliably (see progress_requests_reliable);
        kube serves consistent LISTs from its cache only then. Until etcd's versions are known the answer
        is no, as kube's feature support checker says no until it has checked: the check runs in the
        background (no LIST waits for it), and after a failure again at most every VERSION_RECHECK s."""
        if self._progress_reliable is not None:
            return self._progress_reliable
        loop = asyncio.get_running_loop()
        if self._checking is None and loop.time() - self._checked_at >= VERSION_RECHECK:
            self._checked_at = loop.time()
            self._checking = asyncio.ensure_future(self._check_versions())
        return False

    async def _check_versions(self) -> bool:
        try:
            versions = await self.storage.versions()
        except Exception as exc:  # noqa: BLE001 - unknown is "not reliable"; asked again later
            log.warning("could not read etcd's version, LISTs without a resourceVersion read etcd: %s", exc)
            return False
        finally:
            self._checking = None
        reliable = bool(versions) and all(progress_requests_reliable(v) for v in versions)
        if not reliable:
            log.info("etcd %s may send progress notifications ahead of events (etcd-io/etcd#15220, #17507; "
                     "fixed in 3.4.31 and 3.5.13): LISTs without a resourceVersion read etcd, not the watch "
                     "cache, as kube-apiserver does", ", ".join(versions))
        self._progress_reliable = reliable
        return reliable

    def cache(self, rt: ResourceType) -> WatchCache:
        cache = self.caches.get(rt)
        if cache is None:
            cache = self.caches[rt] = WatchCache(self.storage, rt, capacity=self.capacity, budget=self.budget,
                                                 metrics=self.metrics,
                                                 progress_reliable=lambda: self._progress_reliable is True)
        return cache

    def cached(self, rt: ResourceType, key: str) -> dict[str, Any] | None:
        cache = self.caches.get(rt)
        return cache.get(key) if cache is not None else None

    def forget(self, rt: ResourceType) -> None:
        """Stop and drop the cache of a resource no longer served (a CustomResourceDefinition changed or
        went): its etcd watch ends and its watchers get the end of their streams."""
        cache = self.caches.pop(rt, None)
        if cache is not None:
            asyncio.ensure_future(cache.stop())

    async def stop(self) -> None:
        if self._checking is not None:
            self._checking.cancel()
            await asyncio.gather(self._checking, return_exceptions=True)
        for cache in self.caches.values():
            await cache.stop()
