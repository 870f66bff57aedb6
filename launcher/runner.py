"""`kubelab up`: the whole cluster, one command, three processes.

A private etcd (unless --etcd-servers is given); the API server on uvicorn in a child process of its own
(launcher/upapiserver.py, supervised by launcher/apiservers.py), handed every socket it serves, bound here;
the scheduler in a child process of its own (launcher/upscheduler.py, which supervises it too); and the
controllers, DNS and N nodes (kubelet stub + proxy agent each) as named tasks in one asyncio TaskGroup in
this process. One Python process runs one core: split, the API server and the components each have one,
and the scheduler's bindings do not wait for the loop that runs every node. Every component talks to the
others only through the API server, exactly as the one-component-per-process commands do, on the API
server's private unix socket. With --one-process the API server and the scheduler run in this process too,
and each request is handed to the API server's ASGI application (kubelab/client/asgi.py), through all of its
handlers, with no socket or HTTP bytes between. On Ctrl-C (or SIGTERM, or any component crashing) the tasks
are cancelled, the scheduler's and the API server's processes are stopped, the netns dataplane is torn down
and etcd is stopped.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import faulthandler
import json
import logging
import os
import secrets
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from kubelab import addressing, kubeconfig
from kubelab import pki as pki_files
from kubelab.etcd import Etcd
from kubelab.etcdcluster import EtcdCluster

from . import defaults

log = logging.getLogger("kubelab")


def _log(component: str) -> logging.Logger:
    """A logger whose lines are prefixed with `component` (see kubelab/logs.py)."""
    return logging.getLogger(f"kubelab.component.{component}")

STATE_FILE = "cluster.json"


@dataclass
class UpOptions:
    nodes: int = defaults.NODES
    listen: str = defaults.LISTEN
    etcd_servers: list[str] = field(default_factory=list)
    data_dir: Path = Path(defaults.DATA_DIR)
    dataplane: str = "render"
    min_sync_period: float = defaults.MIN_SYNC_PERIOD
    delta_sync: bool = False  # proxy agents leave unchanged shared chains out of partial syncs
    proxy_mode: str = defaults.PROXY_MODE  # kube-proxy's --proxy-mode: iptables (its default on Linux) or nftables
    node_cpu: str = defaults.NODE_CPU
    node_memory: str = defaults.NODE_MEMORY
    node_max_pods: int = defaults.NODE_MAX_PODS
    node_monitor_grace_period: float = defaults.NODE_MONITOR_GRACE_PERIOD
    lb_pool: str | None = defaults.LB_POOL
    # --token-auth-file: the API server requires tokens from it; kubelab's components get theirs (added to
    # the file when missing) and the kubeconfig gets the admin's.
    token_auth_file: Path | None = None
    # kube-apiserver's --authorization-mode when tokens are on (apiserver/authz.py).
    authorization_modes: tuple[str, ...] = defaults.AUTHORIZATION_MODES
    event_ttl: int = defaults.EVENT_TTL_SECONDS  # kube-apiserver's --event-ttl, in seconds
    # The API server's timeouts and in-flight limits (apiserver.serving.ServingOptions; None: kube's defaults).
    serving: Any = None
    # kube-apiserver's --etcd-cafile/--etcd-certfile/--etcd-keyfile, for an https --etcd-servers. The
    # private etcd needs none given: with --token-auth-file it gets certificates of the lab CA.
    etcd_cafile: Path | None = None
    etcd_certfile: Path | None = None
    etcd_keyfile: Path | None = None
    # --apiservers N: API servers 2..N as `kubelab apiserver` processes on the same etcd (launcher/apiservers.py).
    apiservers: int = 1
    # --etcd-members M: the private etcd as an M-member cluster (kubelab/etcdcluster.py).
    etcd_members: int = 1
    # --one-process: the API server in this process too (handed the components' requests without a socket);
    # by default it runs in a child process of its own (launcher/upapiserver.py), so two cores are used.
    one_process: bool = False


def split_listen(listen: str) -> tuple[str, int]:
    """A --listen address: "HOST:PORT", an empty host meaning loopback; raises ValueError."""
    return addressing.split_host_port(listen, default_host="127.0.0.1")


def read_state(data_dir: Path) -> dict[str, Any]:
    path = data_dir / STATE_FILE
    if not path.exists():
        raise FileNotFoundError(f"no running cluster found in {data_dir} (no {STATE_FILE}); start one with "
                                f"`kubelab up --data-dir {data_dir}`")
    state: dict[str, Any] = json.loads(path.read_text())
    return state


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _write_state(data_dir: Path, state: dict[str, Any]) -> None:
    tmp = data_dir / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(data_dir / STATE_FILE)


class Timer:
    def __init__(self) -> None:
        self.start = time.monotonic()

    def __str__(self) -> str:
        return f"{time.monotonic() - self.start:.2f}s"


async def up(options: UpOptions, *, ready: Callable[[dict[str, Any]], None] | None = None) -> None:
    """Run the cluster until cancelled. `ready(state)` is called once everything is registered."""
    import uvicorn

    from apiserver.app import create_app
    from apiserver.serving import Internal, ServingOptions, api_server, raise_open_files_limit, uvicorn_config

    from .build import ApiServerOptions, build_apiserver_config

    data_dir = options.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    _refuse_second_cluster(data_dir)
    host, port = split_listen(options.listen)
    _preflight(options, host, port)
    from . import apiservers

    # The further API servers' ports, bound now (a port in use is named before anything starts): each child
    # serves on the socket it is handed, bound again at the same port for a restart (launcher/apiservers.py).
    listeners = apiservers.bind_listeners(host, apiservers.ports_after(port, options.apiservers))
    # With tokens the API serves HTTPS with a lab CA (kubelab/pki.py): kubectl sends tokens only over TLS.
    scheme = "https" if options.token_auth_file is not None else "http"
    server_url = f"{scheme}://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}"
    timer = Timer()
    etcd: Etcd | EtcdCluster | None = None
    lab = None
    extras: list[apiservers.ExtraApiServer] = []
    firsts: list[apiservers.ExtraApiServer] = []  # the first API server's process (not with --one-process)
    runtimes: list[Any] = []  # every node's container runtime, whose pods' files go last
    try:
        tokens = None
        from kubelab.pki import ensure_lab_pki, ensure_service_account_key

        # The service account signing key, made once in the data dir (kubeadm's sa.key): pods' tokens and
        # `kubectl create token`'s outlive a restart.
        sa_key = await asyncio.to_thread(ensure_service_account_key, data_dir / "pki")
        netns = options.dataplane == "netns"
        if options.token_auth_file is not None:
            from kubelab.tokenfile import ensure_component_tokens

            tokens = ensure_component_tokens(options.token_auth_file.resolve(),
                                             [addressing.node_name(i) for i in range(1, options.nodes + 1)])
        # Pods speak HTTPS to 10.96.0.1:443 whether or not the API asks for tokens (in-cluster clients always
        # do), so there is always a CA (published as kube-root-ca.crt, which every pod's token volume
        # projects) and a certificate for the Service's names and the lab address.
        ips = [addressing.KUBERNETES_SERVICE_IP] + ([addressing.APISERVER_LAB_IP] if netns else []) + (
            [host] if host not in ("0.0.0.0", "", "127.0.0.1") else [])
        pki = await asyncio.to_thread(ensure_lab_pki, data_dir / "pki", ips=ips,
                                      kubelet_ips=[addressing.node_ip(i) for i in range(1, options.nodes + 1)])
        etcd_tls = (options.etcd_cafile, options.etcd_certfile, options.etcd_keyfile)
        if options.etcd_servers:
            etcd_servers = options.etcd_servers
        elif options.etcd_members > 1:
            etcd = EtcdCluster(data_dir / "etcd-cluster", size=options.etcd_members,
                               tls=pki.etcd_tls() if tokens is not None else None)
            await asyncio.to_thread(etcd.start)
            etcd_servers = etcd.urls
            if tokens is not None:
                etcd_tls = (pki.ca_file, pki.etcd_client_cert_file, pki.etcd_client_key_file)
            _log("etcd").info("ready: a cluster of %d members at %s (private, data in %s) [%s]", options.etcd_members,
                              ",".join(etcd_servers), etcd.directory, timer)
        else:
            # With tokens, the private etcd too wants a certificate of the lab CA from its clients: without
            # one, any local user could read every Secret and token straight from its loopback port.
            etcd = Etcd(data_dir / "etcd", tls=pki.etcd_tls() if tokens is not None else None)
            await asyncio.to_thread(etcd.start)
            etcd_servers = [etcd.url]
            if tokens is not None:
                etcd_tls = (pki.ca_file, pki.etcd_client_cert_file, pki.etcd_client_key_file)
            _log("etcd").info("ready at %s (private, data in %s%s) [%s]", etcd.url, etcd.data_dir,
                              ", clients need a certificate of the lab CA" if tokens is not None else "", timer)
        cafile, certfile, keyfile = (str(f) if f is not None else None for f in etcd_tls)
        serving_options = options.serving or ServingOptions()
        raise_open_files_limit()
        # The kubernetes Service's endpoints: in the netns lab, the API server's own address on the lab
        # network, where pods reach it (routed, through kube-proxy's rules for 10.96.0.1:443); otherwise the
        # address it listens on.
        advertise = ((addressing.APISERVER_LAB_IP, addressing.APISERVER_SECURE_PORT) if netns
                     else (host if host not in ("0.0.0.0", "") else "127.0.0.1", port))
        # The lab's prefix is chosen now: the API server dials kubelets from its namespace on the lab network.
        lab_prefix = f"kl-{secrets.token_hex(2)}" if netns else None
        tls = pki if tokens is not None else None  # the port users reach, and the kubelets: HTTPS with tokens
        first = ApiServerOptions(
            tuple(etcd_servers), listen=f"{host}:{port}", advertise_address=advertise[0], advertise_port=advertise[1],
            tls_cert_file=str(tls.cert_file) if tls else None, tls_private_key_file=str(tls.key_file) if tls else None,
            token_auth_file=str(options.token_auth_file.resolve()) if options.token_auth_file is not None else None,
            authorization_modes=options.authorization_modes, event_ttl=options.event_ttl,
            service_account_signing_key_file=str(sa_key), serving=serving_options, etcd_cafile=cafile,
            etcd_certfile=certfile, etcd_keyfile=keyfile,
            kubelet_client_certificate=str(tls.kubelet_client_cert_file) if tls else None,
            kubelet_client_key=str(tls.kubelet_client_key_file) if tls else None,
            kubelet_certificate_authority=str(tls.ca_file) if tls else None,
            kubelet_netns=f"{lab_prefix}-{APISERVER_NETNS}" if lab_prefix else None,
            kubelet_address=None if lab_prefix else "127.0.0.1")
        # The components reach the API server on a socket of their own (plain HTTP, 0600, not counted against
        # the listener's connection cap), so a flood of clients on the port cannot cut their heartbeats off;
        # the same app serves it, its lifespan run once by the public server.
        private = _PrivateSocket(data_dir)
        server: Any = None
        internal: Any = None
        in_process: Any = None  # one process: what the components' requests are handed to, without the socket
        serving: asyncio.Task[None] | None = None
        serving_internal: asyncio.Task[None] | None = None
        extra_serving: list[tuple[Any, asyncio.Task[None]]] = []  # the lab listener, in netns mode
        lab_record: dict[str, Any] | None = None
        try:
            if options.one_process:
                app = create_app(build_apiserver_config(first))
                server = api_server(uvicorn_config(app, options=serving_options, host=host, port=port,
                                                   ssl_certfile=str(tls.cert_file) if tls else None,
                                                   ssl_keyfile=str(tls.key_file) if tls else None), serving_options)
                in_process = Internal(app)
                internal = uvicorn.Server(uvicorn_config(in_process, options=serving_options, lifespan="off"))
                # uvicorn would take SIGINT/SIGTERM for itself; here they cancel the whole cluster instead.
                server.capture_signals = contextlib.nullcontext
                internal.capture_signals = contextlib.nullcontext
                serving = asyncio.create_task(server.serve(), name="apiserver")
                while not server.started:
                    if serving.done():
                        # uvicorn logs why (e.g. address in use) and exits with SystemExit(3).
                        raise RuntimeError(f"the API server could not start on {host}:{port} (see the error above; "
                                           "is the port in use? try --listen 127.0.0.1:PORT)")
                    await asyncio.sleep(0.05)
                serving_internal = asyncio.create_task(internal.serve(sockets=[private.bind()]),
                                                       name="apiserver-private")
                while not internal.started:
                    if serving_internal.done():
                        raise RuntimeError(f"the API server could not serve its private socket {private.path}")
                    await asyncio.sleep(0.01)
            else:
                # The API server in a process of its own (launcher/upapiserver.py), so that it and the
                # components each have a core: every socket it serves is bound here and handed over, the lab
                # (in netns mode) made first for its listener inside the lab's "apiserver" namespace.
                from . import upapiserver

                kept = [private.bind()]
                lab_sock = None
                if netns:
                    assert lab_prefix is not None
                    lab = await _create_lab(data_dir, options, lab_prefix)
                    lab_sock, lab_record = await _bind_on_lab(lab, options)
                    kept.append(lab_sock)
                [public] = apiservers.bind_listeners(host, [port])
                first_options = first

                def first_argv(listen_fd: int) -> list[str]:
                    return upapiserver.argv(first_options, listen_fd=listen_fd, private_fd=kept[0].fileno(),
                                            lab_fd=lab_sock.fileno() if lab_sock is not None else None,
                                            lab_cert_file=str(pki.cert_file), lab_key_file=str(pki.key_file))

                first_process = await apiservers.start_first(first_argv, url=server_url, listener=public, kept=kept,
                                                             data_dir=data_dir, started=firsts,
                                                             ca_file=str(tls.ca_file) if tls else None)
                assert first_process.process is not None
            _log("apiserver").info("ready at %s%s [%s]", server_url,
                                   f" (process {firsts[0].process.pid})" if firsts and firsts[0].process else "", timer)
            if options.apiservers > 1:
                # The others: the first one's settings as flags, with their own defaults for what `up` gives only
                # the first (its serving limits, its lab address and kubelet dialing); in the netns lab pods reach
                # the API at the first server's lab address only.
                await apiservers.start(dataclasses.replace(
                    first, advertise_address=advertise[0] if not netns else "127.0.0.1", advertise_port=None,
                    serving=ServingOptions(), kubelet_netns=None, kubelet_address=None,
                    endpoint_reconciler_type="none" if netns else defaults.ENDPOINT_RECONCILER_TYPE),
                    ca_file=str(tls.ca_file) if tls else None, listeners=listeners, data_dir=data_dir,
                    started=extras)
                for extra in extras:
                    _log(f"apiserver-{extra.index}").info("ready at %s (pid %d, log %s) [%s]", extra.url,
                                                          extra.process.pid if extra.process else 0, extra.log_path,
                                                          timer)
            config_path = kubeconfig.write(data_dir / "kubeconfig", server_url, token=tokens.admin if tokens else None,
                                           ca_file=tls.ca_file if tls else None)
            state: dict[str, Any] = {"pid": os.getpid(), "server": server_url, "kubeconfig": str(config_path),
                                     "dataplane": options.dataplane, "etcd": etcd_servers, "nodes": {}}
            state["servers"] = [server_url, *(extra.url for extra in extras)]  # every API server, the first first
            state["privateSocket"] = private.path  # the components' (removed at the stop)
            # And how each is doing (with --one-process the first is this process's own); rewritten whenever a
            # child restarts.
            def apiserver_records() -> list[dict[str, Any]]:
                return [*(first.record() for first in firsts), *(extra.record() for extra in extras)] if firsts else [
                    {"url": server_url, "pid": os.getpid(), "restarts": 0, "state": "running"},
                    *(extra.record() for extra in extras)]

            state["apiservers"] = apiserver_records()

            def apiservers_changed() -> None:
                state["apiservers"] = apiserver_records()
                _write_state(data_dir, state)

            if tls is not None:
                state["ca"] = str(tls.ca_file)
            state["proxyMode"] = options.proxy_mode  # which rules `kubelab ui` reads on each node
            if options.dataplane == "netns":
                assert lab_prefix is not None
                if lab is None:
                    lab = await _create_lab(data_dir, options, lab_prefix)
                state["netnsPrefix"] = lab.prefix
                state["lab"] = lab.lab_netns
                # The client reaches LoadBalancer IPs through node-1, as a cloud load balancer forwards to nodes.
                routes = {addressing.covering_cidr(options.lb_pool): addressing.node_ip(1)} if options.lb_pool else {}
                state["client"] = {"ip": addressing.CLIENT_IP, "netns": await asyncio.to_thread(
                    lab.add_client, "client", addressing.CLIENT_IP, routes=routes)}
                # Cluster DNS listens in a namespace of its own on the lab network; its replies go back to
                # pods through their nodes (each node's pod CIDR via the node's address).
                pod_routes = {addressing.node_pod_cidr(i): addressing.node_ip(i) for i in range(1, options.nodes + 1)}
                state["dns"] = {"ip": addressing.DNS_SERVER_IP,
                                "netns": await asyncio.to_thread(lab.add_client, "dns", addressing.DNS_SERVER_IP,
                                                                 routes=pod_routes)}
                if lab_record is None:
                    lab_server = api_server(uvicorn_config(in_process.app, options=serving_options, lifespan="off",
                                                           ssl_certfile=str(pki.cert_file),
                                                           ssl_keyfile=str(pki.key_file)), serving_options)
                    lab_server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
                    lab_record = await _serve_on_lab(lab, options, lab_server, extra_serving)
                state["apiserver"] = lab_record
            state["podCA"] = str(pki.ca_file)  # what kube-root-ca.crt holds
            if tokens is None:
                _log("apiserver").info(
                    "no --token-auth-file: the API is open to whoever reaches it; a pod's service account token "
                    "is still checked (expired, another audience or its pod gone: 401) but a valid one gives no "
                    "more than no token at all")
            _write_state(data_dir, state)
            clients: list[Any] = []
            try:
                async with asyncio.TaskGroup() as tg:
                    for task in (serving, serving_internal, *(t for _, t in extra_serving)):
                        if task is not None:
                            tg.create_task(_watch_apiserver(task), name=f"{task.get_name()}-watchdog")
                    if firsts or extras:
                        tg.create_task(apiservers.supervise([*firsts, *extras], on_change=apiservers_changed),
                                       name="apiserver-supervisor")
                    await _run_components(tg, options, private.path, data_dir, state, lab, timer, ready, clients,
                                          runtimes=runtimes, tokens=tokens, root_ca=pki.ca_file.read_text(), app=in_process,
                                          pki=tls)
            finally:
                for api in clients:  # only now: every component using them has stopped
                    with contextlib.suppress(Exception):
                        await api.close()
        finally:
            # Components are stopped first (the TaskGroup is done), so no watch keeps uvicorn waiting.
            for one in (server, internal):
                if one is not None:
                    one.should_exit = True
            for extra, _ in extra_serving:
                extra.should_exit = True
            with contextlib.suppress(Exception, asyncio.CancelledError, SystemExit):
                await asyncio.wait_for(asyncio.gather(*(t for t in (serving, serving_internal) if t is not None),
                                                      *(t for _, t in extra_serving)), 5)
            private.remove()
    finally:
        await apiservers.stop([*firsts, *extras])  # before etcd: each removes its master lease on the way out
        apiservers.close_listeners(listeners)
        await _tear_down(lab, etcd)
        for runtime in runtimes:
            # Again, now that the pods' processes are gone: a pod start the cancelled kubelet no longer
            # waited for may have written its volumes (Secrets) after the runtime's own close().
            with contextlib.suppress(Exception):
                runtime.clear()
        with contextlib.suppress(FileNotFoundError):
            (data_dir / STATE_FILE).unlink()


async def _tear_down(lab: Any, etcd: Etcd | EtcdCluster | None) -> None:
    """The dataplane and etcd, together (neither needs the other once the API server has stopped), each
    on a thread of its own: the default executor's threads may all still be busy with pod starts that
    the cancelled kubelets no longer wait for, and the teardown must not queue behind them. Bounded:
    the pod start in flight (its own timeout) and one grace period for every pod server together, and
    meanwhile etcd's grace period."""
    import concurrent.futures

    loop = asyncio.get_running_loop()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="kubelab-teardown") as pool:
        async def remove_lab() -> None:
            started = time.monotonic()
            await loop.run_in_executor(pool, lab.destroy)
            _log("netns").info("removed every namespace, link and process of %s [%.2fs]", lab.prefix,
                               time.monotonic() - started)

        async def stop_etcd() -> None:
            assert etcd is not None
            await loop.run_in_executor(pool, etcd.stop)
            _log("etcd").info("stopped")

        steps = ([remove_lab()] if lab is not None else []) + ([stop_etcd()] if etcd is not None else [])
        results = await asyncio.gather(*steps, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        raise errors[0]


NETNS_NEEDS_ROOT = ("--dataplane netns needs root (network namespaces and iptables); run as root or use "
                    "--dataplane render")


def _preflight(options: UpOptions, host: str, port: int) -> None:
    """What would otherwise fail half-way through start-up, refused at once in one line (cmd_up prints it)."""
    import errno
    import socket

    from kubelab.etcd import EtcdNotFound, find_etcd

    if options.dataplane == "netns" and os.geteuid() != 0:
        raise PermissionError(NETNS_NEEDS_ROOT)
    if not options.etcd_servers:
        try:
            find_etcd()
        except EtcdNotFound as exc:
            raise EtcdNotFound(f"{exc}; or use a running etcd with --etcd-servers URL") from None
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            sock.bind(address)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise RuntimeError(f"{host}:{port} is already in use (another `kubelab up`, or some other server); "
                               "stop it or pick another port with --listen 127.0.0.1:PORT") from None
        raise RuntimeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


# The URL the components of `kubelab up` use on the private socket (any host: the socket is the address).
PRIVATE_SERVER = "http://apiserver.local"


class _PrivateSocket:
    """The API server's private socket for its own components: `<data-dir>/apiserver.sock`, or one in a
    private temporary directory when that path is too long for a socket address; mode 0600."""

    MAX_PATH = 100  # sun_path holds 108 bytes

    def __init__(self, data_dir: Path) -> None:
        import tempfile

        path = data_dir / "apiserver.sock"
        self._tmp: str | None = None
        if len(str(path).encode()) > self.MAX_PATH:
            self._tmp = tempfile.mkdtemp(prefix="kubelab-")
            path = Path(self._tmp) / "apiserver.sock"
        self.path = str(path)

    def bind(self) -> Any:
        import socket

        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)  # left by a run that was killed
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(self.path)
        finally:
            os.umask(old)
        return sock

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        if self._tmp is not None:
            with contextlib.suppress(OSError):
                os.rmdir(self._tmp)


