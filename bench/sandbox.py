"""Pod sandboxes (root): what one costs the machine and how long the kubelet waits for it, A/B.

    .venv/bin/python bench/sandbox.py --code before=/tmp/base --code after=. [--rounds 3 --batch 10]

Each round runs every --code once, alternated, as a Python process of its own importing that checkout's
`kubeletstub`: a ContainerRuntime (namespaces on) starts --batch sandboxes at once (as a kubelet starting
several pods does: `run_sandbox` gathered), then removes them; --batches times. Per sandbox: the wait
(`run_sandbox` from its call until it returns: the namespace holds the hostname), the CPU of the
sandbox's processes (RUSAGE_CHILDREN over the batch: they are reaped by the removal) and the CPU of the
runtime's own process over the batch (spawning, polling, the hostname thread), divided by the batch.
The load average is printed beside the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


async def worker(batch: int, batches: int) -> dict[str, Any]:
    import kubeletstub
    from kubeletstub.runtime import ContainerRuntime

    waits: list[float] = []
    child_cpu = own_cpu = 0.0
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as scratch:
        rt = ContainerRuntime(Path(scratch) / "node", Path(scratch) / "log", namespaces=True)
        try:
            for b in range(batches):
                keys = [f"default/p{b}-{i}" for i in range(batch)]

                async def timed(key: str) -> float:
                    t0 = time.monotonic()
                    await rt.run_sandbox(key, key.split("/")[1])
                    return time.monotonic() - t0

                ru0, own0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.process_time()
                waits += await asyncio.gather(*(timed(k) for k in keys))
                own_cpu += time.process_time() - own0
                for key in keys:
                    await rt.remove_pod(key, None)
                ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                child_cpu += (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
        finally:
            await rt.close()
    n = batch * batches
    return {"source": str(Path(kubeletstub.__file__).parent.parent), "n": n,
            "child_cpu_ms": 1000 * child_cpu / n, "own_cpu_ms": 1000 * own_cpu / n,
            "wait_p50_ms": 1000 * percentile(waits, 50), "wait_p90_ms": 1000 * percentile(waits, 90),
            "wait_max_ms": 1000 * max(waits)}


def one_run(code: Path, args: argparse.Namespace) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(code)}
    out = subprocess.run([sys.executable, __file__, "--worker", "--batch", str(args.batch), "--batches",
                          str(args.batches)], env=env, cwd=code, check=True, capture_output=True, text=True,
                         timeout=600)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    if Path(result["source"]).resolve() != code:
        raise SystemExit(f"the worker imported {result['source']}, not {code}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--code", action="append", metavar="LABEL=DIR", help="checkouts to compare (alternated)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=10, help="sandboxes started at once")
    parser.add_argument("--batches", type=int, default=3, help="batches per run")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(asyncio.run(worker(args.batch, args.batches))))
        return
    if os.geteuid() != 0:
        raise SystemExit("needs root (namespaces)")
    codes = [(c.split("=", 1)[0], Path(c.split("=", 1)[1]).resolve()) for c in args.code or [f"this={ROOT}"]]
    print("| round | code | sandboxes | CPU per sandbox: its processes + kubelab's | wait p50 / p90 / max | load |")
    print("|---|---|---:|---|---|---|")
    for rnd in range(1, args.rounds + 1):
        for label, code in codes:
            r = one_run(code, args)
            load = "/".join(f"{x:.1f}" for x in os.getloadavg())
            print(f"| {rnd} | {label} | {r['n']} | {r['child_cpu_ms']:.1f} + {r['own_cpu_ms']:.1f} ms | "
                  f"{r['wait_p50_ms']:.0f} / {r['wait_p90_ms']:.0f} / {r['wait_max_ms']:.0f} ms | {load} |",
                  flush=True)


if __name__ == "__main__":
    main()
