"""A CustomResourceDefinition with several versions, one storage version and conversion strategy None, as
kube-apiserver's apiextensions serves it: every served version reads, writes, lists and watches the one set
of objects, stored in the storage version (read back from etcd) and returned in the version asked for with
only apiVersion changed; an unserved version is 404; a deprecated version warns with its deprecationWarning
or kube's default text; status.storedVersions grows as the storage version moves; discovery prefers the
version kube's version priority puts first; a body of another version or kind is refused in kube's words.
Through httpx, the real kubectl and the official Python client, against a real API server and etcd."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from apitools import assert_status, unique_name, watch_events
from kubectltools import Kubectl, wait_for
from kubernetes import client

from apiserver.storage import Storage
from kubelab.etcd import Etcd

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
SCHEMA = {"openAPIV3Schema": {"type": "object", "properties": {
    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}


def version(name: str, *, storage: bool = False, served: bool = True, **extra: Any) -> dict[str, Any]:
    return {"name": name, "served": served, "storage": storage, "schema": copy.deepcopy(SCHEMA), **extra}


VERSIONS = [
    version("v1alpha1", deprecated=True, deprecationWarning="v1alpha1 goes away; use v1"),
    version("v1beta1", deprecated=True),
    version("v1", storage=True),
    version("v2", served=False),
]


def definition(group: str, versions: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"gizmos.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"}, "versions": versions}}


def established(api: httpx.Client, name: str, *, generation: int = 1) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        crd = api.get(f"{CRDS}/{name}").json()
        conditions = {c["type"]: c for c in crd["status"].get("conditions") or []}
        ready = conditions.get("Established", {}).get("status") == "True"
        return crd if ready and crd["metadata"]["generation"] >= generation else None
    return wait_for(f"{name} Established", check)


@pytest.fixture
def group(api: httpx.Client) -> Iterator[str]:
    """An Established Gizmo kind with the four VERSIONS (v1 stores, v2 is not served)."""
    name = f"{unique_name('mv')}.example.com"
    crd = definition(name, copy.deepcopy(VERSIONS))
    assert api.post(CRDS, json=crd).status_code == 201
    established(api, crd["metadata"]["name"])
    yield name
    api.delete(f"{CRDS}/{crd['metadata']['name']}")


def path(group: str, ver: str, name: str = "") -> str:
    return f"/apis/{group}/{ver}/namespaces/default/gizmos" + (f"/{name}" if name else "")


def gizmo(group: str, ver: str, name: str, size: int) -> dict[str, Any]:
    return {"apiVersion": f"{group}/{ver}", "kind": "Gizmo", "metadata": {"name": name}, "spec": {"size": size}}


def stored(etcd: Etcd, key: str) -> dict[str, Any]:
    async def read() -> dict[str, Any]:
        storage = Storage([etcd.url])
        try:
            return (await storage.get(key)).obj
        finally:
            await storage.close()
    return asyncio.run(read())


def warnings(resp: httpx.Response) -> list[str]:
    return resp.headers.get_list("warning")


# --- every served version is one set of objects ----------------------------------------------------------

def test_every_served_version_reads_and_writes_the_objects_stored_in_the_storage_version(
        api: httpx.Client, etcd: Etcd, group: str) -> None:
    made = api.post(path(group, "v1beta1"), json=gizmo(group, "v1beta1", "a", 1))
    assert made.status_code == 201, made.text
    assert made.json()["apiVersion"] == f"{group}/v1beta1"
    assert stored(etcd, f"/registry/{group}/gizmos/default/a")["apiVersion"] == f"{group}/v1"
    for ver in ("v1alpha1", "v1beta1", "v1"):
        got = api.get(path(group, ver, "a")).json()
        assert got["apiVersion"] == f"{group}/{ver}" and got["spec"] == {"size": 1}
        listed = api.get(path(group, ver)).json()
        assert listed["apiVersion"] == f"{group}/{ver}" and listed["kind"] == "GizmoList"
        assert [(i["apiVersion"], i["metadata"]["name"]) for i in listed["items"]] == [(f"{group}/{ver}", "a")]
    # A write through another version: the same object (resourceVersion, uid), stored as v1 again.
    old = made.json()
    replaced = api.put(path(group, "v1alpha1", "a"), json={**gizmo(group, "v1alpha1", "a", 2),
                                                          "metadata": old["metadata"]})
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["apiVersion"] == f"{group}/v1alpha1"
    assert replaced.json()["metadata"]["uid"] == old["metadata"]["uid"]
    assert replaced.json()["metadata"]["generation"] == 2
    patched = api.patch(path(group, "v1", "a"), content=json.dumps({"spec": {"size": 3}}),
                        headers={"Content-Type": "application/merge-patch+json"})
    assert patched.json()["apiVersion"] == f"{group}/v1" and patched.json()["spec"] == {"size": 3}
    on_disk = stored(etcd, f"/registry/{group}/gizmos/default/a")
    assert on_disk["apiVersion"] == f"{group}/v1" and on_disk["spec"] == {"size": 3}
    # A conflict is a conflict whichever version wrote first.
    assert_status(api.put(path(group, "v1beta1", "a"), json={**gizmo(group, "v1beta1", "a", 4),
                                                           "metadata": old["metadata"]}), 409, "Conflict")
    assert api.delete(path(group, "v1alpha1", "a")).status_code == 200
    assert_status(api.get(path(group, "v1", "a")), 404, "NotFound", f'gizmos.{group} "a" not found')


def test_each_version_watches_the_objects_in_its_own_version(api: httpx.Client, group: str) -> None:
    rv = api.get(path(group, "v1")).json()["metadata"]["resourceVersion"]
    assert api.post(path(group, "v1"), json=gizmo(group, "v1", "w", 1)).status_code == 201
    assert api.delete(path(group, "v1beta1", "w")).status_code == 200
    for ver in ("v1alpha1", "v1beta1", "v1"):
        events = list(watch_events(api, path(group, ver), count=2, resourceVersion=rv))
        assert [(e["type"], e["object"]["apiVersion"]) for e in events] == [
            ("ADDED", f"{group}/{ver}"), ("DELETED", f"{group}/{ver}")]


def test_a_version_not_served_is_not_found(api: httpx.Client, group: str) -> None:
    assert_status(api.get(path(group, "v2")), 404, "NotFound")
    assert_status(api.post(path(group, "v2"), json=gizmo(group, "v2", "x", 1)), 404, "NotFound")
    versions = [v["version"] for v in api.get(f"/apis/{group}").json()["versions"]]
    assert "v2" not in versions and not api.get(f"/apis/{group}/v2").is_success


def test_a_body_of_another_version_or_kind_is_refused_in_kubes_words(api: httpx.Client, group: str) -> None:
    # apiextensions' handler: the decoder accepts any version of the kind, then AcceptsGroupVersion refuses it;
    # a wrong kind is the validator's ValidateTypeMeta (kube's TestForProperValidationErrors).
    for ver in ("v1beta1", "v2", "v9"):
        assert_status(api.post(path(group, "v1"), json=gizmo(group, ver, "x", 1)), 400, "BadRequest",
                      f"the API version in the data ({group}/{ver}) does not match the expected API version "
                      f"({group}/v1)")
    assert_status(api.post(path(group, "v1"), json={**gizmo(group, "v1", "x", 1), "kind": "SomethingElse"}),
                  422, "Invalid",
                  f'SomethingElse.{group} "x" is invalid: kind: Invalid value: "SomethingElse": must be Gizmo')
    assert api.get(path(group, "v1")).json()["items"] == []


# --- deprecation warnings ----------------------------------------------------------------------------------

def test_deprecated_versions_warn_with_their_text_or_kubes_default(api: httpx.Client, group: str) -> None:
    assert api.post(path(group, "v1"), json=gizmo(group, "v1", "d", 1)).status_code == 201
    assert warnings(api.get(path(group, "v1alpha1", "d"))) == ['299 - "v1alpha1 goes away; use v1"']
    # The default names the newest served version of equal or greater stability that is not deprecated.
    default = f'299 - "{group}/v1beta1 Gizmo is deprecated; use {group}/v1 Gizmo"'
    assert warnings(api.get(path(group, "v1beta1"))) == [default]
    assert warnings(api.get(path(group, "v1beta1", "missing"))) == [default]
    assert warnings(api.get(path(group, "v1", "d"))) == []


def test_kubectl_prints_the_deprecation_warning_and_reads_every_version(
        api: httpx.Client, kubectl: Kubectl, group: str, tmp_path: Path) -> None:
    (tmp_path / "g.json").write_text(json.dumps(gizmo(group, "v1alpha1", "k", 5)))
    result = kubectl("apply", "-f", str(tmp_path / "g.json"))
    assert result.returncode == 0, result.stderr
    assert "Warning: v1alpha1 goes away; use v1" in result.stderr
    for ver in ("v1alpha1", "v1beta1", "v1"):
        got = json.loads(kubectl.ok("get", f"gizmos.{ver}.{group}", "k", "-o", "json"))
        assert got["apiVersion"] == f"{group}/{ver}" and got["spec"] == {"size": 5}
    # The preferred version (v1) is what a plain `kubectl get gizmos` reads.
    assert json.loads(kubectl.ok("get", "gizmos", "k", "-o", "json"))["apiVersion"] == f"{group}/v1"


def test_the_python_client_reads_and_writes_each_version(apiserver: str, group: str) -> None:
    with client.ApiClient(client.Configuration(host=apiserver)) as api_client:
        objects = client.CustomObjectsApi(api_client)
        made = objects.create_namespaced_custom_object(group, "v1alpha1", "default", "gizmos",
                                                       gizmo(group, "v1alpha1", "p", 7))
        assert made["apiVersion"] == f"{group}/v1alpha1"
        read = objects.get_namespaced_custom_object(group, "v1", "default", "gizmos", "p")
        assert read["apiVersion"] == f"{group}/v1" and read["spec"] == {"size": 7}
        patched = objects.patch_namespaced_custom_object(group, "v1beta1", "default", "gizmos", "p",
                                                         {"spec": {"size": 8}})
        assert patched["apiVersion"] == f"{group}/v1beta1" and patched["spec"] == {"size": 8}
        listed = objects.list_namespaced_custom_object(group, "v1alpha1", "default", "gizmos")
        assert [(i["apiVersion"], i["spec"]["size"]) for i in listed["items"]] == [(f"{group}/v1alpha1", 8)]
        with pytest.raises(client.ApiException) as refused:
            objects.get_namespaced_custom_object(group, "v2", "default", "gizmos", "p")
        assert refused.value.status == 404


# --- the storage version moves; discovery's preferred version ---------------------------------------------

def test_stored_versions_grow_as_the_storage_version_moves(api: httpx.Client, etcd: Etcd, group: str) -> None:
    name = f"gizmos.{group}"
    assert api.post(path(group, "v1"), json=gizmo(group, "v1", "old", 1)).status_code == 201
    crd = api.get(f"{CRDS}/{name}").json()
    assert crd["status"]["storedVersions"] == ["v1"]
    crd["spec"]["versions"] = [version("v1"), version("v2", storage=True)]
    changed = api.put(f"{CRDS}/{name}", json=crd)
    assert changed.status_code == 200, changed.text
    assert changed.json()["status"]["storedVersions"] == ["v1", "v2"]
    established(api, name, generation=changed.json()["metadata"]["generation"])
    wait_for("v2 served", lambda: api.get(path(group, "v2")).status_code == 200)
    assert api.post(path(group, "v1"), json=gizmo(group, "v1", "new", 2)).status_code == 201
    assert stored(etcd, f"/registry/{group}/gizmos/default/new")["apiVersion"] == f"{group}/v2"
    # An object written before keeps its stored version until it is written again (no storage migration).
    assert stored(etcd, f"/registry/{group}/gizmos/default/old")["apiVersion"] == f"{group}/v1"
    assert api.get(path(group, "v2", "old")).json()["apiVersion"] == f"{group}/v2"
    assert api.get(path(group, "v1", "old")).json()["apiVersion"] == f"{group}/v1"
    # A stored version can leave storedVersions only through the status (kube's storage migration does so).
    crd = api.get(f"{CRDS}/{name}").json()
    crd["status"]["storedVersions"] = ["v2"]
    assert api.put(f"{CRDS}/{name}/status", json=crd).json()["status"]["storedVersions"] == ["v2"]


@pytest.mark.parametrize(("names", "preferred", "ordered"), [
    (["v1alpha1", "v1beta1", "v1", "v2"], "v2", ["v2", "v1", "v1beta1", "v1alpha1"]),
    (["v1beta1", "v1beta2", "v1alpha1"], "v1beta2", ["v1beta2", "v1beta1", "v1alpha1"]),
    (["foo", "bar", "v1alpha1", "v10"], "v10", ["v10", "v1alpha1", "bar", "foo"]),
], ids=["ga-first", "beta-by-minor", "non-kube-like-last"])
def test_discovery_prefers_the_version_kubes_priority_puts_first(
        api: httpx.Client, names: list[str], preferred: str, ordered: list[str]) -> None:
    group = f"{unique_name('pv')}.example.com"
    crd = definition(group, [version(n, storage=(n == names[0])) for n in names])
    assert api.post(CRDS, json=crd).status_code == 201
    try:
        established(api, crd["metadata"]["name"])
        doc = api.get(f"/apis/{group}").json()
        assert doc["preferredVersion"]["version"] == preferred
        assert [v["version"] for v in doc["versions"]] == ordered
        listed = next(g for g in api.get("/apis").json()["groups"] if g["name"] == group)
        assert listed["preferredVersion"]["version"] == preferred
        assert [v["version"] for v in listed["versions"]] == ordered
    finally:
        api.delete(f"{CRDS}/{crd['metadata']['name']}")
