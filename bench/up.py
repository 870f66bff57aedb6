"""`kubelab up` as users run it, scheduler_perf-shaped: the one-process cluster under a scheduling burst.

    .venv/bin/python bench/up.py                                   # 500 nodes x 2,000 pods (~1-2 min)
    .venv/bin/python bench/up.py --nodes 5000 --pods 10000
    .venv/bin/python bench/up.py --code before=/tmp/base --code after=. --repeat 2   # A/B, alternated
    .venv/bin/python bench/up.py --profile /tmp/prof               # py-spy `kubelab up` and its API server's process

Each run starts the real command, `python -m kubelab up --nodes 0 --dataplane render` (its own private
etcd on /dev/shm, its own data dir and port), as a process of its own, from the checkout given with
--code (default: this one). Through the API, from this process (aiohttp, outside the cluster's
process): N nodes of 4 CPU / 32Gi / 110 pods with a Ready condition are registered, as kwok and
scheduler_perf's createNodes do; nothing heartbeats for them, so the cluster runs with
--node-monitor-grace-period 1h (kwok renews the nodes' leases instead). Then M pods of 100m / 500Mi
(scheduler_perf's pod-default.yaml) are POSTed 32 at a time; half-way through, one pod asking for
1,000 CPUs is created, and the time from its create's answer to its FailedScheduling event arriving
on a watch is measured.

Reported per run: creates/s (first POST to last answer), all-bound pods/s (first POST to the last
binding seen on a pod watch), the FailedScheduling latency, over-committed nodes (every pod and node
read back through the API at the end, in pages), CPU per pod of the `kubelab up` process (with its API
server's process, the default since the split; --profile samples both, into two files) and of its
etcd, /healthz latency on the public port every 50 ms during the burst (the event loop's lag, as a
client sees it), Ctrl-C to exit; and beside them the machine's gauge: raw etcd puts/s of pod-sized
bytes at 32 in flight into the same etcd (aetcd, bench/harness.py), before the nodes and after the
burst. Machines and moments differ: compare figures with the gauge of the same run.
Everything started here is stopped here (Ctrl-C first, as a user would; then by PID), whatever happens.
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
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from harness import (
    ROOT,
    cpu_seconds,
    etcd_dir,
    machine,
    raw_etcd_puts,
    run_concurrently,
    summary_ms,
    up_cpu_seconds,
    up_processes,
)

from kubelab.etcd import free_port
from kubelab.processes import stop_process

NAMESPACE = "default"
CONCURRENCY = 32
PROBE = "unschedulable-probe"
# A pod as this API server stores it (managedFields, status, defaults) is about 1.7 KB: the gauge puts that much.
GAUGE_BYTES = 1700


def node_body(i: int) -> dict[str, Any]:
    """scheduler_perf's templates/node-default.yaml, with a name instead of generateName."""
    name = f"scheduler-perf-{i:05}"
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {}, "status": {"capacity": {"pods": "110", "cpu": "4", "memory": "32Gi"},
                                   "conditions": [{"status": "True", "type": "Ready"}], "phase": "Running"}}


def pod_body(name: str, *, cpu: str = "100m", memory: str = "500Mi") -> dict[str, Any]:
    """scheduler_perf's templates/pod-default.yaml."""
    resources = {"cpu": cpu, "memory": memory}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"containers": [{"image": "registry.k8s.io/pause:3.10.1", "name": "pause",
                                     "ports": [{"containerPort": 80}],
                                     "resources": {"limits": resources, "requests": resources}}]}}


def pod_name(i: int) -> str:
    return f"pod-{i:06}"


# --- the cluster's process --------------------------------------------------------------------------


