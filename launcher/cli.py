"""The `kubelab` command line (the CLI contract of README.md and docs/ARCHITECTURE.md)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubelab import __version__, addressing
from kubelab.gctune import tune_for_long_running

# gRPC (under aetcd) logs a line at every fork() the netns dataplane makes; only its errors matter here.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

DEFAULT_DATA_DIR = ".kubelab"
SIGPIPE_EXIT = 141  # what a shell reports for a command killed by SIGPIPE (128 + 13)


def _setup_logging(verbose: bool) -> None:
    from kubelab import logs

    logs.setup(verbose)


def _servers(text: str | None) -> list[str]:
    return [s.strip() for s in (text or "").split(",") if s.strip()]


AUTHORIZATION_MODE_HELP = ("with --token-auth-file, kube-apiserver's authorizers in order, comma-separated: Node, RBAC, "
                           "AlwaysAllow, AlwaysDeny (default Node,RBAC, as kubeadm sets it; AlwaysAllow makes every "
                           "authenticated user a cluster-admin)")


def _authorization_modes(text: str) -> tuple[str, ...]:
    from apiserver.authz import parse_modes

    try:
        return parse_modes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# --- up ------------------------------------------------------------------------------------------

def cmd_up(args: argparse.Namespace) -> int:
    from .runner import UpOptions, exit_now, run_until_interrupted, up

    dataplane = args.dataplane or ("netns" if os.geteuid() == 0 else "render")
    options = UpOptions(nodes=args.nodes, listen=args.listen, etcd_servers=_servers(args.etcd_servers),
                        data_dir=Path(args.data_dir), dataplane=dataplane, min_sync_period=args.min_sync_period,
                        delta_sync=args.delta_sync, proxy_mode=args.proxy_mode, node_cpu=args.node_cpu, node_memory=args.node_memory,
                        node_max_pods=args.node_max_pods, node_monitor_grace_period=args.node_monitor_grace_period,
                        lb_pool=args.lb_pool or None, event_ttl=args.event_ttl, serving=_serving_options(args),
                        token_auth_file=Path(args.token_auth_file) if args.token_auth_file else None,
                        authorization_modes=args.authorization_mode, etcd_cafile=_path(args.etcd_cafile),
                        etcd_certfile=_path(args.etcd_certfile),
                        etcd_keyfile=_path(args.etcd_keyfile), apiservers=args.apiservers,
                        etcd_members=args.etcd_members)
    if _unreadable_etcd_files(args, "up"):
        return 2
    _warn_if_open(args.listen, args.token_auth_file)
    data_dir = Path(args.data_dir)

    def ready(state: dict[str, Any]) -> None:
        kubeconfig_path = state["kubeconfig"]
        # The command as the user typed it (`.venv/bin/kubelab` from `make up`), and --data-dir only if needed.
        kubelab = sys.argv[0] if os.path.basename(sys.argv[0]) == "kubelab" else "kubelab"
        at = "" if data_dir == Path(DEFAULT_DATA_DIR) else f" --data-dir {data_dir}"
        example = Path("examples/clusterip-svc.yaml")
        if example.exists():  # run from the repository, as the README's tour does
            target = "$(kubectl get svc clusterip-svc -o jsonpath='{.spec.clusterIP}'):5555"
            first = (f"  kubectl apply -f {example}      # a ClusterIP Service and three pods\n"
                     "  kubectl get pods,endpoints -o wide\n"
                     f"  {kubelab} iptables{at} -t nat node-1 | grep clusterip-svc      # node-1's proxy rules\n")
        else:
            target = "$(kubectl get svc web -o jsonpath='{.spec.clusterIP}'):5555"
            first = ("  kubectl create deployment web --image=nginx --replicas=3 --port=8080\n"
                     "  kubectl expose deployment web --port=5555 --target-port=8080\n"
                     f"  {kubelab} iptables{at} -t nat node-1 | grep default/web      # node-1's proxy rules\n")
        print(f"\nkubelab is up in {state.get('startup', '?')}: {args.nodes} nodes, dataplane {dataplane}, "
              f"API at {state['server']}\n"
              f"  kubeconfig: {kubeconfig_path}\n"
              f"  export KUBECONFIG={kubeconfig_path}\n"
              "Next, in another terminal:\n"
              "  kubectl get nodes -o wide\n" + first
              + (f"  {kubelab} exec{at} node-1 -- curl -s http://{target}      # real packets\n"
                 if dataplane == "netns" else "")
              + f"  {kubelab} status{at}\n"
              + (f"Token authentication is on ({args.token_auth_file}): the API serves HTTPS with a lab CA "
                 f"({state.get('ca')}), and the kubeconfig holds that CA and the admin's token.\n"
                 if args.token_auth_file else "")
              + "Ctrl-C stops everything and removes what kubelab created.\n", flush=True)

    from kubelab.tokenfile import TokenFileError

    tune_for_long_running()
    try:
        code = run_until_interrupted(lambda: up(options, ready=ready))
    except (PermissionError, RuntimeError, FileNotFoundError, TokenFileError) as exc:
        print(f"kubelab up: {exc}", file=sys.stderr)
        code = 1
    exit_now(code)  # everything `up` made is gone by now


def _path(text: str | None) -> Path | None:
    return Path(text) if text else None


def _unreadable_etcd_files(args: argparse.Namespace, command: str) -> bool:
    """--etcd-cafile/--etcd-certfile/--etcd-keyfile that cannot be read: said in one line each. The
    certificate and its key go together."""
    if bool(args.etcd_certfile) != bool(args.etcd_keyfile):
        print(f"kubelab {command}: --etcd-certfile and --etcd-keyfile go together", file=sys.stderr)
        return True
    unreadable = [p for p in (args.etcd_cafile, args.etcd_certfile, args.etcd_keyfile) if p and not os.access(p, os.R_OK)]
    for path in unreadable:
        print(f"kubelab {command}: cannot read {path}", file=sys.stderr)
    return bool(unreadable)


def _etcd_tls_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--etcd-cafile", metavar="FILE", help="SSL Certificate Authority file used to secure etcd "
                                                         "communication (https --etcd-servers)")
    p.add_argument("--etcd-certfile", metavar="FILE", help="SSL certification file used to secure etcd communication")
    p.add_argument("--etcd-keyfile", metavar="FILE", help="SSL key file used to secure etcd communication")


# --- one component per process -------------------------------------------------------------------

def cmd_apiserver(args: argparse.Namespace) -> int:
    from apiserver.app import Config, create_app
    from apiserver.serving import api_server, raise_open_files_limit, uvicorn_config

    from .runner import split_listen

    servers = _servers(args.etcd_servers)
    if not servers:
        print("kubelab apiserver: --etcd-servers is required", file=sys.stderr)
        return 2
    host, port = split_listen(args.listen)
    from kubelab.tokenfile import TokenFileError

    if bool(args.tls_cert_file) != bool(args.tls_private_key_file):
        print("kubelab apiserver: --tls-cert-file and --tls-private-key-file go together", file=sys.stderr)
        return 2
    for path in (args.tls_cert_file, args.tls_private_key_file):
        if path and not os.access(path, os.R_OK):
            print(f"kubelab apiserver: cannot read {path}", file=sys.stderr)
            return 2
    if _unreadable_etcd_files(args, "apiserver"):
        return 2
    disabled = tuple(p for p in (args.disable_admission_plugins or "").split(",") if p)
    if set(disabled) - {"ServiceAccount"}:
        print(f"kubelab apiserver: --disable-admission-plugins: only ServiceAccount can be disabled, not "
              f"{','.join(sorted(set(disabled) - {'ServiceAccount'}))}", file=sys.stderr)
        return 2
    try:
        app = create_app(Config(servers, advertise_ip=args.advertise_address or (host if host != "0.0.0.0" else "127.0.0.1"),
                                port=port, token_auth_file=args.token_auth_file, event_ttl=args.event_ttl,
                                authorization_modes=args.authorization_mode,
                                serving=_serving_options(args), etcd_cafile=args.etcd_cafile,
                                etcd_certfile=args.etcd_certfile, etcd_keyfile=args.etcd_keyfile,
                                service_account_key_file=args.service_account_signing_key_file,
                                disable_admission_plugins=disabled,
                                kubelet_client_certificate=args.kubelet_client_certificate,
                                kubelet_client_key=args.kubelet_client_key,
                                kubelet_certificate_authority=args.kubelet_certificate_authority,
                                identity_hostname=args.identity_hostname or None,
                                endpoint_reconciler_type=args.endpoint_reconciler_type))
    except TokenFileError as exc:
        print(f"kubelab apiserver: {exc}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        print(f"kubelab apiserver: --service-account-signing-key-file: {exc}", file=sys.stderr)
        return 2
    _warn_if_open(args.listen, args.token_auth_file)
    tune_for_long_running()
    raise_open_files_limit()
    # With a certificate the port serves HTTPS, as kube-apiserver's secure port does: kubectl sends
    # bearer tokens only over TLS (kubernetes/kubectl#744).
    options = _serving_options(args)
    api_server(uvicorn_config(app, options=options, host=host, port=port, ssl_certfile=args.tls_cert_file or None,
                              ssl_keyfile=args.tls_private_key_file or None, graceful_shutdown=None), options).run()
    return 0


def _add_serving_flags(p: argparse.ArgumentParser) -> None:
    """kube-apiserver's flags for the limits that keep one client from taking the server (apiserver/serving.py, flowcontrol.py)."""
    p.add_argument("--request-timeout", type=_duration_seconds, default="1m0s", metavar="DURATION",
                   help="answer a request that is not a watch with 504 Timeout after this long (default 1m0s)")
    p.add_argument("--max-requests-inflight", type=_non_negative, default=400, metavar="N",
                   help="at most N reads (get, list) at once, then 429 with Retry-After: 1; watches do not count "
                        "(default 400; 0: no limit)")
    p.add_argument("--max-mutating-requests-inflight", type=_non_negative, default=200, metavar="N",
                   help="at most N writes at once, then 429 with Retry-After: 1 (default 200; 0: no limit)")


