"""The DaemonSet, StatefulSet and ReplicationController controllers against a real API server and etcd,
with the in-process controller manager, scheduler and two kubelet stubs (render dataplane: pods get IPs
and turn Running and Ready, no processes), as test_workload_controllers.py runs them. What is asserted is
what a user of the API sees: pods, their names, labels and nodes, ControllerRevisions, status counts."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from apitools import ns_path, unique_name
from kubectltools import Kubectl, write_kubeconfig
from test_workload_controllers import control_plane, get, items, owners, wait_for

from kubelab.client import ApiClient
from kubeletstub.dataplane import RenderDataplane
from kubeletstub.kubelet import Kubelet
from kubeletstub.node import NodeConfig

APPS = "apps/v1"
NODES = {"wl-node-1", "wl-node-2"}
SMP = {"Content-Type": "application/strategic-merge-patch+json"}
MERGE = {"Content-Type": "application/merge-patch+json"}


def daemonset(name: str, image: str = "busybox:1.36", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "agent", "image": image}]}}, **spec}}


async def pods_of(http: httpx.AsyncClient, app: str) -> list[dict[str, Any]]:
    return [p for p in await items(http, ns_path("pods"), labelSelector=f"app={app}")
            if not p["metadata"].get("deletionTimestamp")]


async def ds_done(http: httpx.AsyncClient, name: str, desired: int) -> dict[str, Any] | None:
    """What `kubectl rollout status ds/<name>` waits for."""
    ds = await get(http, ns_path("daemonsets", name=name, group=APPS))
    st = (ds or {}).get("status") or {}
    if ds is None or st.get("observedGeneration") != ds["metadata"]["generation"]:
        return None
    done = (st.get("desiredNumberScheduled") == desired and st.get("updatedNumberScheduled") == desired
            and st.get("numberAvailable") == desired and st.get("currentNumberScheduled") == desired)
    return ds if done else None


async def test_daemonset_runs_one_pod_per_node_and_rolls_out_a_new_template(private_api: str) -> None:
    name = unique_name("agent")
    async with control_plane(private_api) as http:
        resp = await http.post(ns_path("daemonsets", group=APPS), json=daemonset(name))
        assert resp.status_code == 201, resp.text
        ds = await wait_for("the daemon pods", lambda: ds_done(http, name, 2))
        pods = await pods_of(http, name)
        assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(NODES)
        for pod in pods:
            assert owners(pod) == [("DaemonSet", name, True)]
            assert pod["metadata"]["name"].startswith(f"{name}-")
            # Pinned by node affinity, bound by the scheduler (kube 1.12+), with the daemon tolerations.
            terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            assert terms == {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [pod["spec"]["nodeName"]]}]}]}
            keys = {(t["key"], t["effect"]) for t in pod["spec"]["tolerations"]}
            assert ("node.kubernetes.io/not-ready", "NoExecute") in keys
            assert ("node.kubernetes.io/unschedulable", "NoSchedule") in keys
            assert pod["metadata"]["labels"]["pod-template-generation"] == "1"
        first_hash = pods[0]["metadata"]["labels"]["controller-revision-hash"]
        revisions = await items(http, ns_path("controllerrevisions", group=APPS), labelSelector=f"app={name}")
        assert [(r["metadata"]["name"], r["revision"]) for r in revisions] == [(f"{name}-{first_hash}", 1)]
        assert owners(revisions[0]) == [("DaemonSet", name, True)]
        assert revisions[0]["data"]["spec"]["template"]["$patch"] == "replace"
        assert ds["status"]["numberMisscheduled"] == 0 and ds["status"]["numberReady"] == 2
        table = (await http.get(ns_path("controllerrevisions", group=APPS), params={"labelSelector": f"app={name}"},
                                headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})).json()
        assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Controller", "Revision", "Age"]
        assert table["rows"][0]["cells"][:3] == [f"{name}-{first_hash}", f"daemonset.apps/{name}", 1]

        # A new template rolls out node by node (maxUnavailable 1), each pod replaced with the new hash.
        resp = await http.patch(ns_path("daemonsets", name=name, group=APPS), headers=SMP, json={
            "spec": {"template": {"spec": {"containers": [{"name": "agent", "image": "busybox:1.37"}]}}}})
        assert resp.status_code == 200, resp.text

        async def rolled() -> list[dict[str, Any]] | None:
            done = await ds_done(http, name, 2)
            pods = await pods_of(http, name)
            images = {c["image"] for p in pods for c in p["spec"]["containers"]}
            return pods if done and len(pods) == 2 and images == {"busybox:1.37"} else None

        pods = await wait_for("the new template on every node", rolled)
        second_hash = pods[0]["metadata"]["labels"]["controller-revision-hash"]
        assert second_hash != first_hash and {p["metadata"]["labels"]["controller-revision-hash"] for p in pods} == {
            second_hash}
        revisions = await items(http, ns_path("controllerrevisions", group=APPS), labelSelector=f"app={name}")
        assert sorted((r["revision"], r["metadata"]["name"]) for r in revisions) == [
            (1, f"{name}-{first_hash}"), (2, f"{name}-{second_hash}")]
        await http.delete(ns_path("daemonsets", name=name, group=APPS))


async def test_daemonset_follows_node_labels_and_taints(private_api: str) -> None:
    name = unique_name("picky")
    label = f"kubelab.test/{name}"
    async with control_plane(private_api) as http:
        body = daemonset(name)
        body["spec"]["template"]["spec"]["nodeSelector"] = {label: "yes"}
        resp = await http.post(ns_path("daemonsets", group=APPS), json=body)
        assert resp.status_code == 201, resp.text
        await wait_for("no node eligible", lambda: ds_done(http, name, 0))
        assert await pods_of(http, name) == []

        # A node gains the label: a pod follows; it loses it: the pod goes.
        await http.patch("/api/v1/nodes/wl-node-1", headers=MERGE, json={"metadata": {"labels": {label: "yes"}}})

        async def on(nodes: set[str]) -> bool:
            return {p["spec"].get("nodeName") for p in await pods_of(http, name)} == nodes and \
                bool(await ds_done(http, name, len(nodes)))

        await wait_for("a pod on the labelled node", lambda: on({"wl-node-1"}))
        await http.patch("/api/v1/nodes/wl-node-2", headers=MERGE, json={"metadata": {"labels": {label: "yes"}}})
        await wait_for("pods on both labelled nodes", lambda: on(NODES))

        # An untolerated NoExecute taint evicts the daemon pod; NoSchedule would let it stay.
        await http.patch("/api/v1/nodes/wl-node-2", headers=MERGE, json={"spec": {"taints": [
            {"key": label, "value": "x", "effect": "NoSchedule"}]}})
        await wait_for("the NoSchedule taint observed", lambda: ds_done(http, name, 1))
        assert {p["spec"]["nodeName"] for p in await pods_of(http, name)} == NODES
        await http.patch("/api/v1/nodes/wl-node-2", headers=MERGE, json={"spec": {"taints": [
            {"key": label, "value": "x", "effect": "NoExecute"}]}})
        await wait_for("the pod off the NoExecute node", lambda: on({"wl-node-1"}))
        await http.patch("/api/v1/nodes/wl-node-2", headers=MERGE, json={"spec": {"taints": None}})
        await wait_for("the pod back", lambda: on(NODES))
        await http.patch("/api/v1/nodes/wl-node-1", headers=MERGE, json={"metadata": {"labels": {label: None}}})
        await wait_for("the pod off the unlabelled node", lambda: on({"wl-node-2"}))
        await http.patch("/api/v1/nodes/wl-node-2", headers=MERGE, json={"metadata": {"labels": {label: None}}})
        await http.delete(ns_path("daemonsets", name=name, group=APPS))


async def test_daemonset_follows_a_new_node_and_a_removed_one(private_api: str) -> None:
    """A third kubelet joins: the DaemonSet's pod lands on it; its Node is deleted: the pod goes."""
    name = unique_name("everywhere")
    node = unique_name("wl-extra")
    async with control_plane(private_api) as http:
        resp = await http.post(ns_path("daemonsets", group=APPS), json=daemonset(name))
        assert resp.status_code == 201, resp.text
        await wait_for("pods on the two nodes", lambda: ds_done(http, name, 2))
        api = ApiClient(private_api, user_agent="kubelab-test-extra-node")
        kubelet = asyncio.create_task(Kubelet(api, NodeConfig(name=node, ip="10.240.0.99",
                                                              pod_cidr="10.244.99.0/24"), RenderDataplane()).run())
        try:
            async def on_every_node() -> bool:
                nodes = {p["spec"].get("nodeName") for p in await pods_of(http, name)}
                return nodes == {*NODES, node} and bool(await ds_done(http, name, 3))

            await wait_for("a pod on the new node", on_every_node)
        finally:
            kubelet.cancel()
            await asyncio.gather(kubelet, return_exceptions=True)
            await api.close()
        resp = await http.delete(f"/api/v1/nodes/{node}")
        assert resp.status_code == 200, resp.text

        async def back_to_two() -> bool:
            return {p["spec"].get("nodeName") for p in await pods_of(http, name)} == NODES and \
                bool(await ds_done(http, name, 2))

        await wait_for("the removed node's pod gone", back_to_two)
        await http.delete(ns_path("daemonsets", name=name, group=APPS))


