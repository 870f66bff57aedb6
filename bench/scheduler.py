"""Scheduler throughput, shaped like kube-scheduler's scheduler_perf SchedulingBasic.

    .venv/bin/python bench/scheduler.py                      # 500 nodes x 1000 pods, then 5000 x 10000
    .venv/bin/python bench/scheduler.py --nodes 500 --pods 1000 --profile /tmp/prof

Per workload: a private etcd and the real API server (`kubelab apiserver`, its own process) are
started; nodes of 4 CPU / 32Gi / 110 pods are registered directly through the API with a Ready
condition, as kwok and scheduler_perf's createNodes do (no kubelet); the scheduler runs in this
process; a separate creator process POSTs the pods (100m / 500Mi, scheduler_perf's pod-default.yaml).
Reported: pods/s from the first create to the last binding seen by the scheduler's informer, the CPU
each process spent per pod, and decisions/s of the pure algorithm (decide() + assume over the same
nodes, no I/O). At the end every node's bound requests are checked against its allocatable.
Everything started here is stopped here, whatever happens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import cpu_seconds, etcd_dir, wait_ready

from kubelab import kinds, quantity
from kubelab.client import ApiClient
from kubelab.etcd import Etcd, free_port
from kubelab.gctune import tune_for_long_running
from kubelab.models import Pod
from kubelab.processes import stop_process
from scheduler.algorithm import decide
from scheduler.cache import Cache
from scheduler.scheduling import BIND_IN_FLIGHT, Scheduler

NAMESPACE = "default"
WORKLOADS = [(500, 1000), (5000, 10000)]


def node_body(i: int) -> dict[str, Any]:
    """scheduler_perf's templates/node-default.yaml, with a name instead of generateName."""
    name = f"scheduler-perf-{i:05}"
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {}, "status": {"capacity": {"pods": "110", "cpu": "4", "memory": "32Gi"},
                                   "conditions": [{"status": "True", "type": "Ready"}], "phase": "Running"}}


def pod_body(i: int) -> dict[str, Any]:
    """scheduler_perf's templates/pod-default.yaml."""
    resources = {"cpu": "100m", "memory": "500Mi"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pod-{i:06}", "namespace": NAMESPACE},
            "spec": {"containers": [{"image": "registry.k8s.io/pause:3.10.1", "name": "pause",
                                     "ports": [{"containerPort": 80}],
                                     "resources": {"limits": resources, "requests": resources}}]}}


async def create_all(server: str, bodies: list[dict[str, Any]], rt: Any, concurrency: int) -> float:
    """POST every body with `concurrency` requests in flight; returns the wall time of the first POST."""
    async with ApiClient(server, user_agent="kubelab-bench", fast_requests=True) as api:
        it = iter(bodies)
        first = time.time()

        async def worker() -> None:
            for body in it:
                await api.create(rt, body, body["metadata"].get("namespace"))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return first


def creator_main(args: argparse.Namespace) -> None:
    """The creator process: create the pods, print when the first create started."""
    bodies = [pod_body(i) for i in range(args.create_pods)]
    first = asyncio.run(create_all(args.server, bodies, kinds.PODS, args.concurrency))
    print(json.dumps({"first_create": first}), flush=True)