class Cluster:
    """One `kubelab up` from the checkout `code`, in a private directory; `stop()` sends Ctrl-C, waits,
    then ends whatever is left by PID and removes the directory."""

    def __init__(self, code: Path, *, grace: str = "3600", up_args: tuple[str, ...] = ("--nodes", "0", "--dataplane",
                                                                                      "render")) -> None:
        self.code = code
        self.base = Path(tempfile.mkdtemp(prefix="kubelab-bench-up-", dir=etcd_dir()))
        self.port = free_port()
        self.server = f"http://127.0.0.1:{self.port}"
        self.log_path = self.base / "up.log"
        env = {**os.environ, "PYTHONPATH": str(code)}
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kubelab", "up", *up_args, "--data-dir",
                 str(self.base / "data"), "--listen", f"127.0.0.1:{self.port}", "--node-monitor-grace-period", grace],
                stdout=log, stderr=subprocess.STDOUT, cwd=code, env=env, start_new_session=True)
        self.etcd_pid: int | None = None
        self.etcd_url = ""
        self.prefix: str | None = None
        self.stop_seconds: float | None = None

    async def wait_up(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while b"kubelab is up" not in self.log_path.read_bytes():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"kubelab up did not come up:\n{self.log_path.read_text()[-3000:]}")
            await asyncio.sleep(0.1)
        state = json.loads((self.base / "data" / "cluster.json").read_text())
        self.etcd_url = state["etcd"][0]
        self.prefix = state.get("netnsPrefix")  # the netns lab's, to check that none of its namespaces is left
        self.etcd_pid = int(json.loads((self.base / "data" / "etcd.pid").read_text())["pid"])

    def cpu(self) -> tuple[float, float]:
        """CPU seconds of the `kubelab up` process (every thread) with its API server's and scheduler's
        processes (the defaults since the splits; launcher/upapiserver.py, launcher/upscheduler.py), and of
        its etcd."""
        return up_cpu_seconds(up_processes(self.proc.pid)), cpu_seconds(self.etcd_pid) if self.etcd_pid else 0.0

    def stop(self) -> None:
        if self.proc.poll() is None:
            started = time.monotonic()
            self.proc.send_signal(signal.SIGINT)  # Ctrl-C
            try:
                self.proc.wait(60)
                self.stop_seconds = round(time.monotonic() - started, 2)
            except subprocess.TimeoutExpired:
                pass
        stop_process(self.proc)
        if self.etcd_pid is not None:
            try:
                os.kill(self.etcd_pid, 0)
            except ProcessLookupError:
                pass
            else:
                print(f"etcd {self.etcd_pid} outlived kubelab up; stopping it", file=sys.stderr)
                os.kill(self.etcd_pid, signal.SIGKILL)
        shutil.rmtree(self.base, ignore_errors=True)


# --- the client side ------------------------------------------------------------------------------


async def post(http: aiohttp.ClientSession, path: str, body: dict[str, Any], errors: Counter[str] | None = None
               ) -> None:
    """POST `body`; answers 429 and 5xx are counted in `errors` and the POST sent again (up to 5 times), as a
    client would; a 409 for a retried create means the first attempt had landed."""
    for attempt in range(6):
        try:
            async with http.post(path, data=orjson.dumps(body), headers={"Content-Type": "application/json"}) as resp:
                answer = await resp.read()
                if resp.status == 201 or (resp.status == 409 and attempt > 0):
                    return
                if errors is None or attempt == 5 or (resp.status != 429 and resp.status < 500):
                    raise RuntimeError(f"POST {path}: {resp.status} {answer[:300]!r}")
                errors[str(resp.status)] += 1
        except TimeoutError:  # no answer within the session's 120 s
            if errors is None or attempt == 5:
                raise
            errors["no answer in 120 s"] += 1
        await asyncio.sleep(1.0)


async def list_all(http: aiohttp.ClientSession, path: str, **params: str) -> tuple[list[dict[str, Any]], str]:
    """Every item, in pages of 500 (limit/continue); returns the items and the first page's resourceVersion."""
    items: list[dict[str, Any]] = []
    query, rv = {"limit": "500", **params}, ""
    while True:
        async with http.get(path, params=query) as resp:
            doc = orjson.loads(await resp.read())
            if resp.status != 200:
                raise RuntimeError(f"LIST {path}: {resp.status} {doc}")
        items.extend(doc.get("items") or [])
        rv = rv or doc["metadata"]["resourceVersion"]
        token = doc["metadata"].get("continue")
        if not token:
            return items, rv
        query = {"limit": "500", "continue": token}


async def watch(http: aiohttp.ClientSession, path: str, rv: str, on_event: Any, **params: str) -> None:
    """Stream a watch from `rv`, calling on_event(type, object, time received) for each event."""
    query = {"watch": "true", "resourceVersion": rv, "allowWatchBookmarks": "true", **params}
    async with http.get(path, params=query, timeout=aiohttp.ClientTimeout(total=None)) as resp:
        partial = b""
        async for chunk in resp.content.iter_any():
            now = time.time()
            *lines, partial = (partial + chunk).split(b"\n")
            for line in lines:
                if line.strip():
                    event = orjson.loads(line)
                    on_event(event["type"], event["object"], now)


