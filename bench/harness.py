"""What the benchmarks share: a private etcd on /dev/shm, `kubelab` components as processes of their own,
CPU and memory readings from /proc, percentiles, and stopping everything that was started (by PID,
whatever happens)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kubelab.etcd import Etcd, free_port
from kubelab.processes import stop_process


def etcd_dir() -> str | None:
    return "/dev/shm" if Path("/dev/shm").is_dir() else None


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_breakdown(pid: int) -> dict[str, float]:
    """CPU seconds of a process so far: its event loop's thread (the main thread), its other threads (the
    process's total less the main thread's, so threads that have ended still count), and the children it
    has reaped (iptables-restore, ip, sandboxes: cutime + cstime)."""
    tick = os.sysconf("SC_CLK_TCK")

    def fields(path: str) -> list[str]:
        with open(path) as f:
            return f.read().rsplit(")", 1)[1].split()

    process, main = fields(f"/proc/{pid}/stat"), fields(f"/proc/{pid}/task/{pid}/stat")
    total = (int(process[11]) + int(process[12])) / tick
    loop = (int(main[11]) + int(main[12])) / tick
    return {"main thread": loop, "other threads": total - loop,
            "reaped children": (int(process[13]) + int(process[14])) / tick,
            "main thread waiting for a CPU": runqueue_wait(pid)}


def machine_cpu() -> dict[str, float]:
    """The whole machine's CPU seconds so far, every core summed (/proc/stat's first line): busy at normal
    priority, busy niced (the proxy agents' iptables runs at nice 19 under `kubelab up`), and idle. Two
    readings give how much of the machine a window used: a window whose busy share is near 1 was CPU-bound."""
    tick = os.sysconf("SC_CLK_TCK")
    with open("/proc/stat") as f:
        user, nice, system, idle, iowait, irq, softirq, steal = (int(v) / tick for v in f.readline().split()[1:9])
    return {"busy": user + system + irq + softirq + steal, "niced": nice, "idle": idle + iowait}


def machine_share(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """The shares of the machine's CPU time between two machine_cpu() readings (they add up to 1)."""
    spent = {k: after[k] - before[k] for k in before}
    total = sum(spent.values()) or 1.0
    return {k: round(v / total, 3) for k, v in spent.items()}


def runqueue_wait(pid: int, tid: int | None = None) -> float:
    """Seconds a thread (default: the main one) has spent runnable but waiting for a CPU
    (/proc/PID/task/TID/schedstat's second field): what a thread loses to everything else on the machine."""
    try:
        with open(f"/proc/{pid}/task/{tid or pid}/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`, as they are now."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return found


UP_CHILDREN = (b"launcher.upapiserver", b"launcher.upscheduler")


def up_processes(pid: int, kinds: tuple[bytes, ...] = UP_CHILDREN) -> list[int]:
    """`kubelab up`'s own processes: `pid`, then its children of these `kinds` in that order: its API
    server's (launcher/upapiserver.py) and its scheduler's (launcher/upscheduler.py), the defaults since
    the splits; none with --one-process or an older checkout. Not etcd, not pods."""
    found: dict[bytes, list[int]] = {kind: [] for kind in kinds}
    for child in children(pid):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        for kind in kinds:
            if kind in cmdline:
                found[kind].append(child)
    return [pid, *(child for kind in kinds for child in found[kind])]


def up_cpu_seconds(pids: list[int]) -> float:
    """CPU seconds of `kubelab up`'s processes (up_processes) together; one that has gone counts 0."""
    total = 0.0
    for pid in pids:
        try:
            total += cpu_seconds(pid)
        except OSError:
            pass
    return total


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def summary_ms(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50_ms": round(1000 * percentile(values, 50), 1),
            "p90_ms": round(1000 * percentile(values, 90), 1), "p99_ms": round(1000 * percentile(values, 99), 1),
            "max_ms": round(1000 * max(values), 1) if values else float("nan")}


def machine() -> dict[str, Any]:
    load = os.getloadavg()
    return {"cpus": os.cpu_count(), "loadavg": [round(x, 2) for x in load], "python": sys.version.split()[0]}


async def run_concurrently(calls: list[Any], concurrency: int) -> float:
    """Await every call with `concurrency` in flight; returns the wall time it took."""
    it = iter(calls)

    async def worker() -> None:
        for call in it:
            await call()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - start


@dataclass(frozen=True)
class RawPuts:
    """Raw etcd puts: the machine's gauge (how fast etcd and a Python gRPC client are here, now)."""

    puts: int
    seconds: float
    client_cpu: float  # this process's CPU seconds
    etcd_cpu: float  # etcd's CPU seconds (0 when its PID is not known)

    @property
    def per_second(self) -> float:
        return self.puts / self.seconds


async def raw_etcd_puts(etcd_url: str, bodies: list[bytes], concurrency: int, *, etcd_pid: int | None = None,
                        prefix: str = "/bench-raw/") -> RawPuts:
    """Put every body under `prefix` with aetcd (the client the API server itself uses), `concurrency` in
    flight, then delete the prefix. Keys outside the API server's /registry, so no watch sees them."""
    from apiserver.storage import Storage

    storage = Storage([etcd_url])
    try:
        client = storage.client
        calls = [lambda i=i, b=b: client.put(f"{prefix}pods/{i:06}".encode(), b) for i, b in enumerate(bodies)]
        own0, etcd0 = time.process_time(), cpu_seconds(etcd_pid) if etcd_pid else 0.0
        seconds = await run_concurrently(calls, concurrency)
        client_cpu = time.process_time() - own0
        etcd_cpu = cpu_seconds(etcd_pid) - etcd0 if etcd_pid else 0.0
        await client.delete_prefix(prefix.encode())
    finally:
        await storage.close()
    return RawPuts(len(bodies), seconds, client_cpu, etcd_cpu)


class Lab:
    """A private etcd plus processes; `stop()` ends every process by its PID and removes the data."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="kubelab-bench-", dir=etcd_dir()))
        self.etcd: Etcd | None = None
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start_etcd(self) -> Etcd:
        self.etcd = Etcd(self.base / "etcd")
        self.etcd.start()
        return self.etcd

    def spawn(self, name: str, *args: str, log: bool = True) -> subprocess.Popen[bytes]:
        out = open(self.base / f"{name}.log", "wb") if log else subprocess.DEVNULL  # noqa: SIM115
        proc = subprocess.Popen([sys.executable, "-m", "kubelab", *args], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=ROOT)
        self.procs[name] = proc
        return proc

    def wait_for_up(self, name: str, timeout: float = 180) -> None:
        """Until the `kubelab up` spawned as `name` prints that it is up; its log's tail if it dies first."""
        log, proc = self.base / f"{name}.log", self.procs[name]
        deadline = time.monotonic() + timeout
        while b"kubelab is up" not in log.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"kubelab up did not come up:\n{log.read_text()[-2000:]}")
            time.sleep(0.3)

    def start_apiserver(self) -> str:
        assert self.etcd is not None
        port = free_port()
        # Without `kubelab controllers` no default service accounts exist: pods go in without one.
        proc = self.spawn("apiserver", "apiserver", "--etcd-servers", self.etcd.url, "--listen", f"127.0.0.1:{port}",
                          "--disable-admission-plugins", "ServiceAccount")
        server = f"http://127.0.0.1:{port}"
        asyncio.run(wait_ready(server, proc))
        return server

    def stop(self) -> None:
        for proc in self.procs.values():
            stop_process(proc)
        if self.etcd is not None:
            self.etcd.stop()
        shutil.rmtree(self.base, ignore_errors=True)


async def wait_ready(server: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(base_url=server) as http:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.args} exited during start-up")
            try:
                if (await http.get("/readyz")).text == "ok":
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)
    raise TimeoutError("the API server did not become ready")