def _apiserver_netns(lab: Any, options: UpOptions) -> str:
    """The API server's namespace on the lab network (APISERVER_LAB_IP): where pods reach it through the
    kubernetes Service, and where it dials kubelets from. Replies to pods go back through their nodes
    (each node's pod CIDR via the node's address), as the "dns" namespace has it. Idempotent."""
    pod_routes = {addressing.node_pod_cidr(i): addressing.node_ip(i) for i in range(1, options.nodes + 1)}
    netns: str = lab.add_client(APISERVER_NETNS, addressing.APISERVER_LAB_IP, routes=pod_routes)
    return netns


def _bind_lab_socket() -> Any:
    import socket

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((addressing.APISERVER_LAB_IP, addressing.APISERVER_SECURE_PORT))
    return sock


async def _serve_on_lab(lab: Any, options: UpOptions, server: Any,
                        serving: list[tuple[Any, asyncio.Task[None]]]) -> dict[str, Any]:
    """Serve the API over HTTPS on APISERVER_LAB_IP:6443 from a socket made inside the "apiserver" lab
    namespace (kube-apiserver's secure port on its advertise address), served on this loop as the main
    port is; its certificate (the lab CA's) names 10.96.0.1 and kubernetes.default.svc, so pods check it
    with the kube-root-ca.crt their token volume carries. Returns what cluster.json records of it."""
    sock, record = await _bind_on_lab(lab, options)
    task = asyncio.create_task(server.serve(sockets=[sock]), name="apiserver-lab")
    serving.append((server, task))
    while not server.started:
        if task.done():
            raise RuntimeError(f"the API server could not serve on {record['url']} in {record['netns']}")
        await asyncio.sleep(0.01)
    return record


