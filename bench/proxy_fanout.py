"""Proxy agents of one process (`kubelab up`'s nodes): CPU per EndpointSlice change with every agent on its
own informers (one watch and one decode per agent) and with all of them on one shared pair
(proxyagent/sharedinformers.py, what `kubelab up` does now).

    .venv/bin/python bench/proxy_fanout.py                         # 20 and 50 agents, 200 changes
    .venv/bin/python bench/proxy_fanout.py --agents 50 --changes 400 --repeat 2

A private etcd and `kubelab apiserver` run as processes of their own (harness.Lab); the agents run in
this process in render mode (RecordingApplier, kube-proxy's rules as a dict, no kernel), with `kubelab
up`'s minSyncPeriod of 1 s, against one Service whose EndpointSlice a client in this process rewrites
--changes times, one PUT after the other (100 endpoints, one of them replaced by each). Measured per mode: this process's CPU
seconds from the first PUT until every agent's informer has delivered the last change (the watch,
decode and change tracking of every agent), and until every agent has synced it too; each divided by
the changes. The writer's own CPU is measured alone (0 agents) and taken off. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from harness import Lab, machine

from kubelab import kinds
from kubelab.client import ApiClient
from proxyagent import ProxyAgent, ProxyConfig, SharedProxyInformers
from proxyagent.apply import RecordingApplier

NS = "default"
NAME = "fanout"
ENDPOINTS = 100  # kube's maxEndpointsPerSlice


def slice_body(change: int, rv: str | None) -> dict[str, Any]:
    """A slice of ENDPOINTS endpoints, the last of which is a new pod at every change (a Deployment's
    rollout, one pod at a time)."""
    meta: dict[str, Any] = {"name": f"{NAME}-x", "namespace": NS, "labels": {"kubernetes.io/service-name": NAME}}
    if rv:
        meta["resourceVersion"] = rv
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": meta, "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [{"addresses": [f"10.244.{i // 250}.{i % 250 + 1}"], "conditions": {"ready": True}}
                          for i in [*range(ENDPOINTS - 1), ENDPOINTS + change]]}


async def until(check: Any, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("agents did not catch up")
        await asyncio.sleep(0.01)


async def one_run(server: str, agents: int, changes: int, *, shared: bool) -> dict[str, Any]:
    async with ApiClient(server, fast_requests=True) as writer, ApiClient(server, fast_requests=True) as api:
        await writer.create(kinds.SERVICES, {"apiVersion": "v1", "kind": "Service",
                                             "metadata": {"name": NAME, "namespace": NS},
                                             "spec": {"selector": {"app": NAME}, "ports": [{"name": "http", "port": 80,
                                                                                           "targetPort": 8080}]}})
        current = await writer.create(kinds.ENDPOINTSLICES, slice_body(0, None))
        informers = SharedProxyInformers(api) if shared else None
        made = [ProxyAgent(api, ProxyConfig(node_name=f"fanout-{i}", node_ips=(f"10.98.0.{i + 1}",),
                                            cluster_cidr="10.244.0.0/16"),
                           RecordingApplier(), min_sync_period=1.0, informers=informers) for i in range(agents)]
        tasks = [asyncio.create_task(informers.run())] if informers is not None else []
        tasks += [asyncio.create_task(a.run()) for a in made]
        try:
            for a in made:
                await asyncio.wait_for(a.synced.wait(), 300)
            await asyncio.sleep(1.5)  # the start's syncs over
            cpu0, t0 = time.process_time(), time.monotonic()
            # Counted from here: a count taken once the changes were delivered saw only the last sync of
            # each agent (it read "every agent synced once" over windows of minutes).
            syncs0 = [a.syncs for a in made]
            rv = current.metadata.resource_version
            for n in range(changes):
                answer = await writer.request("PUT", kinds.ENDPOINTSLICES.path(NS, f"{NAME}-x"),
                                              body=slice_body(n + 1, rv))
                rv = answer["metadata"]["resourceVersion"]
            last = int(rv)
            await until(lambda: all(int(a.slices.resource_version or 0) >= last for a in made))
            delivered_cpu, delivered_at = time.process_time() - cpu0, time.monotonic() - t0
            during = [a.syncs - before for a, before in zip(made, syncs0, strict=True)]
            await until(lambda: all(a.proxier.state.pending_endpoints == 0 for a in made))
            await asyncio.sleep(1.2)  # a sync asked for within minSyncPeriod runs by then
            synced_cpu = time.process_time() - cpu0
            # With minSyncPeriod 1 s and a burst of 2 an agent that keeps up syncs about once a second
            # while the changes arrive: syncs per agent ~ delivered seconds + 2 (fewer if a sync is slow).
            return {"agents": agents, "mode": "shared" if shared else "own", "changes": changes,
                    "seconds": round(time.monotonic() - t0, 2), "delivered_s": round(delivered_at, 2),
                    "cpu_delivered_s": round(delivered_cpu, 3), "cpu_with_syncs_s": round(synced_cpu, 3),
                    "syncs_during_changes": sum(during), "syncs_per_agent_min_max": [min(during, default=0),
                                                                                     max(during, default=0)],
                    "syncs_in_all": sum(a.syncs - before for a, before in zip(made, syncs0, strict=True))}
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await writer.delete(kinds.ENDPOINTSLICES, f"{NAME}-x", NS)
            await writer.delete(kinds.SERVICES, NAME, NS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, action="append", help="agents per run (default 20 and 50)")
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    lab = Lab()
    results: list[dict[str, Any]] = []
    try:
        lab.start_etcd()
        server = lab.start_apiserver()
        for _ in range(args.repeat):
            base = asyncio.run(one_run(server, 0, args.changes, shared=False))
            for agents in args.agents or [20, 50]:
                for shared in (False, True):
                    result = asyncio.run(one_run(server, agents, args.changes, shared=shared))
                    for key in ("cpu_delivered", "cpu_with_syncs"):
                        result[f"{key}_ms_per_change"] = round(
                            (result[f"{key}_s"] - base[f"{key}_s"]) * 1000 / args.changes, 2)
                    result["writer_cpu_ms_per_change"] = round(base["cpu_delivered_s"] * 1000 / args.changes, 2)
                    print(json.dumps(result), flush=True)
                    results.append(result)
    finally:
        lab.stop()
    print(json.dumps({"machine": machine()}))
    print("\n| agents | informers | CPU per change, delivered to every agent | with the syncs | seconds to deliver |"
          " syncs per agent while delivering (min-max) |")
    print("|---:|---|---:|---:|---:|---:|")
    for r in results:
        low, high = r["syncs_per_agent_min_max"]
        print(f"| {r['agents']} | {r['mode']} | {r['cpu_delivered_ms_per_change']} ms | "
              f"{r['cpu_with_syncs_ms_per_change']} ms | {r['delivered_s']} s | {low}-{high} |")


if __name__ == "__main__":
    main()
