"""The pod sandbox (kubelet's pause container): a UTS namespace with the pod's hostname, held by a process
that dies with kubelab, which every container of the pod joins. No Python starts for it and nothing goes
through a shell.

The holder is one PID that execs three times, util-linux and coreutils only:

    setpriv --pdeathsig KILL -- unshare --uts -- cat      (stdin: the lifeline, stdout: /dev/null)

setpriv asks the kernel for SIGKILL when the thread that spawned it (the event loop's, which lives as long
as kubelab) ends; unshare makes the UTS namespace and execs `cat`, which holds it. `cat` reads the
*lifeline*, a pipe whose only write end is kubelab's (close-on-exec, passed to no child): when kubelab dies
the kernel closes it, `cat` reads end-of-file and exits. That covers the window the death signal cannot:
kubelab dying after the spawn but before setpriv asked for it (containerinit's sandbox checks its parent
PID for the same reason). The hostname is then set from kubelab itself by a short-lived thread that
enters the new namespace (setns) and calls sethostname: no exec at all. The sandbox is ready once the
holder runs `cat` (unshare execs only after it made the namespace) and its hostname is set.

Where setpriv, unshare or cat is missing, `python -m kubeletstub.containerinit --sandbox` does the same
from a Python start-up (its holder is `sleep infinity`): ~90 ms of CPU per pod instead of ~7.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

from kubelab.netnsthread import run_in_netns

from .procutil import comm, libc, spawn_launcher
from .runtimetypes import ContainerRuntimeError

CLONE_NEWUTS = 0x04000000
SANDBOX_TOOLS = ("setpriv", "unshare", "cat")
START_TIMEOUT = 10.0  # seconds for the holder to reach its last exec

_lifeline_lock = threading.Lock()
_lifeline: tuple[int, int] | None = None


def sandbox_argv() -> list[str] | None:
    """The holder's command, or None where the node lacks one of the programs."""
    found = _tools(os.environ.get("PATH"))
    return None if found is None else list(found)


@functools.lru_cache(maxsize=4)
def _tools(search_path: str | None) -> tuple[str, ...] | None:
    """sandbox_argv for this PATH: looked up once, not three PATH walks per pod (1.3 % of the components'
    loop in a 50-node rollout)."""
    paths = [shutil.which(tool, path=search_path) for tool in SANDBOX_TOOLS]
    if not all(paths):
        return None
    setpriv, unshare, cat = (str(p) for p in paths)
    return (setpriv, "--pdeathsig", "KILL", "--", unshare, "--uts", "--", cat)


def fallback_argv(hostname: str) -> list[str]:
    return [sys.executable, "-m", "kubeletstub.containerinit", "--sandbox", hostname, str(os.getpid())]


def lifeline() -> int:
    """The read end of this process's lifeline (made once; both ends close-on-exec, never closed: the
    write end's life is kubelab's)."""
    global _lifeline
    with _lifeline_lock:
        if _lifeline is None:
            _lifeline = os.pipe()
        return _lifeline[0]


def set_hostname(pid: int, hostname: str) -> None:
    """Set the hostname of `pid`'s UTS namespace. Blocks; moves the calling thread into that namespace, so
    run it in a thread of its own that ends after (`start`). Refuses a namespace that is this process's:
    the host's hostname is never touched."""
    own = os.open("/proc/self/ns/uts", os.O_RDONLY | os.O_CLOEXEC)
    try:
        target = os.open(f"/proc/{pid}/ns/uts", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        os.close(own)
        raise ContainerRuntimeError(f"the sandbox's UTS namespace is gone: {exc.strerror}") from exc
    try:
        if os.fstat(target).st_ino == os.fstat(own).st_ino:
            raise ContainerRuntimeError(f"process {pid} has no UTS namespace of its own")
        if libc.setns(target, CLONE_NEWUTS) != 0:
            raise ContainerRuntimeError(f"setns into the sandbox's UTS namespace: {os.strerror(ctypes.get_errno())}")
        socket.sethostname(hostname)
    finally:
        os.close(target)
        os.close(own)


async def start(pod_key: str, hostname: str) -> subprocess.Popen[bytes]:
    """Spawn the pod's sandbox and return once its namespace holds `hostname`. Raises ContainerRuntimeError
    (the holder killed and reaped) when it does not get there."""
    argv = sandbox_argv()
    holder = os.path.basename(argv[-1])[:15] if argv is not None else "sleep"  # what /proc/PID/comm shows
    stdin = lifeline() if argv is not None else subprocess.DEVNULL
    popen = spawn_launcher(argv or fallback_argv(hostname), stdin=stdin, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while comm(popen.pid) != holder:
            if popen.poll() is not None or time.monotonic() > deadline:
                raise ContainerRuntimeError(f"pod sandbox of {pod_key} did not start")
            await asyncio.sleep(0.005)
        if argv is not None:
            # A thread of its own that ends after (run_in_netns with no netns): the UTS namespace it entered goes
            # with it, never into the executor's threads that later spawn processes.
            await asyncio.to_thread(run_in_netns, None, lambda: set_hostname(popen.pid, hostname),
                                    name="sandbox-hostname")
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            popen.kill()
        popen.wait()
        raise
    return popen
