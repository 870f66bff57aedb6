"""The tools that read a running cluster: `kubelab exec`, `pause`/`resume`, `status`, `iptables`,
`nftables`, `trace`, `explain` and `ui`. They find the cluster `kubelab up` runs from its state file in
--data-dir (or are given --server) and ask the API server through kubelab/client, as any other client."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from kubelab import addressing

# Each command imports the rest of what it uses when it runs, as the component commands do: `kubelab
# iptables NODE` or `kubelab exec` should not pay for the client and its models (importing kubelab.client
# is most of a second, several on a loaded machine).


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


def _get(server: str, path: str, *, token: str | None, ca_file: str | None, timeout: float, agent: str,
         params: dict[str, Any] | None = None) -> tuple[int, str]:
    """One GET through kubelab/client from a synchronous tool: the answer's code and text, whatever the code
    (ApiClient.get_raw). `ca_file`: the cluster's own CA when it has one (`kubelab up` with tokens), else
    the system's trust store checks an https server. Raises TransportError when no answer came."""
    from kubelab.client import ApiClient

    async def get() -> tuple[int, str]:
        async with ApiClient(server, token=token, user_agent=f"kubelab-{agent}", ca_file=ca_file,
                             timeout=timeout) as api:
            return await api.get_raw(path, params=params)

    return asyncio.run(get())


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
    from kubelab.client import TransportError

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
    ca = state.get("ca")  # a cluster with tokens serves HTTPS with its own CA
    # `kubelab up --apiservers N`: every API server on the one etcd, the first (up's own process) first, with
    # its process as up supervises it (launcher/apiservers.py); one that is down is shown, not an error.
    records = state.get("apiservers") or [{"url": url} for url in state.get("servers") or [state["server"]]]
    for record in records:
        url = record["url"]
        try:
            code, text = _get(url, "/readyz", token=None, ca_file=ca, timeout=5, agent="status")
            ready = "ready" if code == 200 else "NOT ready: " + text
        except TransportError as exc:
            ready = f"unreachable: {exc or 'no answer within 5s'}"
        process = (f" pid {record['pid']}, {record['state']}, restarts {record['restarts']}"
                   if "pid" in record else "")
        print(f"apiserver   {url} ({ready}){process}")
    if state.get("scheduler"):  # its process (launcher/upscheduler.py); not with --one-process
        record = state["scheduler"]
        print(f"scheduler   pid {record['pid']}, {record['state']}, restarts {record['restarts']}")
    try:
        nodes = json.loads(_get(state["server"], "/api/v1/nodes", token=token, ca_file=ca, timeout=5,
                                agent="status")[1]).get("items", [])
        pods = json.loads(_get(state["server"], "/api/v1/pods", token=token, ca_file=ca, timeout=5,
                               agent="status")[1]).get("items", [])
    except TransportError:
        return 1  # the first API server is unreachable: said above
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
            await serve(api, state=state, data_dir=Path(args.data_dir), host=host, port=int(port), on_ready=ready,
                        explain_pod=_explain_for_ui)
        finally:
            await api.close()

    return run_until_interrupted(main)


def _explain_for_ui(pod: Any, nodes: list[Any], pods: list[Any]) -> dict[str, Any]:
    """`kubelab explain pod`'s verdicts (scheduler/explain.py) as the page's JSON: handed to kubelab/ui
    from here because the core imports no component (tests/unit/test_layering.py)."""
    import dataclasses

    from scheduler.explain import explain

    return dataclasses.asdict(explain(pod, nodes, pods))


def cmd_trace(args: argparse.Namespace) -> int:
    """kubelab trace KIND/NAME: the latest change of an object, step by step (kubelab/tracing.py)."""
    from kubelab import tracing
    from kubelab.client import TransportError

    kind, _, name = args.object.partition("/")
    rt = tracing.resolve(kind) if name else None
    if rt is None:
        print(f"kubelab trace: expected KIND/NAME (e.g. service/web, pod/api-1), got {args.object!r}", file=sys.stderr)
        return 2
    access = _cluster_access(args, "trace")
    if access is None:
        return 1
    server, token, ca = access
    key = tracing.storage_key(rt, args.namespace, name)
    try:
        code, text = _get(server, tracing.PATH, token=token, ca_file=ca, timeout=10, agent="trace",
                          params={"key": key})
    except TransportError as exc:
        print(f"kubelab trace: {server}: {exc}", file=sys.stderr)
        return 1
    if code != 200:
        print(f"kubelab trace: {code} {text}", file=sys.stderr)
        return 1
    result = json.loads(text)
    if args.output == "json":
        print(json.dumps(result, indent=2))
    else:
        print(tracing.render(result), end="")
    return 0 if result.get("found") else 1


def cmd_explain(args: argparse.Namespace) -> int:
    """kubelab explain pod NAME: every node's filter verdict and scores for one pod (scheduler/explain.py)."""
    from kubelab import kinds
    from kubelab.client import ApiClient, ApiError, TransportError
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
    except TransportError as exc:
        print(f"kubelab explain: cannot reach the API server at {server}: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(render(explain(pod, nodes, pods, strategy=args.scoring)))
    return 0
