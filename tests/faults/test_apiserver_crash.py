"""The API server is killed with SIGKILL in the middle of 2000 concurrent creates, and started again.

A Service (with its ClusterIP, and its NodePorts) or a Pod is one etcd transaction, so a crash can
lose only writes that were never acknowledged, and can never leave half an object or an address
held twice. The client here behaves like kubectl in a retry loop: 50 creates in flight, each retried
on a connection error until the server answers. Afterwards, with a freshly started server:

* every create that was answered 201 is there, with the uid of that answer (lost = 0);
* every object decodes and is complete: a Service has its ClusterIP and NodePorts, each with a
  reservation key that names it; a Pod has its uid, timestamp and Pending status;
* every reservation key names a Service that holds that address or port (no leak), and no ClusterIP
  or NodePort is held by two Services.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx
from faultkit import ApiServerProcess, Figures, OwnedEtcd

from apiserver.registry.allocation import IP_PREFIX, PORT_PREFIX
from apiserver.storage import Storage
from kubelab import addressing
from kubelab.models import Pod, Service

NAMESPACE = "crash"
CREATES = 2000
IN_FLIGHT = 50
KILL_AFTER = 700  # acknowledged creates before the SIGKILL
CONNECTION_ERRORS = (httpx.ConnectError, httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError,
                     httpx.ConnectTimeout, httpx.ReadTimeout, httpx.PoolTimeout)


def body(i: int) -> tuple[str, dict[str, Any]]:
    """Object i of the run: Services (a quarter of them NodePort) and Pods, alternating."""
    if i % 2 == 0:
        spec: dict[str, Any] = {"selector": {"app": f"s{i}"}, "ports": [{"name": "http", "port": 80},
                                                                        {"name": "https", "port": 443}]}
        if i % 4 == 0:
            spec["type"] = "NodePort"
        return "services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"svc-{i}"}, "spec": spec}
    return "pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pod-{i}", "labels": {"i": str(i)}},
                    "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}


class Run:
    def __init__(self) -> None:
        self.acknowledged: dict[str, str] = {}  # "resource/name" -> uid from the 201
        self.committed_unacknowledged: set[str] = set()  # a retry found it existing (409 AlreadyExists)
        self.connection_errors = 0
        self.other: Counter[str] = Counter()
        self.killed_at: float | None = None
        self.restarted_at: float | None = None  # the new server answers /readyz
        self.first_ack_after_restart: float | None = None  # the first 201 to a request sent to it


async def create_all(url: str, run: Run, on_ack: Callable[[], None]) -> None:
    limits = httpx.Limits(max_connections=IN_FLIGHT, max_keepalive_connections=IN_FLIGHT)
    gate = asyncio.Semaphore(IN_FLIGHT)
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as client:

        async def one(i: int) -> None:
            resource, obj = body(i)
            key = f"{resource}/{obj['metadata']['name']}"
            uncertain = False
            async with gate:
                for _ in range(600):
                    sent = time.monotonic()
                    try:
                        resp = await client.post(f"/api/v1/namespaces/{NAMESPACE}/{resource}", json=obj)
                    except CONNECTION_ERRORS:
                        run.connection_errors += 1
                        uncertain = True  # sent or not, we cannot know: retry, as a client would
                        await asyncio.sleep(0.1)
                        continue
                    if resp.status_code == 201:
                        run.acknowledged[key] = resp.json()["metadata"]["uid"]
                        if run.restarted_at is not None and sent >= run.restarted_at \
                                and run.first_ack_after_restart is None:
                            run.first_ack_after_restart = time.monotonic()
                        on_ack()
                    elif resp.status_code == 409 and uncertain:
                        run.committed_unacknowledged.add(key)
                    else:
                        run.other[f"{resp.status_code} {resp.json().get('message')}"] += 1
                    return
                run.other["gave up"] += 1

        await asyncio.gather(*(one(i) for i in range(CREATES)))


async def read_registry(etcd_url: str) -> dict[str, dict[str, Any]]:
    """Everything the checks need, straight from etcd: objects by key, and reservation keys."""
    storage = Storage([etcd_url])
    try:
        out: dict[str, dict[str, Any]] = {}
        for prefix in ("/registry/services/", f"/registry/pods/{NAMESPACE}/", IP_PREFIX, PORT_PREFIX):
            items, _ = await storage.list(prefix)
            out.update({item.key: item.obj for item in items})
        return out
    finally:
        await storage.close()


def check_consistency(stored: dict[str, dict[str, Any]]) -> list[str]:
    """Problems: half-written objects, orphaned reservations, addresses or ports held twice."""
    problems = []
    service_range = ipaddress.ip_network(addressing.SERVICE_CIDR)
    ip_holders: dict[str, list[str]] = {}
    port_holders: dict[int, list[str]] = {}
    services: dict[str, Service] = {}
    for key, obj in stored.items():
        if key.startswith("/registry/services/"):
            svc = Service.from_dict(obj)
            name = f"{svc.metadata.namespace}/{svc.metadata.name}"
            services[name] = svc
            if not svc.metadata.uid or not svc.metadata.creation_timestamp or svc.spec is None:
                problems.append(f"service {name} is incomplete: {obj}")
                continue
            ip = svc.spec.cluster_ip
            if not ip or ipaddress.ip_address(ip) not in service_range or svc.spec.cluster_ips != [ip]:
                problems.append(f"service {name} has no valid ClusterIP: {ip!r} {svc.spec.cluster_ips!r}")
            else:
                ip_holders.setdefault(ip, []).append(name)
                owner = stored.get(IP_PREFIX + ip)
                if owner is None or owner.get("uid") != svc.metadata.uid:
                    problems.append(f"service {name}: reservation of {ip} is {owner}")
            for port in svc.spec.ports or []:
                if svc.spec.type == "NodePort" and not port.node_port:
                    problems.append(f"NodePort service {name} has a port without a nodePort")
                if port.node_port:
                    port_holders.setdefault(port.node_port, []).append(name)
                    owner = stored.get(PORT_PREFIX + str(port.node_port))
                    if owner is None or owner.get("uid") != svc.metadata.uid:
                        problems.append(f"service {name}: reservation of {port.node_port} is {owner}")
        elif key.startswith("/registry/pods/"):
            pod = Pod.from_dict(obj)
            if not pod.metadata.uid or not pod.metadata.creation_timestamp or pod.status is None \
                    or pod.status.phase != "Pending" or not pod.spec or not pod.spec.containers:
                problems.append(f"pod {key} is incomplete: {obj}")
    problems += [f"ClusterIP {ip} is held by {names}" for ip, names in ip_holders.items() if len(names) > 1]
    problems += [f"NodePort {port} is held by {names}" for port, names in port_holders.items() if len(names) > 1]
    for key, owner in stored.items():
        if key.startswith((IP_PREFIX, PORT_PREFIX)):
            svc = services.get(f"{owner.get('namespace')}/{owner.get('name')}")
            value = key.rsplit("/", 1)[1]
            held = svc is not None and svc.metadata.uid == owner.get("uid") and svc.spec is not None and (
                svc.spec.cluster_ip == value or any(str(p.node_port) == value for p in svc.spec.ports or []))
            if not held:
                problems.append(f"reservation {key} names {owner}, which does not hold it")
    return problems


def test_sigkill_during_concurrent_creates_loses_no_acknowledged_write(
        own_etcd: OwnedEtcd, apiserver_process: Callable[..., ApiServerProcess], figures: Figures) -> None:
    server = apiserver_process(own_etcd.url)
    assert httpx.post(f"{server.url}/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}}).status_code == 201
    run = Run()
    restarted = asyncio.Event()

    async def main() -> None:
        loop = asyncio.get_running_loop()

        def on_ack() -> None:
            if run.killed_at is None and len(run.acknowledged) >= KILL_AFTER:
                server.kill()  # SIGKILL, with IN_FLIGHT requests in the middle of being served
                run.killed_at = time.monotonic()
                loop.run_in_executor(None, server.start).add_done_callback(lambda _: restart_done())

        def restart_done() -> None:
            run.restarted_at = time.monotonic()
            loop.call_soon_threadsafe(restarted.set)

        started = time.monotonic()
        await create_all(server.url, run, on_ack)
        await restarted.wait()
        figures["seconds_for_the_run"] = round(time.monotonic() - started, 1)

    asyncio.run(main())
    assert run.killed_at is not None, "the server was never killed"

    # A fresh server (the restarted one is killed too) answers for what was acknowledged.
    server.restart()
    with httpx.Client(base_url=server.url, timeout=30) as api:
        present = {}
        for resource in ("services", "pods"):
            listed = api.get(f"/api/v1/namespaces/{NAMESPACE}/{resource}").json()["items"]
            present.update({f"{resource}/{o['metadata']['name']}": o["metadata"]["uid"] for o in listed})
    lost = {key: uid for key, uid in run.acknowledged.items() if present.get(key) != uid}
    stored = asyncio.run(read_registry(own_etcd.url))
    problems = check_consistency(stored)

    figures.update(operations=CREATES, in_flight=IN_FLIGHT, acknowledged=len(run.acknowledged),
                   committed_but_unacknowledged=len(run.committed_unacknowledged),
                   connection_errors_retried=run.connection_errors,
                   lost=len(lost), objects_stored=len(present), inconsistencies=len(problems),
                   seconds_from_kill_to_server_ready=round((run.restarted_at or 0) - run.killed_at, 2),
                   seconds_from_kill_to_first_201_of_new_server=round(
                       (run.first_ack_after_restart or 0) - run.killed_at, 2))
    assert not lost, f"acknowledged creates missing after the crash: {sorted(lost)[:10]}"
    assert not problems, "\n".join(problems[:20])
    # Every create ended in a 201, or in a 409 for one that had been committed before its answer was
    # lost: nothing else (no 5xx, no give-up), and nothing exists that nobody asked for.
    assert not run.other, run.other
    assert set(present) == set(run.acknowledged) | run.committed_unacknowledged
    assert len(present) == CREATES