async def _bind_on_lab(lab: Any, options: UpOptions) -> tuple[Any, dict[str, Any]]:
    """The API server's socket on the lab network, APISERVER_LAB_IP:6443 bound inside the "apiserver" lab
    namespace (not listening yet), and what cluster.json records of it."""
    from kubelab.netnsthread import run_in_netns

    netns = await asyncio.to_thread(_apiserver_netns, lab, options)
    sock = await asyncio.to_thread(run_in_netns, netns, _bind_lab_socket, name="apiserver-lab-socket")
    url = f"https://{addressing.APISERVER_LAB_IP}:{addressing.APISERVER_SECURE_PORT}"
    _log("apiserver").info("serving pods at %s (network namespace %s), behind the kubernetes Service "
                           "https://%s:443", url, netns, addressing.KUBERNETES_SERVICE_IP)
    return sock, {"ip": addressing.APISERVER_LAB_IP, "netns": netns, "url": url}


async def _watch_apiserver(serving: asyncio.Task[None]) -> None:
    """A component crash ends the TaskGroup; so must the API server stopping on its own."""
    await asyncio.shield(serving)
    raise RuntimeError("the API server stopped")


def _refuse_second_cluster(data_dir: Path) -> None:
    path = data_dir / STATE_FILE
    if not path.exists():
        return
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        old = {}
    if old.get("pid") and _pid_alive(int(old["pid"])) and int(old["pid"]) != os.getpid():
        raise RuntimeError(f"a cluster is already running from {data_dir} (pid {old['pid']}); stop it first or "
                           "use another --data-dir")
    # Killed (SIGKILL, a crash, the machine's OOM killer) rather than stopped: its children died with it
    # (kubelab/processes.py), what it left on disk and in the kernel goes now.
    log.warning("the cluster last run from %s (pid %s) ended without stopping; cleaning up after it", data_dir,
                old.get("pid", "?"))
    if old.get("netnsPrefix"):
        from kubeletstub.netnsstate import cleanup

        report = cleanup(data_dir / "netns", prefix=old["netnsPrefix"])
        if report.removed_netns:
            _log("netns").info("removed %d namespaces left by an earlier run", len(report.removed_netns))
    path.unlink(missing_ok=True)


