"""ClusterLoader2-shaped density on the netns lab: `kubelab up --nodes N` as users run it, one Deployment of
R replicas behind one Service.

    .venv/bin/python bench/density.py                              # 20 nodes x 10 pods, then 50 x 20
    .venv/bin/python bench/density.py --size 20x10
    .venv/bin/python bench/density.py --size 20x10 --code before=/tmp/base --code after=. --repeat 2
    .venv/bin/python bench/density.py --size 20x10 --profile /tmp/prof   # py-spy `kubelab up` and its API server's process
    .venv/bin/python bench/density.py --size 20x10 --serve   # pods with containerPort 80: a pod server each

Each run starts the real command, `python -m kubelab up --nodes N --dataplane netns` (its own private
etcd on /dev/shm, its own data dir, port and lab prefix), as a process of its own, from the checkout given
with --code. Once it says it is up, from this process (aiohttp, outside the cluster): a Service `density`
(port 80) selecting app=density, then a Deployment of N x P replicas of 10m / 16Mi (CL2's density pods:
pause, no ports of their own) whose pods the Service selects. Measured, per run:

- pod startup latency, as CL2's pod_startup_latency: from the pod's appearance on a pod watch (ADDED; its
  creationTimestamp has whole seconds only) to the watch event that first shows it Running, p50/p90/p99;
  and its stages on the same watch: created -> bound (spec.nodeName) -> the kubelet's first status
  (status.hostIP) -> Running (`--timeline FILE`: every pod's stage times);
- rules complete: for every node, the first moment its own iptables (`iptables-save -t nat` in the
  node's network namespace, polled every --poll seconds) DNATs to every replica's IP (only this Service
  selects them; its rules' comments are not read, since over 1,000 endpoints kube-proxy leaves them out),
  counted from the Deployment's create; the slowest node is the figure (target <= 10 s);
- API call latency: the API server's own apiserver_request_duration_seconds histogram (as CL2's
  APIResponsivenessPrometheus reads it), the delta over the run, p99 by bucket upper bound for mutating
  single-object calls (POST/PUT/PATCH/DELETE) and for LISTs, and p50/p99 of the busiest calls;
- memory: RSS of the `kubelab up` process when up (nodes, no pods) and with every pod Running; per pod
  the difference over the replicas; its pod processes beside it (sandboxes, pod servers and their zygote:
  number, RSS, PSS and the CPU they used, which the CPU below leaves out);
- the watch events the API server sent during the run, by kind, with their bytes;
- CPU seconds of `kubelab up` (with its API server's and scheduler's processes: bench/harness.py
  up_processes) and of its etcd from the Deployment's create to the last node's rules, the API server's
  and the scheduler's processes apart; and over the same window the whole machine's CPU time (both
  cores, /proc/stat) as shares busy, busy niced (the nodes' iptables runs at nice 19) and idle: a window
  near 100 % busy was waiting for CPUs;
- and the machine's gauge: raw etcd puts/s of pod-sized bytes at 32 in flight into the same etcd.

Everything started here is stopped here (Ctrl-C first, as a user would; then by PID), whatever happens;
`kubelab up` removes its namespaces on Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import subprocess
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import aiohttp
from harness import (
    ROOT,
    cpu_breakdown,
    cpu_seconds,
    machine,
    machine_cpu,
    machine_share,
    percentile,
    rss_mib,
    runqueue_wait,
    up_cpu_seconds,
    up_processes,
)
from up import NAMESPACE, Cluster, Profiles, gauge, list_all, watch

APP = "density"
MUTATING = ("POST", "PUT", "PATCH", "DELETE")
_BUCKET = re.compile(r'^apiserver_request_duration_seconds_bucket\{(?P<labels>[^}]*)\} (?P<value>\S+)$')
_LABEL = re.compile(r'(\w+)="([^"]*)"')
_WATCH = re.compile(r'^apiserver_watch_events_(?P<what>total|sizes_sum)\{(?P<labels>[^}]*)\} (?P<value>\S+)$')
# Every endpoint's DNAT, whichever Service: over 1,000 endpoints kube-proxy (and the proxy agent) drops the
# per-endpoint comments (large-cluster mode), so they cannot name the Service. Other Services' endpoints in the
# set do no harm: the check is that every replica is in it.
_DNAT = re.compile(r"-j DNAT --to-destination (\d+\.\d+\.\d+\.\d+):")


def service_body() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": APP, "namespace": NAMESPACE},
            "spec": {"selector": {"app": APP}, "ports": [{"name": "http", "port": 80, "targetPort": 80}]}}


def deployment_body(replicas: int, *, serve: bool = False) -> dict[str, Any]:
    """CL2's density deployment: pause pods requesting 10m / 16Mi (testing/density/deployment.yaml). With
    `serve`, each declares containerPort 80, the Service's targetPort, so kubelab runs its built-in HTTP
    server in every pod, as for a Deployment of a web server."""
    resources = {"cpu": "10m", "memory": "16Mi"}
    container: dict[str, Any] = {"name": "pause", "image": "registry.k8s.io/pause:3.10.1",
                                 "resources": {"requests": resources, "limits": resources}}
    if serve:
        container["ports"] = [{"name": "http", "containerPort": 80}]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": APP, "namespace": NAMESPACE},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": APP}},
                     "template": {"metadata": {"labels": {"app": APP}}, "spec": {"containers": [container]}}}}


# --- the API server's latency histogram -------------------------------------------------------------


async def scrape(http: aiohttp.ClientSession) -> dict[tuple[str, str, str, str], dict[float, float]]:
    """(verb, resource, subresource, scope) -> {le: cumulative count} of apiserver_request_duration_seconds."""
    async with http.get("/metrics") as resp:
        text = (await resp.read()).decode()
    out: dict[tuple[str, str, str, str], dict[float, float]] = defaultdict(dict)
    for line in text.splitlines():
        m = _BUCKET.match(line)
        if not m:
            continue
        labels = dict(_LABEL.findall(m["labels"]))
        key = (labels.get("verb", ""), labels.get("resource", ""), labels.get("subresource", ""),
               labels.get("scope", ""))
        le = math.inf if labels["le"] == "+Inf" else float(labels["le"])
        out[key][le] = out[key].get(le, 0.0) + float(m["value"])
    return out


async def watch_traffic(http: aiohttp.ClientSession) -> dict[str, tuple[float, float]]:
    """kind -> (events, bytes) the API server has sent to watchers so far (apiserver_watch_events_*)."""
    async with http.get("/metrics") as resp:
        text = (await resp.read()).decode()
    out: dict[str, tuple[float, float]] = {}
    for line in text.splitlines():
        m = _WATCH.match(line)
        if m:
            kind = dict(_LABEL.findall(m["labels"])).get("kind", "")
            events, size = out.get(kind, (0.0, 0.0))
            out[kind] = (events + float(m["value"]), size) if m["what"] == "total" else (events, size + float(m["value"]))
    return out


def watch_summary(before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]) -> dict[str, Any]:
    """What the watchers were sent during the run, by kind, the most bytes first: each watcher decodes its own copy."""
    rows = {kind: (events - before.get(kind, (0.0, 0.0))[0], size - before.get(kind, (0.0, 0.0))[1])
            for kind, (events, size) in after.items()}
    return {kind: {"events": int(events), "MiB": round(size / 2**20, 1)}
            for kind, (events, size) in sorted(rows.items(), key=lambda kv: -kv[1][1]) if events}


def latency_summary(before: dict[Any, dict[float, float]], after: dict[Any, dict[float, float]]
                    ) -> dict[str, Any]:
    """p99 (a bucket's upper bound, as Prometheus' histogram_quantile rounds up to) of the calls made between
    the two scrapes: mutating single-object calls, and LISTs; the busiest (verb, resource) of each."""
    groups: dict[str, dict[float, float]] = {"mutating": defaultdict(float), "list": defaultdict(float)}
    counts: Counter[str] = Counter()
    per_call: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    for key, buckets in after.items():
        verb, resource, sub, _scope = key
        if verb == "WATCH" or verb == "CONNECT":
            continue
        group = "mutating" if verb in MUTATING else "list" if verb == "LIST" else None
        if group is None:
            continue
        delta = {le: n - before.get(key, {}).get(le, 0.0) for le, n in buckets.items()}
        call = f"{verb} {resource}{'/' + sub if sub else ''}"
        for le, n in delta.items():
            groups[group][le] += n
            per_call[call][le] += n
        counts[call] += int(delta.get(math.inf, 0))

    def quantiles(buckets: dict[float, float]) -> dict[str, Any]:
        total = buckets.get(math.inf, 0.0)
        p99 = next((le for le in sorted(buckets) if total and buckets[le] >= 0.99 * total), None)
        p50 = next((le for le in sorted(buckets) if total and buckets[le] >= 0.5 * total), None)
        return {"calls": int(total), "p50_le_s": p50, "p99_le_s": p99}

    result: dict[str, Any] = {group: quantiles(buckets) for group, buckets in groups.items()}
    result["busiest"] = {call: quantiles(per_call[call]) for call, _ in counts.most_common(8)}
    return result


# --- the nodes' rules -------------------------------------------------------------------------------


async def dnat_targets(netns: str) -> set[str]:
    """The pod IPs the node's nat table DNATs the Service to (its KUBE-SEP chains)."""
    proc = await asyncio.create_subprocess_exec("ip", "netns", "exec", netns, "iptables-save", "-t", "nat",
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    out, _ = await proc.communicate()
    return {m[1] for line in out.decode().splitlines() if (m := _DNAT.search(line))}


def pod_processes(pid: int) -> dict[str, Any]:
    """The processes below `kubelab up` that are not its own (its API server's and scheduler's processes):
    pod sandboxes and pod servers, and the zygote the servers are forked from since it came. Their number,
    their RSS summed (pages a fork shares with its zygote counted in each), their PSS (shared pages split
    between those that share them) and the CPU they have used: a pod server's start, which a run's
    cpu_s does not see (they are not reaped until the end)."""
    kids: dict[int, list[int]] = defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    kids[int(f.read().rsplit(")", 1)[1].split()[1])].append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    own = set(up_processes(pid))
    todo = [child for child in kids[pid] if child not in own]
    found: list[int] = []
    while todo:
        found.append(todo.pop())
        todo += kids[found[-1]]
    rss = pss = cpu = 0.0
    for proc in found:
        try:
            rss += rss_mib(proc)
            with open(f"/proc/{proc}/smaps_rollup") as f:
                pss += next(int(line.split()[1]) for line in f if line.startswith("Pss:")) / 1024
            cpu += cpu_seconds(proc)
        except (OSError, StopIteration):
            continue
    return {"count": len(found), "rss_mib": round(rss, 1), "pss_mib": round(pss, 1), "cpu_s": round(cpu, 1)}


# --- one run ----------------------------------------------------------------------------------------


async def density(cluster: Cluster, nodes: int, per_node: int, args: argparse.Namespace) -> dict[str, Any]:
    replicas = nodes * per_node
    result: dict[str, Any] = {"nodes": nodes, "pods": replicas, "serving": args.serve}
    state = json.loads((cluster.base / "data" / "cluster.json").read_text())
    netns = {name: node["netns"] for name, node in state["nodes"].items()}
    result["gauge_before"] = await gauge(cluster, args.gauge_puts)
    async with aiohttp.ClientSession(cluster.server, timeout=aiohttp.ClientTimeout(total=300)) as http:
        await asyncio.sleep(args.settle)  # what `kubelab up` does once up (leases, first syncs) settles
        ups = up_processes(cluster.proc.pid)  # with the API server's and the scheduler's processes (the defaults)
        apis = up_processes(cluster.proc.pid, (b"launcher.upapiserver",))[1:]
        schedulers = up_processes(cluster.proc.pid, (b"launcher.upscheduler",))[1:]
        result["up_processes"] = len(ups)
        rss_idle = sum(rss_mib(pid) for pid in ups)
        result["rss_mib_up"] = round(rss_idle, 1)
        result["rss_mib_per_node_up"] = round(rss_idle / nodes, 1)
        _, pods_rv = await list_all(http, f"/api/v1/namespaces/{NAMESPACE}/pods")
        seen: dict[str, float] = {}
        running: dict[str, float] = {}
        ips: dict[str, str] = {}
        # Where a pod's startup went, seen on the same watch: bound (spec.nodeName set), its kubelet's first
        # status (status.hostIP: the kubelet has taken the pod up; a checkout before ec4d81c wrote hostIP
        # only with Running, so there the last stage reads 0), Running.
        bound: dict[str, float] = {}
        taken_up: dict[str, float] = {}

        def on_pod(kind: str, obj: dict[str, Any], now: float) -> None:
            name = obj["metadata"]["name"]
            if kind == "DELETED":
                return
            seen.setdefault(name, now)
            status = obj.get("status") or {}
            if (obj.get("spec") or {}).get("nodeName"):
                bound.setdefault(name, now)
            if status.get("hostIP"):
                taken_up.setdefault(name, now)
            if status.get("phase") == "Running" and name not in running:
                running[name] = now
                ips[name] = status.get("podIP", "")

        pod_watch = asyncio.create_task(watch(http, f"/api/v1/namespaces/{NAMESPACE}/pods", pods_rv, on_pod,
                                              labelSelector=f"app={APP}"))
        metrics_before = await scrape(http)
        watched_before = await watch_traffic(http)
        async with http.post(f"/api/v1/namespaces/{NAMESPACE}/services", json=service_body()) as resp:
            assert resp.status == 201, await resp.text()
        spies = Profiles(ups, Path(args.profile) / f"density-{args.label}-{nodes}x{per_node}.txt") \
            if args.profile else None
        up0, etcd0, api0 = up_cpu_seconds(ups), cpu_seconds(cluster.etcd_pid or 0), up_cpu_seconds(apis)
        scheduler0 = up_cpu_seconds(schedulers)
        parts0 = cpu_breakdown(cluster.proc.pid)
        api_wait0 = [runqueue_wait(pid) for pid in apis]
        machine0 = machine_cpu()
        t0 = time.time()
        async with http.post(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments",
                             json=deployment_body(replicas, serve=args.serve)) as resp:
            assert resp.status == 201, await resp.text()
        complete: dict[str, float] = {}
        deadline = time.monotonic() + args.timeout
        polls = 0
        while (len(complete) < nodes or len(running) < replicas) and time.monotonic() < deadline:
            want = set(ips.values()) if len(running) >= replicas else None
            if want is not None:
                todo = [n for n in netns if n not in complete]
                found = await asyncio.gather(*(dnat_targets(netns[n]) for n in todo))
                now = time.time()
                polls += 1
                for name, targets in zip(todo, found, strict=True):
                    if want <= targets:
                        complete[name] = now
            await asyncio.sleep(args.poll)
        up1, etcd1, api1 = up_cpu_seconds(ups), cpu_seconds(cluster.etcd_pid or 0), up_cpu_seconds(apis)
        scheduler1 = up_cpu_seconds(schedulers)
        parts1 = cpu_breakdown(cluster.proc.pid)
        api_wait1 = [runqueue_wait(pid) for pid in apis]
        machine1 = machine_cpu()
        if spies is not None:
            await spies.stop()
        metrics_after = await scrape(http)
        watched_after = await watch_traffic(http)
        pod_watch.cancel()
        startup = [running[n] - seen[n] for n in running if n in seen]
        result["running"] = len(running)
        result["pod_startup_s"] = {"p50": round(percentile(startup, 50), 2), "p90": round(percentile(startup, 90), 2),
                                   "p99": round(percentile(startup, 99), 2),
                                   "max": round(max(startup), 2) if startup else None}
        result["startup_stages_s"] = {
            stage: {"p50": round(percentile(spans, 50), 2), "p99": round(percentile(spans, 99), 2)}
            for stage, spans in (("created -> bound", [bound[n] - seen[n] for n in bound if n in seen]),
                                 ("bound -> kubelet's first status", [taken_up[n] - bound[n] for n in taken_up
                                                                      if n in bound]),
                                 ("kubelet's first status -> Running", [running[n] - taken_up[n] for n in running
                                                                        if n in taken_up]))}
        if args.timeline:
            Path(args.timeline).write_text(json.dumps({"t0": t0, "pods": {
                n: {"seen": seen[n], "bound": bound.get(n), "kubelet": taken_up.get(n), "running": running.get(n)}
                for n in seen}}))
        result["all_running_after_create_s"] = round(max(running.values()) - t0, 2) if running else None
        slowest = max(complete.values()) if len(complete) == nodes else None
        result["rules_complete_after_create_s"] = {
            "every_node": round(slowest - t0, 2) if slowest else None,
            "first_node": round(min(complete.values()) - t0, 2) if complete else None,
            "nodes_complete": len(complete), "polls": polls}
        result["api_latency"] = latency_summary(metrics_before, metrics_after)
        result["watch_events_sent"] = watch_summary(watched_before, watched_after)
        # Both processes together, then the components' process (`kubelab up` itself) split into its event
        # loop's thread, its other threads and the children it reaped (iptables, ip, sandboxes); and how long
        # each process's main thread was runnable but waited for a CPU (what the machine's load costs them).
        result["cpu_s"] = {"kubelab up": round(up1 - up0, 1), "its etcd": round(etcd1 - etcd0, 1),
                           "API server's process": round(api1 - api0, 1),
                           "API server's process: main thread waiting for a CPU": round(
                               sum(api_wait1) - sum(api_wait0), 1),
                           "scheduler's process": round(scheduler1 - scheduler0, 1),
                           **{f"components' process: {k}": round(parts1[k] - parts0[k], 1) for k in parts0}}
        # From the Deployment's create to the last poll: the whole machine's CPU (both cores) by kind, as
        # shares; busy + niced near 1 means the rollout was waiting for CPUs, not for anything else.
        result["machine_cpu_share"] = machine_share(machine0, machine1)
        rss_full = sum(rss_mib(pid) for pid in ups)
        result["rss_mib_running"] = round(rss_full, 1)
        result["rss_kib_per_pod"] = round(1024 * (rss_full - rss_idle) / replicas, 1)
        result["children"] = pod_processes(cluster.proc.pid)
        if len(running) < replicas:
            # Where the others are, from the API rather than the watch: phase and node of every pod not seen
            # Running, and the reason of a container that is not running.
            pods, _ = await list_all(http, f"/api/v1/namespaces/{NAMESPACE}/pods", labelSelector=f"app={APP}")
            waiting: Counter[str] = Counter()
            for pod in pods:
                if pod["metadata"]["name"] in running:
                    continue
                status = pod.get("status") or {}
                reasons = {next(iter(s.get("state") or {"?": {}})) + ":" + str(next(iter(
                    (s.get("state") or {}).values()), {}).get("reason", "")) for s in status.get("containerStatuses") or []}
                waiting[f"{status.get('phase', '?')} on {pod['spec'].get('nodeName') or '(unbound)'} "
                        f"{','.join(sorted(reasons))}"] += 1
            result["not_seen_running"] = {"pods": len(pods), "listed_running_but_missed": sum(
                1 for pod in pods if pod["metadata"]["name"] not in running and
                (pod.get("status") or {}).get("phase") == "Running"), "by_state": dict(waiting.most_common(12))}
    result["gauge_after"] = await gauge(cluster, args.gauge_puts)
    if spies is not None:
        result.update(spies.summaries())
    return result


async def one_run(code: Path, nodes: int, per_node: int, args: argparse.Namespace) -> dict[str, Any]:
    cluster = Cluster(code, grace="50", up_args=("--nodes", str(nodes), "--dataplane", "netns"))
    result: dict[str, Any] = {"code": args.label}
    try:
        started = time.monotonic()
        await cluster.wait_up()
        result["startup_s"] = round(time.monotonic() - started, 2)
        result.update(await density(cluster, nodes, per_node, args))
    finally:
        await asyncio.to_thread(cluster.stop)
    result["ctrl_c_to_exit_s"] = cluster.stop_seconds
    left = (await asyncio.to_thread(subprocess.run, ["ip", "netns", "list"], check=False, capture_output=True,
                                    text=True)).stdout
    result["namespaces_left"] = sum(1 for line in left.splitlines() if line.startswith(f"{cluster.prefix}-")) \
        if cluster.prefix else None
    return result


def table_row(r: dict[str, Any]) -> str:
    g = (r["gauge_before"]["raw_etcd_puts_per_s"], r["gauge_after"]["raw_etcd_puts_per_s"])
    s, rules, api = r["pod_startup_s"], r["rules_complete_after_create_s"], r["api_latency"]
    busy = r["machine_cpu_share"]
    return (f"| {r['code']} | {r['nodes']} x {r['pods'] // r['nodes']} | {s['p50']} s | **{s['p99']} s** | "
            f"**{rules['every_node']} s** | {api['mutating']['p99_le_s']} s | {api['list']['p99_le_s']} s | "
            f"{r['rss_mib_per_node_up']} MiB | {r['rss_kib_per_pod']} KiB | {r['cpu_s']['kubelab up']} s | "
            f"{busy['busy']:.0%} + {busy['niced']:.0%} | {g[0]:,} / {g[1]:,} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", action="append", metavar="NODESxPODS",
                        help="nodes x pods per node (repeat; default 20x10 then 50x20)")
    parser.add_argument("--code", action="append", metavar="LABEL=DIR",
                        help="a checkout to run `kubelab up` from (repeat for A/B; runs alternate); default: this one")
    parser.add_argument("--repeat", type=int, default=1, help="rounds (each runs every --code once)")
    parser.add_argument("--gauge-puts", type=int, default=3000, help="raw etcd puts per gauge")
    parser.add_argument("--poll", type=float, default=0.25, help="seconds between reads of the nodes' rules")
    parser.add_argument("--serve", action="store_true",
                        help="pods declare containerPort 80, so each runs kubelab's built-in HTTP server "
                             "(CL2's pause pods declare none)")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds to wait after `kubelab up` is up")
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for the rules of every node")
    parser.add_argument("--profile", metavar="DIR", help="py-spy `kubelab up`'s processes from the Deployment's "
                        "create to the last node's rules")
    parser.add_argument("--json", metavar="FILE", help="also write every result here")
    parser.add_argument("--timeline", metavar="FILE", help="write each pod's stage times (epoch seconds) here")
    args = parser.parse_args()
    codes = [(c.split("=", 1)[0], Path(c.split("=", 1)[1]).resolve()) for c in args.code or [f"this={ROOT}"]]
    sizes = [tuple(int(x) for x in s.split("x")) for s in args.size or ["20x10", "50x20"]]
    results = []
    for nodes, per_node in sizes:
        for _ in range(args.repeat):
            for label, code in codes:
                args.label = label
                before = machine()
                result = asyncio.run(one_run(code, nodes, per_node, args))
                result["machine"] = {"before": before, "after": machine()}
                print(json.dumps(result), flush=True)
                results.append(result)
    print("\n| code | nodes x pods/node | pod startup p50 | p99 | every node's rules complete | mutating p99 | "
          "LIST p99 | RSS per node (up) | RSS per pod | `kubelab up` CPU | machine busy + niced | "
          "gauge: raw etcd puts/s (before / after) |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(table_row(r))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
