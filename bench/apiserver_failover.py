"""API server failover, seen by a client: `kubelab up --apiservers 3 --etcd-members 3`, a steady stream of
requests through kubelab's client given two of the API servers, and the one it is using SIGKILLed, --kills
times (issue #19's benchmark). Then creates/s through 1, 2 and 3 of the same cluster's API servers.

    .venv/bin/python bench/apiserver_failover.py --kills 20

`kubelab up` starts a child API server that died again (launcher/apiservers.py: at once the first time, then
with the kubelet's crash back-off, 10 s doubling, forgotten after 10 minutes running), on the socket it
keeps bound, so the server is back at the same URL. This bench waits for that restart (/readyz ok again at
the killed URL) before the next kill. The two children take turns, so each one's second and later kills
come within 10 minutes of its last start and wait out a back-off: per kill it reports the time from the
kill to /readyz ok again, the back-off `kubelab up` logged for it, and the difference (the restart
itself: a new process's start-up, etcd's lists and the bootstrap). The client (kubelab.client.ApiClient, as the components use it)
is given the two child API servers' URLs: every kill is of the one it is on, so every kill is a failover.
It runs --writers workers creating ConfigMaps and --readers workers reading one, each sending its next
request as soon as the last one answered.

Per kill: the time from the kill to the first successful request sent after it (writes and reads
apart), and the requests that failed (a write whose connection was cut after it was sent is not sent
again: the caller decides, as client-go's callers do; a read is re-sent on the next server). At the end
every acknowledged create is looked for in the API: lost = acknowledged and not stored (expected 0).
Failed creates that were stored anyway are counted too (the ambiguous ones).

Then, on the same cluster, rounds of --creates pod creates, 24 in flight, round-robin over the first N of
[child 2, child 3, the first server] in the order 1, 2, 3, 3, 2, 1 (bench/apiserver_replicas.py's round;
the first server shares `kubelab up`'s process with the scheduler, controllers and node, so it comes last).
Ratios to one; the load average before and after. Everything started here is stopped here, by PID.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from apiserver_replicas import round_
from harness import Lab, machine, summary_ms

from kubelab.client import ApiClient, ApiError, TransportError
from kubelab.etcd import free_port

NAMESPACE = "bench"  # api_server.pod_body's namespace too


@dataclass
class Stream:
    """Every request the workers sent: (sent, answered, ok, kind); the creates acknowledged and failed."""

    records: list[tuple[float, float, bool, str]] = field(default_factory=list)
    acknowledged: set[str] = field(default_factory=set)
    failed_creates: set[str] = field(default_factory=set)
    errors: dict[str, int] = field(default_factory=dict)
    stop: bool = False


async def writer(api: ApiClient, stream: Stream, worker: int) -> None:
    seq = 0
    while not stream.stop:
        name = f"w{worker}-{seq}"
        seq += 1
        sent = time.monotonic()
        try:
            await api.request("POST", f"/api/v1/namespaces/{NAMESPACE}/configmaps",
                              body={"metadata": {"name": name}, "data": {"k": "v"}})
            stream.acknowledged.add(name)
            ok = True
        except (ApiError, TransportError, OSError) as exc:
            stream.failed_creates.add(name)
            stream.errors[type(exc).__name__] = stream.errors.get(type(exc).__name__, 0) + 1
            ok = False
        stream.records.append((sent, time.monotonic(), ok, "write"))
        if not ok:
            await asyncio.sleep(0.01)  # a refused connection answers at once: do not spin


async def reader(api: ApiClient, stream: Stream) -> None:
    while not stream.stop:
        sent = time.monotonic()
        try:
            await api.request("GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps/probe")
            ok = True
        except (ApiError, TransportError, OSError) as exc:
            stream.errors[type(exc).__name__] = stream.errors.get(type(exc).__name__, 0) + 1
            ok = False
        stream.records.append((sent, time.monotonic(), ok, "read"))
        if not ok:
            await asyncio.sleep(0.01)


def first_success_after(stream: Stream, killed: float, kind: str) -> float | None:
    done = [answered for sent, answered, ok, k in stream.records if ok and k == kind and sent >= killed]
    return min(done) - killed if done else None


def child_pids(parent: int) -> dict[str, int]:
    """The `kubelab apiserver` children of `kubelab up` (pid `parent`), by their --listen address."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and b"apiserver" in argv and b"--listen" in argv:
            found[argv[argv.index(b"--listen") + 1].decode()] = int(entry.name)
    return found