def _kubelet_server_tls(pki: Any) -> dict[str, Any]:
    """The kubelets' side: their serving certificate and the CA their clients' certificates chain to."""
    if pki is None:
        return {}
    return {"tls_cert_file": str(pki.kubelet_cert_file), "tls_private_key_file": str(pki.kubelet_key_file),
            "client_ca_file": str(pki.ca_file)}


APISERVER_NETNS = "apiserver"  # the API server's host on the lab network: <prefix>-apiserver


async def _create_lab(data_dir: Path, options: UpOptions, prefix: str) -> Any:
    from kubeletstub.netns import LabNetwork

    if os.geteuid() != 0:
        raise PermissionError(NETNS_NEEDS_ROOT)
    lab = LabNetwork(prefix, data_dir / "netns",
                     local_routes=[addressing.covering_cidr(options.lb_pool)] if options.lb_pool else [])
    await asyncio.to_thread(lab.create)
    return lab


class _Node:
    """One simulated node of the one-process cluster: its dataplane, and its kubelet stub and proxy agent,
    which can be paused (their tasks cancelled, as if the node lost the control plane) and resumed (new
    kubelet and proxy agent, as after a restart) while its namespaces and pods stay where they are."""

    def __init__(self, name: str, ip: str, pod_cidr: str, dataplane: Any, make: Callable[[_Node], tuple[Any, Any]]
                 ) -> None:
        self.name, self.ip, self.pod_cidr, self.dataplane = name, ip, pod_cidr, dataplane
        self._make = make
        self.kubelet: Any = None
        self.agent: Any = None
        self.tasks: list[asyncio.Task[None]] = []

    @property
    def running(self) -> bool:
        return any(not t.done() for t in self.tasks)

    def start(self, tg: asyncio.TaskGroup) -> None:
        self.kubelet, self.agent = self._make(self)
        self.tasks = [tg.create_task(self.kubelet.run(), name=f"kubelet-{self.name}"),
                      tg.create_task(self.agent.run(), name=f"proxy-{self.name}")]

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def _run_components(tg: asyncio.TaskGroup, options: UpOptions, api_socket: str, data_dir: Path,
                          state: dict[str, Any], lab: Any, timer: Timer,
                          ready: Callable[[dict[str, Any]], None] | None, clients: list[Any], *,
                          runtimes: list[Any], tokens: Any = None, root_ca: str | None = None, app: Any = None,
                          pki: Any = None) -> None:
    from kubelab.client import ApiClient
    from kubelab.client.queuemetrics import WorkQueueMetricsProvider
    from kubelab.metricsserver import MetricsServer
    from kubeletstub.dataplane import NetnsDataplane, RenderDataplane
    from proxyagent import SharedProxyInformers
    from proxyagent.metricserver import MetricsServer as ProxyMetricsServer

    from .build import (
        ControllersOptions,
        NodeOptions,
        SchedulerOptions,
        build_controllers,
        build_node,
        build_scheduler,
    )

    def client(agent: str) -> ApiClient:
        # Requests handed to the API server's app in this process (`app`), else aiohttp on the private socket:
        # httpx's pool re-scans its connections for each queued request, and in one process that was half
        # of `kubelab up`'s CPU under a burst; the sockets and HTTP parsing on both sides, most of the rest
        # of what was not the API server's own work (bench/up.py).
        api = ApiClient(PRIVATE_SERVER, uds=api_socket, token=tokens.for_component(agent) if tokens else None,
                        user_agent=f"kubelab-{agent}", fast_requests=True, app=app)
        clients.append(api)
        return api

    # Every node's proxy agent is a handler on one Service and one EndpointSlice informer (one watch and
    # one decode per change, not one per node); each keeps its own change tracking and syncs. They list and
    # watch as kube-proxy does, as system:kube-proxy (bound to system:node-proxier), not as the admin.
    proxy_informers = SharedProxyInformers(client("proxy"))
    tg.create_task(proxy_informers.run(), name="proxy-shared-informers")

    def make(node: _Node) -> tuple[Any, Any]:
        netns = node.dataplane.node_netns if lab is not None else None
        # The kubelet API on the node's address in its namespace; in render mode, whose nodes' addresses
        # exist nowhere, on a free loopback port each.
        node_options = NodeOptions(name=node.name, ip=node.ip, pod_cidr=node.pod_cidr, data_dir=data_dir,
                                   cpu=options.node_cpu, memory=options.node_memory, max_pods=options.node_max_pods,
                                   kubelet_port=addressing.KUBELET_PORT if lab is not None else 0,
                                   kubelet_address=None if lab is not None else "127.0.0.1",
                                   **_kubelet_server_tls(pki), apply_rules=lab is not None,
                                   proxy_mode=options.proxy_mode, min_sync_period=options.min_sync_period,
                                   delta_sync=options.delta_sync, rules_nice=defaults.UP_RULES_NICE)
        return build_node(client(f"kubelet-{node.name}"), client(f"proxy-{node.name}"), node_options, node.dataplane,
                          netns=netns, informers=proxy_informers)

    # Every component has its own metrics registry, served on a loopback port of its own (picked by the
    # kernel, recorded in cluster.json and printed by `kubelab status`); the API server's is its /metrics.
    metrics: dict[str, Any] = {"apiserver": f"{state['server']}/metrics", "proxy": {}}
    state["metrics"] = metrics

    async def serve_metrics(server: Any, task_name: str) -> str:
        await server.start()
        tg.create_task(server.serve_forever(), name=task_name)
        return f"http://{server.host}:{server.port}/metrics"

    # One line per component as it becomes ready, with the time since `kubelab up` started.
    announcements: list[asyncio.Task[None]] = []

    def announce(component: str, waits: list[Any], what: str | Callable[[], str] = "ready") -> None:
        async def wait() -> None:
            for awaitable in waits:
                await awaitable
            _log(component).info("%s [%s]", what() if callable(what) else what, timer)

        announcements.append(tg.create_task(wait(), name=f"{component}-ready"))

    # No leader election here (as `kubelab scheduler|controllers --leader-elect=false`): this process is the
    # one replica of everything in it, so there is nobody inside it to hand over to, and the API server
    # dies with it. A lease would only make a `kubelab up` restarted after a crash wait out its own dead
    # predecessor's lease (leaseDuration, 15 s: a new process is a new identity, as kube forms it) before
    # scheduling anything. Replicas of `kubelab scheduler`/`controllers` pointed at this cluster elect
    # among themselves; next to this unelected pair they are as safe as two schedulers already were (the
    # API server refuses a second binding).
    if not options.one_process:
        # A process of its own (launcher/upscheduler.py): its bindings' answers no longer wait for a turn of
        # this loop, which runs every node.
        from .upscheduler import SchedulerProcess

        def scheduler_changed() -> None:
            state["scheduler"] = scheduler.record()
            _write_state(data_dir, state)

        scheduler = SchedulerProcess(api_socket, tokens.for_component("scheduler") if tokens else None,
                                     on_change=scheduler_changed)
        metrics["scheduler"] = scheduler.metrics_url
        tg.create_task(scheduler.run(), name="scheduler-process")
        announce("scheduler", [scheduler.ready.wait()], lambda: f"ready (process {scheduler.pid})")
    else:
        the_scheduler = build_scheduler(client("scheduler"), SchedulerOptions())
        tg.create_task(the_scheduler.run(), name="scheduler")
        announce("scheduler", [the_scheduler.nodes.wait_synced(), the_scheduler.pods.wait_synced()])
        metrics["scheduler"] = await serve_metrics(
            MetricsServer("127.0.0.1", 0, registry=the_scheduler.metrics.registry, name="scheduler"),
            "scheduler-metrics")
    dns_listening = asyncio.Event()
    tg.create_task(_run_dns(client("dns"), state, data_dir, listening=dns_listening.set), name="clusterdns")
    announce("dns", [dns_listening.wait()], lambda: f"ready on {(state.get('dns') or {}).get('listen') or 'port 53'}")
    queue_metrics = WorkQueueMetricsProvider()
    controllers_synced = asyncio.Event()
    controllers_options = ControllersOptions(
        node_monitor_grace_period=options.node_monitor_grace_period, lb_pool=options.lb_pool, root_ca=root_ca,
        # the API server's key (ensure_service_account_key): legacy token Secrets
        service_account_private_key_file=str(data_dir / "pki" / pki_files.SERVICE_ACCOUNT_KEY))
    tg.create_task(build_controllers(client("controllers"), controllers_options, metrics=queue_metrics,
                                     ready=controllers_synced.set), name="controllers")
    announce("controllers", [controllers_synced.wait()])
    announce("serviceaccounts", [_default_account(client("controllers"))], "default/default ServiceAccount made")
    metrics["controllers"] = await serve_metrics(
        MetricsServer("127.0.0.1", 0, registry=queue_metrics.registry, name="controllers"), "controllers-metrics")

    def proxy_metrics_server(node: _Node) -> ProxyMetricsServer:
        """The node's current proxy agent (a resumed node has a new one) behind one listener."""
        return ProxyMetricsServer("127.0.0.1", 0, metrics=lambda: node.agent.metrics_text(),
                                  healthy=lambda: node.agent.is_healthy(),
                                  last_updated=lambda: node.agent.proxier.last_updated)

    nodes: dict[str, _Node] = {}
    if lab is None:
        from kubeletstub.dataplane import RENDER_NOTE

        _log("kubelet").info(RENDER_NOTE)
    for index in range(1, options.nodes + 1):
        name = addressing.node_name(index)
        ip, cidr = addressing.node_ip(index), addressing.node_pod_cidr(index)
        # The node's files (kubelet's /var/lib/kubelet/pods and /var/log/pods) under the data dir.
        root = data_dir / "nodes" / name
        dataplane = NetnsDataplane(lab, name, ip, cidr, root=root) if lab is not None else RenderDataplane(root)
        runtimes.append(dataplane.runtime)
        node = nodes[name] = _Node(name, ip, cidr, dataplane, make)
        node.start(tg)
        announce(name, [node.kubelet.registered.wait()], f"registered and Ready (InternalIP {ip}, pods {cidr})")
        state["nodes"][name] = {"ip": ip, "podCIDR": cidr, "netns": dataplane.node_netns,
                                "podLogs": str(dataplane.runtime.log_root)}
        metrics["proxy"][name] = await serve_metrics(proxy_metrics_server(node), f"proxy-{name}-metrics")
    _write_state(data_dir, state)
    control = await _serve_control(data_dir, nodes, tg)
    try:
        await asyncio.gather(*announcements)
        for node in nodes.values():
            await node.agent.synced.wait()
        _log("proxy").info("rules applied on every node [%s]", timer)
        if ready is not None:
            state["startup"] = str(timer)
            ready(state)
        await asyncio.Event().wait()  # run until cancelled
    finally:
        control.close()
        with contextlib.suppress(FileNotFoundError):
            (data_dir / CONTROL_SOCKET).unlink()
        for node in nodes.values():  # containers go before their namespaces (they would die with us anyway)
            with contextlib.suppress(Exception):
                await node.dataplane.runtime.close()