async def test_daemonset_on_delete_updates_only_the_pods_deleted(private_api: str) -> None:
    name = unique_name("ondelete")
    async with control_plane(private_api) as http:
        resp = await http.post(ns_path("daemonsets", group=APPS), json=daemonset(name, updateStrategy={"type": "OnDelete"}))
        assert resp.status_code == 201, resp.text
        await wait_for("the daemon pods", lambda: ds_done(http, name, 2))
        resp = await http.patch(ns_path("daemonsets", name=name, group=APPS), headers=SMP, json={
            "spec": {"template": {"spec": {"containers": [{"name": "agent", "image": "busybox:1.37"}]}}}})
        assert resp.status_code == 200, resp.text

        async def observed() -> dict[str, Any] | None:
            ds = await get(http, ns_path("daemonsets", name=name, group=APPS))
            st = ds["status"] if ds else {}
            return ds if ds and st.get("observedGeneration") == 2 and st.get("updatedNumberScheduled") == 0 else None

        await wait_for("the new template observed, no pod updated", observed)
        pods = await pods_of(http, name)
        assert {c["image"] for p in pods for c in p["spec"]["containers"]} == {"busybox:1.36"}
        victim = min(pods, key=lambda p: p["spec"]["nodeName"])
        await http.delete(f"/api/v1/namespaces/default/pods/{victim['metadata']['name']}")

        async def one_updated() -> list[str] | None:
            pods = await pods_of(http, name)
            by_node = {p["spec"].get("nodeName"): p["spec"]["containers"][0]["image"] for p in pods}
            ds = await get(http, ns_path("daemonsets", name=name, group=APPS))
            done = len(pods) == 2 and (ds or {}).get("status", {}).get("updatedNumberScheduled") == 1
            return sorted(by_node.values()) if done else None

        assert await wait_for("the deleted pod replaced at the new template", one_updated) == [
            "busybox:1.36", "busybox:1.37"]
        await http.delete(ns_path("daemonsets", name=name, group=APPS))


