"""Run one piece of work inside a named network namespace, from a thread of its own. No fork.

setns(2) changes the namespace of the calling thread only, and what a socket, a netlink connection or
/proc/sys/net belongs to is decided by the thread that creates or opens it. So a throwaway thread
enters the namespace, does the work and exits: no thread that is reused for anything else ever
changes namespace, and nothing forks a process that holds gRPC's threads (its forked copies crashed).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

NETNS_RUN_DIR = "/var/run/netns"  # where `ip netns add` names namespaces
CLONE_NEWNET = 0x40000000
LIBC = ctypes.CDLL(None, use_errno=True)  # setns, unshare: made once, not per namespace entered


def enter_netns(netns: str) -> None:
    """setns(2) the calling thread into network namespace `netns`: an `ip netns` name, or a path such
    as /proc/PID/ns/net. OSError (FileNotFoundError for a name that does not exist) if it cannot.

    pyroute2's setns lists /var/run/netns on every call to see whether the name exists, which a lab of a
    thousand pods pays on every thread that enters one; opening the file answers the same question."""
    path = netns if "/" in netns else os.path.join(NETNS_RUN_DIR, netns)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if LIBC.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


def run_in_netns(netns: str | None, work: Callable[[], T], *, name: str | None = None) -> T:
    """`work()` in a new thread that first enters `netns` (None: stays in this namespace); its result,
    or its exception raised here."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            if netns is not None:
                enter_netns(netns)
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