async def _default_account(api: Any) -> None:
    """Pods are admitted only once their namespace's `default` ServiceAccount exists (the ServiceAccount
    admission plugin): "up" waits for the one in `default`, so a first `kubectl run` (or a Job's first pod)
    is not refused while the ServiceAccounts controller is still starting."""
    from kubelab import kinds
    from kubelab.client import ApiError, NotFound

    while True:
        try:
            await api.get(kinds.SERVICEACCOUNTS, "default", "default")
            return
        except NotFound:
            await asyncio.sleep(0.1)
        except ApiError as exc:
            if exc.code < 500:  # a 5xx (etcd timing out on a loaded machine) passes: ask again
                raise
            await asyncio.sleep(0.5)


async def _run_dns(api: Any, state: dict[str, Any], data_dir: Path, *,
                   listening: Callable[[], None] | None = None) -> None:
    """Cluster DNS: in netns mode on 10.240.0.3:53 inside `<prefix>-dns`, behind the kube-dns Service;
    in render mode on a free loopback port (`dig @127.0.0.1 -p PORT`), recorded in cluster.json."""
    from clusterdns import DnsOptions
    from clusterdns import run as run_dns

    dns_state = state.get("dns") or {}
    if dns_state.get("netns"):
        options = DnsOptions(listen_host="0.0.0.0", listen_port=53, netns=dns_state["netns"],
                             advertise_ip=dns_state["ip"])
        # CoreDNS's :9153 inside the DNS namespace (`kubelab exec --data-dir D lab -- curl ...`).
        state.setdefault("metrics", {})["dns"] = f"http://{dns_state['ip']}:9153/metrics (netns {dns_state['netns']})"
        dns_state["listen"] = f"{dns_state['ip']}:53 in {dns_state['netns']}"
        await run_dns(api, options, listening=lambda _: listening() if listening is not None else None)
        return

    def bound(sockets: Any) -> None:
        state["dns"] = {"listen": f"127.0.0.1:{sockets.port}"}
        if sockets.metrics is not None:
            state.setdefault("metrics", {})["dns"] = f"http://127.0.0.1:{sockets.metrics.getsockname()[1]}/metrics"
        _write_state(data_dir, state)
        if listening is not None:
            listening()

    await run_dns(api, DnsOptions(listen_host="127.0.0.1", listen_port=0, metrics_port=0), listening=bound)


