"""The container runtime of a node: kubelab's containerd. Starts containers' processes, keeps their
output in CRI log files, notices their exits, stops them; one pod sandbox (a UTS namespace with the
pod's hostname) per pod. Like containerd it outlives a kubelet restart: it belongs to the dataplane.

A container is its command exec'd by `kubeletstub.containerinit` in the pod's network namespace, the
sandbox's UTS namespace and a mount namespace of its own, in a session of its own (its process group is
the container: when its main process exits, whatever it left behind is SIGKILLed, as runc's PID
namespace does). Every container asks the kernel to SIGKILL it when the kubelab process dies
(PR_SET_PDEATHSIG, in containerinit; see `spawn_launcher` for why not `kubelab.processes.spawn`). Without namespaces (`namespaces=False`, no root) the command runs as a plain
process on the host with its environment and working directory only.

No thread or process per container copies output: stdout and stderr are pipes read on the event loop
(`loop.add_reader`), 64 KiB at a time, into `containerlogs.ContainerLog`; an exit is a pidfd becoming
readable on the same loop. Signals go through the pidfd, so a recycled PID is never signalled.

The records it keeps are in `runtimetypes.py`; attach and exec into a running container (its output,
stdin, terminal, and `exec_command`: the argv/env/cwd that runs a command inside it) in `containerio.py`,
which ContainerRuntime inherits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubelab import timeutil, validation

from . import crilog, sandbox
from .containerio import ContainerStreams, spawn_in_container
from .containerlogs import ContainerLog
from .procutil import MNT_DETACH, first_child, libc, mounts_under, read_all, signal_init, spawn_launcher
from .runtimetypes import Container, ContainerRuntimeError, ContainerSpec, Mount, Sandbox

log = logging.getLogger(__name__)

READ_CHUNK = 64 * 1024
# After a container's main process exits, its pipes are given this long to reach EOF (a process that left
# the container's process group may hold them) before they are closed regardless.
DRAIN_TIMEOUT = 2.0
START_ERROR_EXIT = 128
START_TIMEOUT = 60.0  # seconds the launcher may take to set a container up and exec
__all__ = ["Container", "ContainerRuntime", "ContainerRuntimeError", "ContainerSpec", "Mount", "Sandbox",
           "spawn_in_container"]


class ContainerRuntime(ContainerStreams):
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
        """The pod's UTS namespace with its hostname, held by a pause process (see `sandbox.py`)."""
        box = self._sandboxes.get(pod_key)
        if box is not None and (box.popen is None or box.popen.poll() is None):
            return box
        box = Sandbox(pod_key, hostname)
        if self.namespaces:
            box.popen = await sandbox.start(pod_key, hostname)
            box.pid = box.popen.pid
            box.pidfd = os.pidfd_open(box.pid)
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
            popen = spawn_launcher(argv, pass_fds=(err_w,), **stdio)
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
            error = await asyncio.wait_for(read_all(err_r), START_TIMEOUT)
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
            container.init_pid = await first_child(popen.pid, container._exited)
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
        signal_init(container, signal.SIGTERM)
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
        for mount_point in mounts_under(pods):
            libc.umount2(str(mount_point).encode(), MNT_DETACH)
        shutil.rmtree(pods, ignore_errors=True)
        shutil.rmtree(self.log_root, ignore_errors=True)
