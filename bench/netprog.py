"""Network programming latency: from a Service change (the writer got its 200) until every node's proxy
agent has applied it (its iptables-restore, or in nftables mode its nft transaction, is done), in
`kubelab up` (one process, render dataplane: the agents render and "restore" into a recorder; netns
would add the real iptables-restore or nft).

Per change, each node's time is taken from the proxy agents' own sync reports (the `kubelab trace`
records: "sync done at t, covering Services up to revision R"), so nothing is inferred: a node applied
the change at the end of its first sync whose Services revision is at least the change's.

    .venv/bin/python bench/netprog.py                 # 3 and 30 nodes, idle and 50 changes/s
    .venv/bin/python bench/netprog.py --quick         # shorter phases
    .venv/bin/python bench/netprog.py --nodes 3 --dataplane netns    # as root: real iptables-restore
    .venv/bin/python bench/netprog.py --nodes 3 --dataplane netns --proxy-mode iptables --proxy-mode nftables
                                                  # both proxy modes, one after the other, in one run

Changes: the port of one of 50 ClusterIP Services (no endpoints) flips between 80 and 81. Idle: one
change every 1.5 s. Load: 50 changes/s spread over the 50 Services. The proxy agents run with
kube-proxy's defaults: --min-sync-period 1 s with a burst of 2 (an idle change is applied at once; under
load the agent syncs at most twice a second).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from harness import ROOT, Lab, machine, summary_ms

from kubelab.client import ApiClient
from kubelab.etcd import free_port
from kubelab.processes import stop_process
from kubelab.tracing import PATH as TRACES

SERVICES = 50


def service(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"np-{i:03}"},
            "spec": {"selector": {"app": f"np-{i:03}"}, "ports": [{"port": 80, "targetPort": 8080}]}}


async def change(api: ApiClient, i: int, port: int) -> tuple[int, float]:
    body = {"spec": {"ports": [{"port": port, "targetPort": 8080, "protocol": "TCP"}]}}
    obj = await api.request("PATCH", f"/api/v1/namespaces/default/services/np-{i:03}", body=body,
                            content_type="application/merge-patch+json")
    return int(obj["metadata"]["resourceVersion"]), time.time()


async def phase(api: ApiClient, nodes: int, *, count: int, interval: float) -> dict[str, Any]:
    changes: list[tuple[int, float]] = []
    ports = dict.fromkeys(range(SERVICES), 80)
    tasks = []
    start = time.monotonic()
    for n in range(count):
        i = n % SERVICES
        ports[i] = 81 if ports[i] == 80 else 80
        tasks.append(asyncio.create_task(change(api, i, ports[i])))
        await asyncio.sleep(max(0.0, start + (n + 1) * interval - time.monotonic()))
    changes = list(await asyncio.gather(*tasks))
    await asyncio.sleep(3.0)  # the last changes reach every node
    reports = (await api.request("GET", TRACES, params={"type": "proxy-sync"}))["items"]
    by_node: dict[str, list[dict[str, Any]]] = {}
    for report in reports:
        by_node.setdefault(report["node"], []).append(report)
    for syncs in by_node.values():
        syncs.sort(key=lambda r: r["doneAt"])
    every, per_node, missing = [], [], 0
    restores = [r["restoreSeconds"] for syncs in by_node.values() for r in syncs]
    for revision, acked in changes:
        latest = 0.0
        for node_syncs in by_node.values():
            done = next((r["doneAt"] for r in node_syncs if r["servicesRevision"] >= revision), None)
            if done is None:
                missing += 1
                continue
            per_node.append(max(0.0, done - acked))
            latest = max(latest, done - acked)
        every.append(max(0.0, latest))
    return {"changes": count, "rate_per_s": round(1 / interval, 2), "nodes_reporting": len(by_node),
            "not_applied": missing, "until_every_node": summary_ms(every), "per_node": summary_ms(per_node),
            "restore": summary_ms(restores)}


async def measure(server: str, nodes: int, quick: bool) -> dict[str, Any]:
    async with ApiClient(server, user_agent="kubelab-bench", fast_requests=True) as api:
        for i in range(SERVICES):
            await api.request("POST", "/api/v1/namespaces/default/services", body=service(i))
        await asyncio.sleep(5.0)  # created, programmed everywhere
        idle = await phase(api, nodes, count=8 if quick else 20, interval=1.5)
        await asyncio.sleep(2.0)
        load = await phase(api, nodes, count=250 if quick else 500, interval=1 / 50)
    return {"idle": idle, "load_50_per_s": load}


def run(nodes: int, dataplane: str, quick: bool, proxy_mode: str) -> dict[str, Any]:
    lab = Lab()
    data_dir = lab.base / "up"
    port = free_port()
    proc = lab.spawn("up", "up", "--nodes", str(nodes), "--dataplane", dataplane, "--data-dir", str(data_dir),
                     "--listen", f"127.0.0.1:{port}", "--proxy-mode", proxy_mode)
    try:
        lab.wait_for_up("up")
        result = asyncio.run(measure(f"http://127.0.0.1:{port}", nodes, quick))
        result.update(nodes=nodes, dataplane=dataplane, proxy_mode=proxy_mode, min_sync_period_s=1.0, burst=2)
        return result
    finally:
        # kubelab up tears down its namespaces and etcd itself on Ctrl-C.
        stop_process(proc, sig=signal.SIGINT, timeout=60)
        lab.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--nodes", type=int, action="append", help="node counts (default 3 and 30)")
    parser.add_argument("--dataplane", choices=["render", "netns"], default="render")
    parser.add_argument("--proxy-mode", choices=["iptables", "nftables"], action="append", dest="proxy_modes",
                        help="the proxy agents' --proxy-mode (default iptables); give it twice to measure "
                             "both, one lab after the other, in the same run")
    args = parser.parse_args()
    if args.dataplane == "netns" and os.geteuid() != 0:
        sys.exit("--dataplane netns needs root")
    results: dict[str, Any] = {"machine_before": machine(), "runs": []}
    for nodes in args.nodes or [3, 30]:
        for mode in args.proxy_modes or ["iptables"]:
            results["runs"].append(run(nodes, args.dataplane, args.quick, mode))
    results["machine_after"] = machine()
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(ROOT)))
    main()
