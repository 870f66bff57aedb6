"""The API server's hot paths, measured against a private etcd and `kubelab apiserver` in its own process:

(a) pod creates/s through the API vs raw etcd puts of the same bytes, same concurrency, same run; and,
    for scale, through the floor: a bare ASGI app under the same uvicorn whose only work per POST is
    one aetcd put of the body it was sent (what any Python API server on this stack costs at least);
(b) LIST latency with N pods in a namespace: JSON and Table (kubectl's Accept);
(c) watch fan-out: time from a write's acknowledgement (the writer got its 201) to each of 100
    watchers receiving the event (the watchers run in a process of their own);
(e) memory: RSS of each component running as its own process against N pods.

    .venv/bin/python bench/api_server.py            # 10,000 pods
    .venv/bin/python bench/api_server.py --quick    # 2,000 pods, fewer events

Pods are scheduler_perf's pod-default (100m / 500Mi) with spec.nodeName set to a node that does not
exist, so no kubelet runs them and the scheduler only caches them. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from typing import Any

import aiohttp
import orjson
from harness import (
    ROOT,
    Lab,
    cpu_seconds,
    machine,
    raw_etcd_puts,
    rss_mib,
    run_concurrently,
    summary_ms,
    wait_ready,
)

from kubelab.client import ApiClient
from kubelab.etcd import free_port
from kubelab.processes import stop_process

NAMESPACE = "bench"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"


def pod_body(i: int, prefix: str = "pod") -> dict[str, Any]:
    resources = {"cpu": "100m", "memory": "500Mi"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{prefix}-{i:06}", "namespace": NAMESPACE,
                                                            "labels": {"app": "bench"}},
            "spec": {"nodeName": "phantom-node",
                     "containers": [{"image": "registry.k8s.io/pause:3.10.1", "name": "pause",
                                     "ports": [{"containerPort": 80}],
                                     "resources": {"limits": resources, "requests": resources}}]}}


async def creates_vs_puts(server: str, etcd_url: str, count: int, concurrency: int, apiserver_pid: int,
                          etcd_pid: int) -> dict[str, Any]:
    stored: list[bytes] = []
    async with ApiClient(server, user_agent="kubelab-bench", fast_requests=True) as api:
        await api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": NAMESPACE}})

        async def create(i: int) -> None:
            obj = await api.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body=pod_body(i))
            obj["metadata"].pop("resourceVersion", None)
            stored.append(orjson.dumps(obj))

        cpu0, own0, etcd0 = cpu_seconds(apiserver_pid), time.process_time(), cpu_seconds(etcd_pid)
        api_seconds = await run_concurrently([lambda i=i: create(i) for i in range(count)], concurrency)
        api_cpu = cpu_seconds(apiserver_pid) - cpu0
        client_cpu, api_etcd_cpu = time.process_time() - own0, cpu_seconds(etcd_pid) - etcd0
    raw = await raw_etcd_puts(etcd_url, stored, concurrency, etcd_pid=etcd_pid)
    raw_seconds, raw_client_cpu, raw_etcd_cpu = raw.seconds, raw.client_cpu, raw.etcd_cpu
    api_rate, raw_rate = count / api_seconds, count / raw_seconds
    return {"pods": count, "concurrency": concurrency, "api_creates_per_s": round(api_rate),
            "raw_etcd_puts_per_s": round(raw_rate), "ratio": round(api_rate / raw_rate, 2),
            "apiserver_cpu_ms_per_create": round(1000 * api_cpu / count, 3),
            "client_cpu_ms_per_create": round(1000 * client_cpu / count, 3),
            "etcd_cpu_ms_per_create": round(1000 * api_etcd_cpu / count, 3),
            "client_cpu_ms_per_raw_put": round(1000 * raw_client_cpu / count, 3),
            "etcd_cpu_ms_per_raw_put": round(1000 * raw_etcd_cpu / count, 3),
            "mean_object_bytes": round(statistics.mean(len(b) for b in stored))}


def floor_app(etcd_url: str) -> Any:
    """The floor server: a bare ASGI app (no framework, no decoding, no validation) that answers a POST
    with 201 and the body it was sent, after one aetcd put of that body under a key of its path."""
    from apiserver.storage import Storage

    storage: dict[str, Storage] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    storage["etcd"] = Storage([etcd_url])
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await storage["etcd"].close()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        if scope["method"] == "POST":
            await storage["etcd"].client.put(f"/bench-floor{scope['path']}/{len(body)}-{id(body)}".encode(), body)
            status, answer = 201, body
        else:
            status, answer = 200, b"ok"
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode())]})
        await send({"type": "http.response.body", "body": answer})

    return app


async def floor_creates(lab: Lab, etcd_url: str, etcd_pid: int, count: int, concurrency: int) -> dict[str, Any]:
    """The same creates as (a), same client and concurrency, sent to the floor server (its own process)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--floor-server", etcd_url, "--port", str(port)], cwd=ROOT,  # noqa: ASYNC220
                            start_new_session=True)
    lab.procs["floor"] = proc
    server = f"http://127.0.0.1:{port}"
    await wait_ready(server, proc)
    async with ApiClient(server, user_agent="kubelab-bench", fast_requests=True) as api:
        async def create(i: int) -> None:
            await api.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body=pod_body(i))

        cpu0, own0, etcd0 = cpu_seconds(proc.pid), time.process_time(), cpu_seconds(etcd_pid)
        seconds = await run_concurrently([lambda i=i: create(i) for i in range(count)], concurrency)
        cpu, own = cpu_seconds(proc.pid) - cpu0, time.process_time() - own0
        etcd_cpu = cpu_seconds(etcd_pid) - etcd0
    stop_process(proc)  # before the next measurement; Lab.stop would only at the very end
    return {"floor_creates_per_s": round(count / seconds),
            "floor_server_cpu_ms_per_create": round(1000 * cpu / count, 3),
            "floor_client_cpu_ms_per_create": round(1000 * own / count, 3),
            "floor_etcd_cpu_ms_per_create": round(1000 * etcd_cpu / count, 3)}


