"""The "container" of a netns-dataplane pod: a tiny server that says which pod answered.

Run inside a pod's network namespace as ``python -m kubeletstub.podserver --name POD --port 5000
[--port 5353/udp ...]``. Every TCP port answers any HTTP GET (or HEAD) with the body ``<pod-name>\\n``
and nothing else, so a test or a user can count which pod served a request; everything else it knows
goes into headers:

    X-Pod-Name         the pod's name (same as the body, without the newline)
    X-Pod-IP           the pod IP given with --pod-ip, else the local address the client reached
    X-Server-Address   the local ip:port that accepted the connection (after any DNAT)
    X-Client-Address   the peer ip:port as the pod sees it (shows whether a hop SNATed the packet)

With ``--request-log PATH`` every request is also logged, one line each, with the client address the pod
saw, into that container log file (CRI format, rotated as kubelet rotates them: `containerlogs`), so
``kubectl logs -f`` shows SNAT and sessionAffinity at work::

    10.240.0.2:40512 -> 10.244.1.5:8080 "GET / HTTP/1.1" 200

A ``/udp`` port answers every datagram with the same ``<pod-name>\\n``.

Lifecycle contract with `kubeletstub.podprocess`: once every socket is bound and listening the server
writes ``READY\\n`` to stdout and then detaches stdout. It exits on SIGTERM or SIGINT, and when the
process that started it (``--parent-pid``, else its parent at start-up) dies: the kubelet stub may be
SIGKILLed, and a pod server must never outlive the lab it belongs to. Standard library only (and, with
--request-log, kubeletstub.containerlogs, itself standard library only).

``python -m kubeletstub.podserver --zygote --parent-pid PID`` is the parent the kubelet stub forks its pod
servers from (`kubeletstub.podzygote`): this module imported once, not a Python started for every pod.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import socketserver
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Literal

READY_LINE = b"READY\n"

Protocol = Literal["TCP", "UDP"]


@dataclass(frozen=True)
class Listener:
    port: int
    protocol: Protocol


def parse_port(text: str) -> Listener:
    """``5000`` or ``5000/tcp`` -> TCP 5000; ``5353/udp`` -> UDP 5353."""
    number, _, proto = text.partition("/")
    protocol = (proto or "tcp").upper()
    if protocol not in ("TCP", "UDP"):
        raise argparse.ArgumentTypeError(f"unsupported protocol {proto!r} (tcp or udp)")
    try:
        port = int(number)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid port {number!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} out of range 1-65535")
    return Listener(port, "TCP" if protocol == "TCP" else "UDP")


class RequestLog:
    """The request log: a container log file, written by the server's threads one line at a time."""

    def __init__(self, path: str) -> None:
        from pathlib import Path

        from kubeletstub.containerlogs import ContainerLog

        self._log = ContainerLog(Path(path))
        self._lock = threading.Lock()

    def line(self, text: str) -> None:
        with self._lock:
            self._log.write("stdout", text.encode("utf-8", "replace") + b"\n")