def profiler(pid: int, path: Path) -> subprocess.Popen[bytes] | None:
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        return None
    return subprocess.Popen([spy, "record", "-p", str(pid), "-o", str(path), "-f", "raw", "-r", "100",
                             "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def run_workload(nodes: int, pods: int, args: argparse.Namespace) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="kubelab-bench-", dir=args.etcd_dir))
    etcd = Etcd(base / "etcd")
    procs: list[subprocess.Popen[bytes]] = []
    result: dict[str, Any] = {"nodes": nodes, "pods": pods}
    try:
        etcd.start()
        port = free_port()
        server = f"http://127.0.0.1:{port}"
        apiserver = subprocess.Popen([sys.executable, "-m", "kubelab", "apiserver", "--etcd-servers", etcd.url,  # noqa: ASYNC220
                                      "--listen", f"127.0.0.1:{port}", "--disable-admission-plugins",
                                      "ServiceAccount"], start_new_session=True)
        procs.append(apiserver)
        await wait_ready(server, apiserver)
        t0 = time.monotonic()
        await create_all(server, [node_body(i) for i in range(nodes)], kinds.NODES, 8)
        result["node_registration_s"] = round(time.monotonic() - t0, 1)

        api = ApiClient(server, user_agent="kubelab-scheduler", fast_requests=True)
        scheduler = Scheduler(api, seed=1, bind_in_flight=args.bind_in_flight)
        bound: list[float] = []

        def on_pod(event: str, old: Pod | None, new: Pod | None) -> None:
            if new is not None and new.node_name and (old is None or not old.node_name):
                bound.append(time.time())

        scheduler.pods.add_handler(on_pod)
        task = asyncio.get_running_loop().create_task(scheduler.run())
        while len(scheduler.cache.nodes) < nodes:
            await asyncio.sleep(0.05)
            if task.done():
                task.result()
        spies = []
        if args.profile:
            Path(args.profile).mkdir(parents=True, exist_ok=True)
            spies = [s for s in (profiler(apiserver.pid, Path(args.profile) / f"apiserver-{nodes}.txt"),
                                 profiler(os.getpid(), Path(args.profile) / f"scheduler-{nodes}.txt")) if s]
        cpu0 = {"apiserver": cpu_seconds(apiserver.pid), "etcd": cpu_seconds(etcd.process.pid),  # type: ignore[union-attr]
                "scheduler": time.process_time()}
        children0 = _children_cpu()
        creator = subprocess.Popen([sys.executable, __file__, "--create-pods", str(pods), "--server", server,  # noqa: ASYNC220
                                    "--concurrency", str(args.create_concurrency)], stdout=subprocess.PIPE)
        procs.append(creator)
        while len(bound) < pods:
            await asyncio.sleep(0.05)
            if task.done():
                task.result()
            if creator.poll() not in (None, 0):
                raise RuntimeError("the pod creator failed")
        out, _ = creator.communicate(timeout=60)
        first = json.loads(out)["first_create"]
        creator_cpu = _children_cpu() - children0  # the creator has exited and been reaped
        cpu = {"apiserver": cpu_seconds(apiserver.pid) - cpu0["apiserver"],
               "etcd": cpu_seconds(etcd.process.pid) - cpu0["etcd"],  # type: ignore[union-attr]
               "scheduler (this process)": time.process_time() - cpu0["scheduler"], "creator": creator_cpu}
        for spy in spies:
            spy.send_signal(2)
            spy.wait(60)
        elapsed = bound[-1] - first
        result.update(pods_per_second=round(pods / elapsed, 1), seconds=round(elapsed, 2),
                      cpu_ms_per_pod={k: round(1000 * v / pods, 2) for k, v in cpu.items()},
                      decisions=scheduler.decisions)
        print(json.dumps(result), file=sys.stderr, flush=True)
        result["overcommitted_nodes"] = await verify(api, nodes, pods)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()
        fresh = [Pod.from_dict({**pod_body(i), "status": {"phase": "Pending"}}) for i in range(pods)]
        node_objects = list(scheduler.nodes.cache.values())
        result["pure_decisions_per_second"] = pure_decisions(node_objects, fresh)
        result["pure_decisions_per_second_loop"] = pure_decisions(node_objects, fresh, vectorized=False)
        return result
    finally:
        for proc in procs:
            stop_process(proc)
        etcd.stop()
        shutil.rmtree(base, ignore_errors=True)


def _children_cpu() -> float:
    times = os.times()
    return times.children_user + times.children_system


async def verify(api: ApiClient, nodes: int, pods: int) -> int:
    """Every pod bound, and no node holding more than it can: returns the number of over-committed nodes."""
    # One GET per pod: kubelab's API server cannot list 10000 pods at once (etcd's answer exceeds the
    # 4 MiB gRPC message limit of its etcd client; see BENCHMARKS.md).
    names = iter(range(pods))
    items: list[Pod] = []

    async def fetch() -> None:
        for i in names:
            items.append(await api.get(kinds.PODS, pod_body(i)["metadata"]["name"], NAMESPACE))

    await asyncio.gather(*(fetch() for _ in range(16)))
    node_items, _ = await api.list(kinds.NODES)
    unbound = [p.key for p in items if not p.node_name]
    if len(items) != pods or unbound:
        raise AssertionError(f"{len(items)} pods, {len(unbound)} unbound")
    used: dict[str, list[int]] = {}
    for p in items:
        u = used.setdefault(p.node_name, [0, 0, 0])
        req = p.spec.containers[0].resources.requests  # type: ignore[index,union-attr]
        assert req is not None
        u[0] += quantity.milli_value(req["cpu"])
        u[1] += quantity.value(req["memory"])
        u[2] += 1
    over = 0
    for n in node_items:
        alloc = n.status.allocatable or n.status.capacity  # type: ignore[union-attr]
        assert alloc is not None
        cpu, mem, count = used.get(n.metadata.name or "", [0, 0, 0])
        if cpu > quantity.milli_value(alloc["cpu"]) or mem > quantity.value(alloc["memory"]) or \
                count > quantity.value(alloc["pods"]):
            over += 1
    return over


def pure_decisions(node_objects: list[Any], pod_objects: list[Pod], *, vectorized: bool = True) -> float:
    """decide() + assume for every pod over the same nodes, in memory: the algorithm alone, as the
    scheduler runs it (with the cache's numpy arrays), or with `vectorized=False` the loop alone."""
    cache = Cache()
    for node in node_objects:
        cache.set_node(node)
    rng, start = random.Random(1), 0
    began = time.perf_counter()
    for pod in pod_objects:
        decision = decide(pod, cache.node_list(), rng=rng, start=start,
                          arrays=cache.node_arrays() if vectorized else None)
        start = decision.next_start
        assert decision.node is not None
        cache.assume(pod, decision.node)
    return round(len(pod_objects) / (time.perf_counter() - began), 1)


async def apiserver_breakdown(count: int, args: argparse.Namespace) -> dict[str, Any]:
    """The API server's CPU per request for each call a scheduled pod costs it, measured one endpoint
    at a time (`count` requests, 8 in flight, aiohttp client), plus what one pod watcher adds."""
    base = Path(tempfile.mkdtemp(prefix="kubelab-bench-", dir=args.etcd_dir))
    etcd = Etcd(base / "etcd")
    apiserver: subprocess.Popen[bytes] | None = None
    out: dict[str, Any] = {}
    try:
        etcd.start()
        port = free_port()
        server = f"http://127.0.0.1:{port}"
        apiserver = subprocess.Popen([sys.executable, "-m", "kubelab", "apiserver", "--etcd-servers", etcd.url,  # noqa: ASYNC220
                                      "--listen", f"127.0.0.1:{port}", "--disable-admission-plugins",
                                      "ServiceAccount"], start_new_session=True)
        await wait_ready(server, apiserver)
        await create_all(server, [node_body(0)], kinds.NODES, 1)
        spy = None
        if args.profile:
            Path(args.profile).mkdir(parents=True, exist_ok=True)
            spy = profiler(apiserver.pid, Path(args.profile) / "apiserver-breakdown.txt")
        async with ApiClient(server, fast_requests=True) as api:
            async def measure(name: str, calls: list[Any]) -> None:
                c0, e0, t0 = cpu_seconds(apiserver.pid), cpu_seconds(etcd.process.pid), time.monotonic()  # type: ignore[union-attr]
                it = iter(calls)

                async def worker() -> None:
                    for call in it:
                        await call()

                await asyncio.gather(*(worker() for _ in range(8)))
                out[name] = {"apiserver_ms": round(1000 * (cpu_seconds(apiserver.pid) - c0) / len(calls), 3),
                             "etcd_ms": round(1000 * (cpu_seconds(etcd.process.pid) - e0) / len(calls), 3),  # type: ignore[union-attr]
                             "requests_per_s": round(len(calls) / (time.monotonic() - t0))}

            pods = [Pod.from_dict({**pod_body(i), "status": {}}) for i in range(2 * count)]
            await measure("POST pods (create)", [lambda b=pod_body(i): api.create(kinds.PODS, b, NAMESPACE)  # noqa: B008
                                                 for i in range(count)])
            await measure("POST pods/binding", [lambda p=p: api.bind(
                p.model_copy(update={"metadata": p.metadata.model_copy(update={"uid": None})}), "scheduler-perf-00000")
                for p in pods[:count]])
            recorder_pod = await api.get(kinds.PODS, "pod-000000", NAMESPACE)
            from kubelab.events import EventRecorder
            recorder = EventRecorder(api, "default-scheduler")
            await measure("POST events (Scheduled)", [lambda i=i: recorder.post(
                recorder_pod, "Normal", "Scheduled", f"Successfully assigned default/pod-{i} to n", action="Binding")
                for i in range(count)])
            condition = {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                                    "message": "0/1 nodes are available: 1 Insufficient cpu."}]}}
            await measure("PATCH pods/status (PodScheduled=False)", [lambda i=i: api.patch(
                kinds.PODS, f"pod-{i:06}", condition, NAMESPACE, subresource="status",
                content_type="application/strategic-merge-patch+json") for i in range(count)])
            # What one watcher adds per event: creates again, with a pod watch open and drained.
            watching = asyncio.get_running_loop().create_task(_drain_watch(server))
            await asyncio.sleep(0.5)
            await measure("POST pods (create) with 1 pod watcher", [
                lambda b=pod_body(i): api.create(kinds.PODS, b, NAMESPACE) for i in range(count, 2 * count)])  # noqa: B008
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)
        if spy is not None:
            spy.send_signal(2)
            spy.wait(60)
        return out
    finally:
        stop_process(apiserver)
        etcd.stop()
        shutil.rmtree(base, ignore_errors=True)