def _serving_options(args: argparse.Namespace) -> Any:
    from apiserver.serving import ServingOptions

    return ServingOptions(request_timeout=args.request_timeout, max_requests_inflight=args.max_requests_inflight,
                          max_mutating_requests_inflight=args.max_mutating_requests_inflight)


def _duration_seconds(text: str) -> float:
    """A positive Go duration (`1m0s`, `90s`), in seconds."""
    from kubelab.timeutil import parse_duration

    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text}")
    return seconds


def _non_negative(text: str) -> int:
    from kubelab.validation import is_ascii_digits

    if not is_ascii_digits(text):
        raise argparse.ArgumentTypeError(f"not a non-negative integer: {text!r}")
    return int(text)


def _positive(text: str) -> int:
    from kubelab.validation import is_ascii_digits

    if not is_ascii_digits(text) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a positive integer: {text!r}")
    return int(text)


def _event_ttl(text: str) -> int:
    """--event-ttl: a duration, kept as whole seconds (etcd leases are), at least one."""
    return max(1, round(_duration_seconds(text)))


def _cluster_access(args: argparse.Namespace, command: str) -> tuple[str, str | None, str | None] | None:
    """--server when given, else the cluster `kubelab up` runs in --data-dir: (server, token, CA file).
    None (after saying why) when there is no such cluster."""
    if args.server is not None:
        return str(args.server), None, None
    from kubelab.kubeconfig import token_of

    from .runner import read_state

    try:
        state = read_state(Path(args.data_dir))
    except FileNotFoundError as exc:
        print(f"kubelab {command}: {exc}", file=sys.stderr)
        return None
    return str(state["server"]), token_of(Path(state["kubeconfig"])), state.get("ca")


def _verify(ca_file: str | None) -> Any:
    """httpx's `verify` for a cluster: its own CA when it has one (`kubelab up` with tokens), else the system's."""
    import ssl

    return ssl.create_default_context(cafile=ca_file) if ca_file else True


def _token(args: argparse.Namespace) -> str | None:
    """The bearer token a component sends: --token, or the content of --token-file."""
    from kubelab.tokenfile import read_token

    if getattr(args, "token_file", None):
        return read_token(args.token_file)
    return getattr(args, "token", None) or None


def _warn_if_open(listen: str, token_auth_file: str | None) -> None:
    """The API binds to loopback unless told otherwise; told otherwise without tokens, say what it means."""
    from .runner import split_listen

    host, _ = split_listen(listen)
    if not token_auth_file and host not in ("127.0.0.1", "localhost", "::1"):
        logging.getLogger("kubelab").warning(
            "the API server listens on %s without authentication: whoever reaches it is cluster-admin "
            "(give it --token-auth-file)", host)


def _run_client_component(args: argparse.Namespace, make: Any, *, lease: str | None = None) -> int:
    """Run `make(api)` against --server; with a `lease` name (the scheduler, the controllers), `make(api,
    elector)`, the elector None under --leader-elect=false."""
    from kubelab.client import ApiClient
    from kubelab.tokenfile import TokenFileError

    from .runner import run_until_interrupted

    try:
        token = _token(args)
    except TokenFileError as exc:
        print(f"kubelab {args.command}: {exc}", file=sys.stderr)
        return 2
    ca_file = getattr(args, "certificate_authority", None)
    if ca_file:
        import ssl

        try:
            ssl.create_default_context(cafile=ca_file)
        except (OSError, ssl.SSLError) as exc:
            print(f"kubelab {args.command}: --certificate-authority {ca_file}: {exc}", file=sys.stderr)
            return 2
    if lease is not None and args.leader_elect:
        from kubelab.leaderelection import config_errors

        problems = config_errors(args.leader_elect_lease_duration, args.leader_elect_renew_deadline,
                                 args.leader_elect_retry_period)
        if problems:
            print(f"kubelab {args.command}: --leader-elect-*: {'; '.join(problems)}", file=sys.stderr)
            return 2

    tune_for_long_running()

    async def main() -> None:
        # A node's user agent names the node, so `kubelab trace` tells its watch deliveries apart.
        agent = f"kubelab-{args.command}" + (f"-{args.name}" if args.command == "node" else "")
        elector = None
        closing = []
        if lease is not None and args.leader_elect:
            from kubelab import leaderelection as le

            # The Lease gets a client of its own, as kube's components give leader election its own REST
            # config ("leader-election" in its user agent, a timeout of half the renew deadline): the
            # component's client has the elector's check as its write fence, which the Lease's own
            # writes must not pass through, and a Lease write stuck behind the component's requests
            # would cost the lease.
            election_api = ApiClient(args.server, token=token, user_agent=f"{agent}/leader-election",
                                     ca_file=ca_file, timeout=args.leader_elect_renew_deadline / 2)
            closing.append(election_api)
            elector = le.LeaderElector(election_api, le.Config(
                args.leader_elect_resource_namespace, args.leader_elect_resource_name, le.new_identity(),
                lease_duration=args.leader_elect_lease_duration, renew_deadline=args.leader_elect_renew_deadline,
                retry_period=args.leader_elect_retry_period))
        api = ApiClient(args.server, token=token, user_agent=agent, fast_requests=args.command == "scheduler",
                        ca_file=ca_file, write_fence=elector.check if elector is not None else None)
        closing.append(api)
        try:
            await (make(api, elector) if lease is not None else make(api))
        finally:
            for client in closing:
                await client.close()

    # The scheduler and the controllers only talk to the API: uvloop's loop costs them less per request
    # and per watch event (scheduler CPU per scheduled pod at 5000 nodes: 0.67 -> 0.59 ms).
    return run_until_interrupted(main, fast_loop=args.command in ("scheduler", "controllers"))


