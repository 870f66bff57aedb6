"""Where the time goes from `kubectl delete pod` to the pod's branch gone from `kubelab ui`'s page on every
node, on the netns lab (`kubelab up --dataplane netns --nodes 3`, the first seed article's Service and three
pods, examples/clusterip-svc.yaml).

    .venv/bin/python bench/ui_delete.py --rounds 5
    .venv/bin/python bench/ui_delete.py --rounds 5 --code before=/dev/shm/base --code after=.

Each round applies the manifest, waits until every node's rules and every page show three branches, lets
the cluster go quiet (past minSyncPeriod, so the proxy agents' token buckets are full, as for a user who
looks at the page before deleting), then runs `kubectl delete pod api-2 --wait=false` and records, from the
pod's watch event with deletionTimestamp (Terminating: the deletion as a watcher first sees it; kubectl
itself returns later, its start-up and discovery take 0.5-1.5 s here): the EndpointSlice event that takes
api-2 out of the ready endpoints, each node's kernel commit that drops its KUBE-SEP branch (`nft monitor`
in the node's namespace, then iptables-save to see what the commit did), each page's path read that first
shows two branches on every node (a client doing what app.js does, one per `--code`: each checkout's
`kubelab ui`, side by side on the same cluster), each page's path reads, and the API server's trace of the
slice write (`kubelab trace`: its delivery to the proxy agents, each node's restore and how long it took).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness import ROOT, Lab, machine, percentile
from ui import Page as PathPage
from ui import start_ui

from kubelab.etcd import free_port
from kubelab.processes import stop_process

MANIFEST = Path(ROOT) / "examples" / "clusterip-svc.yaml"
SERVICE = "default/clusterip-svc"
QUIET_SECONDS = 3.0


def branches(text: str) -> int:
    """The Service's KUBE-SEP jumps in the node's nat table."""
    return sum(1 for line in text.splitlines()
               if line.startswith("-A KUBE-SVC-") and f'"{SERVICE} -> ' in line and "-j KUBE-SEP-" in line)


async def save(netns: str) -> str:
    proc = await asyncio.create_subprocess_exec("ip", "netns", "exec", netns, "iptables-save", "-t", "nat",
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    out, _ = await proc.communicate()
    return out.decode()


class Node:
    """A node's kernel: `nft monitor` in its namespace; after each commit, what the nat table holds."""

    def __init__(self, name: str, netns: str) -> None:
        self.name, self.netns = name, netns
        self.count = -1
        self.want: int | None = None
        self.at: float | None = None

    async def run(self) -> None:
        proc = await asyncio.create_subprocess_exec("ip", "netns", "exec", self.netns, "nft", "monitor",
                                                    stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.DEVNULL)
        assert proc.stdout is not None
        try:
            self.count = branches(await save(self.netns))
            while await proc.stdout.read(1 << 16):
                seen = time.monotonic()
                self.count = branches(await save(self.netns))
                if self.want is not None and self.at is None and self.count == self.want:
                    self.at = seen
        finally:
            if proc.returncode is None:
                proc.kill()
            await proc.wait()


class Page(PathPage):
    """bench/ui.py's page with the Service selected, read once at start. `at`: when a read first showed
    `want` branches on every node; `shown`: the branches per node of the last read."""

    def __init__(self, url: str) -> None:
        super().__init__(url, SERVICE, list_services=False, read_at_start=True)
        self.want: int | None = None
        self.at: float | None = None
        self.shown: list[int] = []

    @property
    def reads(self) -> list[float]:
        return self.path_reads

    def saw(self, path: dict[str, Any]) -> None:
        self.shown = [sum(len(p["branches"]) for p in n["ports"]) for n in path["nodes"]]
        if self.want is not None and self.at is None and self.shown and all(c == self.want for c in self.shown):
            self.at = time.monotonic()


