"""Child processes: starting one that dies with this process, and stopping one as `docker stop` does.

A child that kubelab starts must not outlive it: `kubelab up` killed with SIGKILL once left its private
etcd running, holding the data dir's lock, and the next `kubelab up` on that data dir waited 30 s for
it. `spawn` asks the kernel to SIGKILL the child when its parent goes (PR_SET_PDEATHSIG), and closes
the race in which the parent died before the child could ask. The kernel counts the *thread* that
forked as the parent (prctl(2)), so children are forked by one long-lived thread of this process,
never by a pool worker that may come and go. Pod servers (kubeletstub) watch their parent's PID
themselves instead.

Stopping: a signal, a grace period, then SIGKILL (`stop_process`).
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import functools
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def stop_process(proc: subprocess.Popen[Any] | None, *, sig: int = signal.SIGTERM, timeout: float = 15.0
                 ) -> int | None:
    """Send `sig` to a running `proc` (by its PID), wait up to `timeout` seconds for it to exit, then
    SIGKILL it. Returns its exit code (-9 when it had to be killed; None for no process)."""
    if proc is None:
        return None
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


# --- children that die with this process ---------------------------------------------------------

@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's prctl, looked up in the parent: the forked child must not load anything before exec."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def die_with_parent(parent_pid: int, prctl: Callable[..., int]) -> None:
    """A `preexec_fn`: runs in the forked child, before exec. PR_SET_PDEATHSIG survives exec (of
    anything but a set-user-ID program). Checked after setting it: had the parent already died, the
    child has been re-parented and no signal will ever come, so it goes at once."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGKILL)


class _Spawner:
    """The one thread that forks this process's children (see the module docstring). Made anew in a
    forked copy of this process, which does not inherit the thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = 0
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    def run(self, work: Callable[[], subprocess.Popen[Any]]) -> subprocess.Popen[Any]:
        with self._lock:
            if self._pool is None or self._pid != os.getpid():
                # One worker, never shut down before interpreter exit: it stays, and so does every
                # child's parent thread.
                self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="kubelab-spawn")
                self._pid = os.getpid()
            pool = self._pool
        return pool.submit(work).result()


_spawner = _Spawner()


def spawn(argv: Sequence[str], **popen_kwargs: Any) -> subprocess.Popen[Any]:
    """subprocess.Popen(argv, **popen_kwargs) for a child that is SIGKILLed when this process dies, by
    whatever means (SIGKILL included). Without prctl (not Linux) it is an ordinary child."""
    prctl = _prctl()
    if prctl is None:
        return subprocess.Popen(argv, **popen_kwargs)
    preexec = functools.partial(die_with_parent, os.getpid(), prctl)
    # preexec_fn is unsafe with threads when it takes a lock another thread held at the fork; this one
    # takes none: two system calls through a function looked up beforehand, then exec.
    return _spawner.run(lambda: subprocess.Popen(argv, preexec_fn=preexec, **popen_kwargs))  # noqa: PLW1509
