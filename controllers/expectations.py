"""Expectations: what a controller has asked for and not yet seen in its informer (kube's
UIDTrackingControllerExpectations).

A ReplicaSet controller that creates three pods must not count pods again before its informer has
seen those three, or a burst of syncs would create them twice. So it records "3 adds expected" (or
"these pod keys are being deleted") before writing, the pod event handlers lower the counts, and the
owner is only synced again once everything expected has been seen, or after five minutes in case an
event was lost. The clock is injected, so this is testable without waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

EXPECTATIONS_TIMEOUT = 5 * 60.0


@dataclass
class _Record:
    adds: int = 0
    deletes: set[str] = field(default_factory=set)
    timestamp: float = 0.0


class Expectations:
    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 timeout: float = EXPECTATIONS_TIMEOUT) -> None:
        self._clock = clock
        self._timeout = timeout
        self._records: dict[str, _Record] = {}

    def satisfied(self, key: str) -> bool:
        """True when nothing is pending for `key`, when what was expected has all been observed, or
        when the expectations are older than the timeout."""
        record = self._records.get(key)
        if record is None:
            return True
        if record.adds <= 0 and not record.deletes:
            return True
        return self._clock() - record.timestamp > self._timeout

    def expect_creations(self, key: str, count: int) -> None:
        self._records[key] = _Record(adds=count, timestamp=self._clock())

    def expect_deletions(self, key: str, pod_keys: Iterable[str]) -> None:
        self._records[key] = _Record(deletes=set(pod_keys), timestamp=self._clock())

    def expect(self, key: str, *, adds: int, deletes: Iterable[str]) -> None:
        """Creations and deletions of one sync at once (a DaemonSet sync may do both)."""
        self._records[key] = _Record(adds=adds, deletes=set(deletes), timestamp=self._clock())

    def creation_observed(self, key: str) -> None:
        record = self._records.get(key)
        if record is not None:
            record.adds -= 1

    def deletion_observed(self, key: str, pod_key: str) -> None:
        record = self._records.get(key)
        if record is not None:
            record.deletes.discard(pod_key)

    def forget(self, key: str) -> None:
        self._records.pop(key, None)