def statefulset(name: str, replicas: int = 3, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
            "spec": {"serviceName": name, "replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "web", "image": "nginx:1.25",
                                                           "ports": [{"containerPort": 80}]}]}}, **spec}}


async def sts_done(http: httpx.AsyncClient, name: str, replicas: int) -> dict[str, Any] | None:
    """What `kubectl rollout status sts/<name>` waits for."""
    sts = await get(http, ns_path("statefulsets", name=name, group=APPS))
    st = (sts or {}).get("status") or {}
    if sts is None or st.get("observedGeneration") != sts["metadata"]["generation"]:
        return None
    done = (st.get("readyReplicas") == replicas == st.get("replicas") and st.get("updatedReplicas") == replicas
            and st.get("currentRevision") == st.get("updateRevision"))
    return sts if done else None


async def test_statefulset_ordinals_identity_scale_and_rolling_update(private_api: str, tmp_path: Path) -> None:
    name = unique_name("web")
    async with control_plane(private_api) as http:
        resp = await http.post("/api/v1/namespaces/default/services", json={
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"clusterIP": "None", "selector": {"app": name}, "ports": [{"port": 80}]}})
        assert resp.status_code == 201, resp.text
        resp = await http.post(ns_path("statefulsets", group=APPS), json=statefulset(name))
        assert resp.status_code == 201, resp.text
        # Watch the pods come: OrderedReady makes web-1 only once web-0 is Running and Ready.
        sts = await wait_for("3 ready replicas", lambda: sts_done(http, name, 3), timeout=60)
        pods = sorted(await pods_of(http, name), key=lambda p: p["metadata"]["name"])
        assert [p["metadata"]["name"] for p in pods] == [f"{name}-0", f"{name}-1", f"{name}-2"]
        created = [p["metadata"]["creationTimestamp"] for p in pods]
        assert created == sorted(created)
        for i, pod in enumerate(pods):
            assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == (f"{name}-{i}", name)
            labels = pod["metadata"]["labels"]
            assert labels["statefulset.kubernetes.io/pod-name"] == f"{name}-{i}"
            assert labels["apps.kubernetes.io/pod-index"] == str(i)
            # A StatefulSet's pods carry the revision's name (a DaemonSet's the bare hash).
            assert labels["controller-revision-hash"] == sts["status"]["updateRevision"]
            assert sts["status"]["updateRevision"].startswith(f"{name}-")
            assert owners(pod) == [("StatefulSet", name, True)]

        # The headless Service's endpoints carry the hostnames cluster DNS serves.
        async def hostnames() -> set[str] | None:
            slices = await items(http, "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
                                 labelSelector=f"kubernetes.io/service-name={name}")
            found = {e.get("hostname") for s in slices for e in s.get("endpoints") or []}
            return found if found == {f"{name}-0", f"{name}-1", f"{name}-2"} else None

        await wait_for("hostnames in the EndpointSlices", hostnames)

        # Scale down: the highest ordinals go.
        resp = await http.patch(ns_path("statefulsets", name=name, group=APPS) + "/scale", headers=MERGE,
                                json={"spec": {"replicas": 1}})
        assert resp.status_code == 200, resp.text

        async def only_first() -> bool:
            return [p["metadata"]["name"] for p in await pods_of(http, name)] == [f"{name}-0"] and \
                bool(await sts_done(http, name, 1))

        await wait_for("only web-0 left", only_first)
        resp = await http.patch(ns_path("statefulsets", name=name, group=APPS) + "/scale", headers=MERGE,
                                json={"spec": {"replicas": 2}})
        await wait_for("2 replicas again", lambda: sts_done(http, name, 2))

        # A new template: a RollingUpdate replaces web-1, then web-0, each at the new revision.
        resp = await http.patch(ns_path("statefulsets", name=name, group=APPS), headers=SMP, json={
            "spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.26"}]}}}})
        assert resp.status_code == 200, resp.text

        async def updated() -> dict[str, Any] | None:
            sts = await sts_done(http, name, 2)
            if sts is None:
                return None
            pods = await pods_of(http, name)
            images = {c["image"] for p in pods for c in p["spec"]["containers"]}
            return sts if images == {"nginx:1.26"} and len(pods) == 2 else None

        sts = await wait_for("the rolling update", updated, timeout=60)
        revisions = await items(http, ns_path("controllerrevisions", group=APPS), labelSelector=f"app={name}")
        assert sorted(r["revision"] for r in revisions) == [1, 2]
        assert sts["status"]["updateRevision"] in {r["metadata"]["name"] for r in revisions}
        assert sts["status"]["currentRevision"] == sts["status"]["updateRevision"] != \
            pods[0]["metadata"]["labels"]["controller-revision-hash"]

        # The real kubectl reads the history from the ControllerRevisions and rolls back with one.
        kubectl = Kubectl("dispatcher", write_kubeconfig(tmp_path, private_api), tmp_path / "cache")
        history = (await asyncio.to_thread(kubectl.ok, "rollout", "history", f"sts/{name}")).splitlines()
        assert [line.split()[0] for line in history[2:] if line.strip()] == ["1", "2"]
        undone = await asyncio.to_thread(kubectl.ok, "rollout", "undo", f"sts/{name}")
        assert undone.strip() == f"statefulset.apps/{name} rolled back"

        async def rolled_back() -> bool:
            sts = await sts_done(http, name, 2)
            pods = await pods_of(http, name)
            return bool(sts) and {c["image"] for p in pods for c in p["spec"]["containers"]} == {"nginx:1.25"}

        await wait_for("the rollback", rolled_back, timeout=60)
        revisions = await items(http, ns_path("controllerrevisions", group=APPS), labelSelector=f"app={name}")
        assert sorted(r["revision"] for r in revisions) == [2, 3]  # revision 1 renumbered as the newest
        await http.delete(ns_path("statefulsets", name=name, group=APPS))
        await http.delete(f"/api/v1/namespaces/default/services/{name}")


