"""Pod creates/s through 1, 2 and 3 `kubelab apiserver` processes on the same private etcd (issue #19's
benchmark), and the ratio to one.

Three API servers are started once; each round sends the same number of creates with the same total
concurrency, spread round-robin over the first N servers (as clients behind a load balancer would be).
Rounds run in the order 1, 2, 3, 3, 2, 1 (so drift of the machine's load hits every N alike) and each N's
figure is the mean of its two rounds. Pods are scheduler_perf's pod-default bound to a node that does not
exist (bench/api_server.py's pod_body). Prints one JSON document.

    .venv/bin/python bench/apiserver_replicas.py            # 2,000 creates per round
    .venv/bin/python bench/apiserver_replicas.py --quick    # 500
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
from harness import Lab, cpu_seconds, machine, run_concurrently, wait_ready

from kubelab.etcd import free_port

CONCURRENCY = 24


async def round_(servers: list[str], creates: int, prefix: str) -> float:
    """Creates/s with `creates` pods sent round-robin over `servers`, CONCURRENCY in flight in all."""
    sessions = [aiohttp.ClientSession(base_url=s, connector=aiohttp.TCPConnector(limit=CONCURRENCY))
                for s in servers]
    try:
        async def create(i: int) -> None:
            session = sessions[i % len(sessions)]
            async with session.post(f"/api/v1/namespaces/{NAMESPACE}/pods",
                                    data=orjson.dumps(pod_body(i, prefix)),
                                    headers={"Content-Type": "application/json"}) as resp:
                if resp.status != 201:
                    raise RuntimeError(f"{resp.status}: {await resp.text()}")

        seconds = await run_concurrently([lambda i=i: create(i) for i in range(creates)], CONCURRENCY)
    finally:
        for session in sessions:
            await session.close()
    return creates / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    creates = 500 if args.quick else 2000
    lab = Lab()
    try:
        etcd = lab.start_etcd()
        servers = []
        for n in range(1, 4):
            port = free_port()
            proc = lab.spawn(f"apiserver-{n}", "apiserver", "--etcd-servers", etcd.url, "--listen",
                             f"127.0.0.1:{port}", "--disable-admission-plugins", "ServiceAccount",
                             "--identity-hostname", f"bench-{n}")
            servers.append(f"http://127.0.0.1:{port}")
            asyncio.run(wait_ready(servers[-1], proc, timeout=180))

        async def namespace() -> None:
            async with aiohttp.ClientSession(base_url=servers[0]) as session:
                await session.post("/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}})

        asyncio.run(namespace())
        asyncio.run(round_(servers[:1], min(creates, 200), "warm"))  # first-request costs out of the figures
        rates: dict[int, list[float]] = {1: [], 2: [], 3: []}
        cpu: dict[int, list[float]] = {1: [], 2: [], 3: []}
        pids = [p.pid for name, p in lab.procs.items() if name.startswith("apiserver-")]
        assert etcd.process is not None
        for index, n in enumerate((1, 2, 3, 3, 2, 1)):
            before = sum(cpu_seconds(pid) for pid in pids) + cpu_seconds(etcd.process.pid)
            started = time.perf_counter()
            rates[n].append(asyncio.run(round_(servers[:n], creates, f"r{index}")))
            wall = time.perf_counter() - started
            used = sum(cpu_seconds(pid) for pid in pids) + cpu_seconds(etcd.process.pid) - before
            cpu[n].append(used / wall)  # cores busy in the API servers and etcd together
        mean = {n: sum(v) / len(v) for n, v in rates.items()}
        result: dict[str, Any] = {
            "machine": machine(), "creates_per_round": creates, "concurrency": CONCURRENCY,
            "creates_per_s": {str(n): [round(r, 1) for r in v] for n, v in rates.items()},
            "mean_creates_per_s": {str(n): round(m, 1) for n, m in mean.items()},
            "ratio_to_one": {str(n): round(m / mean[1], 2) for n, m in mean.items()},
            "server_and_etcd_cores_busy": {str(n): [round(c, 2) for c in v] for n, v in cpu.items()},
        }
        print(json.dumps(result, indent=2))
    finally:
        lab.stop()


if __name__ == "__main__":
    main()