async def _lead_or_run(elector: Any, lead: Any) -> None:
    """`lead()` whenever this replica holds the Lease (a fresh call each term), or at once without election."""
    if elector is None:
        await lead()
    else:
        await elector.campaign(lead)


def _metrics_server(args: argparse.Namespace, *, registry: Any = None, exposition: Any = None) -> Any:
    """The component's --metrics-bind-address listener (None when empty)."""
    from kubelab.metricsserver import MetricsServer, split_bind_address

    if not args.metrics_bind_address:
        return None
    host, port = split_bind_address(args.metrics_bind_address)
    return MetricsServer(host, port, registry=registry, exposition=exposition, name=args.command)


def _check_bind_address(args: argparse.Namespace) -> bool:
    from kubelab.metricsserver import split_bind_address

    try:
        if args.metrics_bind_address:
            split_bind_address(args.metrics_bind_address)
    except ValueError as exc:
        print(f"kubelab {args.command}: --metrics-bind-address: {exc}", file=sys.stderr)
        return False
    return True


def cmd_scheduler(args: argparse.Namespace) -> int:
    from kubelab import leaderelection as le
    from kubelab.metricsserver import serve
    from scheduler import Scheduler

    if not _check_bind_address(args):
        return 2

    async def run(api: Any, elector: Any) -> None:
        # Each term gets a fresh scheduler (its own informers, queue and cache), as kube-scheduler gets one
        # by exiting when it loses the lease; /metrics serves the current one's.
        current: list[Scheduler] = []

        async def lead() -> None:
            current[:] = [Scheduler(api, strategy=args.scoring)]
            await current[0].run()

        def exposition() -> bytes:
            from prometheus_client import generate_latest

            return generate_latest(current[0].metrics.registry) if current else b""

        async with asyncio.TaskGroup() as tg:
            tg.create_task(_lead_or_run(elector, lead), name="scheduler")
            tg.create_task(serve(_metrics_server(args, exposition=exposition)), name="scheduler-metrics")

    return _run_client_component(args, run, lease=le.SCHEDULER_LEASE)


def cmd_controllers(args: argparse.Namespace) -> int:
    import controllers
    from kubelab import leaderelection as le
    from kubelab.client.queuemetrics import WorkQueueMetricsProvider
    from kubelab.metricsserver import serve

    if not _check_bind_address(args):
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

        async def lead() -> None:  # a fresh set of controllers each term
            await controllers.run(api, node_monitor_grace_period=args.node_monitor_grace_period,
                                  lb_pool=args.lb_pool or None, metrics=provider, root_ca=root_ca,
                                  service_account_private_key_file=args.service_account_private_key_file,
                                  terminated_pod_gc_threshold=args.terminated_pod_gc_threshold)

        async with asyncio.TaskGroup() as tg:
            tg.create_task(_lead_or_run(elector, lead), name="controllers")
            tg.create_task(serve(_metrics_server(args, registry=provider.registry)), name="controllers-metrics")

    return _run_client_component(args, run, lease=le.CONTROLLER_MANAGER_LEASE)


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
        return _run_client_component(args, lambda api: run_dns(api, options))
    except OSError as exc:
        print(f"kubelab dns: {exc}", file=sys.stderr)
        return 1


def cmd_node(args: argparse.Namespace) -> int:
    from kubeletstub.kubelet import Kubelet
    from kubeletstub.node import NodeConfig
    from proxyagent import ProxyAgent, ProxyConfig
    from proxyagent.apply import IptablesApplier, RecordingApplier
    from proxyagent.metricserver import MetricsServer, split_bind_address
    from proxyagent.nftables.libnft import nft_applier

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
        config = NodeConfig(name=args.name, ip=ip, pod_cidr=cidr, cpu=args.cpu, memory=args.memory,
                            max_pods=args.max_pods, kubelet_port=port, kubelet_address=args.kubelet_address,
                            log_root=str(Path(args.data_dir) / "nodes" / args.name / "log" / "pods"),
                            tls_cert_file=args.tls_cert_file, tls_private_key_file=args.tls_private_key_file,
                            client_ca_file=args.client_ca_file)
        applier = IptablesApplier(None, backend=args.iptables_backend) if args.iptables else RecordingApplier()
        nftables = args.proxy_mode == "nftables"
        rules_file = "nftables.rules" if nftables else "iptables.rules"
        agent = ProxyAgent(api, ProxyConfig(node_name=args.name, node_ips=(ip,), cluster_cidr=args.cluster_cidr),
                           applier, min_sync_period=args.min_sync_period, sync_period=args.sync_period,
                           delta_sync=args.delta_sync, state_file=Path(args.data_dir) / "nodes" / args.name / rules_file,
                           proxy_mode=args.proxy_mode, nft=nft_applier(None, library=nftables) if args.iptables else None,
                           health_checks=args.iptables)  # the health-check NodePorts, on this host's addresses
        async with asyncio.TaskGroup() as tg:
            tg.create_task(Kubelet(api, config, dataplane).run(), name="kubelet")
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
        return _run_client_component(args, run)
    except DataplaneError as exc:
        print(f"kubelab node: {exc}", file=sys.stderr)
        return 1


# --- tools ---------------------------------------------------------------------------------------

def cmd_exec(args: argparse.Namespace) -> int:
    from .runner import read_state

    command = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print("kubelab exec: no command given (kubelab exec NODE -- CMD...)", file=sys.stderr)
        return 2
    try:
        state = read_state(Path(args.data_dir))
    except FileNotFoundError as exc:
        print(f"kubelab exec: {exc}", file=sys.stderr)
        return 1
    if state.get("dataplane") != "netns":
        print("kubelab exec: the cluster runs with --dataplane render; there are no namespaces to enter "
              "(start it as root with --dataplane netns)", file=sys.stderr)
        return 1
    target = args.target
    netns = None
    if target in state["nodes"]:
        netns = state["nodes"][target]["netns"]
    elif target == "lab":
        netns = state.get("lab")
    elif target == "client" and state.get("client"):
        netns = state["client"]["netns"]
    elif target == "apiserver" and state.get("apiserver"):
        netns = state["apiserver"]["netns"]
    else:
        from kubeletstub.netlinkops import DataplaneError
        from kubeletstub.netnsstate import lookup_netns

        pod_key = target if "/" in target else f"default/{target.removeprefix('pod/')}"
        for node in state["nodes"]:
            try:
                netns = lookup_netns(Path(args.data_dir) / "netns", node, pod_key=pod_key,
                                     prefix=state.get("netnsPrefix"))
                break
            except DataplaneError:
                continue
    if netns is None:
        print(f"kubelab exec: no node or pod {target!r} (nodes: {', '.join(state['nodes'])})", file=sys.stderr)
        return 1
    os.execvp("ip", ["ip", "netns", "exec", netns, *command])
    return 0  # pragma: no cover - execvp does not return