async def test_a_statefulset_recreated_after_an_orphaning_delete_adopts_its_pods_and_history(
        private_api: str) -> None:
    """ClaimControllerRevisions: the orphaned ControllerRevision is adopted, not duplicated, so the pods
    made from it are current and none is replaced."""
    name = unique_name("keep")
    async with control_plane(private_api) as http:
        resp = await http.post(ns_path("statefulsets", group=APPS), json=statefulset(name, replicas=2))
        assert resp.status_code == 201, resp.text
        first = await wait_for("2 ready replicas", lambda: sts_done(http, name, 2), timeout=60)
        pods = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await pods_of(http, name)}
        resp = await http.request("DELETE", ns_path("statefulsets", name=name, group=APPS),
                                  json={"propagationPolicy": "Orphan"})
        assert resp.status_code == 200, resp.text

        async def orphaned() -> list[dict[str, Any]] | None:
            revisions = await items(http, ns_path("controllerrevisions", group=APPS), labelSelector=f"app={name}")
            pods = await pods_of(http, name)
            gone = await get(http, ns_path("statefulsets", name=name, group=APPS)) is None
            free = all(not p["metadata"].get("ownerReferences") for p in [*revisions, *pods])
            return revisions if gone and free else None

        [revision] = await wait_for("the pods and the revision orphaned", orphaned)
        resp = await http.post(ns_path("statefulsets", group=APPS), json=statefulset(name, replicas=2))
        assert resp.status_code == 201, resp.text
        again = await wait_for("2 ready replicas again", lambda: sts_done(http, name, 2), timeout=60)
        revisions = await items(http, ns_path("controllerrevisions", group=APPS), labelSelector=f"app={name}")
        assert [r["metadata"]["name"] for r in revisions] == [revision["metadata"]["name"]]
        assert owners(revisions[0]) == [("StatefulSet", name, True)]
        assert revisions[0]["metadata"]["ownerReferences"][0]["uid"] == again["metadata"]["uid"]
        assert again["status"]["updateRevision"] == first["status"]["updateRevision"] == revision["metadata"]["name"]
        now = await pods_of(http, name)
        assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in now} == pods  # adopted, none replaced
        assert all(owners(p) == [("StatefulSet", name, True)] for p in now)
        await http.delete(ns_path("statefulsets", name=name, group=APPS))


