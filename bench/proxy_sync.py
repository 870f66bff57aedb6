"""Benchmark of the proxy agent: render and iptables-restore at 1k, 5k and 10k Services x 3 endpoints.

Run as root (it creates network namespaces, named klbench-*, and always deletes them):

    .venv/bin/python bench/proxy_sync.py                      # all sizes, both backends
    .venv/bin/python bench/proxy_sync.py --sizes 1000 --repeat 3 --backends iptables-legacy

For every size it measures, each `--repeat` times, and reports median and spread (min-max):

* render: `render()` of the objects, as `kubelab proxy render` does (cold: fresh process state
  apart from the memoized hashes), and the agent's full-sync render (its model already built from
  the informer events, fragment cache empty);
* full restore: the full payload into an empty namespace, by the agent's IptablesApplier
  (`ip netns exec NS <backend>-restore -w 5 -W 100000 --noflush --counters`) and, as the baseline,
  by a plain `<backend>-restore --noflush --counters` of the same payload into another empty
  namespace, in the same run;
* one-Service change (largest size): the agent holds the full ruleset in a namespace; one Service's
  endpoints change and the agent runs a partial sync (render + one iptables-restore); the same
  partial payload is then restored again with plain iptables-restore as the baseline. Then the
  same agent turns on --delta-sync (after one sync that records the shared chains) and the change
  is measured again the same way.

`--skip-full` leaves out the full-restore measurements (on iptables-nft at 10k they take ten minutes)
and keeps the rest.

Nothing here is asserted; the numbers go to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import secrets
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubelab.models import EndpointSlice, Service
from proxyagent import Proxier, ProxyConfig, render
from proxyagent.apply import IptablesApplier
from proxyagent.render import render_ports
from proxyagent.servicerules import FragmentCache

CONFIG = ProxyConfig(node_name="node-1", node_ips=("10.240.0.11",), cluster_cidr="10.244.0.0/16")
BACKENDS = ("iptables-nft", "iptables-legacy")


def make_objects(count: int) -> tuple[list[Service], list[EndpointSlice]]:
    """`count` ClusterIP Services (one named port) with 3 ready endpoints each, spread over 3 nodes."""
    services, slices = [], []
    for i in range(count):
        name = f"svc-{i}"
        services.append(Service.from_dict({
            "apiVersion": "v1", "kind": "Service", "metadata": {"namespace": "bench", "name": name},
            "spec": {"type": "ClusterIP", "clusterIP": f"10.{96 + i // 65536}.{i // 256 % 256}.{i % 256}",
                     "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]}}))
        slices.append(endpoint_slice(name, [endpoint_ip(3 * i + k) for k in range(3)]))
    return services, slices


def endpoint_ip(n: int) -> str:
    return f"10.{244 + n // 62500}.{n // 250 % 250}.{n % 250 + 2}"


def endpoint_slice(service: str, ips: list[str]) -> EndpointSlice:
    return EndpointSlice.from_dict({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"namespace": "bench", "name": f"{service}-x", "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": [{"addresses": [ip], "nodeName": f"node-{k + 1}", "conditions": {"ready": True}}
                      for k, ip in enumerate(ips)]})


@contextmanager
def namespace(tag: str) -> Iterator[str]:
    name = f"klbench-{secrets.token_hex(3)}-{tag}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def plain_restore(ns: str, backend: str, payload: bytes) -> float:
    """The baseline: a plain iptables-restore of `payload` (wall time, seconds)."""
    start = time.perf_counter()
    subprocess.run(["ip", "netns", "exec", ns, f"{backend}-restore", "--noflush", "--counters"], input=payload,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def agent_restore(ns: str, backend: str, payload: str) -> float:
    """The agent's IptablesApplier.restore of `payload` (wall time, seconds)."""
    start = time.perf_counter()
    asyncio.run(IptablesApplier(ns, backend=backend).restore(payload))
    return time.perf_counter() - start


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def summary(samples: list[float]) -> dict[str, float]:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples), "n": len(samples)}


