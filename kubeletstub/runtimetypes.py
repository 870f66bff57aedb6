"""What the container runtime (`runtime.py`) keeps about a node's pods: the spec of a container run (what
the kubelet resolved), the run itself (CRI's ContainerStatus, with the pipes and pidfd the runtime
watches it through), the pod sandbox, and the runtime's error."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import crilog


class ContainerRuntimeError(RuntimeError):
    """A sandbox or container could not be started."""


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    read_only: bool = False
    kind: str = "bind"  # or "tmpfs"


@dataclass
class ContainerSpec:
    """What to run: resolved by the kubelet (env, argv, volumes' host paths)."""

    pod_key: str
    pod_uid: str
    name: str
    restart: int
    argv: list[str]
    env: dict[str, str]
    working_dir: str | None = None
    mounts: list[Mount] = field(default_factory=list)
    netns: str | None = None  # name under /var/run/netns
    termination_file: str | None = None  # host path of the file bind-mounted at terminationMessagePath
    stdin: bool = False  # keep a stdin open for attach (kubectl run -i / attach)
    tty: bool = False    # a pseudo-terminal for stdin, stdout and stderr (its output is logged as stdout)


@dataclass
class Container:
    """One run of a container (CRI ContainerStatus)."""

    spec: ContainerSpec
    container_id: str
    log_path: Path
    started_at: str = ""
    started_mono: float = 0.0  # time.monotonic() of started_at (probes' initialDelaySeconds count from it)
    finished_at: str = ""
    finished_mono: float = 0.0
    exit_code: int | None = None
    reason: str = ""
    message: str = ""
    pid: int = 0
    pgid: int = 0
    init_pid: int = 0  # the command: PID 1 of the container's PID namespace (a child of `pid`, unshare)
    spec_path: Path | None = None
    _popen: subprocess.Popen[bytes] | None = None
    _pidfd: int = -1
    _open_pipes: int = 0
    _streams: list[tuple[Any, crilog.Stream]] = field(default_factory=list)
    _stdin: Any = None  # the write end of stdin (a pipe's, or the terminal's master)
    _listeners: list[Callable[[crilog.Stream, bytes], None]] = field(default_factory=list)
    _exited: asyncio.Event = field(default_factory=asyncio.Event)
    _done: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def running(self) -> bool:
        return self.exit_code is None and bool(self.started_at)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    async def wait(self) -> None:
        await self._done.wait()


@dataclass
class Sandbox:
    pod_key: str
    hostname: str
    pid: int = 0
    pidfd: int = -1
    popen: subprocess.Popen[bytes] | None = None

    @property
    def uts_path(self) -> str | None:
        return f"/proc/{self.pid}/ns/uts" if self.pid else None

