"""The DaemonSet, StatefulSet and ReplicationController controllers against a real API server and etcd,
with the in-process controller manager, scheduler and two kubelet stubs (render dataplane: pods get IPs
and turn Running and Ready, no processes), as test_workload_controllers.py runs them. What is asserted is
what a user of the API sees: pods, their names, labels and nodes, ControllerRevisions, status counts."""

from __future__ import annotations

from typing import Any

import httpx
from apitools import ns_path, unique_name
from test_workload_controllers import control_plane, get, items, owners, wait_for

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
