"""The `kubelab` command line (DESIGN.md's CLI contract)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from . import __version__, addressing

DEFAULT_DATA_DIR = ".kubelab"


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)-12s %(message)s", datefmt="%H:%M:%S")
    for ours in ("kubelab", "apiserver", "scheduler", "controllers", "kubeletstub", "proxyagent"):
        logging.getLogger(ours).setLevel(logging.DEBUG if verbose else logging.INFO)
    for noisy in ("httpx", "httpcore", "uvicorn.error", "aetcd", "pyroute2", "grpc"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _servers(text: str | None) -> list[str]:
    return [s.strip() for s in (text or "").split(",") if s.strip()]


# --- up ------------------------------------------------------------------------------------------

def cmd_up(args: argparse.Namespace) -> int:
    from .runner import UpOptions, run_until_interrupted, up

    dataplane = args.dataplane or ("netns" if os.geteuid() == 0 else "render")
    options = UpOptions(nodes=args.nodes, listen=args.listen, etcd_servers=_servers(args.etcd_servers),
                        data_dir=Path(args.data_dir), dataplane=dataplane, min_sync_period=args.min_sync_period,
                        node_monitor_grace_period=args.node_monitor_grace_period)
    data_dir = Path(args.data_dir)

    def ready(state: dict[str, Any]) -> None:
        kubeconfig_path = state["kubeconfig"]
        print(f"\nkubelab is up: {args.nodes} nodes, dataplane {dataplane}, API at {state['server']}\n"
              f"  export KUBECONFIG={kubeconfig_path}\n"
              f"  kubectl get nodes\n"
              f"  kubelab iptables --data-dir {data_dir} node-1      # the rules node-1's proxy agent applied\n"
              + (f"  kubelab exec --data-dir {data_dir} node-1 -- curl -s http://<cluster-ip>:<port>\n"
                 if dataplane == "netns" else "")
              + "Ctrl-C stops everything and removes what kubelab created.\n", flush=True)

    try:
        return run_until_interrupted(lambda: up(options, ready=ready))
    except (PermissionError, RuntimeError, FileNotFoundError) as exc:
        print(f"kubelab up: {exc}", file=sys.stderr)
        return 1


# --- one component per process -------------------------------------------------------------------

def cmd_apiserver(args: argparse.Namespace) -> int:
    import uvicorn

    from apiserver.app import Config, create_app

    from .runner import split_listen

    servers = _servers(args.etcd_servers)
    if not servers:
        print("kubelab apiserver: --etcd-servers is required", file=sys.stderr)
        return 2
    host, port = split_listen(args.listen)
    app = create_app(Config(servers, advertise_ip=args.advertise_address or (host if host != "0.0.0.0" else "127.0.0.1"),
                            port=port))
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
    return 0


def _run_client_component(args: argparse.Namespace, make: Any) -> int:
    from .client import ApiClient
    from .runner import run_until_interrupted

    async def main() -> None:
        api = ApiClient(args.server, user_agent=f"kubelab-{args.command}")
        try:
            await make(api)
        finally:
            await api.close()

    return run_until_interrupted(main)


def cmd_scheduler(args: argparse.Namespace) -> int:
    import scheduler

    return _run_client_component(args, lambda api: scheduler.run(api, strategy=args.scoring))


def cmd_controllers(args: argparse.Namespace) -> int:
    import controllers

    return _run_client_component(args, lambda api: controllers.run(
        api, node_monitor_grace_period=args.node_monitor_grace_period))


def cmd_node(args: argparse.Namespace) -> int:
    from kubeletstub.node import NodeConfig
    from kubeletstub.kubelet import Kubelet
    from proxyagent import ProxyAgent, ProxyConfig
    from proxyagent.apply import IptablesApplier, RecordingApplier

    index = args.index
    ip = args.node_ip or addressing.node_ip(index)
    cidr = args.pod_cidr or addressing.node_pod_cidr(index)

    async def run(api: Any) -> None:
        config = NodeConfig(name=args.name, ip=ip, pod_cidr=cidr, cpu=args.cpu, memory=args.memory,
                            max_pods=args.max_pods)
        applier = IptablesApplier(None) if args.iptables else RecordingApplier()
        agent = ProxyAgent(api, ProxyConfig(node_name=args.name, node_ips=(ip,), cluster_cidr=args.cluster_cidr),
                           applier, min_sync_period=args.min_sync_period,
                           state_file=Path(args.data_dir) / "nodes" / args.name / "iptables.rules")
        async with asyncio.TaskGroup() as tg:
            tg.create_task(Kubelet(api, config).run(), name="kubelet")
            tg.create_task(agent.run(), name="proxy")

    return _run_client_component(args, run)


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
    else:
        from kubeletstub.netns import DataplaneError, lookup_netns

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

    from .runner import control, read_state

    try:
        state = read_state(Path(args.data_dir))
    except FileNotFoundError as exc:
        print(f"kubelab status: {exc}", file=sys.stderr)
        return 1
    print(f"cluster     pid {state['pid']}, dataplane {state['dataplane']}, kubeconfig {state['kubeconfig']}")
    print(f"etcd        {', '.join(state['etcd'])}")
    try:
        ready = httpx.get(f"{state['server']}/readyz", timeout=5)
        print(f"apiserver   {state['server']} ({'ready' if ready.status_code == 200 else 'NOT ready: ' + ready.text})")
        nodes = httpx.get(f"{state['server']}/api/v1/nodes", timeout=5).json().get("items", [])
    except httpx.HTTPError as exc:
        print(f"apiserver   {state['server']} (unreachable: {exc})")
        return 1
    try:
        agents = control(Path(args.data_dir), "status").get("nodes", {})
    except OSError:
        agents = {}
    for node in nodes:
        name = node["metadata"]["name"]
        ready = next((c["status"] for c in node.get("status", {}).get("conditions", []) if c["type"] == "Ready"), "?")
        where = state["nodes"].get(name, {})
        print(f"{name:<11} Ready={ready} ip {where.get('ip', '?')} pods {where.get('podCIDR', '?')}"
              f"{' netns ' + where['netns'] if where.get('netns') else ''}, kubelet+proxy {agents.get(name, '?')}")
    return 0


def cmd_iptables(args: argparse.Namespace) -> int:
    from .runner import read_state

    data_dir = Path(args.data_dir)
    try:
        state = read_state(data_dir)
    except FileNotFoundError as exc:
        print(f"kubelab iptables: {exc}", file=sys.stderr)
        return 1
    node = state["nodes"].get(args.node)
    if node is None:
        print(f"kubelab iptables: no node {args.node!r} (nodes: {', '.join(state['nodes'])})", file=sys.stderr)
        return 1
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
    from .manifests import ManifestError, load_objects
    from proxyagent import ProxyConfig, render

    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
        services, slices = load_objects(text)
    except (OSError, ManifestError) as exc:
        print(f"kubelab proxy render: {exc}", file=sys.stderr)
        return 1
    config = ProxyConfig(node_name=args.node_name, node_ips=tuple(args.node_ip or ()),
                         cluster_cidr=args.cluster_cidr or None, masquerade_all=args.masquerade_all)
    sys.stdout.write(render(services, slices, config).text)
    return 0


# --- parser --------------------------------------------------------------------------------------

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
    p.add_argument("--listen", default="127.0.0.1:8080", help="API server address (default 127.0.0.1:8080)")
    p.add_argument("--etcd-servers", help="use this etcd (URL[,URL]) instead of starting a private one")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="state directory (default .kubelab)")
    p.add_argument("--dataplane", choices=["render", "netns"],
                   help="netns: a network namespace per node and pod, real iptables and traffic (root); render: "
                        "rules are rendered but nothing runs (default: netns as root, render otherwise)")
    p.add_argument("--min-sync-period", type=float, default=1.0,
                   help="proxy agents sync at most twice per this many seconds (kube-proxy: 1s)")
    p.add_argument("--node-monitor-grace-period", type=float, default=50.0,
                   help="seconds without a heartbeat before a node turns Ready=Unknown (kube: 50)")
    p.set_defaults(func=cmd_up)

    p = sub.add_parser("apiserver", help="run only the API server")
    p.add_argument("--etcd-servers", required=True, help="etcd URL[,URL]")
    p.add_argument("--listen", default="127.0.0.1:8080", help="address to serve on (default 127.0.0.1:8080)")
    p.add_argument("--advertise-address", help="IP the kubernetes Service's endpoints point at")
    p.set_defaults(func=cmd_apiserver)

    for name, func, text in (("scheduler", cmd_scheduler, "run only the scheduler"),
                             ("controllers", cmd_controllers, "run only the endpoints and endpointslice controllers")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--server", default="http://127.0.0.1:8080", help="API server URL")
        if name == "scheduler":
            p.add_argument("--scoring", choices=["LeastAllocated", "MostAllocated"], default="LeastAllocated",
                           help="NodeResourcesFit scoring strategy (default LeastAllocated)")
        else:
            p.add_argument("--node-monitor-grace-period", type=float, default=50.0,
                           help="seconds without a heartbeat before a node turns Ready=Unknown (kube: 50)")
        p.set_defaults(func=func)

    p = sub.add_parser("node", help="run one node: kubelet stub + proxy agent")
    p.add_argument("--name", required=True, help="node name")
    p.add_argument("--server", default="http://127.0.0.1:8080", help="API server URL")
    p.add_argument("--index", type=int, default=1, help="node number N: IP 10.240.0.(10+N), pods 10.244.N.0/24")
    p.add_argument("--node-ip", help="InternalIP (default from --index)")
    p.add_argument("--pod-cidr", help="pod CIDR (default from --index)")
    p.add_argument("--cpu", default="4")
    p.add_argument("--memory", default="8Gi")
    p.add_argument("--max-pods", type=int, default=110)
    p.add_argument("--cluster-cidr", default=addressing.POD_CIDR)
    p.add_argument("--iptables", action="store_true", help="apply rules with iptables-restore in this network "
                                                           "namespace (default: render only)")
    p.add_argument("--min-sync-period", type=float, default=1.0)
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    p.set_defaults(func=cmd_node)

    p = sub.add_parser("exec", help="run a command inside a node's (or pod's) network namespace",
                       description="kubelab exec [--data-dir DIR] NODE -- CMD...  (NODE may also be a pod name or "
                                   "namespace/pod, or 'client': a host on the lab network outside the cluster, "
                                   "10.240.0.2)")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    p.add_argument("target", metavar="NODE")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD")
    p.set_defaults(func=cmd_exec)

    for verb, text in (("pause", "stop NODE's kubelet stub and proxy agent (its pods keep running): a node that "
                                 "lost the control plane"),
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

    p = sub.add_parser("proxy", help="kube-proxy tools")
    proxy_sub = p.add_subparsers(dest="proxy_command", required=True, metavar="SUBCOMMAND")
    r = proxy_sub.add_parser("render", help="print the iptables-restore payload kube-proxy would write",
                             description="Read Services and EndpointSlices (YAML or JSON; several documents or a List) "
                                         "and print the iptables-restore payload kube-proxy's iptables mode writes "
                                         "for them. Pure: no root, no cluster.")
    r.add_argument("-f", "--file", required=True, help="manifest file, or - for stdin")
    r.add_argument("--node-name", default="", help="this node's name (decides which endpoints are local)")
    r.add_argument("--node-ip", action="append", help="this node's IP (repeatable)")
    r.add_argument("--cluster-cidr", default="", help="pod CIDR for local-traffic detection (e.g. 10.244.0.0/16)")
    r.add_argument("--masquerade-all", action="store_true", help="SNAT all traffic to service IPs")
    r.set_defaults(func=cmd_proxy_render)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(args.verbose)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
