"""Start and stop a pod's server process (`kubeletstub.podserver`) inside the pod's network namespace.

Owns the argv (``ip netns exec NS python -m kubeletstub.podserver ...``, never a shell), waiting
until every port listens (the server's ``READY`` line), and stopping by PID. A process is identified
by its PID *and* its start time (field 22 of /proc/PID/stat), recorded when it starts, so a PID the
kernel has recycled for someone else's process is never signalled, even from a fresh process that
only has the lab's state file. Signals go through a pidfd, so the check and the kill cannot race.
Needs Linux 5.3+ (pidfd_open).

Namespaces belong to `kubeletstub.netns` and state files to `kubeletstub.netnsstate`; this module only knows processes.
"""

from __future__ import annotations

import os
import select
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from kubeletstub.podserver import READY_LINE

PODSERVER_MODULE = "kubeletstub.podserver"
# The directory that holds the `kubeletstub` package, put first on the server's PYTHONPATH so
# `-m kubeletstub.podserver` resolves to this very source whether or not the project is installed.
_SOURCE_ROOT = str(Path(__file__).resolve().parents[1])


class PodProcessError(RuntimeError):
    """A pod server did not start, or could not be stopped."""


@dataclass(frozen=True)
class ServedPort:
    """One declared containerPort the pod server listens on."""

    port: int
    protocol: Literal["TCP", "UDP"] = "TCP"

    def __post_init__(self) -> None:
        if not 1 <= self.port <= 65535:
            raise ValueError(f"port {self.port} out of range 1-65535")
        if self.protocol not in ("TCP", "UDP"):
            raise ValueError(f"protocol {self.protocol!r} not supported (TCP or UDP)")

    def as_arg(self) -> str:
        return str(self.port) if self.protocol == "TCP" else f"{self.port}/udp"


@dataclass(frozen=True)
class PodProcess:
    """A started pod server: enough to find (and stop) it again from another process."""

    pid: int
    start_time: int
    netns: str
    pod_name: str
    ports: tuple[ServedPort, ...]
    log_path: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "startTime": self.start_time,
            "netns": self.netns,
            "podName": self.pod_name,
            "ports": [{"port": p.port, "protocol": p.protocol} for p in self.ports],
            "logPath": self.log_path,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PodProcess:
        return cls(
            pid=int(data["pid"]),
            start_time=int(data["startTime"]),
            netns=str(data["netns"]),
            pod_name=str(data["podName"]),
            ports=tuple(ServedPort(int(p["port"]), p["protocol"]) for p in data.get("ports", [])),
            log_path=data.get("logPath"),
        )


# Popen objects of the servers this process started, so stopping one also reaps it (no zombies, no
# "subprocess still running" ResourceWarning). Servers started by another process are not here.
_children: dict[int, subprocess.Popen[bytes]] = {}
_children_lock = threading.Lock()


def pod_server_argv(
    netns: str | None,
    pod_name: str,
    ports: Sequence[ServedPort],
    *,
    pod_ip: str | None = None,
    parent_pid: int | None = None,
    request_log: str | None = None,
) -> list[str]:
    """The argv that runs a pod's server inside `netns` (None: the current one; no shell involved)."""
    argv = ["ip", "netns", "exec", netns] if netns is not None else []
    argv += [sys.executable, "-m", PODSERVER_MODULE, "--name", pod_name]
    for port in ports:
        argv += ["--port", port.as_arg()]
    if pod_ip is not None:
        argv += ["--pod-ip", pod_ip]
    if parent_pid is not None:
        argv += ["--parent-pid", str(parent_pid)]
    if request_log is not None:
        argv += ["--request-log", request_log]
    return argv


def start_pod_process(
    netns: str | None,
    pod_name: str,
    ports: Sequence[ServedPort],
    *,
    pod_ip: str | None = None,
    log_path: str | os.PathLike[str] | None = None,
    timeout: float = 10.0,
    request_log: str | None = None,
) -> PodProcess:
    """Start the server for `pod_name` in `netns` and return once every port listens.

    The server's stderr is appended to `log_path` (discarded when None). It exits by itself when
    this process dies. Raises PodProcessError, with the tail of the log, if it exits or does not
    listen within `timeout` seconds; nothing is left running then.
    """
    if not ports:
        raise ValueError("a pod server needs at least one port")
    # `ip netns exec` execs the command without forking, so the PID we get is the server's and we are
    # its parent: --parent-pid lets it notice that even if we die before it starts watching.
    argv = pod_server_argv(netns, pod_name, ports, pod_ip=pod_ip, parent_pid=os.getpid(), request_log=request_log)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_SOURCE_ROOT, env.get("PYTHONPATH")) if p)
    log_file = open(log_path, "ab") if log_path is not None else None  # noqa: SIM115 - closed below
    try:
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log_file if log_file is not None else subprocess.DEVNULL,
            env=env,
            close_fds=True,
            # Its own session: a Ctrl-C meant for `kubelab up` must not kill pods before the
            # orderly teardown does.
            start_new_session=True,
        )
    except OSError as exc:
        raise PodProcessError(f"cannot start pod server for {pod_name}: {exc}") from exc
    finally:
        if log_file is not None:
            log_file.close()
    with _children_lock:
        _children[popen.pid] = popen
    stat = _proc_stat(popen.pid)
    proc = PodProcess(
        pid=popen.pid,
        start_time=stat[1] if stat is not None else 0,
        netns=netns or "",
        pod_name=pod_name,
        ports=tuple(ports),
        log_path=os.fspath(log_path) if log_path is not None else None,
    )
    try:
        _wait_ready(popen, proc, timeout)
    except BaseException:
        stop_pod_process(proc)
        raise
    finally:
        assert popen.stdout is not None
        popen.stdout.close()
    return proc


