"""A CustomResourceDefinition being deleted (Terminating, its cleanup held by an object's own finalizer) stays
in discovery, as apiextensions-apiserver's DiscoveryController keeps it: the kind is still listed, in the
legacy APIResourceList and in the aggregated document alike, but with only the verbs a terminating kind
takes (delete, deletecollection, get, list, watch, in the controller's order); its status subresource keeps
get/patch/update. The handler still takes patches (that is how the holding finalizer comes off) and
refuses creates with kube's words; once the definition is gone the group leaves both documents. Checked
through httpx, the real kubectl (`api-resources -o wide`) and the official Python client."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
from apitools import assert_status, unique_name
from kubectltools import Kubectl, wait_for
from kubernetes import client

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
SCHEMA = {"openAPIV3Schema": {"type": "object", "properties": {
    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}
# customresource_discovery_controller.go: every verb while served, these while Terminating.
SERVED_VERBS = ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"]
TERMINATING_VERBS = ["delete", "deletecollection", "get", "list", "watch"]


def _legacy(api: httpx.Client, group: str) -> dict[str, list[str]]:
    """Each resource's verbs in /apis/<group>/v1."""
    body = api.get(f"/apis/{group}/v1").json()
    return {r["name"]: r["verbs"] for r in body["resources"]}


def _aggregated(api: httpx.Client, group: str) -> dict[str, Any] | None:
    """The group's v1 resource entry `gadgets` in /apis' aggregated (v2) document, None without the group."""
    items = api.get("/apis", headers={"Accept": V2}).json()["items"]
    found = [i for i in items if i["metadata"]["name"] == group]
    if not found:
        return None
    (version,) = found[0]["versions"]
    (resource,) = version["resources"]
    return dict(resource)


def test_a_terminating_definition_stays_in_discovery_with_the_terminating_verbs(
        api: httpx.Client, apiserver: str, kubectl: Kubectl) -> None:
    group = f"{unique_name('term')}.example.com"
    name = f"gadgets.{group}"
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name},
           "spec": {"group": group, "scope": "Cluster", "names": {"plural": "gadgets", "kind": "Gadget"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": copy.deepcopy(SCHEMA),
                                  "subresources": {"status": {}}}]}}
    assert api.post(CRDS, json=crd).status_code == 201
    wait_for(f"{name} in discovery", lambda: api.get(f"/apis/{group}/v1").status_code == 200)
    path = f"/apis/{group}/v1/gadgets"
    assert _legacy(api, group) == {"gadgets": SERVED_VERBS, "gadgets/status": ["get", "patch", "update"]}
    served = _aggregated(api, group)
    assert served is not None and served["verbs"] == SERVED_VERBS

    held = {"apiVersion": f"{group}/v1", "kind": "Gadget", "metadata": {"name": "held", "finalizers": ["x/y"]}}
    assert api.post(path, json=held).status_code == 201
    try:
        assert api.delete(f"{CRDS}/{name}").status_code == 200
        wait_for("the terminating verbs in the legacy document",
                 lambda: _legacy(api, group)["gadgets"] == TERMINATING_VERBS)
        conditions = {c["type"]: c for c in api.get(f"{CRDS}/{name}").json()["status"]["conditions"]}
        assert conditions["Terminating"]["status"] == "True"
        assert conditions["Established"]["status"] == "True"
        # Kept, not removed: the subresource as it was, the group still in /apis (both documents).
        assert _legacy(api, group) == {"gadgets": TERMINATING_VERBS, "gadgets/status": ["get", "patch", "update"]}
        terminating = _aggregated(api, group)
        assert terminating is not None
        assert terminating == {**served, "verbs": TERMINATING_VERBS}
        assert terminating["subresources"] == [{"subresource": "status", "verbs": ["get", "patch", "update"],
                                                "responseKind": {"group": group, "version": "v1", "kind": "Gadget"}}]
        assert group in {g["name"] for g in api.get("/apis").json()["groups"]}

        # The real kubectl lists the kind with those verbs; the Python client reads the same list.
        wide = kubectl.ok("api-resources", f"--api-group={group}", "-o", "wide").splitlines()
        assert wide[0].split() == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND", "VERBS", "CATEGORIES"]
        assert wide[1].split() == ["gadgets", f"{group}/v1", "false", "Gadget", "delete,deletecollection,get,list,watch"]
        with client.ApiClient(client.Configuration(host=apiserver)) as api_client:
            listed = client.CustomObjectsApi(api_client).get_api_resources(group, "v1")
        assert {r.name: r.verbs for r in listed.resources}["gadgets"] == TERMINATING_VERBS

        # What the handler does meanwhile: no creates (kube's words), reads and patches go on.
        assert_status(api.post(path, json={**held, "metadata": {"name": "late"}}), 405, "MethodNotAllowed",
                      "create not allowed while custom resource definition is terminating")
        assert api.get(f"{path}/held").status_code == 200
    finally:
        patched = api.patch(f"{path}/held", content=json.dumps({"metadata": {"finalizers": None}}),
                            headers={"Content-Type": "application/merge-patch+json"})
    assert patched.status_code == 200, patched.text
    wait_for("the definition gone", lambda: api.get(f"{CRDS}/{name}").status_code == 404)
    wait_for("the group out of the aggregated document", lambda: _aggregated(api, group) is None)
    assert api.get(f"/apis/{group}/v1").status_code == 404
    assert group not in {g["name"] for g in api.get("/apis").json()["groups"]}
