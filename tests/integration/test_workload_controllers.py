"""The ReplicaSet and Deployment controllers and the garbage collector against a real API server and etcd.

The whole control plane runs in-process: the controller manager, the scheduler and two kubelet stubs
(render dataplane: pods get IPs and turn Running and Ready, no processes). Everything talks to a
private API server over HTTP, so what is asserted here is what a user of the API would see.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
from apitools import CORE, ns_path, unique_name
from polling import wait_for_async as wait_for

import controllers
import scheduler
from kubelab.client import ApiClient
from kubeletstub.dataplane import RenderDataplane
from kubeletstub.kubelet import Kubelet
from kubeletstub.node import NodeConfig

APPS = "apps"


@contextlib.asynccontextmanager
async def control_plane(url: str) -> AsyncIterator[httpx.AsyncClient]:
    clients = [ApiClient(url, user_agent=f"kubelab-test-{n}") for n in range(4)]
    tasks = [asyncio.create_task(controllers.run(clients[0], lb_pool=None, node_monitor_grace_period=600)),
             asyncio.create_task(scheduler.run(clients[1]))]
    for n, api in enumerate(clients[2:], start=1):
        config = NodeConfig(name=f"wl-node-{n}", ip=f"10.240.0.{10 + n}", pod_cidr=f"10.244.{n}.0/24")
        tasks.append(asyncio.create_task(Kubelet(api, config, RenderDataplane()).run()))
    try:
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            yield http
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for api in clients:
            await api.close()


def deployment(name: str, *, replicas: int = 3, image: str = "nginx:1.25", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "web", "image": image,
                                                           "ports": [{"containerPort": 80}]}]}}, **spec}}


def replicaset(name: str, *, replicas: int = 3) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"rs": name}},
                     "template": {"metadata": {"labels": {"rs": name}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}}


async def get(http: httpx.AsyncClient, path: str) -> Any:
    resp = await http.get(path)
    return resp.json() if resp.status_code == 200 else None


async def items(http: httpx.AsyncClient, path: str, **params: str) -> list[dict[str, Any]]:
    resp = await http.get(path, params=params)
    assert resp.status_code == 200, resp.text
    return resp.json()["items"]  # type: ignore[no-any-return]


class WatchedStates:
    """The objects a watch delivered, in order, until it saw a DELETED event."""

    def __init__(self) -> None:
        self.objects: list[dict[str, Any]] = []
        self.done = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def deleted(self) -> bool:
        return self.done.is_set()


async def watch_replicasets(http: httpx.AsyncClient, app: str) -> WatchedStates:
    """Start watching the ReplicaSets labelled app=`app` from now; stops at the first DELETED event."""
    path = ns_path("replicasets", group="apps/v1")
    listed = (await http.get(path, params={"labelSelector": f"app={app}"})).json()
    states = WatchedStates()
    params = {"watch": "true", "labelSelector": f"app={app}",
              "resourceVersion": listed["metadata"]["resourceVersion"]}

    async def follow() -> None:
        async with http.stream("GET", path, params=params, timeout=None) as resp:
            async for line in resp.aiter_lines():
                if not line:
                    continue
                event = json.loads(line)
                states.objects.append(event["object"])
                if event["type"] == "DELETED":
                    states.done.set()
                    return

    states.task = asyncio.create_task(follow())
    return states


def owners(obj: dict[str, Any]) -> list[tuple[str, str, bool]]:
    return [(r["kind"], r["name"], bool(r.get("controller"))) for r in obj["metadata"].get("ownerReferences") or []]


async def events_for(http: httpx.AsyncClient, name: str) -> list[tuple[str, str]]:
    evs = await items(http, ns_path("events"))
    return [(e["reason"], e["message"]) for e in evs if e["involvedObject"]["name"] == name]


async def rolled_out(http: httpx.AsyncClient, name: str, replicas: int) -> dict[str, Any] | None:
    d = await get(http, ns_path("deployments", name=name, group=f"{APPS}/v1"))
    if d is None:
        return None
    st = d.get("status") or {}
    done = (st.get("observedGeneration") == d["metadata"]["generation"] and st.get("updatedReplicas", 0) == replicas
            and st.get("replicas", 0) == replicas and st.get("availableReplicas", 0) == replicas)
    return d if done else None


async def test_deployment_creates_its_replicaset_and_pods(private_api: str) -> None:
    name = unique_name("web")
    async with control_plane(private_api) as http:
        resp = await http.post(ns_path("deployments", group="apps/v1"), json=deployment(name))
        assert resp.status_code == 201, resp.text
        d = await wait_for("the rollout to complete", lambda: rolled_out(http, name, 3))
        rss = await items(http, ns_path("replicasets", group="apps/v1"), labelSelector=f"app={name}")
        assert len(rss) == 1
        rs = rss[0]
        template_hash = rs["metadata"]["labels"]["pod-template-hash"]
        assert rs["metadata"]["name"] == f"{name}-{template_hash}"
        assert set(template_hash) <= set("bcdfghjklmnpqrstvwxz2456789") and 1 <= len(template_hash) <= 10
        assert rs["spec"]["selector"]["matchLabels"] == {"app": name, "pod-template-hash": template_hash}
        assert rs["spec"]["template"]["metadata"]["labels"] == {"app": name, "pod-template-hash": template_hash}
        assert owners(rs) == [("Deployment", name, True)]
        assert rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
        assert rs["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"] == "3"
        assert rs["metadata"]["annotations"]["deployment.kubernetes.io/max-replicas"] == "4"
        assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
        assert rs["status"]["replicas"] == 3 and rs["status"]["readyReplicas"] == 3
        assert rs["status"]["availableReplicas"] == 3 and rs["status"]["fullyLabeledReplicas"] == 3
        assert rs["status"]["observedGeneration"] == rs["metadata"]["generation"]

        pods = await items(http, ns_path("pods"), labelSelector=f"app={name}")
        assert len(pods) == 3
        for pod in pods:
            assert pod["metadata"]["name"].startswith(f"{rs['metadata']['name']}-")
            assert len(pod["metadata"]["name"]) == len(rs["metadata"]["name"]) + 6
            assert owners(pod) == [("ReplicaSet", rs["metadata"]["name"], True)]
            assert pod["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] is True

        conditions = {c["type"]: c for c in d["status"]["conditions"]}
        assert [c["type"] for c in d["status"]["conditions"]] == ["Available", "Progressing"]
        assert (conditions["Available"]["status"], conditions["Available"]["reason"],
                conditions["Available"]["message"]) == ("True", "MinimumReplicasAvailable",
                                                        "Deployment has minimum availability.")
        assert (conditions["Progressing"]["reason"], conditions["Progressing"]["message"]) == (
            "NewReplicaSetAvailable", f'ReplicaSet "{rs["metadata"]["name"]}" has successfully progressed.')
        events = await wait_for("the ScalingReplicaSet event", lambda: events_for(http, name))
        assert ("ScalingReplicaSet", f"Scaled up replica set {rs['metadata']['name']} to 3") in events
        rs_events = await events_for(http, rs["metadata"]["name"])
        created = [m for r, m in rs_events if r == "SuccessfulCreate"]
        assert sorted(created) == sorted(f"Created pod: {p['metadata']['name']}" for p in pods)


async def test_rollout_replaces_every_pod_and_keeps_history(private_api: str) -> None:
    name = unique_name("roll")
    async with control_plane(private_api) as http:
        await http.post(ns_path("deployments", group="apps/v1"), json=deployment(name))
        await wait_for("the first rollout", lambda: rolled_out(http, name, 3))
        first = {p["metadata"]["name"] for p in await items(http, ns_path("pods"), labelSelector=f"app={name}")}
        resp = await http.patch(ns_path("deployments", name=name, group="apps/v1"),
                                json={"spec": {"template": {"spec": {"containers": [
                                    {"name": "web", "image": "nginx:1.26"}]}}}},
                                headers={"Content-Type": "application/strategic-merge-patch+json"})
        assert resp.status_code == 200, resp.text
        d = await wait_for("the second rollout", lambda: rolled_out(http, name, 3))
        assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"

        async def old_pods_gone() -> list[dict[str, Any]] | None:
            pods = await items(http, ns_path("pods"), labelSelector=f"app={name}")
            return pods if len(pods) == 3 and not {p["metadata"]["name"] for p in pods} & first else None

        pods = await wait_for("only new pods", old_pods_gone)
        assert {c["image"] for p in pods for c in p["spec"]["containers"]} == {"nginx:1.26"}
        rss = {rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]: rs
               for rs in await items(http, ns_path("replicasets", group="apps/v1"), labelSelector=f"app={name}")}
        assert set(rss) == {"1", "2"}
        assert rss["1"]["spec"]["replicas"] == 0 and rss["2"]["spec"]["replicas"] == 3
        assert rss["1"]["metadata"]["name"] != rss["2"]["metadata"]["name"]
        events = [m for r, m in await events_for(http, name) if r == "ScalingReplicaSet"]
        new_name, old_name = rss["2"]["metadata"]["name"], rss["1"]["metadata"]["name"]
        # maxSurge 1, maxUnavailable 0: one new pod at a time, one old pod at a time.
        assert f"Scaled up replica set {new_name} to 1" in events
        assert f"Scaled down replica set {old_name} to 2 from 3" in events
        assert f"Scaled up replica set {new_name} to 2 from 1" in events
        assert f"Scaled down replica set {old_name} to 0 from 1" in events

        # revisionHistoryLimit 0: the empty old ReplicaSet is deleted.
        resp = await http.patch(ns_path("deployments", name=name, group="apps/v1"),
                                json={"spec": {"revisionHistoryLimit": 0}},
                                headers={"Content-Type": "application/merge-patch+json"})
        assert resp.status_code == 200, resp.text

        async def one_rs_left() -> bool:
            left = await items(http, ns_path("replicasets", group="apps/v1"), labelSelector=f"app={name}")
            return [rs["metadata"]["name"] for rs in left] == [new_name]

        await wait_for("the old ReplicaSet to be cleaned up", one_rs_left)


async def test_scale_subresource_and_surplus_deletion(private_api: str) -> None:
    name = unique_name("scale")
    async with control_plane(private_api) as http:
        await http.post(ns_path("deployments", group="apps/v1"), json=deployment(name))
        await wait_for("the rollout", lambda: rolled_out(http, name, 3))
        resp = await http.patch(ns_path("deployments", name=name, group="apps/v1") + "/scale",
                                json={"spec": {"replicas": 5}},
                                headers={"Content-Type": "application/merge-patch+json"})
        assert resp.status_code == 200, resp.text
        await wait_for("5 replicas", lambda: rolled_out(http, name, 5))
        resp = await http.patch(ns_path("deployments", name=name, group="apps/v1") + "/scale",
                                json={"spec": {"replicas": 1}},
                                headers={"Content-Type": "application/merge-patch+json"})
        await wait_for("1 replica", lambda: rolled_out(http, name, 1))

        async def one_pod() -> list[dict[str, Any]] | None:
            pods = await items(http, ns_path("pods"), labelSelector=f"app={name}")
            return pods if len(pods) == 1 else None

        await wait_for("surplus pods to be deleted", one_pod)
        rs = (await items(http, ns_path("replicasets", group="apps/v1"), labelSelector=f"app={name}"))[0]
        deleted = [m for r, m in await events_for(http, rs["metadata"]["name"]) if r == "SuccessfulDelete"]
        assert len(deleted) == 4
        events = [m for r, m in await events_for(http, name) if r == "ScalingReplicaSet"]
        assert f"Scaled up replica set {rs['metadata']['name']} to 5 from 3" in events
        assert f"Scaled down replica set {rs['metadata']['name']} to 1 from 5" in events


async def test_replicaset_adopts_orphans_and_releases_strays(private_api: str) -> None:
    name = unique_name("adopt")
    async with control_plane(private_api) as http:
        orphan = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{name}-orphan", "labels": {"rs": name}},
                  "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}
        assert (await http.post(ns_path("pods"), json=orphan)).status_code == 201

        async def orphan_running() -> bool:
            pod = await get(http, ns_path("pods", name=f"{name}-orphan"))
            return pod is not None and (pod.get("status") or {}).get("phase") == "Running"

        # As in kube, the controller may sync the new ReplicaSet before its pod informer has the orphan: it
        # then makes two pods, adopts the orphan and deletes one of the three. Running (and older) first,
        # the orphan is the last that getPodsToDelete's ranking picks, so it stays either way.
        await wait_for("the orphan running", orphan_running)
        await http.post(ns_path("replicasets", group="apps/v1"), json=replicaset(name, replicas=2))

        async def settled() -> list[dict[str, Any]] | None:
            pods = await items(http, ns_path("pods"), labelSelector=f"rs={name}")
            return pods if len(pods) == 2 and all(owners(p) == [("ReplicaSet", name, True)] for p in pods) else None

        pods = await wait_for("the orphan adopted and one pod created", settled)
        assert f"{name}-orphan" in {p["metadata"]["name"] for p in pods}
        # Relabel the orphan: the ReplicaSet releases it and makes another pod.
        await http.patch(ns_path("pods", name=f"{name}-orphan"), json={"metadata": {"labels": {"rs": "elsewhere"}}},
                         headers={"Content-Type": "application/merge-patch+json"})

        async def released() -> bool:
            stray = await get(http, ns_path("pods", name=f"{name}-orphan"))
            return stray is not None and not stray["metadata"].get("ownerReferences") and bool(await settled())

        await wait_for("the stray released and replaced", released)
        await http.delete(ns_path("pods", name=f"{name}-orphan"), params={"gracePeriodSeconds": "0"})


async def test_background_deletion_removes_replicasets_and_pods(private_api: str) -> None:
    name = unique_name("bg")
    async with control_plane(private_api) as http:
        await http.post(ns_path("deployments", group="apps/v1"), json=deployment(name, replicas=2))
        await wait_for("the rollout", lambda: rolled_out(http, name, 2))
        resp = await http.request("DELETE", ns_path("deployments", name=name, group="apps/v1"),
                                  json={"propagationPolicy": "Background"})
        assert resp.status_code == 200
        assert await get(http, ns_path("deployments", name=name, group="apps/v1")) is None

        async def all_gone() -> bool:
            rss = await items(http, ns_path("replicasets", group="apps/v1"), labelSelector=f"app={name}")
            pods = await items(http, ns_path("pods"), labelSelector=f"app={name}")
            return not rss and not pods

        await wait_for("the ReplicaSet and its pods to be collected", all_gone)


async def test_foreground_deletion_waits_for_dependents(private_api: str) -> None:
    name = unique_name("fg")
    async with control_plane(private_api) as http:
        await http.post(ns_path("deployments", group="apps/v1"), json=deployment(name, replicas=2))
        await wait_for("the rollout", lambda: rolled_out(http, name, 2))
        # Every state the ReplicaSet goes through, from a watch: the whole cascade can finish between two
        # polls, so polling alone would sometimes miss the finalizer the ReplicaSet carried.
        rs_states = await watch_replicasets(http, name)
        resp = await http.request("DELETE", ns_path("deployments", name=name, group="apps/v1"),
                                  json={"propagationPolicy": "Foreground"})
        assert resp.status_code == 200
        marked = resp.json()
        assert marked["metadata"]["finalizers"] == ["foregroundDeletion"]
        assert marked["metadata"]["deletionTimestamp"]
        # Readable while its dependents go; the ReplicaSet is deleted in the foreground too (it has pods).
        while True:
            d = await get(http, ns_path("deployments", name=name, group="apps/v1"))
            pods = await items(http, ns_path("pods"), labelSelector=f"app={name}")
            if d is None:
                break
            assert d["metadata"]["finalizers"] == ["foregroundDeletion"]
            await asyncio.sleep(0.05)
        assert pods == [] or all(p["metadata"].get("deletionTimestamp") for p in pods)
        await wait_for("the ReplicaSet's DELETED event", lambda: rs_states.deleted())
        assert rs_states.task is not None
        await rs_states.task
        seen_rs_finalizer = any("foregroundDeletion" in (rs["metadata"].get("finalizers") or [])
                                for rs in rs_states.objects)
        assert seen_rs_finalizer
        assert await items(http, ns_path("replicasets", group="apps/v1"), labelSelector=f"app={name}") == []
        assert await items(http, ns_path("pods"), labelSelector=f"app={name}") == []


async def test_orphan_deletion_keeps_dependents(private_api: str) -> None:
    name = unique_name("orph")
    async with control_plane(private_api) as http:
        await http.post(ns_path("replicasets", group="apps/v1"), json=replicaset(name, replicas=2))

        async def two_pods() -> list[dict[str, Any]] | None:
            pods = await items(http, ns_path("pods"), labelSelector=f"rs={name}")
            return pods if len(pods) == 2 else None

        await wait_for("two pods", two_pods)
        resp = await http.request("DELETE", ns_path("replicasets", name=name, group="apps/v1"),
                                  json={"propagationPolicy": "Orphan"})
        assert resp.json()["metadata"]["finalizers"] == ["orphan"]

        async def rs_gone() -> bool:
            return await get(http, ns_path("replicasets", name=name, group="apps/v1")) is None

        await wait_for("the ReplicaSet to go once its pods are orphaned", rs_gone)
        pods = await items(http, ns_path("pods"), labelSelector=f"rs={name}")
        assert len(pods) == 2
        assert all(not p["metadata"].get("ownerReferences") for p in pods)
        for pod in pods:
            await http.delete(ns_path("pods", name=pod["metadata"]["name"]), params={"gracePeriodSeconds": "0"})


async def test_endpointslices_follow_their_service_through_gc(private_api: str) -> None:
    name = unique_name("svc")
    async with control_plane(private_api) as http:
        svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
               "spec": {"selector": {"app": name}, "ports": [{"port": 80}]}}
        assert (await http.post(ns_path("services"), json=svc)).status_code == 201
        path = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"

        async def slices() -> list[dict[str, Any]]:
            return await items(http, path, labelSelector=f"kubernetes.io/service-name={name}")

        created = await wait_for("the Service's slice", slices)
        assert owners(created[0]) == [("Service", name, True)]
        await http.delete(f"{CORE}/namespaces/default/services/{name}")
        await wait_for("the garbage collector to delete the slice", lambda: _empty(slices()))

        # Foreground: the Service stays (with its finalizer) until its slice is gone, and no new one appears.
        name = unique_name("svcfg")
        svc["metadata"]["name"] = name
        svc["spec"]["selector"] = {"app": name}
        assert (await http.post(ns_path("services"), json=svc)).status_code == 201
        await wait_for("the Service's slice", slices)
        resp = await http.request("DELETE", f"{CORE}/namespaces/default/services/{name}",
                                  json={"propagationPolicy": "Foreground"})
        assert resp.json()["metadata"]["finalizers"] == ["foregroundDeletion"]

        async def service_gone() -> bool:
            return await get(http, f"{CORE}/namespaces/default/services/{name}") is None

        await wait_for("the Service to go after its slice", service_gone)
        assert await slices() == []


async def _empty(coro: Any) -> bool:
    return not await coro


async def test_recreate_scales_old_to_zero_before_creating_new(private_api: str) -> None:
    name = unique_name("recreate")
    async with control_plane(private_api) as http:
        body = deployment(name, replicas=2, strategy={"type": "Recreate"})
        assert (await http.post(ns_path("deployments", group="apps/v1"), json=body)).status_code == 201
        await wait_for("the first rollout", lambda: rolled_out(http, name, 2))
        first = (await items(http, ns_path("replicasets", group="apps/v1"), labelSelector=f"app={name}"))[0]
        await http.patch(ns_path("deployments", name=name, group="apps/v1"),
                         json={"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.26"}]}}}},
                         headers={"Content-Type": "application/strategic-merge-patch+json"})

        async def replaced() -> list[dict[str, Any]] | None:
            pods = await items(http, ns_path("pods"), labelSelector=f"app={name}")
            images = {c["image"] for p in pods for c in p["spec"]["containers"]}
            return pods if len(pods) == 2 and images == {"nginx:1.26"} else None

        await wait_for("the second rollout", lambda: rolled_out(http, name, 2))
        await wait_for("only new pods", replaced)
        events = [m for r, m in await events_for(http, name) if r == "ScalingReplicaSet"]
        old_name = first["metadata"]["name"]
        new_name = next(rs["metadata"]["name"] for rs in await items(
            http, ns_path("replicasets", group="apps/v1"), labelSelector=f"app={name}")
            if rs["metadata"]["name"] != old_name)
        # All old pods go first, then the new ReplicaSet is created at full size.
        assert events.index(f"Scaled down replica set {old_name} to 0 from 2") < \
            events.index(f"Scaled up replica set {new_name} to 2")


async def test_dependent_with_another_live_owner_only_loses_the_dangling_reference(private_api: str) -> None:
    name = unique_name("owners")
    async with control_plane(private_api) as http:
        owners_uids = {}
        for suffix in ("a", "b"):
            resp = await http.post(ns_path("configmaps"), json={"metadata": {"name": f"{name}-{suffix}"}})
            owners_uids[suffix] = resp.json()["metadata"]["uid"]
        refs = [{"apiVersion": "v1", "kind": "ConfigMap", "name": f"{name}-{s}", "uid": uid}
                for s, uid in owners_uids.items()]
        resp = await http.post(ns_path("configmaps"), json={"metadata": {"name": f"{name}-dep", "ownerReferences": refs}})
        assert resp.status_code == 201, resp.text
        await http.delete(ns_path("configmaps", name=f"{name}-a"))

        async def one_ref_left() -> dict[str, Any] | None:
            dep = await get(http, ns_path("configmaps", name=f"{name}-dep"))
            return dep if dep and [r["name"] for r in dep["metadata"]["ownerReferences"]] == [f"{name}-b"] else None

        await wait_for("the dangling reference to be removed", one_ref_left)
        await http.delete(ns_path("configmaps", name=f"{name}-b"))

        async def dep_gone() -> bool:
            return await get(http, ns_path("configmaps", name=f"{name}-dep")) is None

        await wait_for("the dependent to go with its last owner", dep_gone)


async def test_min_ready_seconds_delays_availability(private_api: str) -> None:
    name = unique_name("minready")
    async with control_plane(private_api) as http:
        body = replicaset(name, replicas=2)
        body["spec"]["minReadySeconds"] = 3600
        await http.post(ns_path("replicasets", group="apps/v1"), json=body)

        async def status() -> dict[str, Any]:
            rs = await get(http, ns_path("replicasets", name=name, group="apps/v1"))
            return (rs or {}).get("status") or {}

        async def ready_two() -> dict[str, Any] | None:
            current = await status()
            return current if current.get("readyReplicas") == 2 else None

        async def available_two() -> dict[str, Any] | None:
            current = await status()
            return current if current.get("availableReplicas") == 2 else None

        ready = await wait_for("two ready pods", ready_two)
        # Ready for less than an hour: not available yet.
        assert "availableReplicas" not in ready
        await http.patch(ns_path("replicasets", name=name, group="apps/v1"), json={"spec": {"minReadySeconds": 0}},
                         headers={"Content-Type": "application/merge-patch+json"})
        available = await wait_for("two available pods", available_two)
        assert available["readyReplicas"] == 2 and available["observedGeneration"] == 2
        await http.request("DELETE", ns_path("replicasets", name=name, group="apps/v1"))


async def test_events_are_left_to_their_ttl_not_collected(private_api: str) -> None:
    """kube's garbage collector ignores events (DefaultIgnoredResources): an event whose owner is deleted
    stays until its TTL, while a ConfigMap with the same owner goes."""
    name = unique_name("evowner")
    async with control_plane(private_api) as http:
        resp = await http.post(ns_path("configmaps"), json={"metadata": {"name": f"{name}-owner"}})
        owner = [{"apiVersion": "v1", "kind": "ConfigMap", "name": f"{name}-owner", "uid": resp.json()["metadata"]["uid"]}]
        event = {"metadata": {"name": f"{name}-event", "ownerReferences": owner},
                 "involvedObject": {"kind": "ConfigMap", "name": f"{name}-owner", "namespace": "default"},
                 "reason": "Owned", "message": "an event with an owner", "type": "Normal"}
        assert (await http.post(ns_path("events"), json=event)).status_code == 201
        resp = await http.post(ns_path("configmaps"), json={"metadata": {"name": f"{name}-dep", "ownerReferences": owner}})
        assert resp.status_code == 201, resp.text
        await http.delete(ns_path("configmaps", name=f"{name}-owner"))

        async def dep_gone() -> bool:
            return await get(http, ns_path("configmaps", name=f"{name}-dep")) is None

        await wait_for("the ConfigMap dependent to go with its owner", dep_gone)
        kept = await get(http, ns_path("events", name=f"{name}-event"))
        assert kept is not None and kept["metadata"]["ownerReferences"] == owner
