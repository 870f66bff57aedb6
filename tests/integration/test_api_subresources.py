"""Subresources: pods/binding (what the scheduler calls), pods/status and nodes/status (what the kubelet
writes), and the rule that a main-resource write cannot change status."""

from __future__ import annotations

import copy

import httpx
from apitools import CORE, assert_status, create, ns_path, pod, unique_name


def binding(name: str, node: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}


def test_binding_sets_node_name_and_pod_scheduled(api: httpx.Client) -> None:
    name = unique_name("bind")
    created = create(api, ns_path("pods"), pod(name))
    assert "nodeName" not in created["spec"]

    resp = api.post(ns_path("pods", name=name) + "/binding", json=binding(name, "node-1"))
    assert resp.status_code == 201, resp.text
    assert resp.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    stored = api.get(ns_path("pods", name=name)).json()
    assert stored["spec"]["nodeName"] == "node-1"
    scheduled = [c for c in stored["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert len(scheduled) == 1
    assert scheduled[0]["status"] == "True"
    assert int(stored["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    names = {p["metadata"]["name"] for p in
             api.get(ns_path("pods"), params={"fieldSelector": "spec.nodeName=node-1"}).json()["items"]}
    assert name in names


def test_binding_an_already_bound_pod_conflicts(api: httpx.Client) -> None:
    name = unique_name("rebind")
    create(api, ns_path("pods"), pod(name))
    assert api.post(ns_path("pods", name=name) + "/binding", json=binding(name, "node-1")).status_code == 201

    resp = api.post(ns_path("pods", name=name) + "/binding", json=binding(name, "node-2"))
    # BindingREST.assignPod: a plain error becomes NewConflict(Resource("pods/binding"), ...).
    status = assert_status(resp, 409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{name}": '
                                                  f'pod {name} is already assigned to node "node-1"')
    assert status["details"] == {"name": name, "kind": "pods/binding"}
    assert api.get(ns_path("pods", name=name)).json()["spec"]["nodeName"] == "node-1"


def test_binding_a_missing_pod_is_not_found(api: httpx.Client) -> None:
    name = unique_name("nobody")
    resp = api.post(ns_path("pods", name=name) + "/binding", json=binding(name, "node-1"))
    assert_status(resp, 404, "NotFound", f'pods "{name}" not found')


def test_binding_without_a_target_is_invalid(api: httpx.Client) -> None:
    name = unique_name("notarget")
    create(api, ns_path("pods"), pod(name))
    resp = api.post(ns_path("pods", name=name) + "/binding",
                    json={"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {}})
    assert_status(resp, 422, "Invalid")
    assert "nodeName" not in api.get(ns_path("pods", name=name)).json()["spec"]


def test_pod_status_put_changes_only_status(api: httpx.Client) -> None:
    name = unique_name("status")
    created = create(api, ns_path("pods"), pod(name, labels={"app": "a"}))
    body = copy.deepcopy(created)
    body["status"]["phase"] = "Running"
    body["status"]["podIP"] = "10.244.1.7"
    body["metadata"]["labels"] = {"app": "changed"}
    body["spec"]["containers"][0]["image"] = "nginx:9"

    resp = api.put(ns_path("pods", name=name) + "/status", json=body)
    assert resp.status_code == 200, resp.text
    stored = api.get(ns_path("pods", name=name)).json()
    assert stored == resp.json()
    assert stored["status"]["phase"] == "Running"
    assert stored["status"]["podIP"] == "10.244.1.7"
    assert stored["metadata"]["labels"] == {"app": "a"}
    assert stored["spec"]["containers"][0]["image"] == "nginx:1.27"


def test_pod_status_put_with_a_stale_resource_version_conflicts(api: httpx.Client) -> None:
    name = unique_name("status-stale")
    created = create(api, ns_path("pods"), pod(name))
    first = copy.deepcopy(created)
    first["status"]["phase"] = "Running"
    assert api.put(ns_path("pods", name=name) + "/status", json=first).status_code == 200
    stale = copy.deepcopy(created)
    stale["status"]["phase"] = "Failed"
    resp = api.put(ns_path("pods", name=name) + "/status", json=stale)
    assert_status(resp, 409, "Conflict")
    assert api.get(ns_path("pods", name=name)).json()["status"]["phase"] == "Running"


def test_pod_put_cannot_change_status(api: httpx.Client) -> None:
    name = unique_name("mainput")
    created = create(api, ns_path("pods"), pod(name))
    body = copy.deepcopy(created)
    body["status"]["phase"] = "Succeeded"
    body["metadata"]["labels"] = {"edited": "yes"}
    resp = api.put(ns_path("pods", name=name), json=body)
    assert resp.status_code == 200, resp.text
    stored = api.get(ns_path("pods", name=name)).json()
    assert stored["metadata"]["labels"] == {"edited": "yes"}
    assert stored["status"]["phase"] == "Pending"


def test_pod_spec_is_mostly_immutable(api: httpx.Client) -> None:
    name = unique_name("immutable")
    created = create(api, ns_path("pods"), pod(name))
    body = copy.deepcopy(created)
    body["spec"]["restartPolicy"] = "Never"
    resp = api.put(ns_path("pods", name=name), json=body)
    status = assert_status(resp, 422, "Invalid")
    assert status["details"]["causes"][0]["field"] == "spec"
    assert status["details"]["causes"][0]["message"].startswith(
        "Forbidden: pod updates may not change fields other than `spec.containers[*].image`")
    assert api.get(ns_path("pods", name=name)).json()["spec"]["restartPolicy"] == "Always"

    image_only = copy.deepcopy(created)
    image_only["spec"]["containers"][0]["image"] = "nginx:1.28"
    resp = api.put(ns_path("pods", name=name), json=image_only)
    assert resp.status_code == 200, resp.text
    assert api.get(ns_path("pods", name=name)).json()["spec"]["containers"][0]["image"] == "nginx:1.28"


def node(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"podCIDR": "10.244.7.0/24", "podCIDRs": ["10.244.7.0/24"]},
            "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}],
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.7"}]}}


def test_node_keeps_the_status_it_registers_with(api: httpx.Client) -> None:
    name = unique_name("node")
    created = create(api, f"{CORE}/nodes", node(name))
    assert created["status"]["conditions"][0]["status"] == "False"
    assert created["status"]["addresses"] == [{"type": "InternalIP", "address": "10.0.0.7"}]


def test_node_status_put_changes_only_status(api: httpx.Client) -> None:
    name = unique_name("node")
    created = create(api, f"{CORE}/nodes", node(name))
    body = copy.deepcopy(created)
    body["status"]["conditions"][0].update({"status": "True", "reason": "KubeletReady"})
    body["spec"]["unschedulable"] = True
    body["metadata"]["labels"]["role"] = "sneaky"

    resp = api.put(f"{CORE}/nodes/{name}/status", json=body)
    assert resp.status_code == 200, resp.text
    stored = api.get(f"{CORE}/nodes/{name}").json()
    assert stored["status"]["conditions"][0]["status"] == "True"
    assert "unschedulable" not in stored["spec"]
    assert "role" not in stored["metadata"]["labels"]


def test_node_put_cannot_change_status(api: httpx.Client) -> None:
    name = unique_name("node")
    created = create(api, f"{CORE}/nodes", node(name))
    body = copy.deepcopy(created)
    body["status"]["conditions"][0]["status"] = "True"
    body["spec"]["unschedulable"] = True
    resp = api.put(f"{CORE}/nodes/{name}", json=body)
    assert resp.status_code == 200, resp.text
    stored = api.get(f"{CORE}/nodes/{name}").json()
    assert stored["spec"]["unschedulable"] is True
    assert stored["status"]["conditions"][0]["status"] == "False"


def test_status_of_a_missing_object_is_not_found(api: httpx.Client) -> None:
    name = unique_name("nostatus")
    assert_status(api.get(ns_path("pods", name=name) + "/status"), 404, "NotFound", f'pods "{name}" not found')
    assert_status(api.put(f"{CORE}/nodes/{name}/status", json=node(name)), 404, "NotFound",
                  f'nodes "{name}" not found')


def test_unknown_subresource_is_not_found(api: httpx.Client) -> None:
    name = unique_name("nosub")
    create(api, ns_path("pods"), pod(name))
    assert_status(api.get(ns_path("pods", name=name) + "/frobnicate"), 404, "NotFound")
    assert_status(api.put(ns_path("services", name="kubernetes") + "/binding", json={}), 404, "NotFound")
