"""How `kubelab up` keeps its child processes running (its API servers, launcher/apiservers.py; its scheduler,
launcher/upscheduler.py), as a kubelet runs a static pod's container with restartPolicy Always: a child that
exits (a crash, a SIGKILL, the OOM killer) is started again with the same command line, the first time at
once, then after 10 s doubling to 300 s, the back-off forgotten once it has run 10 minutes since its last
start (RestartBackoff: the kubelet's backOffPeriod, MaxContainerBackOff and its flowcontrol.Backoff's expiry
of twice the cap).

The waits are on file descriptors the event loop watches (the child's pidfd, its ready pipe): no thread, no
polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

# The kubelet's crash loop back-off (pkg/kubelet: backOffPeriod, MaxContainerBackOff); an entry of its
# flowcontrol.Backoff expires once its last start is more than twice the cap old: 10 minutes.
BACKOFF_INITIAL = 10.0
BACKOFF_MAX = 300.0
EXIT_POLL = 0.1  # without pidfds only


@dataclass
class RestartBackoff:
    """When to start an exited child again, as the kubelet restarts a crashing container. The kubelet starts
    a container that is not in back-off at once and only then records a back-off of 10 s (kuberuntime's
    doBackOff, then Backoff.Next); each next exit waits the recorded period, counted from the exit, and
    doubles it up to 300 s; an exit more than 10 minutes after the last start is a first one again. So the
    waits are 0, 10, 20, 40, ..., 300, 300 s. Pure: the caller gives the clock."""

    initial: float = BACKOFF_INITIAL
    cap: float = BACKOFF_MAX
    period: float | None = None  # None: not in back-off
    last_start: float = 0.0

    def delay(self, exited_at: float) -> float:
        """Seconds to wait after an exit at `exited_at` (monotonic) before the next start, which it records."""
        if self.period is None or exited_at - self.last_start > 2 * self.cap:
            self.period, wait = self.initial, 0.0
        else:
            wait = self.period
            self.period = min(self.period * 2, self.cap)
        self.last_start = exited_at + wait
        return wait


async def readable(fd: int) -> None:
    """Wait until `fd` is readable (for a pidfd: its process has exited)."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


async def exit_code(process: subprocess.Popen[bytes]) -> int:
    """Wait for `process` to exit and reap it."""
    if process.poll() is None:
        try:
            pidfd = os.pidfd_open(process.pid)
        except (AttributeError, OSError):  # no pidfd (Linux < 5.3): look every EXIT_POLL
            while process.poll() is None:
                await asyncio.sleep(EXIT_POLL)
        else:
            try:
                await readable(pidfd)
            finally:
                os.close(pidfd)
    return process.wait()


def how_it_ended(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
        return f"was killed by signal {-code}"
    return f"exited with code {code}"


class Child(Protocol):
    """A child process `kubelab up` keeps running (see keep_running)."""

    process: subprocess.Popen[bytes] | None
    restarts: int
    state: str  # starting (not ready yet), running (ready), back-off (exited, waiting to start again)
    backoff: RestartBackoff

    @property
    def url(self) -> str:
        """Where it serves, for the log ("" for nowhere a user goes)."""

    @property
    def log_at(self) -> str:
        """Where its output goes, for the log ("above": up's own output)."""

    def exited(self) -> None:
        """Its process has exited: let go of what must not outlive it (a port clients should be refused on)."""

    def launch(self) -> None:
        """Start its process again; OSError or RuntimeError when it cannot (no fork, a port taken)."""

    async def wait_ready(self) -> bool:
        """Whether the process just launched became ready (False: it exited first)."""


async def keep_running(child: Child, log: logging.Logger, on_change: Callable[[], None]) -> None:
    """Start `child` again whenever its (already started) process exits, after RestartBackoff's wait; until
    cancelled. A start that fails waits the next back-off. `on_change()` after each change of its state, pid or
    restart count."""
    while True:
        assert child.process is not None
        code = await exit_code(child.process)
        stopped = time.monotonic()
        wait = child.backoff.delay(stopped)
        child.exited()
        child.state = "back-off"
        on_change()
        log.warning("%s (pid %d); starting it again %s (restart %d), log %s", how_it_ended(code), child.process.pid,
                    f"in {wait:g}s" if wait else "now", child.restarts + 1, child.log_at)
        await asyncio.sleep(wait)
        try:
            child.launch()
        except (OSError, RuntimeError) as exc:
            log.warning("cannot start it again: %s", exc)
            continue
        child.restarts += 1
        child.state = "starting"
        on_change()
        if await child.wait_ready():
            child.state = "running"
            on_change()
            log.info("ready again%s (pid %d, restart %d) %.2fs after it stopped", f" at {child.url}" if child.url else "",
                     child.process.pid, child.restarts, time.monotonic() - stopped)
