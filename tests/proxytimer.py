"""A proxyagent.timer.Timer for tests: monotonic time that moves only when the test moves it (kube's
fakeTimer for the BoundedFrequencyRunner), so the sync runner's pacing and the proxiers' time-based
decisions are tested without sleeping. tests/unit and tests/e2e put `tests/` on sys.path:
`from proxytimer import FakeTimer`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class FakeTimer:
    """`t` is the time (set or moved by the test). The sync runner waits through `wait`; `idle()` returns
    once it waits again, so `step()` moves time or makes a request and returns when the runner has done
    whatever that led to."""

    def __init__(self, start: float = 0.0) -> None:
        self.t = start
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []
        self._event: asyncio.Event | None = None  # what the runner waits for besides time, while it waits
        self._timeout: asyncio.Future[None] | None = None  # and its timeout
        self._waiting = asyncio.Event()

    def now(self) -> float:
        return self.t

    def _sleeper(self, seconds: float) -> asyncio.Future[None]:
        future = asyncio.get_running_loop().create_future()
        self._sleepers.append((self.t + seconds, future))
        return future

    async def sleep(self, seconds: float) -> None:
        await self._sleeper(seconds)

    async def wait(self, event: asyncio.Event, timeout: float) -> bool:
        if event.is_set():
            return True
        timeout_future = self._sleeper(timeout)
        waiter = asyncio.ensure_future(event.wait())
        self._event, self._timeout = event, timeout_future
        self._waiting.set()
        try:
            await asyncio.wait({waiter, timeout_future}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._event = self._timeout = None
            waiter.cancel()
            timeout_future.cancel()
        return event.is_set()

    async def idle(self) -> None:
        """Return once the runner waits on this timer."""
        while self._event is None:
            self._waiting.clear()
            await self._waiting.wait()

    async def step(self, action: Callable[[], object] = lambda: None, *, advance: float = 0.0) -> None:
        """Move time by `advance` (waking what is due), do `action`, and return once the runner waits again."""
        self.t += advance
        due = [future for at, future in self._sleepers if at <= self.t and not future.done()]
        self._sleepers = [(at, future) for at, future in self._sleepers if at > self.t and not future.done()]
        for future in due:
            future.set_result(None)
        action()
        if self._event is not None and (self._event.is_set() or self._timeout in due):
            self._event = None  # woken: it is on its way out of this wait
        await self.idle()
