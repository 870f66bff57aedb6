"""LISTs of N pods from the watch cache vs from etcd, against `kubelab apiserver` in its own process.

    .venv/bin/python bench/list_cache.py                    # 10,000 pods, 20 LISTs of each kind
    .venv/bin/python bench/list_cache.py --pods 2000 --repeat 10

N pods (bench/api_server.py's, ~1.7 KB each as stored) are written straight into a private etcd, then
the API server is started and LISTed, the kinds alternated round by round so each sees the same machine:

- `rv=0`: resourceVersion=0, served from the watch cache (whatever it holds);
- `consistent`: no resourceVersion, the consistent read, served from the cache once it has caught up to
  etcd's current revision (kube 1.31+'s ConsistentListFromCache) when etcd's progress notifications can be
  trusted (etcd >= 3.4.31 / 3.5.13, printed as `consistent_from_cache`), else read from etcd, as kube does;
- `consistent, limit=500`: the first page of the same (later pages would read etcd at its revision);
- `etcd (exact rv)`: resourceVersionMatch=Exact at the current revision, which the cache leaves to etcd:
  the same answer read with one etcd range of the same keys;
- and, as a floor, the same etcd range read from this process by the API server's storage layer (aetcd,
  each object decoded; no HTTP, no encoding).

Latency is the client's (aiohttp), from the request to the last byte of the answer; p50/p99 of each; and
the API server's CPU per LIST of each kind (its /proc CPU time around each request: on a loaded machine
the steadier figure). The
gauge beside it: raw etcd puts/s at 32 in flight into the same etcd. Everything started here is stopped
here, by PID, whatever happens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

import aiohttp
import orjson
from api_server import NAMESPACE, pod_body
from harness import Lab, cpu_seconds, machine, raw_etcd_puts, run_concurrently, summary_ms

from apiserver.cacher import progress_requests_reliable
from apiserver.storage import Storage


async def fill(etcd_url: str, count: int) -> None:
    """The pods as the API server would have stored them, put straight into etcd, 32 at a time."""
    storage = Storage([etcd_url])
    try:
        async def put(i: int) -> None:
            body = pod_body(i)
            body["metadata"].update({"uid": f"00000000-0000-0000-0000-{i:012}",
                                     "creationTimestamp": "2026-01-01T00:00:00Z"})
            body["status"] = {"phase": "Pending", "qosClass": "Guaranteed"}
            await storage.put_raw(f"/registry/pods/{NAMESPACE}/{body['metadata']['name']}", orjson.dumps(body))

        await run_concurrently([lambda i=i: put(i) for i in range(count)], 32)
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE, "uid": "1" * 36,
                                                                    "creationTimestamp": "2026-01-01T00:00:00Z"},
              "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
        await storage.put_raw(f"/registry/namespaces/{NAMESPACE}", orjson.dumps(ns))
    finally:
        await storage.close()


async def measure(server: str, etcd_url: str, count: int, repeat: int, apiserver_pid: int) -> dict[str, Any]:
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    times: dict[str, list[float]] = {}
    cpu: dict[str, float] = {}  # the API server's CPU seconds, summed per kind: robust on a loaded machine
    sizes: dict[str, int] = {}
    storage = Storage([etcd_url])
    try:
        async with aiohttp.ClientSession(server, timeout=aiohttp.ClientTimeout(total=300)) as http:
            async def get(params: dict[str, str]) -> dict[str, Any]:
                async with http.get(path, params=params) as resp:
                    body = await resp.read()
                    assert resp.status == 200, body[:300]
                return {"bytes": len(body), "doc": orjson.loads(body)}

            warm = await get({"resourceVersion": "0"})  # starts the pods' watch cache
            assert len(warm["doc"]["items"]) == count, len(warm["doc"]["items"])
            for _ in range(repeat):
                current = (await get({"limit": "1"}))["doc"]["metadata"]["resourceVersion"]
                kinds = {"rv=0": {"resourceVersion": "0"}, "consistent": {},
                         "consistent, limit=500": {"limit": "500"},
                         "etcd (exact rv)": {"resourceVersion": current, "resourceVersionMatch": "Exact"}}
                for name, params in kinds.items():
                    started, cpu0 = time.perf_counter(), cpu_seconds(apiserver_pid)
                    answer = await get(params)
                    times.setdefault(name, []).append(time.perf_counter() - started)
                    cpu[name] = cpu.get(name, 0.0) + cpu_seconds(apiserver_pid) - cpu0
                    sizes[name] = answer["bytes"]
                started = time.perf_counter()
                rng = await storage.list_range(f"/registry/pods/{NAMESPACE}/", f"/registry/pods/{NAMESPACE}0", limit=0,
                                               revision=0)
                times.setdefault("raw etcd range (floor)", []).append(time.perf_counter() - started)
                assert len(rng.items) == count
    finally:
        await storage.close()
    return {name: {**summary_ms(values), "bytes": sizes.get(name),
                   "apiserver_cpu_ms_per_list": round(1000 * cpu[name] / len(values), 1) if name in cpu else None}
            for name, values in times.items()}


async def etcd_versions(etcd_url: str) -> list[str]:
    storage = Storage([etcd_url])
    try:
        return await storage.versions()
    finally:
        await storage.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--gauge-puts", type=int, default=3000)
    args = parser.parse_args()
    result: dict[str, Any] = {"pods": args.pods, "machine_before": machine()}
    lab = Lab()
    try:
        etcd = lab.start_etcd()
        assert etcd.process is not None
        asyncio.run(fill(etcd.url, args.pods))
        server = lab.start_apiserver()
        gauge = asyncio.run(raw_etcd_puts(etcd.url, [b"x" * 1700] * args.gauge_puts, 32, etcd_pid=etcd.process.pid,
                                          prefix="/bench-list-gauge/"))
        result["gauge_raw_etcd_puts_per_s"] = round(gauge.per_second)
        versions = asyncio.run(etcd_versions(etcd.url))
        result["etcd_versions"] = versions
        result["consistent_from_cache"] = all(progress_requests_reliable(v) for v in versions)
        result["lists"] = asyncio.run(measure(server, etcd.url, args.pods, args.repeat, lab.procs["apiserver"].pid))
    finally:
        lab.stop()
    result["machine_after"] = machine()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
