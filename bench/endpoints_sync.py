"""CPU of one sync of the Endpoints and EndpointSlice controllers for a Service of N pods, in this process,
without the API: what a sync computes before it writes (its pods' endpoints, the trigger time, the trace
causes, the comparison with the stored slices or Endpoints).

    .venv/bin/python bench/endpoints_sync.py                 # 200 and 1,000 pods
    .venv/bin/python bench/endpoints_sync.py --pods 200 --rounds 50

Two ways, alternated in the same run: "from scratch" derives every pod at every sync (what each sync did
before the controllers kept what they derive: a fresh memo and fresh trackers per sync), "one pod
changed" is the steady state of a rollout (the controllers' memo and trackers warm, one pod replaced by a
new object between syncs, as the informer does). Pods look as the kubelet stub writes them (four
conditions, a container status, an owner). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from harness import machine

from controllers.endpoints import _comparable, desired_endpoints, pod_address
from controllers.endpointslices import _content, _zone, planned_content, planned_slices, pod_endpoint
from controllers.podmemo import PodMemo, VersionedWire
from controllers.triggertime import CauseTracker, TriggerTimeTracker
from kubelab.models import Node, Pod, Service
from kubelab.selectors import selector_from_map

SERVICE = Service.from_dict({
    "apiVersion": "v1", "kind": "Service",
    "metadata": {"name": "density", "namespace": "default", "uid": "svc", "resourceVersion": "5",
                 "creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {"selector": {"app": "density"}, "clusterIP": "10.96.0.20",
             "ports": [{"name": "http", "port": 80, "targetPort": 80, "protocol": "TCP"}]}})
NODES = {f"node-{i}": Node.from_dict({"metadata": {"name": f"node-{i}"}}) for i in range(20)}


def pod(i: int, rv: int) -> Pod:
    when = "2026-01-01T00:00:05Z"
    return Pod.from_dict({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"density-5f7b9-{i:05d}", "namespace": "default", "uid": f"uid-{i}-{rv}",
                     "resourceVersion": str(rv), "labels": {"app": "density", "pod-template-hash": "5f7b9"},
                     "creationTimestamp": "2026-01-01T00:00:01Z",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "density-5f7b9",
                                          "uid": "rs", "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"nodeName": f"node-{i % 20}", "containers": [
            {"name": "pause", "image": "pause", "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]},
        "status": {"phase": "Running", "podIP": f"10.244.{i % 20}.{i // 20 + 2}",
                   "podIPs": [{"ip": f"10.244.{i % 20}.{i // 20 + 2}"}], "hostIP": "10.0.0.1",
                   "conditions": [{"type": t, "status": "True", "lastTransitionTime": when}
                                  for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")],
                   "containerStatuses": [{"name": "pause", "ready": True, "restartCount": 0, "image": "pause",
                                          "imageID": "", "started": True,
                                          "state": {"running": {"startedAt": "2026-01-01T00:00:04Z"}}}]}})


class Syncs:
    """The controllers' per-sync work for one Service, with their memo and trackers."""

    def __init__(self) -> None:
        self.endpoints: PodMemo[Any] = PodMemo()
        self.addresses: PodMemo[Any] = PodMemo()
        self.contents, self.read_back = VersionedWire(), VersionedWire()
        self.triggers = [TriggerTimeTracker(), TriggerTimeTracker()]
        self.causes = [CauseTracker(), CauseTracker()]

    def slices(self, pods: list[Pod], stored: list[Any]) -> None:
        selector = selector_from_map(SERVICE.spec.selector if SERVICE.spec else None)
        selected = [p for p in pods if selector.matches(p.metadata.labels)]
        entries = self.endpoints.derive("default/density", ("svc", "5"), selected,
                                        lambda p: pod_endpoint(p, SERVICE, NODES),
                                        extra=lambda p: _zone(NODES.get(p.node_name)))
        self.triggers[0].compute(SERVICE, selected)
        _, seen = self.causes[0].causes(SERVICE, selected, current=lambda k: None)
        for have, (want, wires) in zip(stored, planned_slices(SERVICE, entries), strict=False):
            _ = self.contents.get(have.metadata.name, have.metadata.resource_version,
                                  partial(_content, have)) == planned_content(want, wires)
        self.causes[0].commit("default/density", seen)

    def endpoints_(self, pods: list[Pod], stored: Any) -> None:
        selector = selector_from_map(SERVICE.spec.selector if SERVICE.spec else None)
        selected = [p for p in pods if selector.matches(p.metadata.labels)]
        entries = self.addresses.derive("default/density", ("svc", "5"), selected, lambda p: pod_address(p, SERVICE))
        desired = desired_endpoints(SERVICE, selected, entries=entries)
        self.triggers[1].compute(SERVICE, selected)
        _, seen = self.causes[1].causes(SERVICE, selected, current=lambda k: None)
        _ = self.read_back.get("default/density", "9", lambda: _comparable(stored)) == _comparable(desired)
        self.causes[1].commit("default/density", seen)


def timed(fn: Callable[[], None]) -> float:
    start = time.process_time()
    fn()
    return (time.process_time() - start) * 1000


def run(pods_n: int, rounds: int) -> dict[str, Any]:
    pods = [pod(i, 100 + i) for i in range(pods_n)]
    stored = [s for s, _ in planned_slices(SERVICE, [pod_endpoint(p, SERVICE, NODES) for p in pods])]
    for i, s in enumerate(stored):
        s.metadata.name, s.metadata.resource_version = f"density-{i}", "9"
    stored_ep = desired_endpoints(SERVICE, pods)
    warm = Syncs()
    warm.slices(pods, stored)
    warm.endpoints_(pods, stored_ep)
    times: dict[str, list[float]] = {k: [] for k in ("slices scratch", "slices one", "endpoints scratch",
                                                     "endpoints one")}
    rv = 10_000
    for n in range(rounds):
        rv += 1
        pods[n % pods_n] = pod(n % pods_n, rv)  # one pod replaced, as the informer replaces it
        cold = Syncs()  # nothing kept: every pod derived, every stored object serialised, as before
        times["slices scratch"].append(timed(partial(cold.slices, pods, stored)))
        times["slices one"].append(timed(partial(warm.slices, pods, stored)))
        times["endpoints scratch"].append(timed(partial(cold.endpoints_, pods, stored_ep)))
        times["endpoints one"].append(timed(partial(warm.endpoints_, pods, stored_ep)))
    return {"pods": pods_n, "rounds": rounds,
            **{f"{k} ms": round(statistics.median(v), 2) for k, v in times.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, action="append", help="pods behind the Service (default 200 and 1000)")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    results = [run(n, args.rounds) for n in args.pods or [200, 1000]]
    for r in results:
        print(json.dumps(r), flush=True)
    print(json.dumps({"machine": machine()}))
    print("\n| pods | EndpointSlice sync, from scratch | one pod changed | Endpoints sync, from scratch | one pod changed |")
    print("|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['pods']} | {r['slices scratch ms']} ms | {r['slices one ms']} ms | {r['endpoints scratch ms']} ms"
              f" | {r['endpoints one ms']} ms |")


if __name__ == "__main__":
    main()
