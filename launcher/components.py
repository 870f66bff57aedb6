"""The commands that run one component each: `kubelab apiserver`, `scheduler`, `controllers`, `dns` and
`node`. Each checks its flags, builds its component through build.py (as `kubelab up` does) and runs it
with componentrun.py."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubelab import addressing
from kubelab.gctune import tune_for_long_running

from .componentrun import check_bind_address, lead_or_run, metrics_server, run_client_component
from .flagvalues import server_list, serving_options, unreadable_etcd_files, warn_if_open

if TYPE_CHECKING:  # build.py (every component) is imported when a command runs, not by every command
    from .build import ApiServerOptions


def apiserver_options(args: argparse.Namespace) -> ApiServerOptions:
    """`kubelab apiserver`'s flags as build.ApiServerOptions (apiservers.argv writes them back)."""
    from .build import ApiServerOptions

    return ApiServerOptions(
        tuple(server_list(args.etcd_servers)), listen=args.listen, advertise_address=args.advertise_address or None,
        tls_cert_file=args.tls_cert_file or None, tls_private_key_file=args.tls_private_key_file or None,
        token_auth_file=args.token_auth_file or None, authorization_modes=args.authorization_mode,
        event_ttl=args.event_ttl, service_account_signing_key_file=args.service_account_signing_key_file or None,
        disable_admission_plugins=tuple(p for p in (args.disable_admission_plugins or "").split(",") if p),
        serving=serving_options(args), etcd_cafile=args.etcd_cafile or None, etcd_certfile=args.etcd_certfile or None,
        etcd_keyfile=args.etcd_keyfile or None, kubelet_client_certificate=args.kubelet_client_certificate or None,
        kubelet_client_key=args.kubelet_client_key or None,
        kubelet_certificate_authority=args.kubelet_certificate_authority or None,
        endpoint_reconciler_type=args.endpoint_reconciler_type, identity_hostname=args.identity_hostname or None)


def _inherited_listener(fd: int, port: int) -> socket.socket | str:
    """The TCP socket --listen-fd names, or why it cannot be served on."""
    try:
        listener = socket.socket(fileno=fd)
    except OSError as exc:
        return f"--listen-fd {fd}: {exc.strerror}"
    if listener.type != socket.SOCK_STREAM or listener.family not in (socket.AF_INET, socket.AF_INET6):
        listener.detach()
        return f"--listen-fd {fd}: not a TCP socket"
    bound = listener.getsockname()[1]
    if bound != port:
        listener.detach()
        return f"--listen-fd {fd} is bound to port {bound}, --listen says {port}: give --listen the socket's address"
    return listener


