"""Run one piece of work inside a named network namespace, from a thread of its own. No fork.

setns(2) changes the namespace of the calling thread only, and what a socket, a netlink connection or
/proc/sys/net belongs to is decided by the thread that creates or opens it. So a throwaway thread
enters the namespace, does the work and exits: no thread that is reused for anything else ever
changes namespace, and nothing forks a process that holds gRPC's threads (its forked copies crashed).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from typing import TypeVar

from pyroute2 import netns as pyroute2_netns

T = TypeVar("T")


def run_in_netns(netns: str | None, work: Callable[[], T], *, name: str | None = None) -> T:
    """`work()` in a new thread that first enters `netns` (None: stays in this namespace); its result,
    or its exception raised here."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            if netns is not None:
                pyroute2_netns.setns(netns, flags=0)
            box["result"] = work()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=run, name=name or f"netns-{netns}")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["result"]  # type: ignore[return-value]


def lower_priority(nice: int) -> None:
    """Give the calling thread, and every process it starts from now on, a niceness of at least `nice`
    (setpriority(2) on the thread's id: Linux keeps a nice value per thread, and a child starts with its
    parent thread's). 0 changes nothing; a thread already nicer stays as it is."""
    if nice <= 0:
        return
    tid = threading.get_native_id()
    with contextlib.suppress(OSError):
        if os.getpriority(os.PRIO_PROCESS, tid) < nice:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