class _PodHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    pod_name: str
    pod_ip: str | None

    def __init__(self, port: int, pod_name: str, pod_ip: str | None, request_log: RequestLog | None = None
                 ) -> None:
        self.pod_name = pod_name
        self.pod_ip = pod_ip
        self.request_log = request_log
        super().__init__(("0.0.0.0", port), _PodRequestHandler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn(), a reverse DNS lookup that a pod namespace
        # cannot answer (and must not try: all traffic stays inside the lab's namespaces).
        socketserver.TCPServer.server_bind(self)
        self.server_name = self.pod_name
        self.server_port = self.server_address[1]


class _PodRequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so load generators can reuse connections
    server_version = "kubelab-podserver"
    timeout = 30  # an idle keep-alive connection must not pin a thread forever
    server: _PodHTTPServer

    def version_string(self) -> str:
        return self.server_version

    def do_GET(self) -> None:
        self._answer(with_body=True)

    def do_HEAD(self) -> None:
        self._answer(with_body=False)

    def _answer(self, *, with_body: bool) -> None:
        body = f"{self.server.pod_name}\n".encode()
        local_ip, local_port = self.connection.getsockname()[:2]
        client_ip, client_port = self.client_address[:2]
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Pod-Name", self.server.pod_name)
        self.send_header("X-Pod-IP", self.server.pod_ip or local_ip)
        self.send_header("X-Server-Address", f"{local_ip}:{local_port}")
        self.send_header("X-Client-Address", f"{client_ip}:{client_port}")
        self.end_headers()
        if with_body:
            self.wfile.write(body)
        if self.server.request_log is not None:
            self.server.request_log.line(f"{client_ip}:{client_port} -> {local_ip}:{local_port} "
                                         f'"{self.requestline}" 200')

    def log_message(self, format: str, *args: object) -> None:  # `format`: the stdlib signature
        # Requests are logged above, into a rotated container log, when asked; never to stderr, which
        # is a plain file that would grow without bound under a benchmark.
        pass


class _PodUDPServer(socketserver.ThreadingUDPServer):
    daemon_threads = True

    def __init__(self, port: int, pod_name: str) -> None:
        self.pod_name = pod_name
        super().__init__(("0.0.0.0", port), _PodDatagramHandler)


class _PodDatagramHandler(socketserver.BaseRequestHandler):
    server: _PodUDPServer

    def handle(self) -> None:
        _data, sock = self.request
        sock.sendto(f"{self.server.pod_name}\n".encode(), self.client_address)


def open_parent(parent_pid: int) -> int | None:
    """A pidfd of our parent `parent_pid`; None if it has exited already."""
    try:
        pidfd = os.pidfd_open(parent_pid)
    except ProcessLookupError:
        return None
    # The parent may have died (and its PID been reused) before pidfd_open: if we were reparented, the
    # PID no longer names our parent.
    if os.getppid() != parent_pid:
        os.close(pidfd)
        return None
    return pidfd


def wait_for_exit(pidfd: int) -> None:
    """Block until the process of `pidfd` exits. A pidfd becomes readable then; this follows the whole
    process, unlike PR_SET_PDEATHSIG, which fires when the *thread* that forked us ends (the kubelet
    stub starts pods from asyncio.to_thread workers)."""
    select.select([pidfd], [], [])


def _wait_for_parent_death(parent_pid: int) -> None:
    """Block until `parent_pid` exits (returns at once if it is already gone)."""
    pidfd = open_parent(parent_pid)
    if pidfd is None:
        return
    try:
        wait_for_exit(pidfd)
    finally:
        os.close(pidfd)


def _terminate(signum: int, _frame: FrameType | None) -> None:
    # At once, without the interpreter's teardown: there is nothing to flush (stdout is /dev/null by
    # now, stderr is line-buffered and every message is a line), and a lab stops hundreds of pod
    # servers together on a loaded machine, where their orderly exits took seconds of CPU.
    os._exit(0)


def serve(pod_name: str, listeners: Sequence[Listener], *, pod_ip: str | None, parent_pid: int,
          request_log: str | None = None) -> None:
    """Serve until `parent_pid` exits; READY on stdout once every port listens, then stdout goes."""
    def ready() -> None:
        sys.stdout.buffer.write(READY_LINE)
        sys.stdout.flush()
        # Nothing else goes to stdout: the reader closes its end after READY, and a later write would
        # die of SIGPIPE.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)

    serve_until(pod_name, listeners, pod_ip=pod_ip, request_log=request_log, ready=ready,
                until=lambda: _wait_for_parent_death(parent_pid))
    print(f"podserver {pod_name}: parent {parent_pid} exited, stopping", file=sys.stderr)


def serve_until(pod_name: str, listeners: Sequence[Listener], *, pod_ip: str | None, request_log: str | None,
                ready: Callable[[], None], until: Callable[[], None]) -> None:
    """Listen on every port, call `ready`, serve from threads until `until` returns. OSError if a port
    cannot be bound (nothing served then)."""
    # Bind every port before serving any, so READY means all of them listen (or none start).
    log = RequestLog(request_log) if request_log else None
    servers: list[tuple[Listener, socketserver.BaseServer]] = []
    for listener in listeners:
        if listener.protocol == "TCP":
            servers.append((listener, _PodHTTPServer(listener.port, pod_name, pod_ip, log)))
        else:
            servers.append((listener, _PodUDPServer(listener.port, pod_name)))
    for listener, server in servers:
        name = f"serve-{listener.port}/{listener.protocol.lower()}"
        threading.Thread(target=server.serve_forever, name=name, daemon=True).start()
    ready()
    until()


def main(argv: Sequence[str] | None = None) -> int:
    args_given = list(sys.argv[1:] if argv is None else argv)
    if args_given[:1] == ["--zygote"]:  # the parent that forks a lab's pod servers (podzygote.py)
        from kubeletstub import podzygote

        return podzygote.main(args_given[1:])
    parser = argparse.ArgumentParser(
        prog="python -m kubeletstub.podserver", description="Answer HTTP GETs with the pod's name."
    )
    parser.add_argument("--name", required=True, help="pod name; the whole response body is NAME + newline")
    parser.add_argument(
        "--port", dest="ports", action="append", type=parse_port, required=True, metavar="PORT[/tcp|/udp]"
    )
    parser.add_argument("--pod-ip", help="reported in X-Pod-IP (default: the local address reached)")
    parser.add_argument("--parent-pid", type=int, help="exit when this process dies (default: our parent)")
    parser.add_argument("--request-log", help="log each request into this container log file (CRI format)")
    args = parser.parse_args(args_given)

    # Install before binding: the starter may SIGTERM us the moment it gives up waiting for READY.
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, _terminate)
    parent_pid: int = args.parent_pid if args.parent_pid is not None else os.getppid()
    listeners: list[Listener] = list(dict.fromkeys(args.ports))  # drop duplicates, keep order
    try:
        serve(args.name, listeners, pod_ip=args.pod_ip, parent_pid=parent_pid, request_log=args.request_log)
    except OSError as exc:
        print(f"podserver {args.name}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
