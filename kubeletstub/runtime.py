"""The container runtime of a node: kubelab's containerd. Starts containers' processes, keeps their
output in CRI log files, notices their exits, stops them; one pod sandbox (a UTS namespace with the
pod's hostname) per pod. Like containerd it outlives a kubelet restart: it belongs to the dataplane.

A container is its command exec'd by `kubeletstub.containerinit` in the pod's network namespace, the
sandbox's UTS namespace and a mount namespace of its own, in a session of its own (its process group is
the container: when its main process exits, whatever it left behind is SIGKILLed, as runc's PID
namespace does). Every container asks the kernel to SIGKILL it when the kubelab process dies
(PR_SET_PDEATHSIG, in containerinit; see `_spawn` for why not `kubelab.processes.spawn`). Without namespaces (`namespaces=False`, no root) the command runs as a plain
process on the host with its environment and working directory only.

No thread or process per container copies output: stdout and stderr are pipes read on the event loop
(`loop.add_reader`), 64 KiB at a time, into `containerlogs.ContainerLog`; an exit is a pidfd becoming
readable on the same loop. Signals go through the pidfd, so a recycled PID is never signalled.

`exec_command` gives the argv/env/cwd that runs a command *inside* a running container (the stream
engineer's exec uses it).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import json
import logging
import os
import secrets
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubelab import timeutil, validation

from . import crilog
from .containerlogs import ContainerLog

log = logging.getLogger(__name__)

_SOURCE_ROOT = str(Path(__file__).resolve().parents[1])
READ_CHUNK = 64 * 1024
# After a container's main process exits, its pipes are given this long to reach EOF (a process that left
# the container's process group may hold them) before they are closed regardless.
DRAIN_TIMEOUT = 2.0
START_ERROR_EXIT = 128
START_TIMEOUT = 60.0  # seconds the launcher may take to set a container up and exec
# Found on kubelab's PATH: the command entering a container gets the container's environment, whose PATH
# (the user's to set) may not lead to it.
NSENTER = shutil.which("nsenter") or "/usr/bin/nsenter"


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


class ContainerRuntime:
    """Containers of one node. `root` holds the pods' files (kubelet's /var/lib/kubelet/pods), `log_root`
    their logs (kubelet's /var/log/pods)."""

    def __init__(self, root: Path, log_root: Path, *, namespaces: bool = True,
                 on_exit: Callable[[str], None] | None = None) -> None:
        self.root = root
        self.log_root = log_root
        self.namespaces = namespaces
        self.on_exit: Callable[[str], None] = on_exit or (lambda key: None)
        self._containers: dict[tuple[str, str], Container] = {}
        self._previous: dict[tuple[str, str], Container] = {}
        self._sandboxes: dict[str, Sandbox] = {}

    # --- queries ---------------------------------------------------------------------------------

    def container(self, pod_key: str, name: str) -> Container | None:
        return self._containers.get((pod_key, name))

    def previous(self, pod_key: str, name: str) -> Container | None:
        return self._previous.get((pod_key, name))

    def container_pids(self, pod_key: str) -> dict[str, int]:
        """The running containers of a pod -> the PID of each one's command (PID 1 of its PID namespace:
        every process of the container descends from it). For stats/summary."""
        return {n: c.init_pid or c.pid for (k, n), c in self._containers.items() if k == pod_key and c.running}

    def container_names(self, pod_key: str) -> list[str]:
        return [n for (k, n) in self._containers if k == pod_key]

    def pod_dir(self, pod_uid: str) -> Path:
        return self.root / "pods" / pod_uid

    def has_pod(self, pod_key: str) -> bool:
        return pod_key in self._sandboxes or any(k[0] == pod_key for k in self._containers)

    # --- sandbox -----------------------------------------------------------------------------------

    async def run_sandbox(self, pod_key: str, hostname: str) -> Sandbox:
        """The pod's UTS namespace with its hostname, held by a pause process (see containerinit)."""
        box = self._sandboxes.get(pod_key)
        if box is not None and (box.popen is None or box.popen.poll() is None):
            return box
        box = Sandbox(pod_key, hostname)
        if self.namespaces:
            argv = [sys.executable, "-m", "kubeletstub.containerinit", "--sandbox", hostname, str(os.getpid())]
            popen = _spawn(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            box.popen, box.pid = popen, popen.pid
            box.pidfd = os.pidfd_open(popen.pid)
            # The namespace exists once the pause process runs `sleep` (it unshares before exec).
            deadline = time.monotonic() + 10
            while not _comm(popen.pid).startswith("sleep"):
                if popen.poll() is not None or time.monotonic() > deadline:
                    self._kill_sandbox(box)
                    raise ContainerRuntimeError(f"pod sandbox of {pod_key} did not start")
                await asyncio.sleep(0.01)
        self._sandboxes[pod_key] = box
        return box

    def _kill_sandbox(self, box: Sandbox) -> None:
        if box.pidfd >= 0:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(box.pidfd, signal.SIGKILL)
            os.close(box.pidfd)
            box.pidfd = -1
        if box.popen is not None:
            box.popen.wait()

    # --- containers --------------------------------------------------------------------------------

    async def start(self, spec: ContainerSpec) -> Container:
        """Start one run of a container; returns once it runs (or failed to: reason StartError)."""
        key = (spec.pod_key, spec.name)
        old = self._containers.get(key)
        if old is not None:
            if old.running:
                raise ContainerRuntimeError(f"container {spec.name} of {spec.pod_key} is running")
            self._previous[key] = old
        namespace, name = spec.pod_key.split("/", 1)
        uid = spec.pod_uid
        log_path = crilog.container_log_path(self.log_root, namespace, name, uid, spec.name, spec.restart)
        # kubelet keeps the logs of the current and the previous run (`kubectl logs -p`), no older.
        for stale in log_path.parent.glob("*.log*") if log_path.parent.exists() else []:
            number = stale.name.split(".", 1)[0]
            if validation.is_ascii_digits(number) and int(number) < spec.restart - 1:
                stale.unlink(missing_ok=True)
        container = Container(spec, f"containerd://{secrets.token_hex(32)}", log_path)
        self._containers[key] = container
        box = self._sandboxes.get(spec.pod_key)
        work = self.pod_dir(uid) / "containers" / spec.name
        work.mkdir(parents=True, exist_ok=True)
        launch = {
            "argv": spec.argv, "env": spec.env, "workingDir": spec.working_dir, "parentPid": os.getpid(),
            "netns": f"/var/run/netns/{spec.netns}" if spec.netns and self.namespaces else None,
            "uts": box.uts_path if box is not None and self.namespaces else None,
            "mountNamespace": self.namespaces, "pidNamespace": self.namespaces,
            "mounts": [{"source": m.source, "target": m.target, "readOnly": m.read_only, "kind": m.kind}
                       for m in spec.mounts] if self.namespaces else [],
            "scratch": str(work / f"scratch-{spec.restart}"), "tty": spec.tty,
        }
        spec_path = work / f"{spec.restart}.json"
        fd = os.open(spec_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(launch, f)
        container.spec_path = spec_path
        logfile = ContainerLog(log_path)
        err_r, err_w = os.pipe()
        argv = [sys.executable, "-m", "kubeletstub.containerinit", str(spec_path), str(err_w)]
        master = slave = -1
        if spec.tty:
            master, slave = os.openpty()
            stdio: dict[str, Any] = {"stdin": slave, "stdout": slave, "stderr": slave}
        else:
            stdio = {"stdin": subprocess.PIPE if spec.stdin else subprocess.DEVNULL, "stdout": subprocess.PIPE,
                     "stderr": subprocess.PIPE}
        try:
            popen = _spawn(argv, pass_fds=(err_w,), **stdio)
        except OSError as exc:
            for fd in (err_r, err_w, master, slave):
                if fd >= 0:
                    os.close(fd)
            logfile.close()
            self._fail(container, str(exc))
            return container
        os.close(err_w)
        if spec.tty:
            os.close(slave)
            terminal = os.fdopen(master, "r+b", buffering=0)
            container._streams = [(terminal, "stdout")]
            container._stdin = terminal
        else:
            assert popen.stdout is not None and popen.stderr is not None
            container._streams = [(popen.stdout, "stdout"), (popen.stderr, "stderr")]
            container._stdin = popen.stdin
        container._popen, container.pid, container.pgid = popen, popen.pid, popen.pid
        container._pidfd = os.pidfd_open(popen.pid)
        try:
            error = await asyncio.wait_for(_read_all(err_r), START_TIMEOUT)
        except TimeoutError:
            # The launcher is stuck before exec (a mount that hangs): it goes, and the run is a StartError.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(popen.pid, signal.SIGKILL)
            error = f"the container did not start within {START_TIMEOUT:g}s".encode()
        loop = asyncio.get_running_loop()
        for pipe, stream in container._streams:
            os.set_blocking(pipe.fileno(), False)
            container._open_pipes += 1
            loop.add_reader(pipe.fileno(), self._on_output, container, pipe, stream, logfile)
        loop.add_reader(container._pidfd, self._on_exit, container, logfile)
        if error:
            container.reason, container.message = "StartError", error.decode(errors="replace")
            return container
        container.started_at = timeutil.rfc3339()
        container.started_mono = time.monotonic()
        if self.namespaces:
            container.init_pid = await _first_child(popen.pid, container._exited)
        return container

    def _fail(self, container: Container, message: str) -> None:
        container.exit_code, container.reason, container.message = START_ERROR_EXIT, "StartError", message
        container.finished_at = container.started_at = timeutil.rfc3339()
        container.finished_mono = time.monotonic()
        container._exited.set()
        container._done.set()

    def _on_output(self, container: Container, pipe: Any, stream: crilog.Stream, logfile: ContainerLog) -> None:
        try:
            data = os.read(pipe.fileno(), READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            logfile.write(stream, data)
            for listener in list(container._listeners):
                listener(stream, data)
            return
        self._close_pipe(container, pipe, stream, logfile)

    def _close_pipe(self, container: Container, pipe: Any, stream: crilog.Stream, logfile: ContainerLog) -> None:
        if pipe.closed:
            return
        asyncio.get_running_loop().remove_reader(pipe.fileno())
        pipe.close()
        logfile.end(stream)
        container._open_pipes -= 1  # before the listeners hear of it: attach ends when none is left open
        for listener in list(container._listeners):
            listener(stream, b"")
        self._maybe_done(container, logfile)

    def _on_exit(self, container: Container, logfile: ContainerLog) -> None:
        loop = asyncio.get_running_loop()
        loop.remove_reader(container._pidfd)
        popen = container._popen
        assert popen is not None
        code = popen.wait()
        # The container is its process group: what the main process left behind goes with it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(container.pgid, signal.SIGKILL)
        os.close(container._pidfd)
        container._pidfd = -1
        container.exit_code = 128 - code if code < 0 else code  # killed by a signal: 128 + its number
        if container.reason != "StartError":
            container.reason = "Completed" if container.exit_code == 0 else "Error"
        else:
            container.exit_code = START_ERROR_EXIT
            container.started_at = container.started_at or timeutil.rfc3339()
        container.finished_at = timeutil.rfc3339()
        container.finished_mono = time.monotonic()
        container._exited.set()

        def drain() -> None:
            for pipe, stream in container._streams:
                if not pipe.closed:
                    with contextlib.suppress(OSError):
                        while data := os.read(pipe.fileno(), READ_CHUNK):
                            logfile.write(stream, data)
                    self._close_pipe(container, pipe, stream, logfile)
            if container._stdin is not None and not container._stdin.closed:
                container._stdin.close()

        loop.call_later(DRAIN_TIMEOUT, drain)
        self._maybe_done(container, logfile)

    def _maybe_done(self, container: Container, logfile: ContainerLog) -> None:
        if container._exited.is_set() and container._open_pipes <= 0 and not container._done.is_set():
            logfile.close()
            container._done.set()
            self.on_exit(container.spec.pod_key)

    async def stop(self, pod_key: str, name: str, grace: float) -> None:
        """SIGTERM the main process, SIGKILL the container after `grace` seconds; wait until it is done."""
        container = self._containers.get((pod_key, name))
        if container is None or container.done or container._pidfd < 0:
            if container is not None and not container.done and container._exited.is_set():
                await container.wait()
            return
        _signal_init(container, signal.SIGTERM)
        try:
            await asyncio.wait_for(container._exited.wait(), timeout=max(grace, 0))
        except TimeoutError:
            if container._pidfd >= 0:
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(container._pidfd, signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(container.pgid, signal.SIGKILL)
        await container.wait()

    async def remove_pod(self, pod_key: str, pod_uid: str | None, *, grace: float = 0,
                         keep_logs: bool = False) -> None:
        """Stop every container of the pod (together, one grace period), its sandbox, and remove its files."""
        names = [n for (k, n) in self._containers if k == pod_key]
        await asyncio.gather(*(self.stop(pod_key, n, grace) for n in names))
        for n in names:
            self._containers.pop((pod_key, n), None)
            self._previous.pop((pod_key, n), None)
        box = self._sandboxes.pop(pod_key, None)
        if box is not None:
            self._kill_sandbox(box)
        if pod_uid:
            await asyncio.to_thread(shutil.rmtree, self.pod_dir(pod_uid), True)
            if not keep_logs:
                namespace, name = pod_key.split("/", 1)
                await asyncio.to_thread(shutil.rmtree, crilog.pod_log_dir(self.log_root, namespace, name, pod_uid),
                                        True)

    async def close(self) -> None:
        """SIGKILL everything (kubelab is going down), then remove the pods' files: their volumes hold
        Secrets, and the next run starts its containers afresh."""
        for pod_key in {k for k, _ in self._containers} | set(self._sandboxes):
            await self.remove_pod(pod_key, None, grace=0)
        await asyncio.to_thread(self.clear)

    def clear(self) -> None:
        """Remove every pod's files and logs: what a previous run left (killed, its containers died with
        it), or this one's at the end. Memory-backed emptyDirs are unmounted first. Blocks."""
        pods = self.root / "pods"
        for mount_point in _mounts_under(pods):
            _libc.umount2(str(mount_point).encode(), MNT_DETACH)
        shutil.rmtree(pods, ignore_errors=True)
        shutil.rmtree(self.log_root, ignore_errors=True)

    # --- attach ------------------------------------------------------------------------------------

    def subscribe(self, pod_key: str, name: str, listener: Callable[[crilog.Stream, bytes], None]
                  ) -> Callable[[], None]:
        """Call `listener(stream, chunk)` with the running container's output as it is read (b"" when a
        stream ends), on the event loop; it must not block. Returns the unsubscribe function. Raises
        LookupError when the container is not running."""
        container = self._containers.get((pod_key, name))
        if container is None or not container.running:
            raise LookupError(f"container {name} of {pod_key} is not running")
        container._listeners.append(listener)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                container._listeners.remove(listener)

        return unsubscribe

    def output_open(self, pod_key: str, name: str) -> bool:
        """Whether any of the running container's output streams is still open (attach ends when none is)."""
        container = self._containers.get((pod_key, name))
        return container is not None and container._open_pipes > 0

    def stdin_fd(self, pod_key: str, name: str) -> int | None:
        """The descriptor to write the container's stdin to (its terminal with tty), None when the
        container has no stdin (spec `stdin: false`) or it was closed. Blocking: write it with
        loop.add_writer or from a thread."""
        container = self._containers.get((pod_key, name))
        if container is None or container._stdin is None or container._stdin.closed:
            return None
        return int(container._stdin.fileno())

    def close_stdin(self, pod_key: str, name: str) -> None:
        """End of input (stdinOnce, or the client closed stdin): the pipe closed, or ^D on a terminal."""
        container = self._containers.get((pod_key, name))
        if container is None or container._stdin is None or container._stdin.closed:
            return
        if container.spec.tty:
            with contextlib.suppress(OSError):
                os.write(container._stdin.fileno(), b"\x04")
        else:
            container._stdin.close()

    def resize(self, pod_key: str, name: str, *, width: int, height: int) -> None:
        """Terminal resize (the resize channel of attach and exec -t)."""
        container = self._containers.get((pod_key, name))
        if container is None or not container.spec.tty or container._stdin is None or container._stdin.closed:
            return
        fcntl.ioctl(container._stdin.fileno(), termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))

    # --- exec --------------------------------------------------------------------------------------

    def exec_command(self, pod_key: str, name: str, cmd: Sequence[str]) -> tuple[list[str], dict[str, str], str]:
        """(argv, env, cwd) that runs `cmd` inside the running container `name` of `pod_key`: the same
        network, UTS and mount namespaces and root (nsenter into its main process), its environment and
        working directory. Raises LookupError when the container is not running. `spawn_in_container`
        starts it."""
        container = self._containers.get((pod_key, name))
        if container is None or not container.running or not container.pid:
            raise LookupError(f"container {name} of {pod_key} is not running")
        env = dict(container.spec.env)
        cwd = container.spec.working_dir or "/"
        if not self.namespaces:
            return list(cmd), env, cwd
        # `-w` alone: the command's own working directory (its workingDir), found inside its mount
        # namespace and root; nsenter 2.38 opens a named one before entering them.
        argv = [NSENTER, "-t", str(container.init_pid or container.pid), "-n", "-u", "-m", "-p", "-r", "-w",
                "--", *cmd]
        return argv, env, "/"


def spawn_in_container(runtime: ContainerRuntime, pod_key: str, name: str, cmd: Sequence[str],
                       **popen_kwargs: Any) -> subprocess.Popen[bytes]:
    """Start `cmd` inside a running container (kubectl exec): from the event loop's thread, in a session
    of its own; stdin/stdout/stderr as given in `popen_kwargs`. A missing binary exits 127 with nsenter's
    message on stderr ("failed to execute ...: No such file or directory"), 126 when not executable."""
    argv, env, cwd = runtime.exec_command(pod_key, name, cmd)
    return subprocess.Popen(argv, env=env, cwd=cwd, close_fds=True, start_new_session=True, **popen_kwargs)


def _spawn(argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """Start a launcher from the event loop's thread, without a preexec_fn: then subprocess uses vfork,
    and no fork handler runs in the child (gRPC's, of the etcd client in `kubelab up`, crashed children
    forked with a preexec_fn under load: SIGSEGV before exec). The launcher asks for PR_SET_PDEATHSIG
    itself; the kernel ties it to the forking thread, and the event loop's thread lives as long as
    kubelab does."""
    return subprocess.Popen(argv, env=_launcher_env(), close_fds=True, start_new_session=True, **kwargs)


_libc = ctypes.CDLL(None, use_errno=True)
MNT_DETACH = 2


def _mounts_under(path: Path) -> list[Path]:
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


def _signal_init(container: Container, signum: int) -> None:
    """Signal the container's command: PID 1 of its namespace (which, as in any container, ignores a
    signal it has no handler for), else the main process."""
    target = container.init_pid or container.pid
    try:
        fd = os.pidfd_open(target)
    except ProcessLookupError:
        return
    try:
        # Checked through the pidfd: the command is still the child of the container's main process.
        if target == container.pid or _parent(target) == container.pid:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(fd, signum)
    finally:
        os.close(fd)


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:
        return 0
    return int(raw[raw.rindex(")") + 2:].split()[1])


async def _first_child(pid: int, exited: asyncio.Event) -> int:
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


def _launcher_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL")}
    env["PYTHONPATH"] = _SOURCE_ROOT
    return env


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


async def _read_all(fd: int) -> bytes:
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
