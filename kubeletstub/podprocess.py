"""Start and stop a pod's server process (`kubeletstub.podserver`) inside the pod's network namespace.

Servers are forked by this process's zygote (`kubeletstub.podzygote`, one Python started once, which
enters each pod's namespace with setns(2)); this module asks it for one, waits until every port listens
(its ``ready`` answer), and stops servers by PID. A process is identified
by its PID *and* its start time (field 22 of /proc/PID/stat), recorded when it starts, so a PID the
kernel has recycled for someone else's process is never signalled, even from a fresh process that
only has the lab's state file. Signals go through a pidfd, so the check and the kill cannot race.
Needs Linux 5.3+ (pidfd_open).

Namespaces belong to `kubeletstub.netns` and state files to `kubeletstub.netnsstate`; this module only knows processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
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


class _ZygoteGone(OSError):
    """The zygote asked had exited before the request reached it."""


class _Zygote:
    """This process's `kubeletstub.podzygote`: started on the first pod, started again if it ever dies; every
    pod server of this process is forked by it. Its answers are read by a thread of its own and handed to
    the thread that asked (pods are wired from many threads at once)."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_SOURCE_ROOT, env.get("PYTHONPATH")) if p)
        self.popen = subprocess.Popen(
            [sys.executable, "-m", PODSERVER_MODULE, "--zygote", "--parent-pid", str(os.getpid())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True,
            # Its own session: a Ctrl-C meant for `kubelab up` must not reach the pods before the orderly
            # teardown stops them.
            start_new_session=True)
        self._lock = threading.Lock()
        self._next = 0
        self._answers: dict[int, queue.SimpleQueue[dict[str, Any] | None]] = {}
        self.alive = True
        threading.Thread(target=self._read, name="pod-zygote-answers", daemon=True).start()

    def ask(self, request: dict[str, Any]) -> tuple[int, queue.SimpleQueue[dict[str, Any] | None]]:
        """Send a request: its id, and the queue its answers come on (None: the zygote is gone)."""
        answers: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
        with self._lock:
            if not self.alive:
                raise _ZygoteGone("the pod server zygote exited")
            self._next += 1
            request = {**request, "id": self._next}
            self._answers[self._next] = answers
            assert self.popen.stdin is not None
            try:
                self.popen.stdin.write(json.dumps(request).encode() + b"\n")
                self.popen.stdin.flush()
            except BrokenPipeError as exc:
                # It died, and our reader thread has not seen the end of its output yet.
                del self._answers[self._next]
                self.alive = False
                with contextlib.suppress(OSError):  # now, not as an "Exception ignored" when it is collected
                    self.popen.stdin.close()
                raise _ZygoteGone("the pod server zygote exited") from exc
            except OSError:
                del self._answers[self._next]
                raise
            return self._next, answers

    def done(self, request_id: int) -> None:
        with self._lock:
            self._answers.pop(request_id, None)

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            answer = json.loads(line)
            with self._lock:
                answers = self._answers.get(answer["id"])
            if answers is not None:
                answers.put(answer)
        with self._lock:
            self.alive = False
            waiting, self._answers = list(self._answers.values()), {}
        for answers in waiting:
            answers.put(None)
        self.popen.stdout.close()
        self.popen.wait()


_zygote: _Zygote | None = None
_zygote_lock = threading.Lock()
# Seconds a fork's answer may take, whatever the caller's timeout: a zygote starting (a Python importing the
# server) on a loaded machine.
FORK_TIMEOUT = 30.0


def stop_zygote(timeout: float = 5.0) -> None:
    """End this process's zygote, if it runs (its servers are not its to stop: they stay until stopped or
    until this process exits). The next pod server starts a new one."""
    global _zygote
    with _zygote_lock:
        zygote, _zygote = _zygote, None
    if zygote is None:
        return
    assert zygote.popen.stdin is not None
    with zygote._lock, contextlib.suppress(OSError):
        zygote.alive = False
        zygote.popen.stdin.close()  # it exits at the end of its requests
    try:
        zygote.popen.wait(timeout)
    except subprocess.TimeoutExpired:
        zygote.popen.kill()
        zygote.popen.wait()


def _the_zygote() -> _Zygote:
    global _zygote
    with _zygote_lock:
        if _zygote is None or not _zygote.alive:
            _zygote = _Zygote()
        return _zygote


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

    The server (forked by this process's zygote, `kubeletstub.podzygote`) appends its stderr to `log_path`
    (discarded when None) and exits by itself when this process dies. Raises PodProcessError, with the
    tail of the log, if it exits or does not listen within `timeout` seconds; nothing is left running then.
    """
    if not ports:
        raise ValueError("a pod server needs at least one port")
    log = os.fspath(log_path) if log_path is not None else None
    request = {"netns": netns, "name": pod_name, "ports": [p.as_arg() for p in ports], "podIp": pod_ip,
               "logPath": log, "requestLog": request_log}
    deadline = time.monotonic() + timeout
    try:
        try:
            zygote = _the_zygote()
            request_id, answers = zygote.ask(request)
        except _ZygoteGone:
            # It died between two pods and this request found out first (nothing was forked): a new one.
            zygote = _the_zygote()
            request_id, answers = zygote.ask(request)
    except OSError as exc:
        raise PodProcessError(f"cannot start pod server for {pod_name}: {exc}") from exc
    proc: PodProcess | None = None
    try:
        while True:
            # Listening within `timeout` of the call; the fork's answer (a new zygote's first one comes
            # after its own start) gets at least FORK_TIMEOUT.
            left = deadline - time.monotonic() if proc is not None else max(timeout, FORK_TIMEOUT)
            try:
                answer = answers.get(timeout=max(left, 0.0))
            except queue.Empty:
                if proc is None:
                    raise PodProcessError(f"cannot start pod server for {pod_name}: the pod server zygote did not "
                                          f"answer within {max(timeout, FORK_TIMEOUT):g}s") from None
                raise PodProcessError(f"pod server {pod_name} in {proc.netns} not listening after {timeout:g}s"
                                      f"{_log_tail(proc)}") from None
            if answer is None:
                raise PodProcessError(f"cannot start pod server for {pod_name}: the pod server zygote exited")
            if "pid" in answer:
                stat = _proc_stat(answer["pid"])
                proc = PodProcess(pid=answer["pid"], start_time=stat[1] if stat is not None else 0,
                                  netns=netns or "", pod_name=pod_name, ports=tuple(ports),
                                  log_path=log)
                continue
            assert proc is not None
            if answer["ready"]:
                return proc
            raise PodProcessError(f"pod server {pod_name} in {proc.netns} exited with status {answer['status']}"
                                  f" before listening{_log_tail(proc)}")
    except BaseException:
        if proc is not None:
            stop_pod_process(proc)
        raise
    finally:
        zygote.done(request_id)


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


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not our child (a server's parent is the zygote, which reaps it)


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
