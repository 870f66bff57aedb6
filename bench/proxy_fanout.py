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
the changes. The writer's own CPU is measured alone (0 agents) and taken off. Each agent writes its rules
file (`kubelab iptables NODE`'s) into a directory on /dev/shm, as in `kubelab up`. Nothing is asserted.

With `--code NAME=DIR` (a kubelab checkout, e.g. `git worktree add /dev/shm/before main`; repeatable)
only the shared-informer mode is run, each code's agents in a process of their own (importing DIR)
against the same API server, the codes alternated `--repeat` times, with the load average of each run:

    .venv/bin/python bench/proxy_fanout.py --agents 20 --changes 100 --repeat 3 \
        --code before=/dev/shm/before --code after=.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# --code-dir: the checkout a --worker process imports, before any import of kubelab (harness imports this
# checkout's, so a worker does without it).
if "--code-dir" in sys.argv:
    sys.path.insert(0, sys.argv[sys.argv.index("--code-dir") + 1])
else:
    from harness import Lab

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


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "loadavg": [round(x, 2) for x in os.getloadavg()], "python": sys.version.split()[0]}


async def one_run(server: str, agents: int, changes: int, *, shared: bool) -> dict[str, Any]:
    rules = Path(tempfile.mkdtemp(prefix="proxy-fanout-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    try:
        return await _one_run(server, agents, changes, shared=shared, rules=rules)
    finally:
        shutil.rmtree(rules, ignore_errors=True)


async def _one_run(server: str, agents: int, changes: int, *, shared: bool, rules: Path) -> dict[str, Any]:
    async with ApiClient(server, fast_requests=True) as writer, ApiClient(server, fast_requests=True) as api:
        await writer.create(kinds.SERVICES, {"apiVersion": "v1", "kind": "Service",
                                             "metadata": {"name": NAME, "namespace": NS},
                                             "spec": {"selector": {"app": NAME}, "ports": [{"name": "http", "port": 80,
                                                                                           "targetPort": 8080}]}})
        current = await writer.create(kinds.ENDPOINTSLICES, slice_body(0, None))
        informers = SharedProxyInformers(api) if shared else None
        made = [ProxyAgent(api, ProxyConfig(node_name=f"fanout-{i}", node_ips=(f"10.98.0.{i + 1}",),
                                            cluster_cidr="10.244.0.0/16"),
                           RecordingApplier(), min_sync_period=1.0, informers=informers,
                           state_file=rules / f"fanout-{i}" / "iptables.rules") for i in range(agents)]
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
                    "syncs_in_all": sum(a.syncs - before for a, before in zip(made, syncs0, strict=True)),
                    "loadavg_1m": round(os.getloadavg()[0], 2)}
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await writer.delete(kinds.ENDPOINTSLICES, f"{NAME}-x", NS)
            await writer.delete(kinds.SERVICES, NAME, NS)


def per_change(result: dict[str, Any], base: dict[str, Any], changes: int) -> dict[str, Any]:
    for key in ("cpu_delivered", "cpu_with_syncs"):
        result[f"{key}_ms_per_change"] = round((result[f"{key}_s"] - base[f"{key}_s"]) * 1000 / changes, 2)
    result["writer_cpu_ms_per_change"] = round(base["cpu_delivered_s"] * 1000 / changes, 2)
    return result


async def worker(server: str, agents: int, changes: int) -> dict[str, Any]:
    """One code's shared-mode run, with its own 0-agent baseline (the writer's CPU) just before."""
    base = await one_run(server, 0, changes, shared=True)
    return per_change(await one_run(server, agents, changes, shared=True), base, changes)


def compare(server: str, codes: list[tuple[str, str]], agents: list[int], changes: int, repeat: int) -> None:
    results: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for _ in range(repeat):
        for n in agents:
            for name, directory in codes:
                done = subprocess.run([sys.executable, __file__, "--worker", "--code-dir", str(Path(directory).resolve()),
                                       "--server", server, "--agents", str(n), "--changes", str(changes)],
                                      capture_output=True, text=True, check=True)
                result = json.loads(done.stdout.splitlines()[-1])
                result["code"] = name
                print(json.dumps(result), flush=True)
                results.setdefault((name, n), []).append(result)
    print(json.dumps({"machine": machine()}))
    print("\n| agents | code | CPU per change with the syncs, median (min-max) | delivered only | syncs per agent |"
          " load (1 min) |")
    print("|---:|---|---:|---:|---:|---:|")
    for (name, n), runs in results.items():
        synced = [r["cpu_with_syncs_ms_per_change"] for r in runs]
        delivered = [r["cpu_delivered_ms_per_change"] for r in runs]
        syncs = [r["syncs_in_all"] / max(n, 1) for r in runs]
        loads = [r["loadavg_1m"] for r in runs]
        print(f"| {n} | {name} | {statistics.median(synced):.2f} ms ({min(synced):.2f}-{max(synced):.2f}) | "
              f"{statistics.median(delivered):.2f} ms | {statistics.median(syncs):.1f} | "
              f"{min(loads):.1f}-{max(loads):.1f} |")
    if len(codes) == 2:
        (a, _), (b, _) = codes
        for n in agents:
            ratio = (statistics.median(r["cpu_with_syncs_ms_per_change"] for r in results[(a, n)])
                     / statistics.median(r["cpu_with_syncs_ms_per_change"] for r in results[(b, n)]))
            print(f"{n} agents: {a}/{b} CPU per change with the syncs {ratio:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, action="append", help="agents per run (default 20 and 50)")
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--code", action="append", default=[], metavar="NAME=DIR",
                        help="a kubelab checkout whose agents to measure (repeatable; shared informers only)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--code-dir", help=argparse.SUPPRESS)
    parser.add_argument("--server", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(asyncio.run(worker(args.server, args.agents[0], args.changes))))
        return
    lab = Lab()
    results: list[dict[str, Any]] = []
    try:
        lab.start_etcd()
        server = lab.start_apiserver()
        if args.code:
            compare(server, [(name, d) for name, d in (c.split("=", 1) for c in args.code)], args.agents or [20],
                    args.changes, args.repeat)
            return
        for _ in range(args.repeat):
            base = asyncio.run(one_run(server, 0, args.changes, shared=False))
            for agents in args.agents or [20, 50]:
                for shared in (False, True):
                    result = per_change(asyncio.run(one_run(server, agents, args.changes, shared=shared)), base,
                                        args.changes)
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
