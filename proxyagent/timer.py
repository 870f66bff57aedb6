"""The monotonic time the proxy agent decides by: when the sync runner may run next (minSyncPeriod, the
token bucket, the periodic and retry syncs), when a full sync is due, when stale chains may go, how long
the canary monitor waits. kube-proxy's BoundedFrequencyRunner takes it the same way (its `timer`
interface, a fake one in its tests), so a test moves time instead of sleeping through it.

Wall-clock reads stay where kube reads the wall clock for what it reports (the sync timestamps and
queued-change times of /metrics, `last_updated` of /healthz, the trigger times of endpoint changes), and
durations of work are measured with perf_counter: those inform, they never decide."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Timer(Protocol):
    def now(self) -> float:
        """Seconds on a clock that never goes back."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return once `seconds` of this timer's time have passed."""
        ...

    async def wait(self, event: asyncio.Event, timeout: float) -> bool:
        """Return once `event` is set (True) or `timeout` seconds of this timer's time have passed (False)."""
        ...


class MonotonicTimer:
    """time.monotonic and the event loop's own timers."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def wait(self, event: asyncio.Event, timeout: float) -> bool:
        try:
            await asyncio.wait_for(event.wait(), timeout=timeout)
        except TimeoutError:
            return event.is_set()
        return True


MONOTONIC = MonotonicTimer()
