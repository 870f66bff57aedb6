"""`kubelab ui` with many Services: how the page's requests fare once the cluster holds N Services (default
10,000, each with one EndpointSlice of one endpoint), in `kubelab up` (render dataplane, 2 nodes).

    .venv/bin/python bench/ui.py                  # 10,000 Services
    .venv/bin/python bench/ui.py --services 2000 --code before=/dev/shm/base --code after=.

The Services are written first, fast, through `--creators` plain `kubelab apiserver` processes on the
lab's etcd with many requests in flight (inside `kubelab up` the API server shares one process with the
proxy agents, which re-render every Service at each sync: creating 10k there ran at ~250/min); then
`kubelab up --etcd-servers` starts on that etcd, and one UI process per `--code` (each checkout's
`kubelab ui`, side by side on the same cluster, so the ratios are of the same moment).

Measured from a client as the page asks: a search that matches everything (first page of 200), a search
that matches one Service, the nodes-and-pods overview, and one Service's path on every node (each node's
rules read and parsed). Ten requests each; the median and the worst. Then `--changes` changes, as the page
lives them: the endpoint of one Service's slice is moved to a new address, and a client that does what
app.js does (listens to /ui/v1/events and reads the path again when an event names the Service or a
node's rules) times the change from the API server's answer to the PATCH to the agents' rules file
holding it (each node) and to the path showing it on every node (each UI). And each UI process's
resident memory (VmRSS, VmHWM) after all that.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness import ROOT, Lab, machine, summary_ms, wait_ready

from kubelab.etcd import free_port
from kubelab.processes import stop_process


def service(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"svc-{i:05d}"},
            "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}


def address(i: int, generation: int = 0) -> str:
    return f"10.{250 + generation}.{i // 250}.{i % 250 + 1}"


def endpoint_slice(i: int) -> dict[str, Any]:
    # A slice the controllers do not manage (the Service has no selector), as a user may write one.
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"svc-{i:05d}-manual", "labels": {"kubernetes.io/service-name": f"svc-{i:05d}"}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [{"addresses": [address(i)], "conditions": {"ready": True}}]}


async def create_all(urls: list[str], count: int, *, in_flight: int = 64) -> float:
    """Every Service and its slice, `in_flight` requests at a time spread over the API servers."""
    import httpx

    start = time.monotonic()
    limit = asyncio.Semaphore(in_flight)
    clients = [httpx.AsyncClient(base_url=url, timeout=60,
                                 limits=httpx.Limits(max_connections=in_flight, max_keepalive_connections=in_flight))
               for url in urls]
    try:
        async def post(http: httpx.AsyncClient, where: str, body: dict[str, Any]) -> None:
            for _ in range(10):  # a loaded machine's etcd may time out (504/503): kube clients retry those
                r = await http.post(where, json=body)
                if r.status_code < 500:
                    break
                await asyncio.sleep(1.0)
            assert r.status_code in (201, 409), r.text

        async def one(i: int) -> None:
            http = clients[i % len(clients)]
            async with limit:
                await post(http, "/api/v1/namespaces/default/services", service(i))
                await post(http, "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", endpoint_slice(i))
        await asyncio.gather(*(one(i) for i in range(count)))
    finally:
        for http in clients:
            await http.aclose()
    return time.monotonic() - start


def wait_caught_up(ui: str, count: int, target: str) -> float:
    """Until the UI lists every Service and every node's rules have the target's path; the seconds taken."""
    import httpx

    start = time.monotonic()
    with httpx.Client(base_url=ui, timeout=300) as http:
        deadline = start + 900
        while http.get("/ui/v1/services", params={"limit": "1"}).json()["total"] < count + 1:
            assert time.monotonic() < deadline, "the UI's informers never caught up"
            time.sleep(0.5)
        while True:  # every node has rendered it
            path = http.get("/ui/v1/path", params={"service": target}).json()
            if all(n["ports"] and n["ports"][0]["branches"] for n in path["nodes"]):
                break
            assert time.monotonic() < deadline, "the nodes never rendered the Services"
            time.sleep(1)
    return time.monotonic() - start


def requests(ui: str, target: str) -> dict[str, Any]:
    import httpx

    out: dict[str, Any] = {}
    with httpx.Client(base_url=ui, timeout=300) as http:
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


class Page:
    """What app.js does with a Service selected: on each event that names the Service or a node's rules,
    read the path again (one read at a time; events during a read ask for one more), and on an event
    naming Services or slices, the list (as the page's loadServices; `list_services`). Each read's answer
    goes to saw(); this one records when the path first shows `expect` on every node. Every path read is
    timed (`path_reads`). With `read_at_start`, the path is read once before any event."""

    def __init__(self, ui: str, target: str, *, list_services: bool = True, read_at_start: bool = False) -> None:
        self.ui, self.target = ui, target
        self.list_services, self.read_at_start = list_services, read_at_start
        self.expect: str | None = None
        self.seen_at: float | None = None
        self.path_reads: list[float] = []
        self.changed = asyncio.Event()

    def saw(self, path: dict[str, Any]) -> None:
        shown = [b["destination"] for n in path["nodes"] for p in n["ports"] for b in p["branches"]]
        if self.expect and self.seen_at is None and shown and all(
                d and d.startswith(self.expect + ":") for d in shown):
            self.seen_at = time.monotonic()

    async def run(self) -> None:
        import httpx

        async with httpx.AsyncClient(base_url=self.ui, timeout=None) as http:
            async def reader() -> None:
                while True:
                    await self.changed.wait()
                    self.changed.clear()
                    t = time.perf_counter()
                    r = await http.get("/ui/v1/path", params={"service": self.target})
                    self.path_reads.append(time.perf_counter() - t)
                    if r.status_code == 200:
                        self.saw(r.json())

            async def lister() -> None:
                await http.get("/ui/v1/services", params={"limit": "200"})

            async with asyncio.TaskGroup() as tg:
                tg.create_task(reader())
                if self.read_at_start:
                    self.changed.set()
                async with http.stream("GET", "/ui/v1/events") as stream:
                    async for line in stream.aiter_lines():
                        if not line.startswith("data: "):
                            continue
                        change = json.loads(line[6:])
                        if self.list_services and {"services", "endpointslices"} & set(change["kinds"]):
                            tg.create_task(lister())
                        if change["overflow"] or self.target in change["services"] or change["nodes"]:
                            self.changed.set()


async def changes(api: str, uis: dict[str, str], data_dir: Path, nodes: list[str], index: int, count: int
                  ) -> dict[str, Any]:
    """`count` moves of one Service's endpoint, one at a time, each timed to the rules files and to each
    UI's path (as its page would read it)."""
    import httpx

    target = f"default/svc-{index:05d}"
    pages = {name: Page(ui, target) for name, ui in uis.items()}
    tasks = [asyncio.create_task(page.run()) for page in pages.values()]
    files = {node: data_dir / "nodes" / node / "iptables.rules" for node in nodes}
    rows = []
    try:
        await asyncio.sleep(2)  # the pages' event streams are open
        async with httpx.AsyncClient(base_url=api, timeout=120) as http:
            for generation in range(1, count + 1):
                new = address(index, generation)
                for page in pages.values():
                    page.expect, page.seen_at = new, None
                body = endpoint_slice(index)
                body["endpoints"][0]["addresses"] = [new]
                where = f"/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/svc-{index:05d}-manual"
                r = await http.patch(where, json={"endpoints": body["endpoints"]},
                                     headers={"Content-Type": "application/merge-patch+json"})
                assert r.status_code == 200, r.text
                accepted = time.monotonic()
                rules: dict[str, float] = {}
                mtimes: dict[str, int] = {}
                deadline = accepted + 300
                while (len(rules) < len(files) or any(p.seen_at is None for p in pages.values())) \
                        and time.monotonic() < deadline:
                    for node, path in files.items():
                        if node in rules:
                            continue
                        mtime = path.stat().st_mtime_ns
                        if mtimes.get(node) != mtime:
                            mtimes[node] = mtime
                            if f"--to-destination {new}:8080" in path.read_text():
                                rules[node] = time.monotonic()
                    await asyncio.sleep(0.01)
                row: dict[str, Any] = {
                    "rules_written_s": {n: round(t - accepted, 3) for n, t in rules.items()},
                    "page_shows_it_s": {name: round(p.seen_at - accepted, 3) if p.seen_at else None
                                        for name, p in pages.items()}}
                if rules:
                    row["after_last_rules_s"] = {name: round(p.seen_at - max(rules.values()), 3) if p.seen_at else None
                                                 for name, p in pages.items()}
                rows.append(row)
                await asyncio.sleep(1.5)  # past minSyncPeriod: each change starts a quiet period afresh
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return {"rows": rows, "path_reads": {name: summary_ms(p.path_reads) for name, p in pages.items()}}


def memory(pid: int) -> dict[str, float]:
    """A process's resident memory now and at its peak, in MiB (/proc/PID/status)."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {name: round(int(fields[name].split()[0]) / 1024, 1) for name in ("VmRSS", "VmHWM")}


def start_ui(code: Path, data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    """`kubelab ui` from the checkout `code` (its own package first on the path); its address."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    proc = subprocess.Popen([sys.executable, "-m", "kubelab", "ui", "--data-dir", str(data_dir), "--listen",
                             "127.0.0.1:0"], stdout=subprocess.PIPE, text=True, cwd=code, env=env,
                            start_new_session=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().split(": ", 1)[1].strip().rstrip("/")