async def list_latency(server: str, repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with aiohttp.ClientSession(server) as http:
        for name, accept in (("json", "application/json"), ("table", TABLE)):
            times, size, items = [], 0, 0
            for _ in range(repeats):
                start = time.perf_counter()
                async with http.get(f"/api/v1/namespaces/{NAMESPACE}/pods", headers={"Accept": accept}) as resp:
                    body = await resp.read()
                    assert resp.status == 200, body[:200]
                times.append(time.perf_counter() - start)
                size = len(body)
            doc = orjson.loads(body)
            items = len(doc.get("items") or doc.get("rows") or [])
            out[name] = {"items": items, "bytes": size, "median_ms": round(1000 * statistics.median(times), 1),
                         "min_ms": round(1000 * min(times), 1)}
    return out


async def watchers_main(server: str, count: int, rv: str, expect: int) -> None:
    """The watcher process: `count` watch streams from `rv`; prints when each saw each ADDED pod."""
    seen: list[dict[str, float]] = [{} for _ in range(count)]
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(server, connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as http:
        async def watch(index: int) -> None:
            params = {"watch": "true", "resourceVersion": rv, "labelSelector": "app=fanout"}
            async with http.get(f"/api/v1/namespaces/{NAMESPACE}/pods", params=params) as resp:
                buffer = b""
                async for chunk in resp.content.iter_any():
                    now = time.time()
                    buffer += chunk
                    while b"\n" in buffer:
                        line, buffer = buffer.split(b"\n", 1)
                        event = orjson.loads(line)
                        if event["type"] == "ADDED":
                            seen[index][event["object"]["metadata"]["name"]] = now
                    if len(seen[index]) >= expect:
                        return

        tasks = [asyncio.create_task(watch(i)) for i in range(count)]
        print("READY", flush=True)
        try:
            await asyncio.wait_for(asyncio.gather(*tasks), 120)
        except TimeoutError:
            pass
    sys.stdout.write(json.dumps(seen) + "\n")


async def fanout(server: str, watchers: int, events: int, rate: float) -> dict[str, Any]:
    async with ApiClient(server, user_agent="kubelab-bench", fast_requests=True) as api:
        rv = (await api.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods", params={"limit": "1"})
              )["metadata"]["resourceVersion"]
        proc = subprocess.Popen([sys.executable, __file__, "--watchers-process", str(watchers), "--server", server,  # noqa: ASYNC220
                                 "--rv", rv, "--expect", str(events)], stdout=subprocess.PIPE, cwd=ROOT)
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == b"READY"
            await asyncio.sleep(2.0)  # every stream open and registered
            acked: dict[str, float] = {}
            for i in range(events):
                body = pod_body(i, "fanout")
                body["metadata"]["labels"] = {"app": "fanout"}
                await api.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body=body)
                acked[body["metadata"]["name"]] = time.time()
                await asyncio.sleep(1 / rate)
            out, _ = await asyncio.to_thread(proc.communicate, timeout=180)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    seen = json.loads(out.decode().strip().splitlines()[-1])
    delays = [when - acked[name] for per in seen for name, when in per.items() if name in acked]
    missing = watchers * events - len(delays)
    return {"watchers": watchers, "events": events, "write_rate_per_s": rate, "missing_deliveries": missing,
            "delay_after_ack": summary_ms([max(0.0, d) for d in delays]),
            "delivered_before_ack_share": round(sum(1 for d in delays if d < 0) / max(1, len(delays)), 3)}


def memory(lab: Lab, server: str, settle: float) -> dict[str, Any]:
    """Start the other components as processes against the loaded API server, let them list and settle,
    then read every process's RSS."""
    lab.spawn("scheduler", "scheduler", "--server", server, "--metrics-bind-address", "127.0.0.1:0")
    lab.spawn("controllers", "controllers", "--server", server, "--metrics-bind-address", "127.0.0.1:0")
    lab.spawn("node", "node", "--name", "bench-node-1", "--server", server, "--metrics-bind-address",
              "127.0.0.1:0", "--data-dir", str(lab.base))
    lab.spawn("dns", "dns", "--server", server, "--listen", "127.0.0.1:0", "--metrics-port", "-1")
    time.sleep(settle)
    out = {name: round(rss_mib(proc.pid), 1) for name, proc in lab.procs.items() if proc.poll() is None}
    assert lab.etcd is not None and lab.etcd.process is not None
    out["etcd"] = round(rss_mib(lab.etcd.process.pid), 1)
    return {"rss_mib": out}


def more(lab: Lab, result: dict[str, Any], server: str, apiserver_pid: int, args: argparse.Namespace) -> None:
    """(b), (c) and (e), against the API server (a) left 10,000 pods in."""
    result["b_list_latency"] = asyncio.run(list_latency(server, 3 if args.quick else 5))
    result["c_watch_fanout"] = asyncio.run(fanout(server, args.watchers, 50 if args.quick else 200, 20.0))
    result["e_memory"] = memory(lab, server, 10 if args.quick else 20)
    result["e_memory"]["rss_mib"]["apiserver"] = round(rss_mib(apiserver_pid), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2,000 pods, 50 fan-out events")
    parser.add_argument("--pods", type=int)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--watchers", type=int, default=100)
    parser.add_argument("--watchers-process", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--server", help=argparse.SUPPRESS)
    parser.add_argument("--rv", help=argparse.SUPPRESS)
    parser.add_argument("--expect", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--floor-server", metavar="ETCD_URL", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--only-creates", action="store_true", help="(a) alone, with its floor")
    args = parser.parse_args()
    if args.floor_server:
        import uvicorn
        uvicorn.run(floor_app(args.floor_server), host="127.0.0.1", port=args.port, log_level="warning",
                    access_log=False)
        return
    if args.watchers_process:
        asyncio.run(watchers_main(args.server, args.watchers_process, args.rv, args.expect))
        return
    pods = args.pods or (2000 if args.quick else 10000)
    result: dict[str, Any] = {"machine_before": machine()}
    lab = Lab()
    try:
        etcd = lab.start_etcd()
        server = lab.start_apiserver()
        apiserver = lab.procs["apiserver"]
        assert etcd.process is not None
        result["a_creates_vs_raw_puts"] = asyncio.run(creates_vs_puts(server, etcd.url, pods, args.concurrency,
                                                                      apiserver.pid, etcd.process.pid))
        result["a_creates_vs_raw_puts"].update(asyncio.run(floor_creates(lab, etcd.url, etcd.process.pid, pods,
                                                                                args.concurrency)))
        floor = result["a_creates_vs_raw_puts"]
        floor["floor_ratio"] = round(floor["floor_creates_per_s"] / floor["raw_etcd_puts_per_s"], 2)
        if not args.only_creates:
            more(lab, result, server, apiserver.pid, args)
    finally:
        lab.stop()
    result["machine_after"] = machine()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