def cmd_pause_resume(args: argparse.Namespace) -> int:
    from .runner import control

    try:
        answer = control(Path(args.data_dir), f"{args.command} {args.node}")
    except (FileNotFoundError, ConnectionError, OSError) as exc:
        print(f"kubelab {args.command}: {exc}", file=sys.stderr)
        return 1
    if not answer.get("ok"):
        print(f"kubelab {args.command}: {answer.get('error')}", file=sys.stderr)
        return 1
    print(f"{answer['node']}: {answer['state']}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    import httpx

    from .runner import _pid_alive, control, read_state

    try:
        state = read_state(Path(args.data_dir))
    except FileNotFoundError as exc:
        print(f"kubelab status: {exc}", file=sys.stderr)
        return 1
    if not _pid_alive(int(state["pid"])):
        print(f"kubelab status: the cluster in {args.data_dir} is not running (pid {state['pid']} has exited without "
              f"cleaning up); `kubelab up --data-dir {args.data_dir}` starts a new one and removes what is left",
              file=sys.stderr)
        return 1
    print(f"cluster     pid {state['pid']}, dataplane {state['dataplane']}, kubeconfig {state['kubeconfig']}")
    print(f"etcd        {', '.join(state['etcd'])}")
    from kubelab.kubeconfig import token_of

    token = token_of(Path(state["kubeconfig"]))
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    verify = _verify(state.get("ca"))  # a cluster with tokens serves HTTPS with its own CA
    try:
        ready = httpx.get(f"{state['server']}/readyz", timeout=5, verify=verify)
        print(f"apiserver   {state['server']} ({'ready' if ready.status_code == 200 else 'NOT ready: ' + ready.text})")
        nodes = httpx.get(f"{state['server']}/api/v1/nodes", timeout=5, headers=auth, verify=verify).json().get(
            "items", [])
        pods = httpx.get(f"{state['server']}/api/v1/pods", timeout=5, headers=auth, verify=verify).json().get(
            "items", [])
    except httpx.HTTPError as exc:
        print(f"apiserver   {state['server']} (unreachable: {exc})")
        return 1
    for other in (state.get("servers") or [])[1:]:  # `kubelab up --apiservers N`: the others on the same etcd
        try:
            answer = httpx.get(f"{other}/readyz", timeout=5, verify=verify)
            print(f"apiserver   {other} ({'ready' if answer.status_code == 200 else 'NOT ready: ' + answer.text})")
        except httpx.HTTPError as exc:
            print(f"apiserver   {other} (unreachable: {exc})")
    dns = state.get("dns") or {}
    if dns.get("listen"):
        print(f"dns         {dns['listen']} (kube-system/kube-dns {addressing.CLUSTER_DNS_IP})")
    on_node: dict[str, int] = {}
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name:
            on_node[node_name] = on_node.get(node_name, 0) + 1
    try:
        agents = control(Path(args.data_dir), "status").get("nodes", {})
    except OSError:
        agents = {}
    for node in nodes:
        name = node["metadata"]["name"]
        node_ready = next((c["status"] for c in node.get("status", {}).get("conditions", [])
                           if c["type"] == "Ready"), "?")
        where = state["nodes"].get(name, {})
        print(f"{name:<11} Ready={node_ready} ip {where.get('ip', '?')} pods {where.get('podCIDR', '?')}"
              f"{' netns ' + where['netns'] if where.get('netns') else ''}, kubelet+proxy {agents.get(name, '?')}, "
              f"{on_node.get(name, 0)} pods")
    metrics = state.get("metrics") or {}
    if metrics:
        print("metrics")
        for component in ("apiserver", "scheduler", "controllers", "dns"):
            if metrics.get(component):
                print(f"  {component:<17} {metrics[component]}")
        for node, url in sorted((metrics.get("proxy") or {}).items()):
            print(f"  {'proxy ' + node:<17} {url}")
    print(f"export KUBECONFIG={state['kubeconfig']}")
    return 0


def _running_node(command: str, args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The running cluster's state and the record of node `args.node`, or None after saying why not."""
    from .runner import read_state

    try:
        state = read_state(Path(args.data_dir))
    except FileNotFoundError as exc:
        print(f"kubelab {command}: {exc}", file=sys.stderr)
        return None
    node = state["nodes"].get(args.node)
    if node is None:
        print(f"kubelab {command}: no node {args.node!r} (nodes: {', '.join(state['nodes'])})", file=sys.stderr)
        return None
    return state, node


def cmd_iptables(args: argparse.Namespace) -> int:
    found = _running_node("iptables", args)
    if found is None:
        return 1
    state, node = found
    data_dir = Path(args.data_dir)
    if state.get("dataplane") == "netns":
        argv = ["ip", "netns", "exec", node["netns"], "iptables-save"]
        if args.table:
            argv += ["-t", args.table]
        return subprocess.call(argv)
    from proxyagent.canonical import canonical_sort

    path = data_dir / "nodes" / args.node / "iptables.rules"
    if not path.exists():
        print(f"kubelab iptables: node {args.node} has not synced yet", file=sys.stderr)
        return 1
    text = canonical_sort(path.read_text())
    if args.table:
        text = _one_table(text, args.table)
    sys.stdout.write(text)
    return 0


def cmd_nftables(args: argparse.Namespace) -> int:
    """kubelab nftables NODE: `nft list table ip kube-proxy` in the node's namespace (netns lab), or
    the table the node's agent last left, as its model dumps it (render mode). Nodes whose agents
    run in iptables mode have no such table."""
    found = _running_node("nftables", args)
    if found is None:
        return 1
    state, node = found
    data_dir = Path(args.data_dir)
    if state.get("dataplane") == "netns":
        return subprocess.call(["ip", "netns", "exec", node["netns"], "nft", "list", "table", "ip", "kube-proxy"])
    path = data_dir / "nodes" / args.node / "nftables.rules"
    if not path.exists():
        print(f"kubelab nftables: node {args.node} has no nftables table (not synced yet, or its agent runs in "
              "iptables mode: `kubelab up --proxy-mode nftables`)", file=sys.stderr)
        return 1
    sys.stdout.write(path.read_text())
    return 0


def _one_table(text: str, table: str) -> str:
    out, keep = [], False
    for line in text.splitlines(keepends=True):
        if line.startswith("*"):
            keep = line.strip() == f"*{table}"
        if keep:
            out.append(line)
        if line.strip() == "COMMIT":
            keep = False
    return "".join(out)


def cmd_proxy_render(args: argparse.Namespace) -> int:
    from kubelab.manifests import ManifestError, load_objects, pick_family
    from proxyagent import ProxyConfig, render
    from proxyagent.apply import chains_of
    from proxyagent.canonical import canonical_sort
    from proxyagent.serviceports import IPFamily

    def fail(message: str) -> int:
        print(f"kubelab proxy render: {message}", file=sys.stderr)
        return 1

    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
        services, slices = load_objects(text)
        existing = chains_of(Path(args.existing_rules).read_text(), "nat") if args.existing_rules else frozenset()
        family: IPFamily = "IPv6" if args.ipv6 else "IPv4"
        # kube-proxy takes one CIDR per family from a dual-stack --cluster-cidr list.
        cluster_cidr = pick_family(args.cluster_cidr, family) if args.cluster_cidr else None
        if args.cluster_cidr and cluster_cidr is None:
            return fail(f"--cluster-cidr {args.cluster_cidr!r} has no valid {family} CIDR")
    except (OSError, ManifestError) as exc:
        return fail(str(exc))
    if not 0 <= args.masquerade_bit <= 31:
        return fail(f"--masquerade-bit must be within 0..31, not {args.masquerade_bit}")
    config = ProxyConfig(
        node_name=args.node_name, node_ips=tuple(args.node_ip or ()), cluster_cidr=cluster_cidr,
        masquerade_all=args.masquerade_all, masquerade_bit=args.masquerade_bit, random_fully=args.random_fully,
        localhost_nodeports=args.iptables_localhost_nodeports, nfacct=args.nfacct,
        conntrack_tcp_be_liberal=args.conntrack_tcp_be_liberal,
        nodeport_addresses=tuple(a.strip() for a in (args.nodeport_addresses or "").split(",") if a.strip()),
        ip_family=family)
    services, slices = _screened(services, slices)
    if args.proxy_mode == "nftables":
        return _proxy_render_nft(args, text, services, slices, config, fail)
    changed = set(args.changed) if args.changed is not None else None
    payload = render(services, slices, config, changed=changed, existing_nat_chains=existing).text
    sys.stdout.write(canonical_sort(payload) if args.sort else payload)
    return 0


def _screened(services: list[Any], slices: list[Any]) -> tuple[list[Any], list[Any]]:
    """What the API server would have refused never reaches the payload (proxyagent/screening.py, as the
    agent does): iptables-restore and nft take a payload whole, so one bad name would leave every Service
    without rules, and a name with a newline could inject a rule. Each object left out is named on stderr."""
    from proxyagent.screening import service_problems, slice_problems

    def screened(kind: str, objs: list[Any], problems: Callable[[Any], list[str]]) -> list[Any]:
        kept = []
        for obj in objs:
            found = problems(obj)
            if found:
                print(f"kubelab proxy render: left out {kind} {obj.namespace}/{obj.name}: {found[0]}", file=sys.stderr)
            else:
                kept.append(obj)
        return kept

    return screened("Service", services, service_problems), screened("EndpointSlice", slices, slice_problems)


def _proxy_render_nft(args: argparse.Namespace, text: str, services: list[Any], slices: list[Any], config: Any,
                      fail: Callable[[str], int]) -> int:
    """`kubelab proxy render --proxy-mode nftables`: the first transaction a fresh kube-proxy in
    nftables mode sends for these objects, as `nft -f` input; with --sort, the table it leaves in
    knftables' dump order (the order upstream's tests compare in)."""
    from kubelab.manifests import ManifestError, service_cidrs_in
    from proxyagent.nftables import NftConfig, apply_transaction, render_nft

    if args.changed is not None or args.existing_rules:
        return fail("--changed and --existing-rules are iptables-mode flags (an nftables partial sync needs the "
                    "previous sync's elements)")
    try:
        service_cidrs = service_cidrs_in(text)
    except ManifestError as exc:
        return fail(str(exc))
    # kube-proxy defaults --nodeport-addresses to "primary" in nftables mode (platformApplyDefaults).
    nft_config = NftConfig(
        node_name=config.node_name, node_ips=config.node_ips, cluster_cidr=config.cluster_cidr,
        masquerade_all=config.masquerade_all, masquerade_bit=config.masquerade_bit,
        nodeport_addresses=config.nodeport_addresses or ("primary",), service_cidrs=tuple(service_cidrs),
        ip_family=config.ip_family)
    transaction = render_nft(services, slices, nft_config, first_sync=True).text
    if args.sort:
        family = "ip6" if config.ip_family == "IPv6" else "ip"
        transaction = apply_transaction(None, transaction, family=family).dump()
    sys.stdout.write(transaction)
    return 0
def cmd_ui(args: argparse.Namespace) -> int:
    """kubelab ui: the page of kubelab/ui/server.py for the cluster in --data-dir."""
    from kubelab.client import ApiClient
    from kubelab.ui.server import serve

    from .runner import read_state, run_until_interrupted

    try:
        host, port_number = addressing.split_host_port(args.listen, default_host="")
    except ValueError:
        host, port_number = "", 0
    if not host:
        print(f"kubelab ui: --listen wants HOST:PORT, got {args.listen!r}", file=sys.stderr)
        return 2
    port = str(port_number)
    access = _cluster_access(argparse.Namespace(server=None, data_dir=args.data_dir), "ui")
    if access is None:
        return 1
    server, token, ca = access
    state = read_state(Path(args.data_dir))

    def ready(bound: int) -> None:
        print(f"kubelab ui: http://{host}:{bound}/", flush=True)

    async def main() -> None:
        api = ApiClient(server, token=token, user_agent="kubelab-ui", ca_file=ca)
        try:
            await serve(api, state=state, data_dir=Path(args.data_dir), host=host, port=int(port), on_ready=ready)
        finally:
            await api.close()

    return run_until_interrupted(main)


def cmd_trace(args: argparse.Namespace) -> int:
    """kubelab trace KIND/NAME: the latest change of an object, step by step (kubelab/tracing.py)."""
    import httpx

    from kubelab import tracing

    kind, _, name = args.object.partition("/")
    rt = tracing.resolve(kind) if name else None
    if rt is None:
        print(f"kubelab trace: expected KIND/NAME (e.g. service/web, pod/api-1), got {args.object!r}", file=sys.stderr)
        return 2
    access = _cluster_access(args, "trace")
    if access is None:
        return 1
    server, token, ca = access
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    key = tracing.storage_key(rt, args.namespace, name)
    try:
        resp = httpx.get(f"{server}{tracing.PATH}", params={"key": key}, headers=headers, timeout=10,
                         verify=_verify(ca))
    except httpx.HTTPError as exc:
        print(f"kubelab trace: {server}: {exc}", file=sys.stderr)
        return 1
    if resp.status_code != 200:
        print(f"kubelab trace: {resp.status_code} {resp.text}", file=sys.stderr)
        return 1
    result = resp.json()
    if args.output == "json":
        import json
        print(json.dumps(result, indent=2))
    else:
        print(tracing.render(result), end="")
    return 0 if result.get("found") else 1


def cmd_explain(args: argparse.Namespace) -> int:
    """kubelab explain pod NAME: every node's filter verdict and scores for one pod (scheduler/explain.py)."""
    import httpx

    from kubelab import kinds
    from kubelab.client import ApiClient, ApiError
    from scheduler.explain import explain, render

    access = _cluster_access(args, "explain")
    if access is None:
        return 1
    server, token, ca = access

    async def fetch() -> tuple[Any, list[Any], list[Any]]:
        async with ApiClient(server, token=token, user_agent="kubelab-explain", ca_file=ca) as api:
            pod = await api.get(kinds.PODS, args.name, args.namespace)
            nodes, _ = await api.list(kinds.NODES)
            pods, _ = await api.list(kinds.PODS, field_selector="status.phase!=Succeeded,status.phase!=Failed")
            return pod, nodes, pods

    try:
        pod, nodes, pods = asyncio.run(fetch())
    except ApiError as exc:
        print(f"kubelab explain: {exc.message}", file=sys.stderr)
        return 1
    except httpx.HTTPError as exc:
        print(f"kubelab explain: cannot reach the API server at {server}: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(render(explain(pod, nodes, pods, strategy=args.scoring)))
    return 0


# --- parser --------------------------------------------------------------------------------------

def _host_port(text: str) -> str:
    """argparse type of --listen: refused at parse time with argparse's usage error, not a traceback later."""
    try:
        addressing.split_host_port(text, default_host="")
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT (a port 0-65535)") from None
    return text


def _token_args(p: argparse.ArgumentParser) -> None:
    who = p.add_mutually_exclusive_group()
    who.add_argument("--token", help="bearer token to present to the API server (one of its --token-auth-file)")
    who.add_argument("--token-file", metavar="PATH", help="read the bearer token from this file")
    p.add_argument("--certificate-authority", metavar="FILE",
                   help="check an https --server's certificate against this CA bundle (default: the system's)")


def flag_bool(text: str) -> bool:
    """Go's strconv.ParseBool, as kube's components take boolean flags (--flag=false)."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {text!r}")


def _duration(text: str) -> float:
    """A Go duration flag (`15s`, `1m`, or bare seconds)."""
    from kubelab.timeutil import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _leader_election_args(p: argparse.ArgumentParser, lease: str) -> None:
    """kube-scheduler's and kube-controller-manager's --leader-elect-* flags (component-base's
    LeaderElectionConfiguration), with their defaults."""
    from kubelab import leaderelection as le

    p.add_argument("--leader-elect", type=flag_bool, nargs="?", const=True, default=True, metavar="BOOL",
                   help="campaign for a Lease and act only while holding it, so several replicas can run "
                        "(default true, as kube; --leader-elect=false acts at once, alone)")
    p.add_argument("--leader-elect-lease-duration", type=_duration, default=le.DEFAULT_LEASE_DURATION,
                   metavar="DURATION", help="how long a standby waits, after the Lease last changed, before "
                                            "taking it over (default 15s)")
    p.add_argument("--leader-elect-renew-deadline", type=_duration, default=le.DEFAULT_RENEW_DEADLINE,
                   metavar="DURATION", help="how long the leader keeps acting without a successful renewal "
                                            "(default 10s; less than the lease duration)")
    p.add_argument("--leader-elect-retry-period", type=_duration, default=le.DEFAULT_RETRY_PERIOD,
                   metavar="DURATION", help="between tries to acquire or renew (default 2s)")
    p.add_argument("--leader-elect-resource-lock", choices=["leases"], default="leases",
                   help="the lock's kind (kube's only one left: leases)")
    p.add_argument("--leader-elect-resource-name", default=lease, metavar="NAME",
                   help=f"the Lease's name (default {lease})")
    p.add_argument("--leader-elect-resource-namespace", default=le.LEASE_NAMESPACE, metavar="NAMESPACE",
                   help=f"the Lease's namespace (default {le.LEASE_NAMESPACE})")


SERVER_HELP = ("API server URL, or several comma-separated: requests go to one at a time and move to the next "
               "when it cannot be reached; watches resume there from their last resourceVersion")

# --metrics-bind-address defaults (metricsserver.py): the secure ports of kube-scheduler and
# kube-controller-manager, served here as plain HTTP on loopback.
SCHEDULER_BIND_ADDRESS = "127.0.0.1:10259"
CONTROLLERS_BIND_ADDRESS = "127.0.0.1:10257"
DELTA_SYNC_HELP = ("partial syncs leave out KUBE-SERVICES, KUBE-NODEPORTS and the filter chains when their rules are "
                   "what the last sync wrote (kube-proxy always rewrites them): the same rules end up in the kernel, "
                   "and a one-Service change at 10k Services restores tens of rules, not 10k. A hand-edited shared "
                   "chain is then repaired at the next full sync, not the next partial one")


PROXY_MODE_HELP = ("the proxy agents' mode, as kube-proxy's --proxy-mode: iptables (the default, as kube-proxy's) "
                   "or nftables (one `nft -f` transaction per sync into table ip kube-proxy, verdict maps instead "
                   "of a rule per Service; see `kubelab nftables NODE`)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubelab", description="A Kubernetes control plane in miniature: "
                                     "apply -> etcd -> watch -> iptables -> packets, for real, on one machine.")
    parser.add_argument("--version", action="version", version=f"kubelab {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("up", help="run the whole cluster in one process",
                       description="Run etcd (private unless --etcd-servers), the API server, scheduler, controllers "
                                   "and N nodes (kubelet stub + proxy agent) in one process. Writes "
                                   "<data-dir>/kubeconfig. Ctrl-C stops everything and removes what it created.")
    p.add_argument("--nodes", type=int, default=3, help="number of nodes (default 3)")
    p.add_argument("--listen", type=_host_port, default="127.0.0.1:8080",
                   help="API server address (default 127.0.0.1:8080)")
    p.add_argument("--etcd-servers", help="use this etcd (URL[,URL]) instead of starting a private one")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="state directory (default .kubelab)")
    p.add_argument("--dataplane", choices=["render", "netns"],
                   help="netns: a network namespace per node and pod, real iptables and traffic, containers in "
                        "the pod's namespaces (root); render: rules are rendered, not applied, and containers' "
                        "commands run as plain processes on this host, without pod network, hostname or volumes "
                        "(default: netns as root, render otherwise)")
    p.add_argument("--min-sync-period", type=float, default=1.0,
                   help="proxy agents sync at most twice per this many seconds (kube-proxy: 1s)")
    p.add_argument("--delta-sync", action="store_true", help=DELTA_SYNC_HELP)
    p.add_argument("--proxy-mode", choices=["iptables", "nftables"], default="iptables", help=PROXY_MODE_HELP)
    p.add_argument("--node-cpu", default="4", help="each node's cpu capacity and allocatable (default 4)")
    p.add_argument("--node-memory", default="8Gi", help="each node's memory capacity and allocatable (default 8Gi)")
    p.add_argument("--node-max-pods", type=int, default=110, help="each node's pods capacity (default 110)")
    p.add_argument("--node-monitor-grace-period", type=float, default=50.0,
                   help="seconds without a heartbeat before a node turns Ready=Unknown (kube: 50)")
    p.add_argument("--lb-pool", default=addressing.LB_POOL,
                   help=f"addresses LoadBalancer Services get, FIRST-LAST or a CIDR (default {addressing.LB_POOL}; "
                        "'' turns the LoadBalancer controller off)")
    p.add_argument("--token-auth-file", metavar="FILE",
                   help="require bearer tokens from this CSV (token,user,uid[,\"group1,group2\"]); tokens for "
                        "kubelab's own components and an admin are added to it when missing, and the admin's goes "
                        "into the kubeconfig. The API then serves HTTPS (kubectl sends tokens only over TLS) with a "
                        "CA and certificate made in <data-dir>/pki; the kubeconfig carries the CA")
    p.add_argument("--authorization-mode", type=_authorization_modes, default="Node,RBAC", metavar="MODES",
                   help=AUTHORIZATION_MODE_HELP)
    p.add_argument("--event-ttl", type=_event_ttl, default="1h", metavar="DURATION",
                   help="how long the API server keeps an event after its last write (default 1h)")
    p.add_argument("--apiservers", type=_positive, default=1, metavar="N",
                   help="run N API servers on the one etcd (cluster): the first in this process at --listen, the "
                        "others as `kubelab apiserver` processes on the next ports; all are endpoints of the "
                        "kubernetes Service, the kubeconfig names the first (default 1)")
    p.add_argument("--etcd-members", type=_positive, default=1, metavar="M",
                   help="the private etcd as a cluster of M members (3 keeps working with one down; default 1)")
    _add_serving_flags(p)
    _etcd_tls_args(p)
    p.set_defaults(func=cmd_up)

    p = sub.add_parser("apiserver", help="run only the API server")
    p.add_argument("--etcd-servers", required=True, help="etcd URL[,URL]")
    p.add_argument("--listen", type=_host_port, default="127.0.0.1:8080",
                   help="address to serve on (default 127.0.0.1:8080)")
    p.add_argument("--advertise-address", help="IP the kubernetes Service's endpoints point at")
    p.add_argument("--tls-cert-file", metavar="FILE",
                   help="serve HTTPS with this certificate (PEM, with its chain); kubectl sends tokens only over TLS")
    p.add_argument("--tls-private-key-file", metavar="FILE", help="the private key of --tls-cert-file (PEM)")
    p.add_argument("--token-auth-file", metavar="FILE",
                   help="kube-apiserver's static token file (token,user,uid[,\"group1,group2\"]): requests must "
                        "carry `Authorization: Bearer <token>`; users system:node:<name> in group system:nodes may "
                        "write only what their kubelet needs; anonymous requests reach /healthz, /livez, /readyz "
                        "and /version only. Without it the API is open to whoever can reach it")
    p.add_argument("--authorization-mode", type=_authorization_modes, default="Node,RBAC", metavar="MODES",
                   help=AUTHORIZATION_MODE_HELP)
    p.add_argument("--event-ttl", type=_event_ttl, default="1h", metavar="DURATION",
                   help="how long an event is kept after its last write (kube-apiserver's --event-ttl; "
                        "default 1h; e.g. 30m, 90s)")
    p.add_argument("--service-account-signing-key-file", metavar="FILE",
                   help="a P-256 private key (PEM) that signs service account tokens (TokenRequest, pods' projected "
                        "tokens) and checks them; give every API server of a cluster the same one. Without it "
                        "tokens are signed with a key that dies with the process")
    p.add_argument("--disable-admission-plugins", metavar="LIST", default="",
                   help="admission plugins to turn off: ServiceAccount (pods are then admitted without a service "
                        "account or a token volume, for an API server that runs without `kubelab controllers`)")
    _add_serving_flags(p)
    _etcd_tls_args(p)
    p.add_argument("--kubelet-client-certificate", metavar="FILE",
                   help="dial kubelets (exec, logs, port-forward) over TLS with this client certificate")
    p.add_argument("--kubelet-client-key", metavar="FILE", help="the private key of --kubelet-client-certificate")
    p.add_argument("--kubelet-certificate-authority", metavar="FILE",
                   help="the CA kubelets' serving certificates must chain to (default: not checked, as kube)")
    p.add_argument("--endpoint-reconciler-type", choices=["lease", "none"], default="lease",
                   help="lease: this server is an endpoint of the kubernetes Service while its master lease (15 s) "
                        "lives; none: it leaves the Service's endpoints alone (default lease, as kube)")
    p.add_argument("--identity-hostname", metavar="NAME",
                   help="the hostname this server's identity Lease is named after (default: this machine's; "
                        "several API servers on one machine each need their own)")
    p.set_defaults(func=cmd_apiserver)

    for name, func, text in (("scheduler", cmd_scheduler, "run only the scheduler"),
                             ("controllers", cmd_controllers, ("run only the controllers (endpoints, endpointslice, node "
                                                              "lifecycle, namespace, replicaset, deployment, garbage "
                                                              "collector, pod garbage collector, loadbalancer, "
                                                              "serviceaccounts, root CA publisher, ...)"))):
        p = sub.add_parser(name, help=text)
        p.add_argument("--server", default="http://127.0.0.1:8080", help=SERVER_HELP)
        _token_args(p)
        default_bind = SCHEDULER_BIND_ADDRESS if name == "scheduler" else CONTROLLERS_BIND_ADDRESS
        _leader_election_args(p, "kube-scheduler" if name == "scheduler" else "kube-controller-manager")
        p.add_argument("--metrics-bind-address", default=default_bind, metavar="HOST:PORT",
                       help=f"serve Prometheus /metrics here, plain HTTP (default {default_bind}, kube-"
                            f"{'scheduler' if name == 'scheduler' else 'controller-manager'}'s port; empty: off)")
        if name == "scheduler":
            p.add_argument("--scoring", choices=["LeastAllocated", "MostAllocated"], default="LeastAllocated",
                           help="NodeResourcesFit scoring strategy (default LeastAllocated)")
        else:
            p.add_argument("--node-monitor-grace-period", type=float, default=50.0,
                           help="seconds without a heartbeat before a node turns Ready=Unknown (kube: 50)")
            p.add_argument("--lb-pool", default=addressing.LB_POOL,
                           help="addresses LoadBalancer Services get ('' turns the controller off)")
            p.add_argument("--root-ca-file", metavar="FILE",
                           help="the CA (PEM) of the API server's serving certificate, published in every "
                                "namespace as ConfigMap kube-root-ca.crt for pods (kube-controller-manager's "
                                "--root-ca-file; without it no such ConfigMap is made)")
            p.add_argument("--service-account-private-key-file", metavar="FILE",
                           help="the API server's service account signing key (P-256, PEM): the token controller "
                                "signs the tokens of kubernetes.io/service-account-token Secrets with it "
                                "(kube-controller-manager's flag; without it such Secrets are not filled)")
            p.add_argument("--terminated-pod-gc-threshold", type=int, default=12500, metavar="N",
                           help="terminated pods the pod garbage collector keeps before it deletes the oldest "
                                "(kube's default 12500; 0 or less: never). Pods on deleted nodes and unscheduled "
                                "terminating pods are collected whatever it is")
        p.set_defaults(func=func)

    p = sub.add_parser("node", help="run one node: kubelet stub + proxy agent")
    p.add_argument("--name", required=True, help="node name")
    p.add_argument("--server", default="http://127.0.0.1:8080", help=SERVER_HELP)
    _token_args(p)
    p.add_argument("--index", type=int, default=1, help="node number N: IP 10.240.0.(10+N), pods 10.244.N.0/24")
    p.add_argument("--node-ip", help="InternalIP (default from --index)")
    p.add_argument("--pod-cidr", help="pod CIDR (default from --index)")
    p.add_argument("--cpu", default="4")
    p.add_argument("--memory", default="8Gi")
    p.add_argument("--max-pods", type=int, default=110)
    p.add_argument("--cluster-cidr", default=addressing.POD_CIDR)
    p.add_argument("--iptables", action="store_true", help="apply rules with iptables-restore in this network "
                                                           "namespace (default: render only)")
    p.add_argument("--dataplane", choices=["render", "host"], default="render",
                   help="render: no pod network; containers' commands run as plain processes here (default); host: this network namespace is the node "
                        "(a node container): each pod gets a namespace and a routed veth here, other nodes' pod "
                        "CIDRs are routed via their InternalIPs, and pods are removed on exit (root; pair it with "
                        "--iptables)")
    p.add_argument("--iptables-backend", choices=["iptables", "iptables-nft", "iptables-legacy"], default="iptables",
                   help="iptables binaries to use with --iptables (default: the system's iptables alternative)")
    p.add_argument("--min-sync-period", type=float, default=1.0,
                   help="proxy syncs at most twice per this many seconds (kube-proxy: 1s)")
    p.add_argument("--delta-sync", action="store_true", help=DELTA_SYNC_HELP)
    p.add_argument("--proxy-mode", choices=["iptables", "nftables"], default="iptables",
                   help=PROXY_MODE_HELP + "; with --iptables, nftables mode applies its transactions with nft")
    p.add_argument("--sync-period", type=float, default=30.0,
                   help="proxy retry and iptables-monitor interval in seconds (kube-proxy: 30s)")
    p.add_argument("--metrics-bind-address", default="127.0.0.1:10249", metavar="HOST:PORT",
                   help="serve the proxy's /metrics and /healthz here (kube-proxy's default 127.0.0.1:10249; "
                        "empty: off)")
    p.add_argument("--kubelet-port", type=int, metavar="PORT",
                   help="the kubelet API's port, advertised in the Node's daemonEndpoints (default 10250 with "
                        "--dataplane host; none in render mode unless given; 0: a free port)")
    p.add_argument("--kubelet-address", metavar="IP",
                   help="where the kubelet API listens (default: the node's InternalIP)")
    p.add_argument("--tls-cert-file", metavar="FILE", help="serve the kubelet API over HTTPS with this certificate")
    p.add_argument("--tls-private-key-file", metavar="FILE", help="the private key of --tls-cert-file")
    p.add_argument("--client-ca-file", metavar="FILE",
                   help="with --tls-cert-file: require a client certificate of this CA (the API server's)")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    p.set_defaults(func=cmd_node)

    p = sub.add_parser("dns", help="run only cluster DNS (<svc>.<ns>.svc.cluster.local, the kube-dns Service)",
                       description="Serve the cluster domain from the API (Services, EndpointSlices, Namespaces) "
                                   "on UDP and TCP, and create the kube-dns Service (10.96.0.10) in kube-system. "
                                   "With --advertise-address its Endpoints point there, so pods reach this "
                                   "server through the ClusterIP. Names outside the domain are refused.")
    p.add_argument("--server", default="http://127.0.0.1:8080", help=SERVER_HELP)
    _token_args(p)
    p.add_argument("--listen", type=_host_port, default="0.0.0.0:53",
                   help="address to serve DNS on (default 0.0.0.0:53)")
    p.add_argument("--netns", help="open the sockets inside this named network namespace")
    p.add_argument("--metrics-port", type=int, default=9153,
                   help="serve Prometheus /metrics on this port of the listen address (CoreDNS: 9153; -1: off)")
    p.add_argument("--advertise-address", help="IP the kube-dns Endpoints and EndpointSlice point at")
    p.add_argument("--service-ip", default=addressing.CLUSTER_DNS_IP, help="kube-dns ClusterIP (default 10.96.0.10)")
    p.add_argument("--cluster-domain", default=addressing.CLUSTER_DOMAIN, help="default cluster.local")
    p.set_defaults(func=cmd_dns)

    p = sub.add_parser("exec", help="run a command inside a node's (or pod's) network namespace",
                       description="kubelab exec [--data-dir DIR] NODE -- CMD...  (NODE may also be a pod name or "
                                   "namespace/pod, or 'client': a host on the lab network outside the cluster, "
                                   "10.240.0.2)")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    p.add_argument("target", metavar="NODE")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD")
    p.set_defaults(func=cmd_exec)

    for verb, text in (("pause", ("stop NODE's kubelet stub and proxy agent (its pods keep running): a node "
                                  "that lost the control plane")),
                       ("resume", "start NODE's kubelet stub and proxy agent again, as after a restart")):
        p = sub.add_parser(verb, help=text, description=f"{text}. Works on a cluster started with `kubelab up`.")
        p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
        p.add_argument("node", metavar="NODE")
        p.set_defaults(func=cmd_pause_resume)

    p = sub.add_parser("status", help="what a running `kubelab up` is made of, and whether it is healthy")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("iptables", help="the ruleset a node's proxy agent last applied, in iptables-save form")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    p.add_argument("-t", "--table", choices=["filter", "nat"], help="only this table")
    p.add_argument("node", metavar="NODE")
    p.set_defaults(func=cmd_iptables)

    p = sub.add_parser("nftables", help="a node's nftables table (nft list table ip kube-proxy), in nftables "
                                        "proxy mode")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    p.add_argument("node", metavar="NODE")
    p.set_defaults(func=cmd_nftables)

    p = sub.add_parser("trace", help="the path of an object's latest change: accepted, delivered to each watcher, "
                                     "endpoints written, each node's iptables-restore",
                       description="kubelab trace KIND/NAME [-n NS]: e.g. service/web or pod/api-1. Reads the API "
                                   "server's in-memory trace records (written as things happen; the last 50,000 "
                                   "writes).")
    p.add_argument("object", metavar="KIND/NAME")
    p.add_argument("-n", "--namespace", default="default")
    p.add_argument("-o", "--output", choices=["table", "json"], default="table")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="the `kubelab up` cluster to ask (default .kubelab)")
    p.add_argument("--server", help="ask this API server instead (URL)")
    p.set_defaults(func=cmd_trace)

    p = sub.add_parser("ui", help="a web page drawing each Service's path on every node, live",
                       description="Serve the page (kubelab/ui): nodes and their pods; a Service's entries -> "
                                   "KUBE-SVC -> each KUBE-SEP with its probability -> its pod, read from every "
                                   "node's real rules; the last change's trace. Read-only; an API client of the "
                                   "`kubelab up` cluster in --data-dir.")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="the `kubelab up` cluster to show (default .kubelab)")
    p.add_argument("--listen", default="127.0.0.1:8001",
                   help="HOST:PORT to serve the page on (default 127.0.0.1:8001; port 0 picks a free one)")
    p.set_defaults(func=cmd_ui)

    p = sub.add_parser("explain", help="why a pod is (or is not) on a node: every node's filters and scores",
                       description="kubelab explain pod NAME [-n NS]: run kube-scheduler's filters on every node "
                                   "for one pod and score the nodes that pass, plugin by plugin, marking the node "
                                   "the scheduler would pick (or did pick).")
    p.add_argument("kind", choices=["pod", "pods", "po"], metavar="pod")
    p.add_argument("name", metavar="NAME")
    p.add_argument("-n", "--namespace", default="default")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--server", help="API server URL (default: the cluster `kubelab up` runs in --data-dir)")
    where.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    p.add_argument("--scoring", choices=["LeastAllocated", "MostAllocated"], default="LeastAllocated",
                   help="NodeResourcesFit scoring strategy the scheduler runs with (default LeastAllocated)")
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("proxy", help="kube-proxy tools")
    proxy_sub = p.add_subparsers(dest="proxy_command", required=True, metavar="SUBCOMMAND")
    r = proxy_sub.add_parser("render", help="print the iptables-restore payload kube-proxy would write",
                             description="Read Services and EndpointSlices (YAML or JSON; several documents or a List) "
                                         "and print the iptables-restore payload kube-proxy's iptables mode writes "
                                         "for them. Pure: no root, no cluster.")

    r.add_argument("-f", "--file", required=True, help="manifest file, or - for stdin")
    r.add_argument("--node-name", default="", help="this node's name (decides which endpoints are local)")
    r.add_argument("--node-ip", action="append", help="this node's IP (repeatable; the first of the family is "
                                                       "the primary one)")
    r.add_argument("--cluster-cidr", default="", help="pod CIDR(s) for local-traffic detection, comma-separated "
                                                      "(e.g. 10.244.0.0/16); none: no local detector")
    r.add_argument("--masquerade-all", action="store_true", help="SNAT all traffic to service IPs")
    r.add_argument("--masquerade-bit", type=int, default=14, help="fwmark bit marking packets to SNAT (default 14)")
    r.add_argument("--nodeport-addresses", default="",
                   help="comma-separated CIDRs (or 'primary') NodePorts answer on (default: all local addresses)")
    r.add_argument("--iptables-localhost-nodeports", type=flag_bool, default=True, metavar="BOOL",
                   help="NodePorts on 127.0.0.1 too (default true)")
    r.add_argument("--random-fully", type=flag_bool, default=True, metavar="BOOL",
                   help="the iptables binary supports MASQUERADE --random-fully (default true)")
    r.add_argument("--nfacct", action="store_true", help="the nfacct counters kube-proxy creates exist")
    r.add_argument("--conntrack-tcp-be-liberal", action="store_true",
                   help="net.netfilter.nf_conntrack_tcp_be_liberal is set (no INVALID drop rule)")
    r.add_argument("--ipv6", action="store_true", help="render the IPv6 proxier's payload")
    r.add_argument("--changed", action="append", metavar="NAMESPACE/NAME",
                   help="render a partial sync rewriting only these Services' chains (repeatable)")
    r.add_argument("--existing-rules", metavar="FILE",
                   help="iptables-save output of the node: service chains in it that are no longer needed "
                        "are flushed and deleted (-X)")
    r.add_argument("--sort", action="store_true",
                   help="print in the canonical order kube-proxy's tests compare in, not in write order")
    r.add_argument("--proxy-mode", choices=["iptables", "nftables"], default="iptables",
                   help="which kube-proxy mode's rules to print (default iptables, as kube-proxy's): nftables "
                        "prints `nft -f` input for table ip/ip6 kube-proxy, honouring ServiceCIDR objects in the file")
    r.set_defaults(func=cmd_proxy_render)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(args.verbose)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # inside the try: a closed pipe shows here, not at the interpreter's exit
    except BrokenPipeError:
        # The reader went away (`kubelab trace ... -o json | head`): stop quietly, as a Unix tool
        # killed by SIGPIPE does (the shell's 128 + 13). Python ignores SIGPIPE and raises instead;
        # stdout goes to /dev/null so the interpreter's last flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return SIGPIPE_EXIT
    return code


if __name__ == "__main__":
    raise SystemExit(main())