def run(count: int, *, codes: dict[str, Path], creators: int, change_count: int, etcd_data: Path | None = None
        ) -> dict[str, Any]:
    lab = Lab()
    data_dir = lab.base / "up"
    uis: dict[str, tuple[subprocess.Popen[str], str]] = {}
    result: dict[str, Any] = {"services": count}
    try:
        if etcd_data is not None:  # a copy of an earlier run's etcd that holds the Services already
            shutil.copytree(etcd_data, lab.base / "etcd")
            creators = 0
        etcd = lab.start_etcd()
        servers = []
        for n in range(creators):
            port = free_port()
            proc = lab.spawn(f"creator-{n}", "apiserver", "--etcd-servers", etcd.url, "--listen", f"127.0.0.1:{port}")
            asyncio.run(wait_ready(f"http://127.0.0.1:{port}", proc))
            servers.append(f"http://127.0.0.1:{port}")
        if servers:
            created = asyncio.run(create_all(servers, count))
            result["create_seconds"] = round(created, 1)
            result["creates_per_second"] = round(2 * count / created, 1)  # a Service and its slice each
        for n in range(creators):
            stop_process(lab.procs.pop(f"creator-{n}"), sig=signal.SIGTERM, timeout=30)

        port = free_port()
        t = time.monotonic()
        lab.spawn("up", "up", "--nodes", "2", "--dataplane", "render", "--data-dir", str(data_dir),
                  "--etcd-servers", etcd.url, "--listen", f"127.0.0.1:{port}")
        lab.wait_for_up("up", timeout=1800)
        result["up_seconds"] = round(time.monotonic() - t, 1)
        state = json.loads((data_dir / "cluster.json").read_text())
        target = f"default/svc-{count // 2:05d}"
        for name, code in codes.items():
            uis[name] = start_ui(code, data_dir)
        for name, (_, ui) in uis.items():
            result.setdefault("caught_up_seconds", {})[name] = round(wait_caught_up(ui, count, target), 1)
        for name, (_, ui) in uis.items():
            result.setdefault("requests", {})[name] = requests(ui, target)
        result["changes"] = asyncio.run(changes(f"http://127.0.0.1:{port}", {n: u for n, (_, u) in uis.items()},
                                                data_dir, sorted(state["nodes"]), count // 2, change_count))
        result["ui_memory_mib"] = {name: memory(proc.pid) for name, (proc, _) in uis.items()}
        result["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
        return result
    finally:
        for proc, _ in uis.values():
            stop_process(proc, sig=signal.SIGTERM, timeout=30)
        if "up" in lab.procs:
            stop_process(lab.procs.pop("up"), sig=signal.SIGINT, timeout=120)
        lab.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--services", type=int, default=10_000)
    parser.add_argument("--code", action="append", metavar="LABEL=DIR",
                        help="a checkout whose `kubelab ui` to measure (repeatable; default: this one)")
    parser.add_argument("--creators", type=int, default=2, help="API server processes that create the Services")
    parser.add_argument("--changes", type=int, default=5, help="endpoint moves timed to the page")
    parser.add_argument("--etcd-data", type=Path, help="start from a copy of this etcd data dir (an earlier run's, "
                                                       "holding the --services Services) instead of creating them")
    args = parser.parse_args()
    codes = {label: Path(d).resolve() for label, _, d in (c.partition("=") for c in args.code or [])} \
        or {"this": Path(ROOT)}
    print(json.dumps({"machine": machine(), "run": run(args.services, codes=codes, creators=args.creators,
                                                       change_count=args.changes, etcd_data=args.etcd_data)},
                     indent=1))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(ROOT)))
    main()
