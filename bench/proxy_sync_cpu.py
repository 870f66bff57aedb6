"""CPU of the proxy agents' syncs alone, in the shape of a `kubelab up` rollout: N Proxiers in one process
(kubelab up's nodes), one Service of E endpoints in two EndpointSlices, and C changes that each replace one
endpoint; after every change every Proxier syncs once (a partial sync that rewrites the Service's chains,
as in the density rollout), writing its rules file as `kubelab up` does. No API server, no informers, no
kernel: the figure is this process's CPU per node-sync (render, rules file, bookkeeping, the applier's
loop-side work), deterministic in the work it does.

`--applier recording` is render mode's RecordingApplier (kube-proxy's --noflush semantics in memory);
`--applier loopside` keeps only what the event loop does itself with a real IptablesApplier besides
handing the commands to the namespace's thread: encoding the payload and parsing an `iptables-save -t nat`
of the chains the last restore left (the kernel's work is not in this process's loop).

    .venv/bin/python bench/proxy_sync_cpu.py --code before=/dev/shm/before --code after=. --passes 3

Each `--code NAME=DIR` (a kubelab checkout) runs in a process of its own, the codes alternated --passes
times; the load average is printed with every run. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# --code-dir: the checkout a --worker process imports, before any import of it.
sys.path.insert(0, sys.argv[sys.argv.index("--code-dir") + 1] if "--code-dir" in sys.argv
                else str(Path(__file__).resolve().parents[1]))

from kubelab.models import EndpointSlice, Service
from proxyagent import Proxier, ProxyConfig
from proxyagent.apply import RecordingApplier, chains_of


class LoopSideApplier(RecordingApplier):
    """The event loop's share of IptablesApplier's work: the payload encoded for the command's stdin and
    the nat table's chains parsed from save output (here the chains the last restore declared). The
    commands themselves run in another thread against the kernel, so they are left out."""

    def __init__(self) -> None:
        super().__init__()
        self._saved = ""

    async def restore(self, payload: str) -> None:
        payload.encode()
        self.restores += 1
        self._saved = "*nat\n" + "".join(line + " [0:0]\n" for line in payload.splitlines() if line.startswith(":"))

    async def existing_nat_chains(self) -> frozenset[str]:
        return chains_of(self._saved)


def service() -> Service:
    return Service.model_validate({
        "metadata": {"name": "web", "namespace": "default", "resourceVersion": "1"},
        "spec": {"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                 "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}})


def endpoint_slice(part: int, change: int, endpoints: int, nodes: int) -> EndpointSlice:
    """Half the endpoints; the second half's last one is a new pod at every change."""
    half = endpoints // 2
    ids = list(range(part * half, (part + 1) * half))
    if part == 1:
        ids[-1] = endpoints + change
    return EndpointSlice.model_validate({
        "metadata": {"name": f"web-{part}", "namespace": "default", "resourceVersion": str(change + 2),
                     "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": [{"addresses": [f"10.244.{i // 250}.{i % 250 + 1}"], "conditions": {"ready": True},
                       "nodeName": f"node-{i % nodes}"} for i in ids]})


async def worker(nodes: int, endpoints: int, changes: int, applier: str) -> dict[str, Any]:
    rules = Path(tempfile.mkdtemp(prefix="proxy-sync-cpu-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    try:
        proxiers = [Proxier(ProxyConfig(node_name=f"node-{i}", node_ips=(f"10.98.0.{i + 1}",),
                                        cluster_cidr="10.244.0.0/16"),
                            LoopSideApplier() if applier == "loopside" else RecordingApplier(),
                            state_file=rules / f"node-{i}" / "iptables.rules") for i in range(nodes)]
        svc, first, second = service(), endpoint_slice(0, 0, endpoints, nodes), endpoint_slice(1, 0, endpoints, nodes)
        for p in proxiers:
            p.on_service("ADDED", None, svc)
            p.on_slice("ADDED", None, first)
            p.on_slice("ADDED", None, second)
            p.on_services_synced()
            p.on_slices_synced()
            await p.sync_proxy_rules()
        slices = [endpoint_slice(1, n, endpoints, nodes) for n in range(1, changes + 1)]
        cpu0, events_cpu = time.process_time(), 0.0
        old = second
        for new in slices:
            mark = time.process_time()
            for p in proxiers:
                p.on_slice("MODIFIED", old, new)
            events_cpu += time.process_time() - mark
            old = new
            for p in proxiers:
                await p.sync_proxy_rules()
        cpu = time.process_time() - cpu0
        syncs = nodes * changes
        return {"nodes": nodes, "endpoints": endpoints, "changes": changes, "applier": applier,
                "ms_per_node_sync": round((cpu - events_cpu) * 1000 / syncs, 3),
                "ms_per_node_event": round(events_cpu * 1000 / syncs, 3),
                "loadavg_1m": round(os.getloadavg()[0], 2)}
    finally:
        shutil.rmtree(rules, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--endpoints", type=int, default=200)
    parser.add_argument("--changes", type=int, default=50)
    parser.add_argument("--applier", choices=("recording", "loopside"), action="append")
    parser.add_argument("--code", action="append", default=[], metavar="NAME=DIR",
                        help="a kubelab checkout to measure (repeatable; default after=.)")
    parser.add_argument("--passes", type=int, default=3, help="rounds over the codes")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--code-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    appliers = args.applier or ["loopside", "recording"]
    if args.worker:
        print(json.dumps(asyncio.run(worker(args.nodes, args.endpoints, args.changes, appliers[0]))))
        return 0
    codes = [tuple(c.split("=", 1)) for c in args.code] or [("after", ".")]
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for _ in range(args.passes):
        for applier in appliers:
            for name, directory in codes:
                done = subprocess.run([sys.executable, __file__, "--worker", "--code-dir", str(Path(directory).resolve()),
                                       "--nodes", str(args.nodes), "--endpoints", str(args.endpoints),
                                       "--changes", str(args.changes), "--applier", applier],
                                      capture_output=True, text=True, check=True)
                result = json.loads(done.stdout) | {"code": name}
                print(json.dumps(result), flush=True)
                results.setdefault((applier, name), []).append(result)
    print(f"\n{args.nodes} nodes, one Service of {args.endpoints} endpoints, {args.changes} one-endpoint changes, "
          f"every node syncing each; median (min-max) of {args.passes}:")
    print("| applier | code | CPU per node-sync | CPU per node-event | load (1 min) |")
    print("|---|---|---:|---:|---:|")
    for (applier, name), runs in results.items():
        per_sync = [r["ms_per_node_sync"] for r in runs]
        per_event = [r["ms_per_node_event"] for r in runs]
        loads = [r["loadavg_1m"] for r in runs]
        print(f"| {applier} | {name} | {statistics.median(per_sync):.2f} ms ({min(per_sync):.2f}-{max(per_sync):.2f})"
              f" | {statistics.median(per_event):.3f} ms | {min(loads):.1f}-{max(loads):.1f} |")
    if len(codes) == 2:
        (a, _), (b, _) = codes
        for applier in appliers:
            ratio = (statistics.median(r["ms_per_node_sync"] for r in results[(applier, a)])
                     / statistics.median(r["ms_per_node_sync"] for r in results[(applier, b)]))
            print(f"{applier}: {a}/{b} CPU per node-sync {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