def stop_pod_process(proc: PodProcess, *, timeout: float = 5.0) -> None:
    """SIGTERM the server (SIGKILL after `timeout`) and wait until it has exited. Idempotent.

    Does nothing if the process is gone or its PID now belongs to another process.
    """
    stop_pod_processes([proc], timeout=timeout)


# pidfds held at once by stop_pod_processes: a lab of thousands of pods is stopped in batches this big,
# well inside any descriptor limit.
STOP_BATCH = 256


def stop_pod_processes(procs: Sequence[PodProcess], *, timeout: float = 5.0) -> list[PodProcess]:
    """Stop many servers together: SIGTERM to each, one grace period of `timeout` for all of them, SIGKILL
    to those still running, and wait (at most `timeout` again) until they have exited. Returns those that
    were running. Raises PodProcessError naming any that survived SIGKILL.

    One by one, a lab of 300 pods took 300 grace-period waits: 28 s to stop under load, more than the
    test harness allows a Ctrl-C (RELIABILITY.md). Together, a batch takes at most two `timeout`s.
    """
    stopped: list[PodProcess] = []
    survivors: list[str] = []
    for start in range(0, len(procs), STOP_BATCH):
        batch = procs[start:start + STOP_BATCH]
        pidfds: dict[int, PodProcess] = {}
        running: dict[int, PodProcess] = {}
        reap: list[int] = []  # this very process exited: it may be our child, a zombie to reap
        try:
            for proc in batch:
                try:
                    pidfd = os.pidfd_open(proc.pid)
                except ProcessLookupError:
                    reap.append(proc.pid)
                    continue
                pidfds[pidfd] = proc
                # Checked after pidfd_open: from here on the pidfd pins this exact process. Another one
                # with a recycled PID is left alone, and not waited for either.
                stat = _proc_stat(proc.pid)
                if stat is None or stat[1] != proc.start_time:
                    del pidfds[pidfd]
                    os.close(pidfd)
            running = _signal_all(pidfds, signal.SIGTERM)
            stopped += running.values()
            running = _wait_all(running, timeout)
            running = _wait_all(_signal_all(running, signal.SIGKILL), timeout)
            survivors += [f"{p.pod_name} (pid {p.pid})" for p in running.values()]
            reap += [p.pid for fd, p in pidfds.items() if fd not in running]  # a survivor's wait would not end
        finally:
            for pidfd in pidfds:
                os.close(pidfd)
        for pid in reap:
            _reap(pid)
    if survivors:
        raise PodProcessError(f"pod servers survived SIGKILL: {', '.join(survivors)}")
    return stopped


def _signal_all(pidfds: Mapping[int, PodProcess], signum: int) -> dict[int, PodProcess]:
    """Send `signum` to each; those that had not exited yet."""
    running = {}
    for pidfd, proc in pidfds.items():
        try:
            signal.pidfd_send_signal(pidfd, signum)
        except ProcessLookupError:  # exited already (a zombie counts)
            continue
        running[pidfd] = proc
    return running


def _wait_all(pidfds: Mapping[int, PodProcess], timeout: float) -> dict[int, PodProcess]:
    """Wait until every process has exited (a pidfd polls readable then), or `timeout`; those left."""
    left = dict(pidfds)
    if not left:
        return left
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:  # epoll: select() stops at descriptor 1023
        for pidfd in left:
            selector.register(pidfd, selectors.EVENT_READ)
        while left:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            for key, _ in selector.select(remaining):
                selector.unregister(key.fd)
                left.pop(key.fd, None)
    return left


def is_pod_process_alive(proc: PodProcess) -> bool:
    """True while the very process that was started runs (a zombie counts as dead)."""
    return is_process_running(proc.pid, proc.start_time)


def is_process_running(pid: int, start_time: int | None) -> bool:
    """True if `pid` is the process that started at `start_time` and has not exited (zombies have)."""
    stat = _proc_stat(pid)
    return stat is not None and stat[1] == start_time and stat[0] not in ("Z", "X")


def process_start_time(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot, or None if there is no such process."""
    stat = _proc_stat(pid)
    return stat[1] if stat is not None else None


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, starttime) from /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) is in parentheses and may itself contain spaces or ')'.
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])  # fields 3 (state) and 22 (starttime)


def _wait_ready(popen: subprocess.Popen[bytes], proc: PodProcess, timeout: float) -> None:
    assert popen.stdout is not None
    fd = popen.stdout.fileno()
    received = b""
    deadline = time.monotonic() + timeout
    while READY_LINE not in received:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise PodProcessError(
                f"pod server {proc.pod_name} in {proc.netns} not listening after {timeout:g}s"
                f"{_log_tail(proc)}"
            )
        readable, _, _ = select.select([fd], [], [], remaining)
        if not readable:
            continue
        chunk = os.read(fd, 256)
        if not chunk:
            status = popen.wait()
            raise PodProcessError(
                f"pod server {proc.pod_name} in {proc.netns} exited with status {status} before"
                f" listening{_log_tail(proc)}"
            )
        received += chunk


def _reap(pid: int) -> None:
    with _children_lock:
        popen = _children.pop(pid, None)
    if popen is not None:
        popen.wait()
        return
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not our child: its own parent (or init) reaps it


def _log_tail(proc: PodProcess, limit: int = 2000) -> str:
    if proc.log_path is None:
        return ""
    try:
        with open(proc.log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            tail = f.read().decode(errors="replace").strip()
    except OSError:
        return ""
    return f": {tail}" if tail else ""