CONTROL_SOCKET = "control.sock"


async def _serve_control(data_dir: Path, nodes: dict[str, _Node], tg: asyncio.TaskGroup) -> asyncio.Server:
    """A unix socket in the data dir for `kubelab pause|resume NODE` and `kubelab status`: one command line
    in, one JSON line out."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            words = (await reader.readline()).decode().split()
            answer: dict[str, Any]
            if words[:1] == ["status"]:
                answer = {"ok": True, "nodes": {n: ("running" if node.running else "paused")
                                                for n, node in nodes.items()}}
            elif len(words) == 2 and words[0] in ("pause", "resume") and words[1] in nodes:
                node = nodes[words[1]]
                if words[0] == "pause" and node.running:
                    await node.stop()
                    _log(node.name).info("paused: kubelet stub and proxy agent stopped, pods left running")
                elif words[0] == "resume" and not node.running:
                    node.start(tg)
                    _log(node.name).info("resumed: a new kubelet stub and proxy agent started")
                answer = {"ok": True, "node": node.name, "state": "running" if node.running else "paused"}
            else:
                answer = {"ok": False, "error": f"unknown command {' '.join(words)!r}; nodes: {', '.join(nodes)}"}
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()
        finally:
            writer.close()

    path = data_dir / CONTROL_SOCKET
    path.unlink(missing_ok=True)
    return await asyncio.start_unix_server(handle, path=str(path))


def control(data_dir: Path, command: str, timeout: float = 30.0) -> dict[str, Any]:
    """Send one command to a running `kubelab up` (see _serve_control)."""
    import socket

    read_state(data_dir)  # a clear error when no cluster runs there
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(data_dir / CONTROL_SOCKET))
        sock.sendall(command.encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    result: dict[str, Any] = json.loads(data or b"{}")
    return result


# How long a stop may take before every thread's stack and every pending task is written to stderr (the
# process goes on stopping), and how long closing the loop waits for threads still busy in its executor.
STOP_REPORT_AFTER = 40.0
EXECUTOR_GRACE = 10.0


class _DefaultExecutor(concurrent.futures.ThreadPoolExecutor):
    """The loop's default executor (asyncio.to_thread), whose shutdown waits a bounded time. asyncio.run
    joins every worker thread when the loop closes, without a limit before Python 3.12; one thread stuck in
    work the cancelled components no longer wait for kept a stopped `kubelab up` alive until the test
    harness killed it. Queued work is dropped; threads still busy after the grace are named on the log,
    with their stacks, and left to the process's exit."""

    PREFIX = "kubelab-worker"

    def __init__(self, grace: float) -> None:
        super().__init__(thread_name_prefix=self.PREFIX)
        self.grace = grace

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(wait=False, cancel_futures=True)
        if not wait:
            return
        deadline = time.monotonic() + self.grace
        workers = [t for t in threading.enumerate() if t.name.startswith(self.PREFIX)]
        for thread in workers:
            thread.join(max(0.0, deadline - time.monotonic()))
        stuck = [t for t in workers if t.is_alive()]
        if stuck:
            frames = sys._current_frames()
            log.warning("%d worker thread(s) still busy %.0f s after the loop stopped; not waiting for them:\n%s",
                        len(stuck), self.grace, "\n".join(
                            f"{t.name}:\n" + "".join(traceback.format_stack(frames[t.ident]))
                            for t in stuck if t.ident in frames))


