"""BoundedFrequencyRunner: when kube-proxy syncs (pkg/util/async/bounded_frequency_runner.go).

kube-proxy never syncs per event. Event handlers call `run()`; the runner calls the sync function
as soon as a token bucket allows: `burst` runs back to back, then one more per `min_interval`
(iptables.minSyncPeriod, 1 s; burstSyncs 2). Requests that arrive while a run is in progress or
while the bucket is empty are coalesced into the next run, so a storm of a thousand endpoint
changes costs a handful of syncs. The function also runs at least once per `max_interval` (kube-proxy
passes an hour) and, after a failure, when the sync asks for it with `retry_after(syncPeriod)`.

A worked example, min_interval 1 s, burst 2, a change every 10 ms from t=0: run at t=0 (2 tokens
-> 1), a second run right after the first ends (1 -> 0), then the bucket refills one token per
second, so the third run starts about one second after the second; every change in between rides
along with it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from .timer import MONOTONIC, Timer

log = logging.getLogger(__name__)


class TokenBucket:
    """client-go's token-bucket rate limiter (golang.org/x/time/rate): starts full with `burst`
    tokens and refills `rate` tokens per second up to `burst`. Pure: time comes in as `now`."""

    def __init__(self, rate: float, burst: int, now: float) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a token bucket needs rate > 0 and burst >= 1")
        self.rate = rate
        self.burst = burst
        self.tokens = float(burst)
        self.last = now

    def try_accept(self, now: float) -> bool:
        """Take a token if one is there (TryAccept)."""
        self.tokens = min(float(self.burst), self.tokens + max(0.0, now - self.last) * self.rate)
        self.last = max(self.last, now)
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class BoundedFrequencyRunner:
    """Runs `fn` on request, at most `burst` times in a row and then once per `min_interval`, and at
    least once per `max_interval`. Runs never overlap. `loop()` must be running for anything to run. Every
    time it reads or waits for is `timer`'s (timer.py)."""

    def __init__(self, fn: Callable[[], Awaitable[object]], *, min_interval: float, max_interval: float,
                 burst: int = 2, name: str = "sync-runner", timer: Timer = MONOTONIC) -> None:
        if max_interval < min_interval:
            raise ValueError(f"{name}: max_interval ({max_interval}) must be >= min_interval ({min_interval})")
        self.name = name
        self.min_interval = min_interval
        self.max_interval = max_interval
        self._fn = fn
        self._timer = timer
        self._clock = timer.now
        # minSyncPeriod 0 means no rate limit at all (nullLimiter).
        self._bucket = TokenBucket(1.0 / min_interval, burst, timer.now()) if min_interval > 0 else None
        self._wake = asyncio.Event()
        self._run_requested = False
        self._retry_at: float | None = None
        self._next_at = timer.now() + max_interval
        self._last_run = float("-inf")
        self.runs = 0

    def run(self) -> None:
        """Ask for a run as soon as the rate limit allows. Never blocks; repeated requests before
        the run happens are one request."""
        self._run_requested = True
        self._wake.set()

    def retry_after(self, interval: float) -> None:
        """Make sure `fn` runs again no later than `interval` from now (the soonest request wins)."""
        at = self._clock() + interval
        if self._retry_at is None or at < self._retry_at:
            self._retry_at = at
        self._wake.set()

    async def loop(self) -> None:
        log.debug("%s: loop running", self.name)
        self._next_at = self._clock() + self.max_interval
        while True:
            if not self._wake.is_set():
                delay = self._next_at - self._clock()
                if delay > 0:
                    await self._timer.wait(self._wake, delay)
            self._wake.clear()
            if self._retry_at is not None:
                # doRetry: only ever brings the next run forward.
                self._next_at = min(self._next_at, self._retry_at)
                self._retry_at = None
            if self._run_requested or self._clock() >= self._next_at:
                self._run_requested = False
                await self._try_run()

    async def _try_run(self) -> None:
        now = self._clock()
        if self._bucket is None or self._bucket.try_accept(now):
            try:
                await self._fn()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: run failed", self.name)
            self.runs += 1
            self._last_run = self._clock()
            self._next_at = self._last_run + self.max_interval
            return
        # Not allowed yet: come back when the minimum interval since the last run has passed
        # (or earlier, if something else is already scheduled earlier).
        next_possible = max(self.min_interval - (now - self._last_run), 0.001)
        self._next_at = min(self._next_at, now + next_possible)
        log.debug("%s: rate limited, next run in %.3fs", self.name, self._next_at - now)