class Watch:
    """The pods and the Service's EndpointSlices as watch events reach this process."""

    def __init__(self, api: str) -> None:
        self.api = api
        self.terminating_at: float | None = None
        self.slice_at: float | None = None
        self.slice_name = ""
        self.armed = False

    async def run(self) -> None:
        import httpx

        async with httpx.AsyncClient(base_url=self.api, timeout=None) as http:
            async def pods() -> None:
                async with http.stream("GET", "/api/v1/namespaces/default/pods",
                                       params={"watch": "1", "fieldSelector": "metadata.name=api-2"}) as s:
                    async for line in s.aiter_lines():
                        event = json.loads(line)
                        if self.armed and self.terminating_at is None and \
                                event["object"]["metadata"].get("deletionTimestamp"):
                            self.terminating_at = time.monotonic()

            async def slices() -> None:
                async with http.stream("GET", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
                                       params={"watch": "1",
                                               "labelSelector": "kubernetes.io/service-name=clusterip-svc"}) as s:
                    async for line in s.aiter_lines():
                        event = json.loads(line)
                        ready = [e for e in event["object"].get("endpoints") or []
                                 if (e.get("conditions") or {}).get("ready") is not False]
                        if self.armed and self.slice_at is None and len(ready) == 2:
                            self.slice_at = time.monotonic()
                            self.slice_name = event["object"]["metadata"]["name"]

            async with asyncio.TaskGroup() as tg:
                tg.create_task(pods())
                tg.create_task(slices())


def trace(api: str, key: str) -> list[str]:
    """The API server's trace of the object's latest change (`kubelab trace`), one line a step: ms since
    accepted, the step, who, how long a restore took."""
    import httpx

    from kubelab import tracing

    result = httpx.get(f"{api}{tracing.PATH}", params={"key": key}, timeout=30).json()
    return [f"{1000 * s['sinceAccepted']:.0f} {s['step']} {s['component']} {s['detail'][:40]}"
            + ("" if s.get("took") is None else f" took {1000 * s['took']:.0f}") for s in result.get("steps", [])]


def kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True,
                          check=True)


async def until(what: str, check: Any, timeout: float = 180, detail: Any = None) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: {detail() if detail else ''}")
        await asyncio.sleep(0.05)


