"""What the endpoints controllers keep between syncs (controllers/podmemo.py): a sync that reuses each
unchanged pod's endpoint must want exactly what a sync from scratch wants, through a rollout where pods
come, change, go, move to a node of another zone, and the Service itself changes; the content compared
with the stored slices must be the slices' own."""

from __future__ import annotations

import random
from datetime import datetime
from functools import partial
from typing import Any

import pytest

from controllers.endpoints import desired_endpoints, pod_address
from controllers.endpointslices import (
    _content,
    _zone,
    desired_slices,
    planned_content,
    planned_slices,
    pod_endpoint,
)
from controllers.podmemo import PodMemo, VersionedWire
from controllers.triggertime import CauseTracker, Inputs, TriggerTimeTracker, _ready_state
from kubelab import timeutil
from kubelab.models import Node, Pod, Service


class ReadEveryPod:
    """The trackers' answers read from every pod at every sync (what they did before they kept anything)."""

    def __init__(self) -> None:
        self.states: dict[str, tuple[str | None, datetime | None]] | None = None
        self.seen: Inputs | None = None

    def trigger(self, svc: Service, pods: list[Pod]) -> object:
        current = {f"{p.metadata.namespace}/{p.metadata.name}": _ready_state(p) for p in pods}
        known, self.states = self.states, current
        if known is None:
            return timeutil.parse(svc.metadata.creation_timestamp or "")
        changed = [state[1] for k, state in current.items() if state[1] is not None and known.get(k) != state]
        return min(changed) if changed else None

    def causes(self, svc: Service, pods: list[Pod]) -> object:
        tracker = CauseTracker()  # nothing kept: every pod fingerprinted
        if self.seen is not None:
            tracker.commit("default/web", self.seen)
        found, self.seen = tracker.causes(svc, pods, current=lambda k: None)
        return found, self.seen


def service(rv: int, *, named: bool = False, publish: bool = False) -> Service:
    port: dict[str, Any] = {"name": "http", "port": 80, "targetPort": "web" if named else 8080, "protocol": "TCP"}
    return Service.from_dict({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default", "uid": "svc-uid", "resourceVersion": str(rv),
                     "creationTimestamp": "2024-05-01T10:00:00Z"},
        "spec": {"selector": {"app": "web"}, "clusterIP": "10.96.0.10", "ports": [port],
                 "publishNotReadyAddresses": publish}})