async def healthz_probe(http: aiohttp.ClientSession, out: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        try:
            async with http.get("/healthz", timeout=aiohttp.ClientTimeout(total=30)) as resp:
                await resp.read()
        except (TimeoutError, aiohttp.ClientError):  # counted as what it took: the run goes on
            pass
        out.append(time.perf_counter() - started)
        await asyncio.sleep(0.05)


def overcommitted(pods: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> int:
    """Nodes whose bound pods request more cpu, memory or pods than the node has (requests are the
    benchmark's own 100m / 500Mi: anything else is the probe, which must stay unbound)."""
    from kubelab import quantity

    used: dict[str, list[int]] = {}
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if not node:
            continue
        req = pod["spec"]["containers"][0]["resources"]["requests"]
        u = used.setdefault(node, [0, 0, 0])
        u[0] += quantity.milli_value(req["cpu"])
        u[1] += quantity.value(req["memory"])
        u[2] += 1
    over = 0
    for node in nodes:
        alloc = node["status"].get("allocatable") or node["status"]["capacity"]
        cpu, mem, count = used.get(node["metadata"]["name"], [0, 0, 0])
        if cpu > quantity.milli_value(alloc["cpu"]) or mem > quantity.value(alloc["memory"]) or \
                count > quantity.value(alloc["pods"]):
            over += 1
    return over


async def gauge(cluster: Cluster, count: int) -> dict[str, Any]:
    """Raw etcd puts/s of pod-sized bytes, 32 in flight, into the cluster's own etcd."""
    body = orjson.dumps({**pod_body("gauge"), "status": {"phase": "Pending", "qosClass": "Guaranteed"},
                         "metadata": {"name": "gauge", "namespace": NAMESPACE, "uid": "0" * 36,
                                      "creationTimestamp": "2026-01-01T00:00:00Z", "managedFields": [
                                          {"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
                                           "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                                           "fieldsV1": {"f:spec": {"f:containers": {}}}}]}})
    body = body[:-1] + b',"padding":"' + b"x" * max(0, GAUGE_BYTES - len(body) - 14) + b'"}'
    raw = await raw_etcd_puts(cluster.etcd_url, [body] * count, CONCURRENCY, etcd_pid=cluster.etcd_pid,
                              prefix="/bench-up-gauge/")
    return {"raw_etcd_puts_per_s": round(raw.per_second), "bytes": len(body)}


async def burst(cluster: Cluster, nodes: int, pods: int, args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"nodes": nodes, "pods": pods}
    result["gauge_before"] = await gauge(cluster, args.gauge_puts)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(cluster.server, connector=connector,
                                     timeout=aiohttp.ClientTimeout(total=120)) as http:
        t0 = time.monotonic()
        node_errors: Counter[str] = Counter()
        await run_concurrently([lambda i=i: post(http, "/api/v1/nodes", node_body(i), node_errors)
                                for i in range(nodes)], CONCURRENCY)
        result["node_registration_s"] = round(time.monotonic() - t0, 2)
        result["node_errors_retried"] = dict(node_errors)
        # The scheduler sees the nodes on its watch: give it a moment after the last registration.
        await asyncio.sleep(1.0)
        bound: dict[str, float] = {}
        failed_scheduling: list[float] = []
        _, pods_rv = await list_all(http, f"/api/v1/namespaces/{NAMESPACE}/pods")
        _, events_rv = await list_all(http, f"/api/v1/namespaces/{NAMESPACE}/events")

        def on_pod(kind: str, obj: dict[str, Any], now: float) -> None:
            if kind in ("ADDED", "MODIFIED") and (obj.get("spec") or {}).get("nodeName"):
                bound.setdefault(obj["metadata"]["name"], now)

        def on_event(kind: str, obj: dict[str, Any], now: float) -> None:
            if kind in ("ADDED", "MODIFIED") and obj.get("reason") == "FailedScheduling":
                failed_scheduling.append(now)

        watches = [asyncio.create_task(watch(http, f"/api/v1/namespaces/{NAMESPACE}/pods", pods_rv, on_pod)),
                   asyncio.create_task(watch(http, f"/api/v1/namespaces/{NAMESPACE}/events", events_rv, on_event,
                                             fieldSelector=f"involvedObject.name={PROBE}"))]
        healthz: list[float] = []
        probing = asyncio.Event()
        probe_task = asyncio.create_task(healthz_probe(http, healthz, probing))
        spies = Profiles(up_processes(cluster.proc.pid), Path(args.profile) / f"up-{args.label}-{nodes}.txt") \
            if args.profile else None
        up0, etcd0, own0 = *cluster.cpu(), time.process_time()
        probe_acked: list[float] = []
        created = 0
        errors: Counter[str] = Counter()

        async def create(i: int) -> None:
            nonlocal created
            await post(http, f"/api/v1/namespaces/{NAMESPACE}/pods", pod_body(pod_name(i)), errors)
            created += 1
            if created == pods // 2:  # half-way through the burst: a pod no node can take
                await post(http, f"/api/v1/namespaces/{NAMESPACE}/pods", pod_body(PROBE, cpu="1000"), errors)
                probe_acked.append(time.time())

        first = time.time()
        create_seconds = await run_concurrently([lambda i=i: create(i) for i in range(pods)], CONCURRENCY)
        deadline = time.monotonic() + args.timeout
        while (len(bound) < pods or not failed_scheduling) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        up1, etcd1, own1 = *cluster.cpu(), time.process_time()
        probing.set()
        await probe_task
        if spies is not None:
            await spies.stop()
        for task in watches:
            task.cancel()
        await asyncio.gather(*watches, return_exceptions=True)
        if len(bound) < pods:
            raise RuntimeError(f"only {len(bound)} of {pods} pods bound within {args.timeout} s")
        last = max(bound.values())
        result.update(
            creates_per_s=round(pods / create_seconds, 1),
            bound_pods_per_s=round(pods / (last - first), 1), seconds_to_all_bound=round(last - first, 2),
            failed_scheduling_after_create_s=round(failed_scheduling[0] - probe_acked[0], 2)
            if failed_scheduling and probe_acked else None,
            cpu_ms_per_pod={"kubelab up": round(1000 * (up1 - up0) / pods, 2),
                            "its etcd": round(1000 * (etcd1 - etcd0) / pods, 2),
                            "bench client": round(1000 * (own1 - own0) / pods, 2)},
            kubelab_up_cores=round((up1 - up0) / (last - first), 2), create_errors_retried=dict(errors),
            healthz_during_burst=summary_ms(healthz))
        pod_items, _ = await list_all(http, f"/api/v1/namespaces/{NAMESPACE}/pods")
        node_items, _ = await list_all(http, "/api/v1/nodes")
        bench_pods = [p for p in pod_items if p["metadata"]["name"] != PROBE]
        unbound = sum(1 for p in bench_pods if not p["spec"].get("nodeName"))
        result["read_back"] = {"pods": len(bench_pods), "unbound": unbound, "nodes": len(node_items),
                               "probe_bound": any(p["spec"].get("nodeName") for p in pod_items
                                                  if p["metadata"]["name"] == PROBE)}
        result["overcommitted_nodes"] = overcommitted(pod_items, node_items)
    result["gauge_after"] = await gauge(cluster, args.gauge_puts)
    if spies is not None:
        result.update(spies.summaries())
    return result


# --- profiles ---------------------------------------------------------------------------------------


def profiler(pid: int, path: Path) -> subprocess.Popen[bytes] | None:
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        print("py-spy not found (pip install py-spy): no profile", file=sys.stderr)
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([spy, "record", "-p", str(pid), "-o", str(path), "-f", "raw", "-r", "200", "--full-filenames",
                             "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Profiles:
    """py-spy on each of `kubelab up`'s processes (up_processes): the components' process into `path`, the
    API server's child (the default since the split) into `path` with `-apiserver` before its suffix."""

    def __init__(self, pids: list[int], path: Path) -> None:
        self.paths = {"profile": path}
        if len(pids) > 1:
            self.paths["profile_apiserver"] = path.with_name(f"{path.stem}-apiserver{path.suffix}")
        self.spies = [spy for pid, p in zip(pids, self.paths.values(), strict=False)
                      if (spy := profiler(pid, p)) is not None]

    async def stop(self) -> None:
        for spy in self.spies:
            spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        for spy in self.spies:
            await asyncio.to_thread(spy.wait, 60)

    def summaries(self) -> dict[str, Any]:
        return {key: summarize_profile(path) for key, path in self.paths.items() if path.exists()}


# Frames that are not a component: `kubelab up` under every sample, the in-process transport under the API
# server's handlers of its components' requests (charged to apiserver).
LAUNCHERS = ("kubelab/__main__.py", "launcher/cli.py", "launcher/upcommand.py", "launcher/runner.py",
             "kubelab/client/asgi.py")
OWN = ("apiserver", "scheduler", "controllers", "kubelab", "kubeletstub", "proxyagent", "clusterdns")


def _package(frame: str) -> str:
    """The top-level package of a py-spy frame `func (path/to/file.py:line)`."""
    path = frame.rsplit("(", 1)[-1].split(":", 1)[0]
    parts = Path(path).parts
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1].removesuffix(".py")
    for own in OWN:
        if own in parts:
            sub = parts[parts.index(own):]
            return "/".join(sub[:2]) if own == "kubelab" and len(sub) > 2 else own
    return "python" if "python3" in path else Path(path).stem


def summarize_profile(path: Path, top: int = 15) -> dict[str, Any]:
    """Shares of samples: by library anywhere on the stack (inclusive), by the first of kubelab's own
    packages from the loop down (which component's callback it was), and the top functions by self time."""
    inclusive: Counter[str] = Counter()
    component: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")[1:] if stack.startswith(("process", "Thread")) else stack.split(";")
        if not frames:
            continue
        total += count
        packages = [_package(f) for f in frames]
        for package in set(packages):
            inclusive[package] += count
        first = next((p for p, f in zip(packages, frames, strict=True)
                      if p.split("/")[0] in OWN and not any(x in f for x in LAUNCHERS)), "(no kubelab frame)")
        component[first] += count
        own[frames[-1]] += count

    def shares(counter: Counter[str], n: int) -> dict[str, float]:
        return {k: round(100 * v / total, 1) for k, v in counter.most_common(n)}

    return {"samples": total, "inclusive_pct": shares(inclusive, 20), "component_pct": shares(component, 15),
            "self_pct": shares(own, top)}


# --- main -------------------------------------------------------------------------------------------


async def one_run(code: Path, nodes: int, pods: int, args: argparse.Namespace) -> dict[str, Any]:
    cluster = Cluster(code)
    result: dict[str, Any] = {"code": args.label}
    try:
        started = time.monotonic()
        await cluster.wait_up()
        result["startup_s"] = round(time.monotonic() - started, 2)
        result.update(await burst(cluster, nodes, pods, args))
    finally:
        await asyncio.to_thread(cluster.stop)
    result["ctrl_c_to_exit_s"] = cluster.stop_seconds
    return result


def table_row(r: dict[str, Any]) -> str:
    g = (r["gauge_before"]["raw_etcd_puts_per_s"], r["gauge_after"]["raw_etcd_puts_per_s"])
    return (f"| {r['code']} | {r['nodes']:,} x {r['pods']:,} | {r['creates_per_s']} | **{r['bound_pods_per_s']}** | "
            f"{r['failed_scheduling_after_create_s']} s | {r['overcommitted_nodes']} | "
            f"{r['cpu_ms_per_pod']['kubelab up']} ms | {r['cpu_ms_per_pod']['its etcd']} ms | "
            f"{r['healthz_during_burst']['p99_ms']} ms | {g[0]:,} / {g[1]:,} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--code", action="append", metavar="LABEL=DIR",
                        help="a checkout to run `kubelab up` from (repeat for A/B; runs alternate); default: this one")
    parser.add_argument("--repeat", type=int, default=1, help="rounds (each runs every --code once)")
    parser.add_argument("--gauge-puts", type=int, default=3000, help="raw etcd puts per gauge")
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for every pod to be bound")
    parser.add_argument("--profile", metavar="DIR", help="py-spy `kubelab up`'s processes during the burst")
    parser.add_argument("--json", metavar="FILE", help="also write every result here")
    args = parser.parse_args()
    codes = [(c.split("=", 1)[0], Path(c.split("=", 1)[1]).resolve()) for c in args.code or [f"this={ROOT}"]]
    results = []
    for _ in range(args.repeat):
        for label, code in codes:
            args.label = label
            before = machine()
            result = asyncio.run(one_run(code, args.nodes, args.pods, args))
            result["machine"] = {"before": before, "after": machine()}
            print(json.dumps(result), flush=True)
            results.append(result)
    print("\n| code | nodes x pods | creates/s | all bound, pods/s | FailedScheduling after create | "
          "over-committed nodes | `kubelab up` CPU/pod | etcd CPU/pod | /healthz p99 | gauge: raw etcd puts/s "
          "(before / after) |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(table_row(r))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
