"""The further API servers of `kubelab up --apiservers N`: N-1 `kubelab apiserver` processes beside the one
`kubelab up` serves in its own process, on the same etcd (cluster), as kube runs several kube-apiservers
on one etcd cluster.

Each is a child process (it dies with `kubelab up`, kubelab/processes.py) serving on the next ports after
`--listen` (8081, 8082, ... for the default 8080), with the same certificates, token file, service account
key and authorization modes as the first, so a client may use any of them, and an identity of its own
(`--identity-hostname <host>-apiserver-<i>`: kube derives the identity Lease's name from the hostname, and
these share one host). Each keeps its master lease, so the `default/kubernetes` Service lists them all
(apiserver/endpointreconciler.py); in the netns lab, where pods reach the API only at the lab address of
the first, the others leave the Service's endpoints alone (`--endpoint-reconciler-type none`). Their output
goes to `<data-dir>/apiserver-<i>.log`.

Supervised as a kubelet runs a static pod's container with restartPolicy Always (launcher/supervision.py:
started again when it exits, with the kubelet's back-off). `kubelab up` binds each child's listening socket
itself and hands it over (`kubelab apiserver --listen-fd FD`, as systemd's socket activation does), so the
ports are known to be free before anything starts. While a child is down its port is closed, so clients are
refused at once and fail over to another server, as with a kube-apiserver that is down (a socket kept
listening made them wait out their timeout: the kernel completes the handshake and queues the connection);
the same port is bound again for the restart, so a restarted server is at the same URL and clients' lists of
servers stay valid.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apiserver.serving import ServingOptions
from kubelab.client import ApiClient, TransportError
from kubelab.processes import spawn, stop_process

from .build import ApiServerOptions
from .supervision import RestartBackoff, how_it_ended, keep_running

START_TIMEOUT = 120.0  # a loaded machine: the first server's bootstrap retries etcd for up to 2 minutes too
READY_POLL = 0.1


@dataclass
class ExtraApiServer:
    index: int  # 2 for the second API server, ...
    url: str
    port: int
    log_path: Path
    argv: list[str] = field(default_factory=list)
    listener: socket.socket | None = field(default=None, repr=False)  # bound by `kubelab up`, handed to each start
    bind_host: str = ""  # the address `listener` is bound to, to bind it again for a restart
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    restarts: int = 0
    state: str = "starting"  # starting (not ready yet), running (ready), back-off (exited, waiting to start again)
    backoff: RestartBackoff = field(default_factory=RestartBackoff, repr=False)
    # Sockets handed to every start too, kept (listening) across restarts: the first API server's private
    # socket and lab listener (launcher/upapiserver.py), on which up's components and pods wait out a
    # restart rather than being refused.
    kept: list[socket.socket] = field(default_factory=list, repr=False)
    # None: its output to `log_path`; else to this process's (the first API server's, on up's terminal).
    inherit_output: bool = False
    ca_file: str | None = None  # what its serving certificate is checked against

    # What supervision.keep_running asks of a child:
    @property
    def log_at(self) -> str:
        return "above" if self.inherit_output else str(self.log_path)

    def exited(self) -> None:
        if self.listener is not None:
            self.listener.close()  # refused meanwhile: clients fail over at once
            self.listener = None

    def launch(self) -> None:
        _rebind(self)
        _launch(self)

    async def wait_ready(self) -> bool:
        return await _ready(self, None)

    def record(self) -> dict[str, Any]:
        """What cluster.json (and so `kubelab status`) says of it."""
        return {"url": self.url, "pid": self.process.pid if self.process else None, "restarts": self.restarts,
                "state": self.state}


def ports_after(port: int, count: int) -> list[int]:
    """The ports of the API servers after the first: the next `count - 1` ones. Pure."""
    return [port + i for i in range(1, count)]


def argv(options: ApiServerOptions, index: int, port: int, identity_hostname: str, *,
         listen_fd: int | None = None) -> list[str]:
    """The `kubelab apiserver` command line of the index-th API server: `options` as its flags (the ones
    components.apiserver_options reads back), on `port` of --listen's host (served on the inherited socket
    `listen_fd` when given), with an identity of its own. Settings that have no flag must not be set
    (ValueError). Pure."""
    if (options.advertise_port, options.kubelet_netns, options.kubelet_address) != (None, None, None):
        raise ValueError("advertise_port, kubelet_netns and kubelet_address have no `kubelab apiserver` flag")
    host, _ = options.host_port
    out = [sys.executable, "-m", "kubelab", "apiserver", "--etcd-servers", ",".join(options.etcd_servers),
           "--listen", f"{host}:{port}"]
    if listen_fd is not None:
        out += ["--listen-fd", str(listen_fd)]
    if options.advertise_address:
        out += ["--advertise-address", options.advertise_address]
    out += ["--authorization-mode", ",".join(options.authorization_modes), "--event-ttl", f"{options.event_ttl}s"]
    if options.service_account_signing_key_file:
        out += ["--service-account-signing-key-file", options.service_account_signing_key_file]
    out += ["--identity-hostname", f"{identity_hostname}-apiserver-{index}",
            "--endpoint-reconciler-type", options.endpoint_reconciler_type]
    if options.token_auth_file:
        out += ["--token-auth-file", options.token_auth_file]
    if options.tls_cert_file and options.tls_private_key_file:
        out += ["--tls-cert-file", options.tls_cert_file, "--tls-private-key-file", options.tls_private_key_file]
    for name, value in (("--etcd-cafile", options.etcd_cafile), ("--etcd-certfile", options.etcd_certfile),
                        ("--etcd-keyfile", options.etcd_keyfile),
                        ("--kubelet-client-certificate", options.kubelet_client_certificate),
                        ("--kubelet-client-key", options.kubelet_client_key),
                        ("--kubelet-certificate-authority", options.kubelet_certificate_authority)):
        if value:
            out += [name, value]
    if options.disable_admission_plugins:
        out += ["--disable-admission-plugins", ",".join(options.disable_admission_plugins)]
    serving, default = options.serving, ServingOptions()
    if serving.request_timeout != default.request_timeout:
        out += ["--request-timeout", f"{serving.request_timeout}s"]
    if serving.max_requests_inflight != default.max_requests_inflight:
        out += ["--max-requests-inflight", str(serving.max_requests_inflight)]
    if serving.max_mutating_requests_inflight != default.max_mutating_requests_inflight:
        out += ["--max-mutating-requests-inflight", str(serving.max_mutating_requests_inflight)]
    return out


def bind_listeners(host: str, ports: list[int]) -> list[socket.socket]:
    """A socket bound to each of `ports` (before anything starts, so a port another process holds is named
    at once; RuntimeError), not listening: the child listens once it is ready to serve, and until then a
    connection is refused, not queued. The caller closes them (close_listeners) once their servers are gone."""
    bound: list[socket.socket] = []
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for port in ports:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as a listening server binds
            sock.bind((host, port))
            bound.append(sock)
        except OSError:
            sock.close()
            close_listeners(bound)
            raise RuntimeError(f"{host}:{port} is already in use; --apiservers N takes the N-1 ports after "
                               "--listen's: stop what holds it or pick another --listen port") from None
    return bound


def close_listeners(listeners: list[socket.socket]) -> None:
    for listener in listeners:
        listener.close()


def _rebind(server: ExtraApiServer) -> None:
    """Bind the child's port again for its restart (closed while it was down) and name the new socket on
    its command line. RuntimeError when another process took the port meanwhile."""
    if server.listener is None:
        [server.listener] = bind_listeners(server.bind_host, [server.port])
        server.argv[server.argv.index("--listen-fd") + 1] = str(server.listener.fileno())


def _launch(server: ExtraApiServer) -> None:
    assert server.listener is not None
    fds = (server.listener.fileno(), *(sock.fileno() for sock in server.kept))
    # Its own session: the terminal's Ctrl-C reaches `kubelab up`, which stops it in order (before etcd).
    if server.inherit_output:
        server.process = spawn(server.argv, start_new_session=True, pass_fds=fds)
        return
    with open(server.log_path, "ab") as log_file:
        server.process = spawn(server.argv, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True,
                               pass_fds=fds)


async def _ready(server: ExtraApiServer, timeout: float | None) -> bool:
    """Whether its process answers /readyz 200 (True) or exits first (False); RuntimeError after `timeout`."""
    deadline = None if timeout is None else time.monotonic() + timeout
    async with ApiClient(server.url, user_agent="kubelab-up", ca_file=server.ca_file, timeout=2) as api:
        while deadline is None or time.monotonic() < deadline:
            assert server.process is not None
            if server.process.poll() is not None:
                return False
            try:
                if (await api.get_raw("/readyz"))[0] == 200:
                    return True
            except TransportError:
                pass
            await asyncio.sleep(READY_POLL)
    raise RuntimeError(f"API server {server.index} ({server.url}) was not ready within {timeout:g}s; see "
                       f"{server.log_path}")


async def start(options: ApiServerOptions, *, ca_file: str | None, listeners: list[socket.socket], data_dir: Path,
                started: list[ExtraApiServer]) -> None:
    """Start API servers 2.. on `listeners` (bind_listeners), each with `options` (the first one's settings, as
    flags), and wait until each is ready (`ca_file`: what clients check their serving certificate against).
    Each is appended to `started` as soon as it runs, so the caller stops whatever did start, whatever fails.
    One that exits before it is ready fails the start: a command line that cannot serve is not retried."""
    scheme = "https" if options.tls_cert_file else "http"
    host = socket.gethostname()
    for index, listener in enumerate(listeners, start=2):
        port = listener.getsockname()[1]
        server = ExtraApiServer(index, f"{scheme}://{options.advertise_address or options.host_port[0]}:{port}", port,
                                data_dir / f"apiserver-{index}.log", listener=listener,
                                bind_host=listener.getsockname()[0], ca_file=ca_file,
                                argv=argv(options, index, port, host, listen_fd=listener.fileno()))
        _launch(server)
        started.append(server)
    for server in started:
        if not await _ready(server, START_TIMEOUT):
            assert server.process is not None
            raise RuntimeError(f"API server {server.index} ({server.url}) exited with code "
                               f"{server.process.returncode}; see {server.log_path}")
        server.state = "running"


async def start_first(argv_for: Callable[[int], list[str]], *, url: str, listener: socket.socket,
                      kept: list[socket.socket], data_dir: Path, ca_file: str | None,
                      started: list[ExtraApiServer]) -> ExtraApiServer:
    """Start `kubelab up`'s own API server as a child (launcher/upapiserver.py; `argv_for(listen_fd)` its
    command line) on `listener` and the `kept` sockets, its output on this process's, and wait until it is
    ready. Appended to `started` as soon as it runs (the caller stops it, whatever fails)."""
    host, port = listener.getsockname()[:2]
    server = ExtraApiServer(1, url, port, data_dir / "apiserver.log", listener=listener, bind_host=host,
                            argv=argv_for(listener.fileno()), kept=kept, inherit_output=True, ca_file=ca_file)
    _launch(server)
    started.append(server)
    if not await _ready(server, START_TIMEOUT):
        assert server.process is not None
        raise RuntimeError(f"the API server (pid {server.process.pid}) {how_it_ended(server.process.returncode)} before "
                           "it was ready; see its errors above")
    server.state = "running"
    return server


async def supervise(servers: list[ExtraApiServer], *, on_change: Callable[[], None]) -> None:
    """Start every one of `servers` again whenever it exits (supervision.keep_running), on the socket it had;
    until cancelled. `on_change()` after each change of a server's state, pid or restart count."""
    async with asyncio.TaskGroup() as tg:
        for server in servers:
            log = logging.getLogger("kubelab.component.apiserver" + (f"-{server.index}" if server.index > 1 else ""))
            tg.create_task(keep_running(server, log, on_change), name=f"apiserver-{server.index}-supervisor")


async def stop(servers: list[ExtraApiServer]) -> None:
    """SIGTERM every one (each removes its master lease: apiserver/endpointreconciler.py), SIGKILL after
    the grace period; all at once; then close the sockets bound for restarts. Supervision must have stopped
    first."""
    await asyncio.gather(*(asyncio.to_thread(stop_process, s.process, timeout=15.0) for s in servers),
                         return_exceptions=True)
    close_listeners([s.listener for s in servers if s.listener is not None])
    close_listeners([sock for s in servers for sock in s.kept])
