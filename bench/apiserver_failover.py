"""API server failover, seen by a client: `kubelab up --apiservers 3 --etcd-members 3`, a steady stream of
requests through kubelab's client given two of the API servers, and the one it is using SIGKILLed, --kills
times (issue #19's benchmark). Then creates/s through 1, 2 and 3 of the same cluster's API servers.

    .venv/bin/python bench/apiserver_failover.py --kills 20

`kubelab up` does not restart an API server child that died (kube-apiserver is restarted by its kubelet or
systemd, not by its peers): this bench starts the killed one again with the command line it had, and waits
until it is ready, before the next kill. The client (kubelab.client.ApiClient, as the components use it)
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
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apiserver_replicas import round_
from harness import Lab, machine, summary_ms, wait_ready

from kubelab.client import ApiClient, ApiError, TransportError
from kubelab.etcd import free_port
from kubelab.processes import stop_process

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


def argv_of(pid: int) -> list[str]:
    return [w.decode() for w in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if w]


def respawn(argv: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    """Started again as its unit or kubelet would: the same command line, a log of its own."""
    with open(log_path, "wb") as log:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


async def kills(args: argparse.Namespace, servers: list[str], up_pid: int, lab: Lab,
                restarted: dict[str, subprocess.Popen[bytes]]) -> dict[str, Any]:
    children = servers[1:]  # the first server is `kubelab up`'s own process
    listen = {url: url.split("://", 1)[1] for url in children}
    pids = child_pids(up_pid)
    stream = Stream()
    async with ApiClient(children, user_agent="bench-failover", timeout=10) as api:
        await api.request("POST", f"/api/v1/namespaces/{NAMESPACE}/configmaps",
                          body={"metadata": {"name": "probe"}, "data": {"k": "v"}})
        workers = [asyncio.create_task(writer(api, stream, i)) for i in range(args.writers)]
        workers += [asyncio.create_task(reader(api, stream)) for _ in range(args.readers)]
        to_write: list[float] = []
        to_read: list[float] = []
        to_ready: list[float] = []
        failed_per_kill: list[int] = []
        kill_times: list[float] = []
        for kill in range(args.kills):
            await asyncio.sleep(args.settle + random.random())  # a moment unrelated to the stream's requests
            victim = api.server
            address = listen[victim]
            pid = restarted[address].pid if address in restarted else pids[address]
            argv = argv_of(pid)
            failed_before = sum(1 for r in stream.records if not r[2])
            os.kill(pid, signal.SIGKILL)
            killed = time.monotonic()
            kill_times.append(killed)
            if address in restarted:
                restarted[address].wait()
            while (first_success_after(stream, killed, "write") is None
                   or first_success_after(stream, killed, "read") is None):
                if time.monotonic() - killed > 60:
                    raise RuntimeError(f"no successful request within 60 s of killing {victim}")
                await asyncio.sleep(0.005)
            write_s, read_s = first_success_after(stream, killed, "write"), first_success_after(stream, killed, "read")
            assert write_s is not None and read_s is not None
            to_write.append(write_s)
            to_read.append(read_s)
            restarted[address] = await asyncio.to_thread(
                respawn, argv, lab.base / f"apiserver-{address.rsplit(':', 1)[1]}-{kill}.log")
            started = time.monotonic()
            await wait_ready(victim, restarted[address], timeout=180)
            to_ready.append(time.monotonic() - started)
            failed_per_kill.append(sum(1 for r in stream.records if not r[2]) - failed_before)
            print(f"kill {kill + 1} ({victim}): first write {write_s * 1000:.0f} ms, first read {read_s * 1000:.0f} "
                  f"ms after; {failed_per_kill[-1]} failed; restarted and ready in {to_ready[-1]:.1f} s",
                  file=sys.stderr, flush=True)
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
        "restart_to_ready": summary_ms(to_ready), "request_latency_away_from_kills": summary_ms(calm),
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
    restarted: dict[str, subprocess.Popen[bytes]] = {}
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
        result["failover"] = asyncio.run(kills(args, servers, up.pid, lab, restarted))
        if args.creates:
            result["throughput"] = asyncio.run(creates_per_s(servers, args.creates))
        result["machine_after"] = machine()
        print(json.dumps(result, indent=2))
    finally:
        for proc in restarted.values():  # ours, not `kubelab up`'s: stopped here, before it stops etcd
            stop_process(proc)
        lab.stop()


if __name__ == "__main__":
    main()
