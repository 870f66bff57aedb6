"""The container runtime's process plumbing (`runtime.py`): starting a launcher without a preexec_fn, the
pidfd-checked signal to a container's command, finding that command under its launcher, reading a pipe
to its end on the event loop, and the mounts a lab leaves under a directory."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .runtimetypes import Container

SOURCE_ROOT = str(Path(__file__).resolve().parents[1])


def spawn_launcher(argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """Start a launcher from the event loop's thread, without a preexec_fn: then subprocess uses vfork,
    and no fork handler runs in the child (gRPC's, of the etcd client in `kubelab up`, crashed children
    forked with a preexec_fn under load: SIGSEGV before exec). The launcher asks for PR_SET_PDEATHSIG
    itself; the kernel ties it to the forking thread, and the event loop's thread lives as long as
    kubelab does."""
    return subprocess.Popen(argv, env=launcher_env(), close_fds=True, start_new_session=True, **kwargs)


libc = ctypes.CDLL(None, use_errno=True)
MNT_DETACH = 2


def mounts_under(path: Path) -> list[Path]:
    """Mount points below `path` (deepest first), from /proc/self/mounts."""
    prefix = str(path.resolve()) + "/"
    found = []
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                target = line.split()[1].replace("\\040", " ")
                if target.startswith(prefix):
                    found.append(Path(target))
    except OSError:
        return []
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def signal_init(container: Container, signum: int) -> None:
    """Signal the container's command: PID 1 of its namespace (which, as in any container, ignores a
    signal it has no handler for), else the main process."""
    target = container.init_pid or container.pid
    try:
        fd = os.pidfd_open(target)
    except ProcessLookupError:
        return
    try:
        # Checked through the pidfd: the command is still the child of the container's main process.
        if target == container.pid or parent_of(target) == container.pid:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(fd, signum)
    finally:
        os.close(fd)


def parent_of(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:
        return 0
    return int(raw[raw.rindex(")") + 2:].split()[1])


async def first_child(pid: int, exited: asyncio.Event) -> int:
    """The PID of `pid`'s first child (unshare forks the command right after exec), 0 if it exits first."""
    for _ in range(400):
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:  # noqa: ASYNC230 - procfs: never blocks
                children = f.read().split()
        except OSError:
            return 0
        if children:
            return int(children[0])
        if exited.is_set():
            return 0
        await asyncio.sleep(0.005)
    return 0


def launcher_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL")}
    env["PYTHONPATH"] = SOURCE_ROOT
    return env


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


async def read_all(fd: int) -> bytes:
    """Everything written to pipe `fd` until every writer closed it (on the event loop); closes `fd`."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[bytes] = loop.create_future()
    chunks: list[bytes] = []
    os.set_blocking(fd, False)

    def readable() -> None:
        try:
            data = os.read(fd, 4096)
        except BlockingIOError:
            return
        if data:
            chunks.append(data)
            return
        loop.remove_reader(fd)
        if not done.done():
            done.set_result(b"".join(chunks))

    loop.add_reader(fd, readable)
    try:
        return await done
    finally:
        loop.remove_reader(fd)
        os.close(fd)