def fed_proxier(services: list[Service], slices: list[EndpointSlice], applier: Any) -> Proxier:
    proxier = Proxier(CONFIG, applier, min_sync_period=0.0)
    for svc in services:
        proxier.on_service("ADDED", None, svc)
    for es in slices:
        proxier.on_slice("ADDED", None, es)
    proxier.on_services_synced()
    proxier.on_slices_synced()
    return proxier


def bench_size(count: int, backends: list[str], repeat: int, partial: bool, skip_full: bool) -> dict[str, Any]:
    services, slices = make_objects(count)
    result: dict[str, Any] = {"services": count, "endpoints": 3 * count}
    payload = render(services, slices, CONFIG).text
    result["payload"] = {"lines": payload.count("\n"), "bytes": len(payload)}
    result["render_cli"] = summary([timed(lambda: render(services, slices, CONFIG)) for _ in range(repeat)])
    state = fed_proxier(services, slices, None).state
    result["render_agent_full"] = summary([
        timed(lambda: render_ports(state.service_ports(), state.endpoints_map(), CONFIG, cache=FragmentCache()))
        for _ in range(repeat)])
    encoded = payload.encode()
    for backend in backends:
        ours, base = [], []
        for i in range(0 if skip_full else repeat):
            # Alternate who goes first, so drift on a shared machine hits both alike.
            for which in ((0, 1) if i % 2 == 0 else (1, 0)):
                with namespace(backend.rsplit("-", 1)[1]) as ns:
                    if which == 0:
                        ours.append(agent_restore(ns, backend, payload))
                    else:
                        base.append(plain_restore(ns, backend, encoded))
        if not skip_full:
            result[f"full_restore/{backend}"] = {"agent": summary(ours), "baseline": summary(base)}
            print(f"  {count} {backend}: full restore agent {statistics.median(ours):.3f}s, "
                  f"baseline {statistics.median(base):.3f}s", flush=True)
        if partial:
            result[f"one_service_change/{backend}"] = asyncio.run(
                bench_partial(services, slices, backend, repeat))
    return result


async def bench_partial(services: list[Service], slices: list[EndpointSlice], backend: str,
                        repeat: int) -> dict[str, Any]:
    """The agent holds every rule in a namespace; one Service's endpoints change; partial sync."""
    with namespace(backend.rsplit("-", 1)[1]) as ns:
        proxier = fed_proxier(services, slices, IptablesApplier(ns, backend=backend))
        await proxier.sync_proxy_rules()
        first = dict(proxier.last_timings)
        target = len(slices) // 2
        current = slices[target]
        serial = 0

        async def one_change() -> None:
            nonlocal current, serial
            others = [(e.addresses or ["?"])[0] for e in (current.endpoints or [])[1:]]
            changed = endpoint_slice(f"svc-{target}", [f"10.250.{serial // 250}.{serial % 250 + 2}", *others])
            serial += 1
            proxier.on_slice("MODIFIED", current, changed)
            current = changed
            ruleset = await proxier.sync_proxy_rules()
            assert ruleset is not None and not ruleset.full_sync and ruleset.services_written == 1

        async def measure() -> dict[str, Any]:
            totals, renders, restores, base = [], [], [], []
            for _ in range(repeat):
                await one_change()
                totals.append(proxier.last_timings["total"])
                renders.append(proxier.last_timings["render"] + proxier.last_timings.get("delta", 0.0))
                restores.append(proxier.last_timings["restore"])
                base.append(plain_restore(ns, backend, proxier.last_payload.encode()))
            return {"payload_lines": proxier.last_payload.count("\n"), "sync_total": summary(totals),
                    "render": summary(renders), "restore": summary(restores), "baseline_restore": summary(base)}

        result: dict[str, Any] = {"agent_first_full_sync": first, **await measure()}
        proxier.delta_sync = True
        await one_change()  # the first delta sync writes the shared chains whole and records them
        result["delta"] = await measure()
        return result