async def test_a_revision_of_the_same_name_and_data_is_used_whoever_owns_it(private_api: str) -> None:
    """kube's CreateControllerRevision: when the revision's name is taken by one with the same data, that
    one is the revision, owned or not; only other data is a hash collision (a new collisionCount, a new
    name). Here the orphaned revision loses its labels, so the new set cannot adopt it, only run into it."""
    name = unique_name("taken")
    path = ns_path("controllerrevisions", group=APPS)
    async with control_plane(private_api) as http:
        resp = await http.post(ns_path("statefulsets", group=APPS), json=statefulset(name, replicas=1))
        assert resp.status_code == 201, resp.text
        first = await wait_for("1 ready replica", lambda: sts_done(http, name, 1), timeout=60)
        resp = await http.request("DELETE", ns_path("statefulsets", name=name, group=APPS),
                                  json={"propagationPolicy": "Orphan"})
        assert resp.status_code == 200, resp.text
        revision_name = first["status"]["updateRevision"]

        async def orphaned() -> bool:
            revision = await get(http, f"{path}/{revision_name}")
            gone = await get(http, ns_path("statefulsets", name=name, group=APPS)) is None
            return gone and revision is not None and not revision["metadata"].get("ownerReferences")

        await wait_for("the set gone, its revision orphaned", orphaned)
        resp = await http.patch(f"{path}/{revision_name}", headers=MERGE, json={"metadata": {"labels": None}})
        assert resp.status_code == 200, resp.text
        resp = await http.post(ns_path("statefulsets", group=APPS), json=statefulset(name, replicas=1))
        assert resp.status_code == 201, resp.text
        again = await wait_for("1 ready replica again", lambda: sts_done(http, name, 1), timeout=60)
        assert again["status"]["updateRevision"] == revision_name
        assert not again["status"].get("collisionCount")
        named = [r["metadata"]["name"] for r in await items(http, path) if r["metadata"]["name"].startswith(f"{name}-")]
        assert named == [revision_name]
        await http.delete(ns_path("statefulsets", name=name, group=APPS))
        await http.delete(f"{path}/{revision_name}")