def _report_slow_stop(loop: asyncio.AbstractEventLoop) -> None:
    """From a timer thread: what a stop that takes too long is waiting for (diagnosis only)."""
    sys.stderr.write(f"still stopping after {STOP_REPORT_AFTER:.0f} s; every thread's stack follows\n")
    with contextlib.suppress(Exception):
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    with contextlib.suppress(Exception):
        for task in asyncio.all_tasks(loop):
            sys.stderr.write(f"pending {task!r}\n")
            for frame in task.get_stack(limit=4):
                sys.stderr.write("".join(traceback.format_stack(frame, limit=1)))
    sys.stderr.flush()


def run_until_interrupted(coro_factory: Callable[[], Any], *, fast_loop: bool = False,
                          logger: logging.Logger = log) -> int:
    """asyncio.run with Ctrl-C and SIGTERM turned into a clean cancellation (exit code 0). With
    `fast_loop`, on uvloop, as uvicorn runs the API server (the pure API clients: scheduler, controllers).
    Closing the loop waits at most EXECUTOR_GRACE for threads still busy (_DefaultExecutor); a stop still
    going after STOP_REPORT_AFTER writes what it waits for to stderr."""

    async def main() -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        loop.set_default_executor(_DefaultExecutor(EXECUTOR_GRACE))
        main_pid = os.getpid()

        def stop(sig: signal.Signals) -> None:
            if os.getpid() != main_pid:  # a forked helper inherited this handler; not ours to act on
                return
            logger.info("%s received: stopping", sig.name)
            if not task.cancelling():
                report = threading.Timer(STOP_REPORT_AFTER, _report_slow_stop, (loop,))
                report.daemon = True
                report.start()
            task.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop, sig)
        await coro_factory()

    try:
        if fast_loop:
            import uvloop
            uvloop.run(main())
        else:
            asyncio.run(main())
    except asyncio.CancelledError:
        return 0
    except KeyboardInterrupt:
        return 130
    return 0


def exit_now(code: int) -> NoReturn:
    """End the process once everything it made is gone, without the interpreter's own teardown. For
    `kubelab up` with 300 pods that teardown (its cyclic collector walking the heap of every component's
    caches, then each object freed one by one) took 9-16 s on a loaded machine after the cluster had
    stopped, and pushed Ctrl-C past the test harness's patience; the kernel frees the memory at once.
    What must reach the terminal is flushed first; children die with the process anyway
    (kubelab/processes.py)."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
