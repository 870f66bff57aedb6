"""What serving a kind in a second version costs: the same N events LISTed, fetched and created through
core/v1 (stored as served) and events.k8s.io/v1 (converted on every read and write, apiserver/conversion.py),
against a private etcd and `kubelab apiserver` in its own process. The API server's CPU per request is
the steadier figure on a loaded machine; client latency is given beside it.

    .venv/bin/python bench/conversion.py            # 5,000 events
    .venv/bin/python bench/conversion.py --quick    # 1,000 events

Prints one JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

import httpx
from harness import Lab, cpu_seconds, machine, summary_ms

NS = "default"
PATHS = {"core/v1": f"/api/v1/namespaces/{NS}/events", "events.k8s.io/v1": f"/apis/events.k8s.io/v1/namespaces/{NS}/events"}
NOW = "2026-12-02T01:00:00.000000Z"


def v1_event(i: int) -> dict[str, Any]:
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": f"bench-{i}"},
            "eventTime": NOW, "reportingController": "default-scheduler", "reportingInstance": "default-scheduler-x",
            "action": "Binding", "reason": "Scheduled", "type": "Normal", "note": f"Successfully assigned {NS}/p-{i}",
            "regarding": {"apiVersion": "v1", "kind": "Pod", "name": f"p-{i}", "namespace": NS, "uid": f"u-{i}"}}


def core_event(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"core-bench-{i}"},
            "involvedObject": {"kind": "Pod", "name": f"p-{i}", "namespace": NS}, "reason": "Pulled",
            "message": "pulled", "type": "Normal", "count": 1, "source": {"component": "kubelet"}}


async def measure(http: httpx.AsyncClient, pid: int, method: str, paths: list[str], bodies: list[Any] | None = None
                  ) -> dict[str, Any]:
    latencies = []
    cpu = cpu_seconds(pid)
    for i, path in enumerate(paths):
        start = time.perf_counter()
        resp = await http.request(method, path, json=bodies[i] if bodies else None)
        assert resp.status_code < 300, resp.text
        latencies.append(time.perf_counter() - start)
    return {"server_cpu_ms_per_request": round((cpu_seconds(pid) - cpu) * 1000 / len(paths), 3),
            "latency_ms": summary_ms(latencies)}


async def run(server: str, pid: int, count: int, lists: int) -> dict[str, Any]:
    out: dict[str, Any] = {"machine": machine(), "events": count}
    async with httpx.AsyncClient(base_url=server, timeout=120) as http:
        half = count // 2
        out["create"] = {
            "core/v1": await measure(http, pid, "POST", [PATHS["core/v1"]] * half,
                                     [core_event(i) for i in range(half)]),
            "events.k8s.io/v1": await measure(http, pid, "POST", [PATHS["events.k8s.io/v1"]] * (count - half),
                                              [v1_event(i) for i in range(count - half)])}
        out["get"] = {version: await measure(http, pid, "GET", [f"{path}/bench-{i % (count - half)}"
                                                               for i in range(500)])
                      for version, path in PATHS.items()}
        # Alternate the versions so that load on the machine falls on both alike.
        results: dict[str, list[dict[str, Any]]] = {version: [] for version in PATHS}
        for _ in range(lists):
            for version, path in PATHS.items():
                results[version].append(await measure(http, pid, "GET", [path]))
        out["list"] = {version: {
            "server_cpu_ms_per_list": sorted(r["server_cpu_ms_per_request"] for r in runs)[len(runs) // 2],
            "latency_ms_p50": sorted(r["latency_ms"]["p50_ms"] for r in runs)[len(runs) // 2]}
            for version, runs in results.items()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    lab = Lab()
    try:
        lab.start_etcd()
        server = lab.start_apiserver()
        result = asyncio.run(run(server, lab.procs["apiserver"].pid, 1000 if args.quick else 5000,
                                 5 if args.quick else 15))
    finally:
        lab.stop()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