async def test_replicationcontroller_keeps_its_replicas(private_api: str) -> None:
    name = unique_name("rc")
    async with control_plane(private_api) as http:
        resp = await http.post("/api/v1/namespaces/default/replicationcontrollers", json={
            "apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": name},
            "spec": {"replicas": 2, "template": {"metadata": {"labels": {"app": name}}, "spec": {
                "containers": [{"name": "web", "image": "nginx:1.25"}]}}}})
        assert resp.status_code == 201, resp.text
        path = f"/api/v1/namespaces/default/replicationcontrollers/{name}"

        async def rc_ready(n: int) -> dict[str, Any] | None:
            rc = await get(http, path)
            st = (rc or {}).get("status") or {}
            pods = await pods_of(http, name)
            ok = st.get("replicas") == n and st.get("readyReplicas") == n and len(pods) == n and \
                st.get("observedGeneration") == rc["metadata"]["generation"]  # type: ignore[index]
            return rc if ok else None

        rc = await wait_for("2 ready replicas", lambda: rc_ready(2))
        assert rc["spec"]["selector"] == {"app": name} and rc["status"]["availableReplicas"] == 2
        pods = await pods_of(http, name)
        assert all(owners(p) == [("ReplicationController", name, True)] for p in pods)
        assert all(p["metadata"]["ownerReferences"][0]["apiVersion"] == "v1" for p in pods)

        # A deleted pod is replaced; scaling through the subresource adds and removes pods.
        await http.delete(f"/api/v1/namespaces/default/pods/{pods[0]['metadata']['name']}")
        await wait_for("a replacement", lambda: rc_ready(2))
        resp = await http.patch(path + "/scale", headers=MERGE, json={"spec": {"replicas": 3}})
        assert resp.status_code == 200, resp.text
        await wait_for("3 replicas", lambda: rc_ready(3))
        resp = await http.patch(path + "/scale", headers=MERGE, json={"spec": {"replicas": 1}})
        await wait_for("1 replica", lambda: rc_ready(1))
        events = [(e["reason"], e["message"]) for e in await items(http, ns_path("events"))
                  if e["involvedObject"]["name"] == name]
        created = {m for r, m in events if r == "SuccessfulCreate"}
        assert {f"Created pod: {p['metadata']['name']}" for p in pods} <= created
        assert any(r == "SuccessfulDelete" for r, _ in events)
        await http.delete(path, params={"propagationPolicy": "Background"})