async def _drain_watch(server: str) -> None:
    """A pod watcher as an informer opens it: from the resourceVersion of a list (the watch cache serves
    it; a watch from an older revision than the cache holds would go to etcd on its own stream)."""
    async with ApiClient(server) as api:
        _, rv = await api.list(kinds.PODS, field_selector="status.phase!=Succeeded,status.phase!=Failed")
        async for _ in api.watch(kinds.PODS, field_selector="status.phase!=Succeeded,status.phase!=Failed",
                                 resource_version=rv):
            pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, help="one workload: this many nodes (with --pods)")
    parser.add_argument("--pods", type=int)
    parser.add_argument("--bind-in-flight", type=int, default=BIND_IN_FLIGHT,
                        help="bindings in flight (the scheduler's default)")
    parser.add_argument("--create-concurrency", type=int, default=16, help="pod POSTs in flight")
    parser.add_argument("--etcd-dir", default=etcd_dir(),
                        help="where etcd keeps its data (default /dev/shm: tmpfs)")
    parser.add_argument("--profile", metavar="DIR", help="py-spy the API server and the scheduler into DIR")
    parser.add_argument("--apiserver-breakdown", type=int, metavar="N",
                        help="instead: the API server's CPU per request of each endpoint a pod costs (N each)")
    parser.add_argument("--create-pods", type=int, help=argparse.SUPPRESS)  # the creator process
    parser.add_argument("--server", help=argparse.SUPPRESS)
    parser.add_argument("--concurrency", type=int, default=8, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.create_pods:
        creator_main(args)
        return
    if args.apiserver_breakdown:
        print(json.dumps(asyncio.run(apiserver_breakdown(args.apiserver_breakdown, args)), indent=1))
        return
    workloads = [(args.nodes, args.pods)] if args.nodes else WORKLOADS
    # This process is the scheduler: collect garbage as `kubelab scheduler` does (kubelab/gctune.py).
    tune_for_long_running()
    for nodes, pods in workloads:
        result = uvloop.run(run_workload(nodes, pods, args))  # the scheduler's loop, as `kubelab scheduler`
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
