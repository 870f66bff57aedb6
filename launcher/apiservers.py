"""The further API servers of `kubelab up --apiservers N`: N-1 `kubelab apiserver` processes beside the one
`kubelab up` serves in its own process, on the same etcd (cluster), as kube runs several kube-apiservers
on one etcd cluster.

Each is a child process (it dies with `kubelab up`, kubelab/processes.py) listening on the next ports
after `--listen` (8081, 8082, ... for the default 8080), with the same certificates, token file, service
account key and authorization modes as the first, so a client may use any of them, and an identity of its
own (`--identity-hostname <host>-apiserver-<i>`: kube derives the identity Lease's name from the
hostname, and these share one host). Each keeps its master lease, so the `default/kubernetes` Service
lists them all (apiserver/endpointreconciler.py); in the netns lab, where pods reach the API only at the
lab address of the first, the others leave the Service's endpoints alone (`--endpoint-reconciler-type
none`). Their output goes to `<data-dir>/apiserver-<i>.log`.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from apiserver.serving import ServingOptions
from kubelab.client import ApiClient, TransportError
from kubelab.processes import spawn, stop_process

from .build import ApiServerOptions

START_TIMEOUT = 120.0  # a loaded machine: the first server's bootstrap retries etcd for up to 2 minutes too


@dataclass
class ExtraApiServer:
    index: int  # 2 for the second API server, ...
    url: str
    port: int
    log_path: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)


def ports_after(port: int, count: int) -> list[int]:
    """The ports of the API servers after the first: the next `count - 1` ones. Pure."""
    return [port + i for i in range(1, count)]


def argv(options: ApiServerOptions, index: int, port: int, identity_hostname: str) -> list[str]:
    """The `kubelab apiserver` command line of the index-th API server: `options` as its flags (the ones
    components.apiserver_options reads back), on `port` of --listen's host, with an identity of its own.
    Settings that have no flag must not be set (ValueError). Pure."""
    if (options.advertise_port, options.kubelet_netns, options.kubelet_address) != (None, None, None):
        raise ValueError("advertise_port, kubelet_netns and kubelet_address have no `kubelab apiserver` flag")
    host, _ = options.host_port
    out = [sys.executable, "-m", "kubelab", "apiserver", "--etcd-servers", ",".join(options.etcd_servers),
           "--listen", f"{host}:{port}"]
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


def refuse_taken_ports(host: str, ports: list[int]) -> None:
    """RuntimeError naming the first of `ports` another process listens on (checked before anything starts)."""
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError:
                raise RuntimeError(f"{host}:{port} is already in use; --apiservers N takes the N-1 ports after "
                                   "--listen's: stop what holds it or pick another --listen port") from None


def _launch(options: ApiServerOptions, index: int, port: int, data_dir: Path) -> ExtraApiServer:
    scheme = "https" if options.tls_cert_file else "http"
    server = ExtraApiServer(index, f"{scheme}://{options.advertise_address or options.host_port[0]}:{port}", port,
                            data_dir / f"apiserver-{index}.log")
    with open(server.log_path, "ab") as log_file:
        # Its own session: the terminal's Ctrl-C reaches `kubelab up`, which stops it in order (before etcd).
        server.process = spawn(argv(options, index, port, socket.gethostname()), stdout=log_file,
                               stderr=subprocess.STDOUT, start_new_session=True)
    return server


async def _wait_ready(server: ExtraApiServer, ca_file: str | None, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    async with ApiClient(server.url, user_agent="kubelab-up", ca_file=ca_file, timeout=2) as api:
        while time.monotonic() < deadline:
            assert server.process is not None
            if server.process.poll() is not None:
                raise RuntimeError(f"API server {server.index} ({server.url}) exited with code "
                                   f"{server.process.returncode}; see {server.log_path}")
            try:
                if (await api.get_raw("/readyz"))[0] == 200:
                    return
            except TransportError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError(f"API server {server.index} ({server.url}) was not ready within {timeout:g}s; see "
                       f"{server.log_path}")


async def start(options: ApiServerOptions, *, ca_file: str | None, count: int, first_port: int, data_dir: Path,
                started: list[ExtraApiServer]) -> None:
    """Start API servers 2..count, each with `options` (the first one's settings, as flags), and wait until
    each is ready (`ca_file`: what clients check their serving certificate against). Each is appended to
    `started` as soon as it runs, so the caller stops whatever did start, whatever fails."""
    for index, port in enumerate(ports_after(first_port, count), start=2):
        started.append(_launch(options, index, port, data_dir))
    for server in started:
        await _wait_ready(server, ca_file, START_TIMEOUT)


async def stop(servers: list[ExtraApiServer]) -> None:
    """SIGTERM every one (each removes its master lease: apiserver/endpointreconciler.py), SIGKILL after
    the grace period; all at once."""
    await asyncio.gather(*(asyncio.to_thread(stop_process, s.process, timeout=15.0) for s in servers),
                         return_exceptions=True)
