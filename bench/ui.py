"""`kubelab ui` with many Services: how long the page's requests take once the cluster holds N Services
(default 10,000, each with one EndpointSlice of one endpoint), in `kubelab up` (render dataplane, 2 nodes).

    .venv/bin/python bench/ui.py                  # 10,000 Services
    .venv/bin/python bench/ui.py --services 2000

Measured from a client as the page asks: a search that matches everything (first page of 200), a search
that matches one Service, the nodes-and-pods overview, and one Service's path on every node (each node's
whole restored nat table read and parsed). Ten requests each; the median and the worst. And the UI
process's resident memory (VmRSS, VmHWM) once it has listed and watched everything and answered these.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness import ROOT, Lab, machine, summary_ms

from kubelab.etcd import free_port
from kubelab.processes import stop_process


def service(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"svc-{i:05d}"},
            "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}


def endpoint_slice(i: int) -> dict[str, Any]:
    # A slice the controllers do not manage (the Service has no selector), as a user may write one.
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"svc-{i:05d}-manual", "labels": {"kubernetes.io/service-name": f"svc-{i:05d}"}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [{"addresses": [f"10.250.{i // 250}.{i % 250 + 1}"], "conditions": {"ready": True}}]}


async def create_all(url: str, count: int) -> float:
    import httpx

    start = time.monotonic()
    limit = asyncio.Semaphore(32)
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        async def post(where: str, body: dict[str, Any]) -> None:
            for _ in range(10):  # a loaded machine's etcd may time out (504/503): kube clients retry those
                r = await http.post(where, json=body)
                if r.status_code in (201, 409) or r.status_code < 500:
                    break
                await asyncio.sleep(1.0)
            assert r.status_code in (201, 409), r.text

        async def one(i: int) -> None:
            async with limit:
                await post("/api/v1/namespaces/default/services", service(i))
                await post("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", endpoint_slice(i))
        await asyncio.gather(*(one(i) for i in range(count)))
    return time.monotonic() - start


def measure(ui: str, count: int) -> dict[str, Any]:
    import httpx

    out: dict[str, Any] = {}
    with httpx.Client(base_url=ui, timeout=120) as http:
        deadline = time.monotonic() + 600
        while http.get("/ui/v1/services", params={"limit": "1"}).json()["total"] < count + 2:
            assert time.monotonic() < deadline, "the UI's informers never caught up"
            time.sleep(1)
        target = f"default/svc-{count // 2:05d}"
        while True:  # every node has rendered it
            path = http.get("/ui/v1/path", params={"service": target}).json()
            if all(n["ports"] and n["ports"][0]["branches"] for n in path["nodes"]):
                break
            assert time.monotonic() < deadline, "the nodes never rendered the Services"
            time.sleep(1)
        asks = {"search_all_first_200": ("/ui/v1/services", {"limit": "200"}),
                "search_one": ("/ui/v1/services", {"q": target.split("/")[1]}),
                "overview": ("/ui/v1/overview", {}),
                "path_every_node": ("/ui/v1/path", {"service": target})}
        for name, (where, params) in asks.items():
            times = []
            for _ in range(10):
                t = time.perf_counter()
                r = http.get(where, params=params)
                times.append(time.perf_counter() - t)
                assert r.status_code == 200
            out[name] = {**summary_ms(times), "bytes": len(r.content)}
    return out


def memory(pid: int) -> dict[str, float]:
    """The UI process's resident memory now and at its peak, in MiB (/proc/PID/status)."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {name: round(int(fields[name].split()[0]) / 1024, 1) for name in ("VmRSS", "VmHWM")}


def run(count: int) -> dict[str, Any]:
    lab = Lab()
    data_dir = lab.base / "up"
    port = free_port()
    proc = lab.spawn("up", "up", "--nodes", "2", "--dataplane", "render", "--data-dir", str(data_dir),
                     "--listen", f"127.0.0.1:{port}")
    ui_proc = None
    try:
        lab.wait_for_up("up")
        created = asyncio.run(create_all(f"http://127.0.0.1:{port}", count))
        ui_proc = subprocess.Popen([sys.executable, "-m", "kubelab", "ui", "--data-dir", str(data_dir), "--listen",
                                    "127.0.0.1:0"], stdout=subprocess.PIPE, text=True)
        assert ui_proc.stdout is not None
        ui = ui_proc.stdout.readline().split(": ", 1)[1].strip().rstrip("/")
        result = {"services": count, "create_seconds": round(created, 1), **measure(ui, count),
                  "ui_memory_mib": memory(ui_proc.pid)}
        return result
    finally:
        if ui_proc is not None:
            stop_process(ui_proc, sig=signal.SIGTERM, timeout=30)
        stop_process(proc, sig=signal.SIGINT, timeout=60)
        lab.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--services", type=int, default=10_000)
    args = parser.parse_args()
    print(json.dumps({"machine": machine(), "run": run(args.services)}, indent=1))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(ROOT)))
    main()