def cmd_apiserver(args: argparse.Namespace) -> int:
    from apiserver.app import create_app
    from apiserver.serving import api_server, raise_open_files_limit, uvicorn_config
    from kubelab.tokenfile import TokenFileError

    from .build import build_apiserver_config

    options = apiserver_options(args)
    if not options.etcd_servers:
        print("kubelab apiserver: --etcd-servers is required", file=sys.stderr)
        return 2
    host, port = options.host_port
    listener: socket.socket | None = None
    if args.listen_fd is not None:
        inherited = _inherited_listener(args.listen_fd, port)
        if isinstance(inherited, str):
            print(f"kubelab apiserver: {inherited}", file=sys.stderr)
            return 2
        listener = inherited
    if bool(options.tls_cert_file) != bool(options.tls_private_key_file):
        print("kubelab apiserver: --tls-cert-file and --tls-private-key-file go together", file=sys.stderr)
        return 2
    for path in (options.tls_cert_file, options.tls_private_key_file):
        if path and not os.access(path, os.R_OK):
            print(f"kubelab apiserver: cannot read {path}", file=sys.stderr)
            return 2
    if unreadable_etcd_files(args, "apiserver"):
        return 2
    disabled = options.disable_admission_plugins
    if set(disabled) - {"ServiceAccount"}:
        print(f"kubelab apiserver: --disable-admission-plugins: only ServiceAccount can be disabled, not "
              f"{','.join(sorted(set(disabled) - {'ServiceAccount'}))}", file=sys.stderr)
        return 2
    try:
        app = create_app(build_apiserver_config(options))
    except TokenFileError as exc:
        print(f"kubelab apiserver: {exc}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        print(f"kubelab apiserver: --service-account-signing-key-file: {exc}", file=sys.stderr)
        return 2
    warn_if_open(args.listen, args.token_auth_file)
    tune_for_long_running()
    raise_open_files_limit()
    # With a certificate the port serves HTTPS, as kube-apiserver's secure port does: kubectl sends
    # bearer tokens only over TLS (kubernetes/kubectl#744).
    # On an inherited socket (--listen-fd) it does not bind one: the parent holds the port across restarts.
    api_server(uvicorn_config(app, options=options.serving, host=host, port=port, ssl_certfile=options.tls_cert_file,
                              ssl_keyfile=options.tls_private_key_file, graceful_shutdown=None),
               options.serving).run(sockets=[listener] if listener is not None else None)
    return 0


def cmd_scheduler(args: argparse.Namespace) -> int:
    from kubelab import leaderelection as le
    from kubelab.metricsserver import serve
    from scheduler import Scheduler

    from .build import SchedulerOptions, build_scheduler

    if not check_bind_address(args):
        return 2

    async def run(api: Any, elector: Any) -> None:
        # Each term gets a fresh scheduler (its own informers, queue and cache), as kube-scheduler gets one
        # by exiting when it loses the lease; /metrics serves the current one's.
        current: list[Scheduler] = []

        async def lead() -> None:
            current[:] = [build_scheduler(api, SchedulerOptions(scoring=args.scoring))]
            await current[0].run()

        def exposition() -> bytes:
            from prometheus_client import generate_latest

            return generate_latest(current[0].metrics.registry) if current else b""

        async with asyncio.TaskGroup() as tg:
            tg.create_task(lead_or_run(elector, lead), name="scheduler")
            tg.create_task(serve(metrics_server(args, exposition=exposition)), name="scheduler-metrics")

    return run_client_component(args, run, lease=le.SCHEDULER_LEASE)


def cmd_controllers(args: argparse.Namespace) -> int:
    from kubelab import leaderelection as le
    from kubelab.client.queuemetrics import WorkQueueMetricsProvider
    from kubelab.metricsserver import serve

    from .build import ControllersOptions, build_controllers

    if not check_bind_address(args):
        return 2
    root_ca: str | None = None
    if args.root_ca_file:
        try:
            root_ca = Path(args.root_ca_file).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            print(f"kubelab controllers: --root-ca-file {args.root_ca_file}: {exc}", file=sys.stderr)
            return 2

    async def run(api: Any, elector: Any) -> None:
        provider = WorkQueueMetricsProvider()

        options = ControllersOptions(node_monitor_grace_period=args.node_monitor_grace_period,
                                     lb_pool=args.lb_pool or None, root_ca=root_ca,
                                     service_account_private_key_file=args.service_account_private_key_file,
                                     terminated_pod_gc_threshold=args.terminated_pod_gc_threshold)

        async def lead() -> None:  # a fresh set of controllers each term
            await build_controllers(api, options, metrics=provider)

        async with asyncio.TaskGroup() as tg:
            tg.create_task(lead_or_run(elector, lead), name="controllers")
            tg.create_task(serve(metrics_server(args, registry=provider.registry)), name="controllers-metrics")

    return run_client_component(args, run, lease=le.CONTROLLER_MANAGER_LEASE)


def cmd_dns(args: argparse.Namespace) -> int:
    """kubelab dns: cluster DNS as a process of its own (clusterdns/)."""
    from clusterdns import DnsOptions
    from clusterdns import run as run_dns

    from .runner import split_listen

    host, port = split_listen(args.listen)
    metrics = None if args.metrics_port < 0 else args.metrics_port
    options = DnsOptions(listen_host=host, listen_port=port, netns=args.netns, metrics_port=metrics,
                         advertise_ip=args.advertise_address, service_ip=args.service_ip, domain=args.cluster_domain)
    try:
        return run_client_component(args, lambda api: run_dns(api, options))
    except OSError as exc:
        print(f"kubelab dns: {exc}", file=sys.stderr)
        return 1


def cmd_node(args: argparse.Namespace) -> int:
    from proxyagent.metricserver import MetricsServer, split_bind_address

    from .build import NodeOptions, build_node

    index = args.index
    ip = args.node_ip or addressing.node_ip(index)
    cidr = args.pod_cidr or addressing.node_pod_cidr(index)
    metrics_address = None
    if args.metrics_bind_address:
        try:
            metrics_address = split_bind_address(args.metrics_bind_address)
        except ValueError as exc:
            print(f"kubelab node: --metrics-bind-address: {exc}", file=sys.stderr)
            return 2
    if args.dataplane == "host" and os.geteuid() != 0:
        print("kubelab node: --dataplane host needs root (it creates a network namespace and veth per pod); run "
              "it as root, e.g. in a privileged container, or use --dataplane render", file=sys.stderr)
        return 1

    async def run(api: Any) -> None:
        from kubeletstub.dataplane import RENDER_NOTE, NetnsDataplane, RenderDataplane, open_host_dataplane

        dataplane: NetnsDataplane | None = None
        if args.dataplane == "host":
            dataplane = await asyncio.to_thread(open_host_dataplane, Path(args.data_dir) / "netns", args.name, ip,
                                                cidr)
        else:
            logging.getLogger("kubelet").info(RENDER_NOTE)
        try:
            if dataplane is not None:
                await dataplane.start_node()  # a clear error before anything else starts
            await run_node(api, dataplane or RenderDataplane(Path(args.data_dir) / "nodes" / args.name))
        finally:
            if dataplane is not None:
                await asyncio.to_thread(dataplane.lab.destroy)  # pods' namespaces, veths, node routes

    async def run_node(api: Any, dataplane: Any) -> None:
        # The kubelet API: on the node's address where the node runs pods (host dataplane); in render mode
        # nothing runs and the node's address is nobody's, so only with an explicit --kubelet-port.
        port = args.kubelet_port if args.kubelet_port is not None else \
            (addressing.KUBELET_PORT if args.dataplane == "host" else None)
        options = NodeOptions(name=args.name, ip=ip, pod_cidr=cidr, data_dir=Path(args.data_dir), cpu=args.cpu,
                              memory=args.memory, max_pods=args.max_pods, kubelet_port=port,
                              kubelet_address=args.kubelet_address, tls_cert_file=args.tls_cert_file,
                              tls_private_key_file=args.tls_private_key_file, client_ca_file=args.client_ca_file,
                              cluster_cidr=args.cluster_cidr, apply_rules=args.iptables,
                              iptables_backend=args.iptables_backend, proxy_mode=args.proxy_mode,
                              min_sync_period=args.min_sync_period, sync_period=args.sync_period,
                              delta_sync=args.delta_sync)
        kubelet, agent = build_node(api, api, options, dataplane)
        async with asyncio.TaskGroup() as tg:
            tg.create_task(kubelet.run(), name="kubelet")
            tg.create_task(agent.run(), name="proxy")
            if metrics_address is not None:
                server = MetricsServer(*metrics_address, metrics=agent.metrics_text, healthy=agent.is_healthy,
                                       last_updated=lambda: agent.proxier.last_updated)
                try:
                    await server.start()
                except OSError as exc:  # kube-proxy too keeps proxying when its metrics port is taken
                    logging.getLogger("proxyagent").warning("proxy metrics not served on %s: %s",
                                                            args.metrics_bind_address, exc)
                else:
                    tg.create_task(server.serve_forever(), name="proxy-metrics")

    from kubeletstub.netlinkops import DataplaneError

    try:
        return run_client_component(args, run)
    except DataplaneError as exc:
        print(f"kubelab node: {exc}", file=sys.stderr)
        return 1