def node(name: str, zone: str | None) -> Node:
    return Node.from_dict({"metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone} if zone else {}}})


def pod(i: int, rv: int, *, ready: bool, node_name: str, deleting: bool = False, port: int = 8080) -> Pod:
    meta: dict[str, Any] = {"name": f"web-{i:03}", "namespace": "default", "uid": f"uid-{i}-{rv}",
                            "resourceVersion": str(rv), "labels": {"app": "web"}}
    if deleting:
        meta["deletionTimestamp"] = "2024-05-01T10:01:00Z"
    return Pod.from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                          "spec": {"nodeName": node_name, "containers": [
                              {"name": "c", "image": "pause", "ports": [{"name": "web", "containerPort": port}]}]},
                          "status": {"phase": "Running", "podIP": f"10.244.{i // 200}.{i % 200 + 1}",
                                     "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                                     "lastTransitionTime": f"2024-05-01T10:00:{rv % 60:02}Z"}]}})


def test_a_rollout_through_the_memo_wants_what_a_sync_from_scratch_wants() -> None:
    rng = random.Random(7)
    nodes = {f"n{i}": node(f"n{i}", f"zone-{i % 2}") for i in range(4)}
    svc = service(1)
    pods: dict[int, Pod] = {}
    slices_memo: PodMemo[Any] = PodMemo()
    addresses_memo: PodMemo[Any] = PodMemo()
    triggers, causes, reference = TriggerTimeTracker(), CauseTracker(), ReadEveryPod()
    rv = 10
    for step in range(300):
        rv += 1
        roll = rng.random()
        if roll < 0.45 or not pods:  # a pod comes or changes (a new object, as the informer hands out)
            i = rng.randrange(230)
            pods[i] = pod(i, rv, ready=rng.random() < 0.7, node_name=f"n{rng.randrange(4)}",
                          deleting=rng.random() < 0.1, port=rng.choice((8080, 8080, 9090)))
        elif roll < 0.65:
            del pods[rng.choice(sorted(pods))]
        elif roll < 0.75:  # a node changes zone: the pods on it are not replaced, their endpoints change
            name = f"n{rng.randrange(4)}"
            nodes[name] = node(name, rng.choice(("zone-0", "zone-1", None)))
        elif roll < 0.8:  # the Service changes
            svc = service(rv, named=rng.random() < 0.5, publish=rng.random() < 0.3)
        listed = list(pods.values())
        rng.shuffle(listed)
        # Unchanged pods are the same objects from one sync to the next, as in the informer's cache.
        entries = slices_memo.derive("default/web", (svc.metadata.uid, svc.metadata.resource_version), listed,
                                     partial(pod_endpoint, service=svc, nodes=nodes),
                                     extra=lambda p: _zone(nodes.get(p.node_name)))
        planned = planned_slices(svc, entries)
        assert [s.to_dict() for s, _ in planned] == [s.to_dict() for s in desired_slices(svc, listed, nodes)], step
        assert [planned_content(s, wires) for s, wires in planned] == [_content(s) for s, _ in planned], step
        kept = addresses_memo.derive("default/web", (svc.metadata.uid, svc.metadata.resource_version), listed,
                                     partial(pod_address, service=svc))
        assert desired_endpoints(svc, listed, entries=kept).to_dict() == desired_endpoints(svc, listed).to_dict()
        assert slices_memo.size("default/web") == len(listed)  # nothing kept for pods gone
        # The trackers reuse what they read of a pod object; the reference reads every pod afresh.
        assert triggers.compute(svc, listed) == reference.trigger(svc, listed), step
        found, seen = causes.causes(svc, listed, current=lambda k: None)
        assert (found, seen) == reference.causes(svc, listed), step
        causes.commit("default/web", seen)


def test_a_memo_entry_serves_only_the_object_it_was_derived_from() -> None:
    memo: PodMemo[str] = PodMemo()
    calls: list[str] = []

    def compute(p: Pod) -> str:
        calls.append(p.metadata.name or "")
        return p.metadata.uid or ""

    first = pod(1, 5, ready=True, node_name="n0")
    assert memo.derive("s", "ctx", [first], compute) == ["uid-1-5"]
    assert memo.derive("s", "ctx", [first], compute) == ["uid-1-5"] and calls == ["web-001"]
    # The same resourceVersion on another object (a pod built by hand) is derived afresh.
    same_rv = pod(1, 5, ready=False, node_name="n0")
    memo.derive("s", "ctx", [same_rv], compute)
    assert len(calls) == 2
    memo.derive("s", "other context", [same_rv], compute)  # the Service changed
    assert len(calls) == 3
    memo.derive("s", "other context", [same_rv], compute, extra=lambda p: "zone-b")  # its node changed
    assert len(calls) == 4
    memo.derive("s", None, [same_rv], compute)  # no context: never kept
    memo.derive("s", None, [same_rv], compute)
    assert len(calls) == 6 and memo.size("s") == 1
    no_rv = same_rv.model_copy(deep=True)
    no_rv.metadata.resource_version = None
    memo.derive("t", "ctx", [no_rv], compute)
    memo.derive("t", "ctx", [no_rv], compute)
    assert len(calls) == 8
    memo.forget("t")
    assert memo.size("t") == 0


@pytest.mark.parametrize("version", ["7", None])
def test_read_back_content_is_kept_for_a_resource_version_only(version: str | None) -> None:
    wire = VersionedWire()
    calls: list[int] = []

    def read() -> dict[str, int]:
        calls.append(1)
        return {"a": 1}

    for _ in range(2):
        assert wire.get("default/web-x", version, read) == {"a": 1}
    assert len(calls) == (1 if version else 2)
    assert wire.get("default/web-x", "8", lambda: {"b": 2}) == {"b": 2}  # a newer write is read again
    wire.forget("default/web-x")
    assert wire.get("default/web-x", "8", lambda: {"c": 3}) == {"c": 3}
