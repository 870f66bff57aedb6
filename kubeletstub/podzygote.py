"""The parent of a kubelab process's built-in pod servers: one Python, started once, that forks a server for
each pod instead of a new interpreter per pod.

Started by `kubeletstub.podprocess` as ``python -m kubeletstub.podserver --zygote --parent-pid PID`` (so a
forked server's command line still names kubeletstub.podserver and the kubelab process it belongs to). A
Python started for each pod (``ip netns exec NS python -m kubeletstub.podserver``) spent 55-60 ms of CPU
importing http.server and the rest before it listened, more than the rest of the pod's setup (BENCHMARKS.md,
"Pod servers forked from a zygote"). A fork of this process costs a millisecond or two.

Single-threaded, so forking is safe. Requests come on stdin, a JSON object a line::

    {"id": 7, "netns": "kl-...", "name": "web-0", "ports": ["5000", "5353/udp"], "podIp": "10.244.1.5",
     "logPath": "/.../kl-....log", "requestLog": null}

and for each the answers go to stdout, a line each: ``{"id": 7, "pid": 1234}`` once the server is forked,
then ``{"id": 7, "ready": true}`` once every port listens, or ``{"id": 7, "ready": false, "status": N}``
when it exited first (N its exit code, negative for a signal). A server is its own session, has its pod's
network namespace (setns(2): it needs no mount namespace, `ip netns exec`'s /etc/netns files are for
commands run in the pod), writes its stderr to logPath, and exits when the kubelab process does: it
watches a pidfd of that process, which the zygote opened while that process was its parent. The zygote
reaps its servers, and exits (leaving them to their own watch) when the kubelab process ends or closes
its stdin.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import sys
from typing import Any

from kubelab.netnsthread import enter_netns
from kubeletstub import podserver


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "--parent-pid":
        print("usage: python -m kubeletstub.podserver --zygote --parent-pid PID", file=sys.stderr)
        return 2
    parent = podserver.open_parent(int(argv[1]))
    if parent is not None:
        Zygote(parent).run()
    return 0


class Zygote:
    def __init__(self, parent: int) -> None:
        self.parent = parent  # the kubelab process's pidfd, inherited by every server
        self.selector = selectors.DefaultSelector()
        self.waking_r, self.waking_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.pending: dict[int, tuple[int, int]] = {}  # ready pipe -> (request id, server pid)
        self.exited: dict[int, int] = {}  # server pid -> exit code, for those still pending
        self.requests = b""

    def run(self) -> None:
        signal.set_wakeup_fd(self.waking_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # the wakeup fd says when to reap
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is for kubelab, which stops the pods
        self.selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "request")
        self.selector.register(self.parent, selectors.EVENT_READ, "parent")
        self.selector.register(self.waking_r, selectors.EVENT_READ, "child")
        while True:
            for key, _ in self.selector.select():
                if key.data == "parent":
                    return
                if key.data == "child":
                    self._reap()
                elif key.data == "request":
                    if not self._read_requests():
                        return
                else:
                    self._readiness(key.fd)

    def _read_requests(self) -> bool:
        chunk = os.read(sys.stdin.fileno(), 65536)
        if not chunk:
            return False
        self.requests += chunk
        *lines, self.requests = self.requests.split(b"\n")
        for line in lines:
            if line.strip():
                self._fork(json.loads(line))
        return True

    def _fork(self, request: dict[str, Any]) -> None:
        ready_r, ready_w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:
            try:
                self._become_server(request, ready_w)
            finally:
                os._exit(1)  # _become_server never returns; this is for an exception it did not catch
        os.close(ready_w)
        self.pending[ready_r] = (request["id"], pid)
        self.selector.register(ready_r, selectors.EVENT_READ, "ready")
        self._answer({"id": request["id"], "pid": pid})

    def _readiness(self, ready_r: int) -> None:
        said = os.read(ready_r, 64)
        request_id, pid = self.pending.pop(ready_r)
        self.selector.unregister(ready_r)
        os.close(ready_r)
        if said.startswith(podserver.READY_LINE):
            self.exited.pop(pid, None)
            self._answer({"id": request_id, "ready": True})
            return
        # Its end of the pipe closed without READY: it has exited, or is exiting.
        status = self.exited.pop(pid, None)
        if status is None:
            _, raw = os.waitpid(pid, 0)
            status = os.waitstatus_to_exitcode(raw)
        self._answer({"id": request_id, "ready": False, "status": status})

    def _reap(self) -> None:
        try:
            while os.read(self.waking_r, 512):
                pass
        except BlockingIOError:
            pass  # drained
        pending = {pid for _, pid in self.pending.values()}
        while True:
            try:
                pid, raw = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in pending:
                self.exited[pid] = os.waitstatus_to_exitcode(raw)

    def _answer(self, answer: dict[str, Any]) -> None:
        sys.stdout.buffer.write(json.dumps(answer).encode() + b"\n")
        sys.stdout.flush()

    def _become_server(self, request: dict[str, Any], ready_w: int) -> None:
        """In the forked child: the pod's server, until the kubelab process exits or a SIGTERM."""
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, podserver._terminate)
        signal.signal(signal.SIGINT, podserver._terminate)
        keep = {ready_w, self.parent}
        log_path = request.get("logPath")
        err = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644) if log_path \
            else os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(err, 2)
        # Nothing of the zygote's stays open here: its requests, answers, selector and other servers' pipes.
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            if fd > 2 and fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass  # the listing's own descriptor, closed by now
        name = str(request["name"])
        try:
            if request.get("netns"):
                enter_netns(str(request["netns"]))
            listeners = list(dict.fromkeys(podserver.parse_port(str(p)) for p in request["ports"]))

            def ready() -> None:
                os.write(ready_w, podserver.READY_LINE)
                os.close(ready_w)

            podserver.serve_until(name, listeners, pod_ip=request.get("podIp"),
                                  request_log=request.get("requestLog"), ready=ready,
                                  until=lambda: podserver.wait_for_exit(self.parent))
        except Exception as exc:  # noqa: BLE001 - the log and the exit code are all the kubelet sees
            print(f"podserver {name}: {exc}", file=sys.stderr, flush=True)
            os._exit(1)
        print(f"podserver {name}: kubelab exited, stopping", file=sys.stderr, flush=True)
        os._exit(0)