def fmt(s: dict[str, float]) -> str:
    return f"{s['median'] * 1000:,.0f} ms ({s['min'] * 1000:,.0f}-{s['max'] * 1000:,.0f})"


def report(results: list[dict[str, Any]], backends: list[str]) -> str:
    lines = ["| Services | payload lines | render (CLI) | render (agent, full) | "
             + " | ".join(f"full restore {b}: agent / plain (ratio)" for b in backends) + " |",
             "|---:|---:|---:|---:|" + "---:|" * len(backends)]
    for r in results:
        cells = [f"{r['services']:,}", f"{r['payload']['lines']:,}", fmt(r["render_cli"]), fmt(r["render_agent_full"])]
        for b in backends:
            f = r.get(f"full_restore/{b}")
            if f is None:  # --skip-full
                cells.append("-")
                continue
            ratio = f["agent"]["median"] / f["baseline"]["median"]
            cells.append(f"{fmt(f['agent'])} / {fmt(f['baseline'])} ({ratio:.2f})")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("| Services | " + " | ".join(f"render (CLI) / plain {b} restore" for b in backends) + " | "
                 + " | ".join(f"render (agent) / plain {b} restore" for b in backends) + " |")
    lines.append("|---:|" + "---:|" * (2 * len(backends)))
    for r in results:
        if any(f"full_restore/{b}" not in r for b in backends):
            continue
        base = [r[f"full_restore/{b}"]["baseline"]["median"] for b in backends]
        lines.append(f"| {r['services']:,} | "
                     + " | ".join(f"{r['render_cli']['median'] / x:.2f}" for x in base) + " | "
                     + " | ".join(f"{r['render_agent_full']['median'] / x:.2f}" for x in base) + " |")
    lines.append("")
    lines.append("| one-Service change | backend | partial payload lines | agent sync total | render | restore | "
                 "plain restore of the same payload | restore ratio |")
    lines.append("|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        for b in backends:
            p = r.get(f"one_service_change/{b}")
            if p:
                ratio = p["restore"]["median"] / p["baseline_restore"]["median"]
                lines.append(f"| {r['services']:,} | {b} | {p['payload_lines']:,} | {fmt(p['sync_total'])} | "
                             f"{fmt(p['render'])} | {fmt(p['restore'])} | {fmt(p['baseline_restore'])} | "
                             f"{ratio:.2f} |")
                d = p.get("delta")
                if d:
                    ratio = d["restore"]["median"] / d["baseline_restore"]["median"]
                    lines.append(f"| {r['services']:,} | {b}, --delta-sync | {d['payload_lines']:,} | "
                                 f"{fmt(d['sync_total'])} | {fmt(d['render'])} | {fmt(d['restore'])} | "
                                 f"{fmt(d['baseline_restore'])} | {ratio:.2f} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 10000])
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-full", action="store_true", help="leave out the full-restore measurements")
    parser.add_argument("--json", type=Path, help="also write the raw numbers here")
    parser.add_argument("--report", type=Path, metavar="JSON", help="only print the tables of an earlier --json")
    args = parser.parse_args()
    if args.report:
        print(report(json.loads(args.report.read_text()), args.backends))
        return 0
    if os.geteuid() != 0:
        print("bench/proxy_sync.py needs root (network namespaces, iptables)", file=sys.stderr)
        return 1
    print(f"# proxy_sync on {platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"{subprocess.run(['iptables', '--version'], capture_output=True, text=True, check=False).stdout.strip()}", flush=True)
    results = []
    for count in args.sizes:
        print(f"{count} Services x 3 endpoints ...", flush=True)
        results.append(bench_size(count, args.backends, args.repeat, partial=count == max(args.sizes),
                                  skip_full=args.skip_full))
    print(report(results, args.backends))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