async def rounds(api: str, kubeconfig: Path, state: dict[str, Any], uis: dict[str, str], count: int
                 ) -> list[dict[str, Any]]:
    nodes = [Node(name, info["netns"]) for name, info in sorted(state["nodes"].items())]
    pages = {label: Page(ui) for label, ui in uis.items()}
    watch = Watch(api)
    tasks = [asyncio.create_task(x.run()) for x in (*nodes, *pages.values(), watch)]
    out = []
    try:
        for _ in range(count):
            await until("api pods gone", lambda: not kubectl(
                kubeconfig, "get", "pods", "-l", "app=api-container", "-o", "name").stdout.strip())
            await asyncio.to_thread(kubectl, kubeconfig, "apply", "-f", str(MANIFEST))
            for page in pages.values():
                page.changed.set()
            await until("three branches everywhere", lambda: all(n.count == 3 for n in nodes) and all(
                p.shown and all(c == 3 for c in p.shown) for p in pages.values()))
            await asyncio.sleep(QUIET_SECONDS)
            for x in (*nodes, *pages.values()):
                x.want, x.at = 2, None
            watch.armed, watch.terminating_at, watch.slice_at = True, None, None
            sent = time.monotonic()
            await asyncio.to_thread(kubectl, kubeconfig, "delete", "pod", "api-2", "--wait=false")
            accepted = time.monotonic()
            await until("two branches on every node", lambda: all(n.at for n in nodes))
            # The slice's latest write when every node has committed: the one that took api-2 out.
            steps = await asyncio.to_thread(trace, api, f"/registry/endpointslices/default/{watch.slice_name}")
            await until("two branches on every page", lambda: all(p.at for p in pages.values()),
                        detail=lambda: {label: p.shown for label, p in pages.items() if not p.at})
            watch.armed = False

            # Zero: the pod's Terminating event, the deletion as a watcher first sees it. kubectl returns
            # later than that (its start-up and discovery take 0.5-1.5 s here), so its return is no zero.
            zero = watch.terminating_at or accepted

            def since(t: float | None, zero: float = zero) -> float | None:
                return None if t is None else round(t - zero, 3)
            last_node = max(n.at for n in nodes if n.at)
            reads = {label: [round(1000 * r) for r in p.reads] for label, p in pages.items()}
            for page in pages.values():
                page.reads.clear()
            out.append({"kubectl_ran_s": round(accepted - sent, 3), "slice_trace": steps, "path_reads_ms": reads,
                        "kubectl_returned_s": since(accepted), "kubectl_started_s": since(sent),
                        "slice_event_s": since(watch.slice_at),
                        "node_committed_s": {n.name: since(n.at) for n in nodes},
                        "page_s": {label: since(p.at) for label, p in pages.items()},
                        "page_after_last_node_s": {label: since(p.at, last_node) for label, p in pages.items()}})
            print(json.dumps(out[-1]), file=sys.stderr, flush=True)
            await asyncio.to_thread(kubectl, kubeconfig, "delete", "pods", "-l", "app=api-container", "--wait=false")
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return out


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def med(values: list[float | None]) -> float | None:
        got = [v for v in values if v is not None]
        return round(percentile(got, 50), 3) if got else None

    labels = rows[0]["page_s"] if rows else {}
    return {"kubectl_started_s": med([r["kubectl_started_s"] for r in rows]),
            "slice_event_s": med([r["slice_event_s"] for r in rows]),
            "last_node_committed_s": med([max(v for v in r["node_committed_s"].values() if v is not None)
                                          for r in rows]),
            "page_s": {label: med([r["page_s"][label] for r in rows]) for label in labels},
            "page_after_last_node_s": {label: med([r["page_after_last_node_s"][label] for r in rows])
                                       for label in labels},
            "path_read_ms": {label: med([v for r in rows for v in r["path_reads_ms"][label]]) for label in labels}}


def run(codes: dict[str, Path], count: int, nodes: int) -> dict[str, Any]:
    lab = Lab()
    data_dir = lab.base / "up"
    port = free_port()
    uis: dict[str, tuple[subprocess.Popen[str], str]] = {}
    proc = lab.spawn("up", "up", "--nodes", str(nodes), "--dataplane", "netns", "--data-dir", str(data_dir),
                     "--listen", f"127.0.0.1:{port}")
    try:
        lab.wait_for_up("up")
        state = json.loads((data_dir / "cluster.json").read_text())
        for label, code in codes.items():
            uis[label] = start_ui(code, data_dir)
        rows = asyncio.run(rounds(f"http://127.0.0.1:{port}", data_dir / "kubeconfig", state,
                                  {label: ui for label, (_, ui) in uis.items()}, count))
        return {"median": summarize(rows), "rounds": rows, "loadavg_after": [round(x, 2) for x in os.getloadavg()]}
    finally:
        for ui_proc, _ in uis.values():
            stop_process(ui_proc, sig=signal.SIGTERM, timeout=30)
        stop_process(proc, sig=signal.SIGINT, timeout=120)
        lab.procs.pop("up", None)
        lab.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--code", action="append", metavar="LABEL=DIR",
                        help="a checkout whose `kubelab ui` to measure (repeatable; default: this one)")
    args = parser.parse_args()
    codes = {label: Path(d).resolve() for label, _, d in (c.partition("=") for c in args.code or [])} \
        or {"this": Path(ROOT)}
    print(json.dumps({"machine": machine(), "run": run(codes, args.rounds, args.nodes)}, indent=1))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(ROOT)))
    main()
