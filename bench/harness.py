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
