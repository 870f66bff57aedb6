"""Hostile requests against a real API server: what one request costs the server that answers it.

Each attack class is a small async function registered with @attack in bench/hostile_attacks.py; it
sets up what it needs (not measured) and fires one hostile request or a short sequence (measured)
through an `Arena`. Around it,
a probe process of its own asks GET /healthz every 10 ms on a kept-alive connection and samples the
server's RSS from /proc every 10 ms (in a thread, so a frozen server still gets its memory read). Per
attack it prints: the answers (status code and reason), how long the attack's requests took, /healthz
latency p50/p99/max while they were in flight, and the server's RSS growth (peak over the level just
before the attack, and what was still held after it).

    .venv/bin/python bench/hostile.py                      # every attack, a fresh API server each
    .venv/bin/python bench/hostile.py json-patch-copy-doubling yaml-alias-bytes
    .venv/bin/python bench/hostile.py --list               # the attack classes and what they send
    .venv/bin/python bench/hostile.py --source /tmp/old    # the API server from another checkout
    .venv/bin/python bench/hostile.py --json               # one JSON line per attack instead of a table

/healthz latency counts from when a probe was due, not from when it was sent: a probe that waits
1 s for a frozen server stands for the hundred probes that were due meanwhile (each counted with the
time it would have waited), so a freeze shows in p99 and not only in max. The API server runs with
its own etcd (under /dev/shm when there is one), both stopped by PID at the end whatever happens; a
server that passes --max-rss is killed and the attack reported as such.

Adding an attack class: in bench/hostile_attacks.py, write `async def my_attack(arena: Arena) -> None`
that prepares with `arena.seed(...)` / `arena.request(...)` and fires with `arena.fire(...)`, decorate it
with `@attack("my-attack")`, and begin its docstring with a paragraph saying what it sends and what
kube-apiserver answers (--list prints it).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import hostile_load  # noqa: F401 - registers the load attack classes
import httpx
from harness import ROOT, Lab, cpu_seconds, percentile, rss_mib, wait_ready
from hostile_attacks import ATTACKS, NAMESPACE, Arena, Attack, Shot

from kubelab.etcd import free_port
from kubelab.processes import stop_process

PROBE_INTERVAL = 0.010
TAIL = 0.25  # seconds after the last answer that still count for /healthz (a freeze right after it counts)
SETTLE = 2.0  # seconds after the last answer at which the RSS still held is read (the server trims at 1 s)


# --- the probe (a process of its own) ------------------------------------------------------------

def probe_main(url: str, pid: int, interval: float) -> None:
    """Ask GET /healthz every `interval` until stdin has a line (or closes), sample the server's RSS in a
    thread meanwhile, then print {"probes": [[due, latency, ok], ...], "rss": [[t, MiB], ...]}."""
    host, port = url.removeprefix("http://").split(":")
    rss: list[tuple[float, float]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            try:
                rss.append((time.monotonic(), rss_mib(pid)))
            except OSError:
                return
            stop.wait(interval)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    conn = http.client.HTTPConnection(host, int(port), timeout=600)
    probes: list[tuple[float, float, bool]] = []
    due = time.monotonic()
    print("READY", flush=True)
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], max(0.0, due - time.monotonic()))
        if ready:
            break
        try:
            conn.request("GET", "/healthz")
            resp = conn.getresponse()
            ok = resp.status == 200 and resp.read() == b"ok"
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = http.client.HTTPConnection(host, int(port), timeout=600)
            ok = False
        done = time.monotonic()
        # Every probe that fell due while this one was out would have been answered no sooner.
        while due <= done:
            probes.append((due, done - due, ok))
            due += interval
    stop.set()
    sampler.join()
    print(json.dumps({"probes": probes, "rss": rss}), flush=True)


class Probe:
    def __init__(self, url: str, pid: int) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--probe", url, "--pid", str(pid)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != b"READY":
            raise RuntimeError("the probe did not start")

    def finish(self) -> dict[str, Any]:
        out, _ = self.proc.communicate(b"stop\n", timeout=600)
        return dict(json.loads(out.decode().strip().splitlines()[-1]))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


# --- running one attack --------------------------------------------------------------------------

class ServerProcess:
    """`python -m kubelab apiserver` from `source` (this checkout, or another for before/after runs)."""

    def __init__(self, lab: Lab, source: Path) -> None:
        assert lab.etcd is not None
        port = free_port()
        log = open(lab.base / f"apiserver-{port}.log", "wb")  # noqa: SIM115 - closed in stop()
        self.log = log
        self.proc = subprocess.Popen([sys.executable, "-m", "kubelab", "apiserver", "--etcd-servers", lab.etcd.url,
                                      "--listen", f"127.0.0.1:{port}", "--disable-admission-plugins",
                                      "ServiceAccount"], stdout=log, stderr=subprocess.STDOUT,
                                     cwd=source, start_new_session=True)
        self.url = f"http://127.0.0.1:{port}"
        asyncio.run(wait_ready(self.url, self.proc))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        stop_process(self.proc)
        self.log.close()


async def _run_attack(server: ServerProcess, chosen: Attack, *, timeout: float, max_rss: float
                      ) -> tuple[list[Shot], str]:
    async with httpx.AsyncClient(base_url=server.url, timeout=timeout) as http:
        resp = await http.post("/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}})
        if resp.status_code not in (201, 409):
            raise RuntimeError(f"namespace: {resp.status_code} {resp.text[:200]}")
        arena = Arena(http)
        watchdog = asyncio.create_task(_watch_rss(server.proc.pid, max_rss))
        attack_task = asyncio.create_task(chosen.run(arena))
        done, _ = await asyncio.wait({watchdog, attack_task}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        outcome = ""
        if attack_task in done:
            error = attack_task.exception()
            if error is not None:
                outcome = f"{type(error).__name__}: {str(error)[:120]}"
        elif watchdog in done:
            outcome = f"killed at {watchdog.result():.0f} MiB RSS (--max-rss)"
            server.kill()
        else:
            outcome = f"no answer within {timeout:.0f} s"
            server.kill()  # still busy: the probe waiting on it ends with it
        for task in (watchdog, attack_task):
            task.cancel()
        await asyncio.gather(watchdog, attack_task, return_exceptions=True)
        return arena.shots, outcome


async def _watch_rss(pid: int, limit: float) -> float:
    while True:
        mib = rss_mib(pid)
        if mib > limit:
            return mib
        await asyncio.sleep(0.05)


def measure(lab: Lab, source: Path, chosen: Attack, *, timeout: float, max_rss: float) -> dict[str, Any]:
    server = ServerProcess(lab, source)
    probe: Probe | None = None
    try:
        time.sleep(0.5)  # let start-up settle before the baseline
        pid = server.proc.pid
        cpu0 = cpu_seconds(pid)
        probe = Probe(server.url, pid)
        shots, outcome = asyncio.run(_run_attack(server, chosen, timeout=timeout, max_rss=max_rss))
        if not outcome:
            time.sleep(SETTLE)
        samples = probe.finish()
        cpu = cpu_seconds(pid) - cpu0 if server.proc.poll() is None else float("nan")
    finally:
        if probe is not None:
            probe.kill()
        server.stop()
    return summarize(chosen, shots, outcome, samples, cpu)


def summarize(chosen: Attack, shots: list[Shot], outcome: str, samples: dict[str, Any], cpu: float) -> dict[str, Any]:
    out: dict[str, Any] = {"attack": chosen.name, "outcome": outcome or "answered",
                           "answers": [f"{s.status} {s.reason}".strip() for s in shots],
                           "messages": [s.message[:160] for s in shots if s.message]}
    if not shots:
        return out
    start, answered = min(s.sent for s in shots), max(s.answered for s in shots)
    end = max(answered, start) + TAIL
    latencies = [lat for due, lat, _ in samples["probes"] if start <= due <= end]
    failed = sum(1 for due, _, ok in samples["probes"] if start <= due <= end and not ok)
    before = [mib for t, mib in samples["rss"] if t < start]
    during = [mib for t, mib in samples["rss"] if start <= t <= end]
    after = [mib for t, mib in samples["rss"] if t > end]
    base = before[-1] if before else (during[0] if during else float("nan"))
    out.update({
        "request_s": round(sum(s.answered - s.sent for s in shots), 2),
        "healthz_ms": {"n": len(latencies), "failed": failed,
                       "p50": round(1000 * percentile(latencies, 50), 1),
                       "p99": round(1000 * percentile(latencies, 99), 1),
                       "max": round(1000 * max(latencies), 1) if latencies else float("nan")},
        "rss_mib": {"base": round(base, 1), "peak_growth": round(max(during + after, default=base) - base, 1),
                    "retained": round((after or during or [base])[-1] - base, 1)},
        "server_cpu_s": round(cpu, 2)})
    return out


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (f"{'attack':30} {'answers':26} {'req s':>7} {'hz p50':>7} {'hz p99':>8} {'hz max':>8} "
            f"{'RSS+ MB':>8} {'kept MB':>8} {'cpu s':>6}")
    print(head)
    print("-" * len(head))
    for r in rows:
        hz, mem = r.get("healthz_ms", {}), r.get("rss_mib", {})
        answers = ",".join(r["answers"]) if r["outcome"] == "answered" else r["outcome"]
        print(f"{r['attack']:30} {answers[:26]:26} {r.get('request_s', float('nan')):7.2f} "
              f"{hz.get('p50', float('nan')):7.1f} {hz.get('p99', float('nan')):8.1f} {hz.get('max', float('nan')):8.1f} "
              f"{mem.get('peak_growth', float('nan')):8.1f} {mem.get('retained', float('nan')):8.1f} "
              f"{r.get('server_cpu_s', float('nan')):6.2f}")
    for r in rows:
        for message in r.get("messages", []):
            print(f"  {r['attack']}: {message}")


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # through the finally blocks: every process stopped, the lab removed


def main() -> None:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("attacks", nargs="*", help="attack classes to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the attack classes")
    parser.add_argument("--source", type=Path, default=ROOT, help="checkout whose API server to run")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds an attack may take")
    parser.add_argument("--max-rss", type=float, default=4096.0, help="MiB of server RSS that ends an attack")
    parser.add_argument("--json", action="store_true", help="print one JSON line per attack")
    parser.add_argument("--probe", help=argparse.SUPPRESS)
    parser.add_argument("--pid", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        probe_main(args.probe, args.pid, PROBE_INTERVAL)
        return
    if args.list:
        for a in ATTACKS.values():
            print(f"{a.name:30} {a.doc}")
        return
    unknown = [a for a in args.attacks if a not in ATTACKS]
    if unknown:
        parser.error(f"unknown attack(s): {', '.join(unknown)} (see --list)")
    chosen = [ATTACKS[a] for a in args.attacks] if args.attacks else list(ATTACKS.values())
    rows = []
    lab = Lab()
    try:
        lab.start_etcd()
        for one in chosen:
            row = measure(lab, args.source.resolve(), one, timeout=args.timeout, max_rss=args.max_rss)
            rows.append(row)
            if args.json:
                print(json.dumps(row), flush=True)
            else:
                print(f"# {one.name}: done", file=sys.stderr, flush=True)
    finally:
        lab.stop()
    if not args.json:
        print(f"# source: {args.source.resolve()}  machine: {os.cpu_count()} CPUs, "
              f"load {os.getloadavg()[0]:.2f}")
        print_table(rows)


if __name__ == "__main__":
    main()