def backoff_logged(log_path: Path, pid: int) -> float:
    """The back-off `kubelab up` logged when the child `pid` died ("... (pid P); starting it again in 10s")."""
    found = re.findall(rf"\(pid {pid}\); starting it again (?:in ([0-9.]+)s|now)", log_path.read_text())
    if not found:
        raise RuntimeError(f"kubelab up logged no restart of pid {pid}")
    return float(found[-1] or 0)


async def ready_again(url: str, pids: Callable[[], dict[str, int]], address: str, killed_pid: int,
                      timeout: float) -> None:
    """/readyz ok at `url` from a process other than the killed one (its restart), within `timeout`."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(base_url=url, timeout=2) as http:
        while time.monotonic() < deadline:
            if pids().get(address, killed_pid) != killed_pid:
                try:
                    if (await http.get("/readyz")).text == "ok":
                        return
                except httpx.HTTPError:
                    pass
            await asyncio.sleep(0.05)
    raise TimeoutError(f"{url} was not ready again within {timeout:g} s of the kill")


async def kills(args: argparse.Namespace, servers: list[str], up_pid: int, up_log: Path) -> dict[str, Any]:
    children = servers[1:]  # the first server is `kubelab up`'s own process
    listen = {url: url.split("://", 1)[1] for url in children}
    stream = Stream()
    async with ApiClient(children, user_agent="bench-failover", timeout=10) as api:
        await api.request("POST", f"/api/v1/namespaces/{NAMESPACE}/configmaps",
                          body={"metadata": {"name": "probe"}, "data": {"k": "v"}})
        workers = [asyncio.create_task(writer(api, stream, i)) for i in range(args.writers)]
        workers += [asyncio.create_task(reader(api, stream)) for _ in range(args.readers)]
        to_write: list[float] = []
        to_read: list[float] = []
        to_ready: list[float] = []
        backoffs: list[float] = []
        restart_only: list[float] = []
        failed_per_kill: list[int] = []
        kill_times: list[float] = []
        for kill in range(args.kills):
            await asyncio.sleep(args.settle + random.random())  # a moment unrelated to the stream's requests
            victim = api.server
            address = listen[victim]
            pid = child_pids(up_pid)[address]
            failed_before = sum(1 for r in stream.records if not r[2])
            os.kill(pid, signal.SIGKILL)
            killed = time.monotonic()
            kill_times.append(killed)
            while (first_success_after(stream, killed, "write") is None
                   or first_success_after(stream, killed, "read") is None):
                if time.monotonic() - killed > 60:
                    raise RuntimeError(f"no successful request within 60 s of killing {victim}")
                await asyncio.sleep(0.005)
            write_s, read_s = first_success_after(stream, killed, "write"), first_success_after(stream, killed, "read")
            assert write_s is not None and read_s is not None
            to_write.append(write_s)
            to_read.append(read_s)
            # `kubelab up` restarts it (after its back-off: up to 300 s, and a start-up on a loaded machine).
            await ready_again(victim, lambda: child_pids(up_pid), address, pid, timeout=480)
            to_ready.append(time.monotonic() - killed)
            backoffs.append(backoff_logged(up_log, pid))
            restart_only.append(to_ready[-1] - backoffs[-1])
            failed_per_kill.append(sum(1 for r in stream.records if not r[2]) - failed_before)
            print(f"kill {kill + 1} ({victim}): first write {write_s * 1000:.0f} ms, first read {read_s * 1000:.0f} "
                  f"ms after; {failed_per_kill[-1]} failed; ready again {to_ready[-1]:.1f} s after the kill "
                  f"(back-off {backoffs[-1]:g} s)", file=sys.stderr, flush=True)
        stream.stop = True
        await asyncio.gather(*workers)
        stored = {item["metadata"]["name"] for item in
                  (await api.request("GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps"))["items"]}
    # The stream's own pace, away from the kills (a request sent 10 s or more after the last kill before it,
    # or before the first): what a failover's figures compare with on this machine, now.
    kill_times.sort()
    calm = [answered - sent for sent, answered, ok, _ in stream.records
            if ok and not any(0 <= sent - k < 10 for k in kill_times)]
    writes = [r for r in stream.records if r[3] == "write"]
    reads = [r for r in stream.records if r[3] == "read"]
    return {
        "kills": args.kills, "writers": args.writers, "readers": args.readers,
        "kill_to_first_write": summary_ms(to_write), "kill_to_first_read": summary_ms(to_read),
        "kill_to_ready_again": summary_ms(to_ready), "backoff_s": backoffs,
        "kill_to_ready_less_backoff": summary_ms(restart_only),
        "kill_to_ready_first_restarts": summary_ms([t for t, b in zip(to_ready, backoffs, strict=True) if b == 0]),
        "request_latency_away_from_kills": summary_ms(calm),
        "requests": {"writes": len(writes), "writes_failed": sum(1 for r in writes if not r[2]),
                     "reads": len(reads), "reads_failed": sum(1 for r in reads if not r[2])},
        "failed_per_kill": {"p50": sorted(failed_per_kill)[len(failed_per_kill) // 2],
                            "max": max(failed_per_kill)} if failed_per_kill else {},
        "errors": stream.errors,
        "acknowledged_creates_lost": len(stream.acknowledged - stored),
        "failed_creates_stored_anyway": len(stream.failed_creates & stored),
    }


async def creates_per_s(servers: list[str], creates: int) -> dict[str, Any]:
    order = [servers[1], servers[2], servers[0]]  # the children first: the first server shares up's process
    await round_(order[:1], min(creates, 200), "warm")
    rates: dict[int, list[float]] = {1: [], 2: [], 3: []}
    for index, n in enumerate((1, 2, 3, 3, 2, 1)):
        rates[n].append(await round_(order[:n], creates, f"r{index}"))
    mean = {n: sum(v) / len(v) for n, v in rates.items()}
    return {"creates_per_round": creates, "creates_per_s": {str(n): [round(r, 1) for r in v] for n, v in rates.items()},
            "mean_creates_per_s": {str(n): round(m, 1) for n, m in mean.items()},
            "ratio_to_one": {str(n): round(m / mean[1], 2) for n, m in mean.items()}}


async def namespace(server: str) -> None:
    async with ApiClient(server, user_agent="bench-failover") as api:
        await api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": NAMESPACE}})
        deadline = time.monotonic() + 120
        while True:  # pods are admitted once the namespace's default ServiceAccount exists
            try:
                await api.request("GET", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default")
                return
            except ApiError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--settle", type=float, default=3.0, help="seconds of steady stream before each kill")
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--creates", type=int, default=1000, help="pod creates per throughput round (0: none)")
    args = parser.parse_args()
    lab = Lab()
    before = machine()
    try:
        port = free_port()
        data_dir = lab.base / "up"
        up = lab.spawn("up", "up", "--apiservers", "3", "--etcd-members", "3", "--nodes", "1", "--dataplane", "render",
                       "--listen", f"127.0.0.1:{port}", "--data-dir", str(data_dir))
        lab.wait_for_up("up", timeout=300)
        servers = json.loads((data_dir / "cluster.json").read_text())["servers"]
        assert len(servers) == 3, servers
        asyncio.run(namespace(servers[0]))
        result: dict[str, Any] = {"bench": "apiserver_failover", "servers": servers, "machine_before": before}
        result["failover"] = asyncio.run(kills(args, servers, up.pid, lab.base / "up.log"))
        if args.creates:
            result["throughput"] = asyncio.run(creates_per_s(servers, args.creates))
        result["machine_after"] = machine()
        print(json.dumps(result, indent=2))
    finally:
        lab.stop()


if __name__ == "__main__":
    main()
