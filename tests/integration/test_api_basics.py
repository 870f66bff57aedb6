"""The REST basics against a real etcd: bootstrap objects, CRUD of every kind at its Kubernetes path,
list shapes, resourceVersion and optimistic concurrency, the standard errors, generateName, selectors."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import yaml
from apitools import CORE, assert_status, create, names, ns_path, pod, service, unique_name

from apiserver.storage import Storage
from kubelab.etcd import Etcd

RFC3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


def etcd_mod_revision(etcd: Etcd, key: str) -> int:
    async def read() -> int:
        storage = Storage([etcd.url])
        try:
            return (await storage.get(key)).mod_revision
        finally:
            await storage.close()
    return asyncio.run(read())


# --- what the API server creates for itself ---------------------------------------------------------

def test_system_namespaces_exist(api: httpx.Client) -> None:
    resp = api.get(f"{CORE}/namespaces")
    assert resp.status_code == 200
    found = {i["metadata"]["name"]: i for i in resp.json()["items"]}
    for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
        assert name in found
        assert found[name]["status"]["phase"] == "Active"
        assert found[name]["metadata"]["labels"]["kubernetes.io/metadata.name"] == name


def test_kubernetes_service_and_endpoints(api: httpx.Client, apiserver: str) -> None:
    svc = api.get(ns_path("services", "default", "kubernetes")).json()
    assert svc["spec"]["clusterIP"] == "10.96.0.1"
    assert svc["spec"]["clusterIPs"] == ["10.96.0.1"]
    assert svc["spec"]["type"] == "ClusterIP"
    assert [(p["name"], p["port"], p["protocol"]) for p in svc["spec"]["ports"]] == [("https", 443, "TCP")]
    assert "selector" not in svc["spec"]

    port = httpx.URL(apiserver).port
    ep = api.get(ns_path("endpoints", "default", "kubernetes"))
    assert ep.status_code == 200
    # One subset per port (apiserver/endpointreconciler.py): other modules' API servers share this etcd.
    subsets = ep.json()["subsets"]
    assert {"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]} in subsets
    eps = api.get(ns_path("endpointslices", "default", "kubernetes", group="discovery.k8s.io/v1"))
    assert eps.status_code == 200
    assert eps.json()["endpoints"][0]["addresses"] == ["127.0.0.1"]


def test_a_restarted_apiserver_points_the_kubernetes_service_at_its_new_port(
        api: httpx.Client, etcd: Etcd, start_apiserver: Callable[..., Any]) -> None:
    # kube-apiserver reconciles the `kubernetes` Service and its Endpoints at every start
    # (CreateOrUpdateMasterServiceIfNeeded), so clients reaching 10.96.0.1:443 find the live server.
    with start_apiserver(etcd.url) as other:
        port = httpx.URL(other).port
        svc = api.get(ns_path("services", "default", "kubernetes")).json()
        assert svc["spec"]["ports"][0]["targetPort"] == port
        ep = api.get(ns_path("endpoints", "default", "kubernetes")).json()
        assert port in {p["port"] for subset in ep["subsets"] for p in subset["ports"]}


# --- CRUD of every kind -----------------------------------------------------------------------------------

def _kind_cases() -> list[Any]:
    ip = "10.244.1.5"
    return [
        pytest.param(f"{CORE}/namespaces", "Namespace", "NamespaceList", "namespaces",
                     lambda n: {"metadata": {"name": n}}, id="namespaces"),
        pytest.param(f"{CORE}/nodes", "Node", "NodeList", "nodes",
                     lambda n: {"metadata": {"name": n}, "spec": {"podCIDR": "10.244.9.0/24"}}, id="nodes"),
        pytest.param(ns_path("pods"), "Pod", "PodList", "pods", pod, id="pods"),
        pytest.param(ns_path("services"), "Service", "ServiceList", "services", service, id="services"),
        pytest.param(ns_path("endpoints"), "Endpoints", "EndpointsList", "endpoints",
                     lambda n: {"metadata": {"name": n}, "subsets": [
                         {"addresses": [{"ip": ip}], "ports": [{"port": 80, "protocol": "TCP"}]}]}, id="endpoints"),
        pytest.param(ns_path("endpointslices", group="discovery.k8s.io/v1"), "EndpointSlice", "EndpointSliceList",
                     "endpointslices.discovery.k8s.io",
                     lambda n: {"metadata": {"name": n, "labels": {"kubernetes.io/service-name": "web"}},
                                "addressType": "IPv4", "endpoints": [{"addresses": [ip]}], "ports": [{"port": 80}]},
                     id="endpointslices"),
        pytest.param(ns_path("events"), "Event", "EventList", "events",
                     lambda n: {"metadata": {"name": n}, "type": "Normal", "reason": "Tested", "message": "hello",
                                "count": 1, "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}},
                     id="events"),
        pytest.param(ns_path("leases", group="coordination.k8s.io/v1"), "Lease", "LeaseList",
                     "leases.coordination.k8s.io",
                     lambda n: {"metadata": {"name": n}, "spec": {"holderIdentity": "node-1",
                                                                   "leaseDurationSeconds": 40}},
                     id="leases"),
    ]


@pytest.mark.parametrize(("collection", "kind", "list_kind", "group_resource", "manifest"), _kind_cases())
def test_create_get_list_update_delete(api: httpx.Client, etcd: Etcd, collection: str, kind: str, list_kind: str,
                                       group_resource: str, manifest: Callable[[str], dict[str, Any]]) -> None:
    name = unique_name("crud")
    api_version = "v1" if collection.startswith(CORE) else "/".join(collection.split("/")[2:4])
    namespaced = "/namespaces/" in collection

    # create: 201 and the whole stored object
    resp = api.post(collection, json=manifest(name))
    assert resp.status_code == 201, resp.text
    created = resp.json()
    meta = created["metadata"]
    assert created["kind"] == kind
    assert created["apiVersion"] == api_version
    assert meta["name"] == name
    assert (meta.get("namespace") == "default") if namespaced else ("namespace" not in meta)
    assert re.fullmatch(r"[0-9a-f-]{36}", meta["uid"])
    assert RFC3339_UTC.match(meta["creationTimestamp"]), meta["creationTimestamp"]
    assert isinstance(meta["resourceVersion"], str)
    key = f"/registry/{collection.rsplit('/', 1)[1]}/" + (f"default/{name}" if namespaced else name)
    assert int(meta["resourceVersion"]) == etcd_mod_revision(etcd, key)

    # get
    got = api.get(f"{collection}/{name}")
    assert got.status_code == 200
    assert got.json() == created

    # list: typed List with the store revision, and the object in it
    listed = api.get(collection)
    assert listed.status_code == 200
    body = listed.json()
    assert body["kind"] == list_kind
    assert body["apiVersion"] == api_version
    assert int(body["metadata"]["resourceVersion"]) >= int(meta["resourceVersion"])
    assert name in names(body["items"])

    # update (PUT) with the resourceVersion just read
    changed = {**created, "metadata": {**meta, "labels": {**(meta.get("labels") or {}), "touched": "yes"}}}
    resp = api.put(f"{collection}/{name}", json=changed)
    assert resp.status_code == 200, resp.text
    updated = resp.json()
    assert updated["metadata"]["labels"]["touched"] == "yes"
    assert int(updated["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])
    assert updated["metadata"]["uid"] == meta["uid"]
    assert updated["metadata"]["creationTimestamp"] == meta["creationTimestamp"]
    assert api.get(f"{collection}/{name}").json()["metadata"]["labels"]["touched"] == "yes"

    # delete: 200 with the deleted object, then it is gone
    resp = api.delete(f"{collection}/{name}")
    assert resp.status_code == 200, resp.text
    assert resp.json()["metadata"]["uid"] == meta["uid"]
    if kind == "Namespace":
        # A namespace first turns Terminating; the namespace controller (not running in this test)
        # empties it and removes its `kubernetes` finalizer through /finalize, which deletes it.
        assert resp.json()["status"]["phase"] == "Terminating"
        assert resp.json()["metadata"]["deletionTimestamp"]
        terminating = resp.json()
        finalized = {**terminating, "spec": {"finalizers": []}}
        assert api.put(f"{collection}/{name}/finalize", json=finalized).status_code == 200
    gone = api.get(f"{collection}/{name}")
    status = assert_status(gone, 404, "NotFound", f'{group_resource} "{name}" not found')
    assert status["details"]["name"] == name
    assert name not in names(api.get(collection).json()["items"])
    assert_status(api.delete(f"{collection}/{name}"), 404, "NotFound", f'{group_resource} "{name}" not found')


def test_an_empty_list_has_items_as_an_empty_list(api: httpx.Client) -> None:
    ns = unique_name("empty")
    create(api, f"{CORE}/namespaces", {"metadata": {"name": ns}})
    for path, kind in ((ns_path("services", ns), "ServiceList"), (ns_path("pods", ns), "PodList"),
                       (ns_path("leases", ns, group="coordination.k8s.io/v1"), "LeaseList")):
        body = api.get(path).json()
        assert body["kind"] == kind
        assert body["items"] == []
        assert body["metadata"]["resourceVersion"].isdigit()


def test_list_across_namespaces(api: httpx.Client) -> None:
    ns = unique_name("other")
    create(api, f"{CORE}/namespaces", {"metadata": {"name": ns}})
    a, b = unique_name("a"), unique_name("b")
    create(api, ns_path("services"), service(a))
    create(api, ns_path("services", ns), service(b))
    everywhere = api.get(f"{CORE}/services").json()
    assert {a, b, "kubernetes"} <= names(everywhere["items"])
    assert names(api.get(ns_path("services", ns)).json()["items"]) == {b}


def test_create_accepts_a_body_without_api_version_and_kind(api: httpx.Client) -> None:
    # The official Python client sends model objects this way; the URL says what they are.
    name = unique_name("bare")
    resp = api.post(ns_path("services"), json={"metadata": {"name": name}, "spec": {"ports": [{"port": 80}]}})
    assert resp.status_code == 201, resp.text
    assert resp.json()["kind"] == "Service"
    assert resp.json()["apiVersion"] == "v1"
    assert api.get(ns_path("services", name=name)).json()["kind"] == "Service"


def test_create_accepts_yaml(api: httpx.Client) -> None:
    name = unique_name("yaml")
    text = yaml.safe_dump(service(name, ports=[{"port": 8080, "name": "http"}]))
    resp = api.post(ns_path("services"), content=text, headers={"Content-Type": "application/yaml"})
    assert resp.status_code == 201, resp.text
    stored = api.get(ns_path("services", name=name)).json()
    assert stored["spec"]["ports"][0]["port"] == 8080
    assert stored["spec"]["ports"][0]["name"] == "http"


def test_yaml_is_served_when_asked_for(api: httpx.Client) -> None:
    resp = api.get(ns_path("services", name="kubernetes"), headers={"Accept": "application/yaml"})
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("application/yaml")
    assert yaml.safe_load(resp.text)["spec"]["clusterIP"] == "10.96.0.1"


# --- resourceVersion ---------------------------------------------------------------------------------

def test_put_with_a_stale_resource_version_conflicts(api: httpx.Client) -> None:
    name = unique_name("stale")
    first = create(api, ns_path("services"), service(name))
    fresh = {**first, "metadata": {**first["metadata"], "labels": {"v": "2"}}}
    assert api.put(ns_path("services", name=name), json=fresh).status_code == 200

    stale = {**first, "metadata": {**first["metadata"], "labels": {"v": "stale"}}}
    resp = api.put(ns_path("services", name=name), json=stale)
    status = assert_status(resp, 409, "Conflict",
                           f'Operation cannot be fulfilled on services "{name}": the object has been modified; '
                           "please apply your changes to the latest version and try again")
    assert status["details"] == {"name": name, "kind": "services"}
    assert api.get(ns_path("services", name=name)).json()["metadata"]["labels"] == {"v": "2"}


def test_put_without_resource_version_is_unconditional(api: httpx.Client) -> None:
    name = unique_name("uncond")
    first = create(api, ns_path("services"), service(name))
    meta = {k: v for k, v in first["metadata"].items() if k != "resourceVersion"}
    resp = api.put(ns_path("services", name=name), json={**first, "metadata": {**meta, "labels": {"x": "1"}}})
    assert resp.status_code == 200, resp.text
    assert resp.json()["metadata"]["labels"] == {"x": "1"}
    assert int(resp.json()["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])


def test_a_no_op_update_keeps_the_resource_version(api: httpx.Client) -> None:
    name = unique_name("noop")
    first = create(api, ns_path("services"), service(name))
    resp = api.put(ns_path("services", name=name), json=first)
    assert resp.status_code == 200, resp.text
    assert resp.json()["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert api.get(ns_path("services", name=name)).json()["metadata"]["resourceVersion"] == \
        first["metadata"]["resourceVersion"]


def test_concurrent_patches_without_resource_version_all_land(api: httpx.Client) -> None:
    # Unconditional writes retry on a storage conflict (GuaranteedUpdate), so none is lost.
    name = unique_name("concurrent")
    create(api, ns_path("services"), service(name))

    def add_label(i: int) -> int:
        resp = api.patch(ns_path("services", name=name), json={"metadata": {"labels": {f"k{i}": str(i)}}},
                         headers={"Content-Type": "application/merge-patch+json"})
        return resp.status_code

    with ThreadPoolExecutor(max_workers=10) as pool:
        assert list(pool.map(add_label, range(10))) == [200] * 10
    labels = api.get(ns_path("services", name=name)).json()["metadata"]["labels"]
    assert labels == {f"k{i}": str(i) for i in range(10)}


def test_put_of_a_missing_object_is_not_found(api: httpx.Client) -> None:
    name = unique_name("ghost")
    resp = api.put(ns_path("services", name=name), json=service(name))
    assert_status(resp, 404, "NotFound", f'services "{name}" not found')
    assert_status(api.get(ns_path("services", name=name)), 404, "NotFound")


def test_put_with_another_name_than_the_url_is_refused(api: httpx.Client) -> None:
    name = unique_name("named")
    first = create(api, ns_path("services"), service(name))
    other = {**first, "metadata": {**first["metadata"], "name": "someone-else"}}
    resp = api.put(ns_path("services", name=name), json=other)
    assert_status(resp, 400, "BadRequest",
                  f"the name of the object (someone-else) does not match the name on the URL ({name})")


# --- the standard errors ----------------------------------------------------------------------------

def test_create_twice_is_already_exists(api: httpx.Client) -> None:
    name = unique_name("twice")
    create(api, ns_path("services"), service(name))
    resp = api.post(ns_path("services"), json=service(name))
    status = assert_status(resp, 409, "AlreadyExists", f'services "{name}" already exists')
    assert status["details"] == {"name": name, "kind": "services"}


def test_get_missing_is_not_found_with_details(api: httpx.Client) -> None:
    resp = api.get(ns_path("services", name="x"))
    status = assert_status(resp, 404, "NotFound", 'services "x" not found')
    assert status["details"] == {"name": "x", "kind": "services"}
    resp = api.get(ns_path("endpointslices", name="x", group="discovery.k8s.io/v1"))
    status = assert_status(resp, 404, "NotFound", 'endpointslices.discovery.k8s.io "x" not found')
    assert status["details"] == {"name": "x", "group": "discovery.k8s.io", "kind": "endpointslices"}


def test_create_in_a_missing_namespace_is_not_found(api: httpx.Client) -> None:
    name = unique_name("lost")
    resp = api.post(ns_path("services", "nope"), json=service(name))
    status = assert_status(resp, 404, "NotFound", 'namespaces "nope" not found')
    assert status["details"] == {"name": "nope", "kind": "namespaces"}
    assert_status(api.get(ns_path("services", "nope", name)), 404, "NotFound")
    # The ClusterIP reservation travels in the same transaction, so nothing leaked: 10.96.0.0/12 has
    # room enough that this cannot be checked by exhaustion, but the Service list is clean.
    assert name not in names(api.get(f"{CORE}/services").json()["items"])


# --- generateName -----------------------------------------------------------------------------------

def test_generate_name(api: httpx.Client) -> None:
    body = {"metadata": {"generateName": "gen-"}, "spec": {"ports": [{"port": 80}]}}
    first = api.post(ns_path("services"), json=body)
    second = api.post(ns_path("services"), json=body)
    assert first.status_code == 201, first.text
    assert second.status_code == 201, second.text
    a, b = first.json()["metadata"]["name"], second.json()["metadata"]["name"]
    assert re.fullmatch(r"gen-[bcdfghjklmnpqrstvwxz2456789]{5}", a), a
    assert a != b
    assert first.json()["metadata"]["generateName"] == "gen-"
    assert api.get(ns_path("services", name=a)).json()["metadata"]["uid"] == first.json()["metadata"]["uid"]


# --- selectors --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def labelled_pods(apiserver: str) -> dict[str, str]:
    """Five pods in a namespace of their own: labels and node names to select by, one of them Running."""
    ns = unique_name("sel")
    with httpx.Client(base_url=apiserver, timeout=10) as api:
        create(api, f"{CORE}/namespaces", {"metadata": {"name": ns}})
        specs = {
            "p-web-prod": ({"app": "web", "env": "prod"}, "node-1"),
            "p-web-dev": ({"app": "web", "env": "dev"}, "node-2"),
            "p-db-prod": ({"app": "db", "env": "prod", "canary": "true"}, "node-1"),
            "p-cache": ({"app": "cache"}, None),
            "p-plain": ({}, None),
        }
        for name, (labels, node) in specs.items():
            extra = {"nodeName": node} if node else {}
            create(api, ns_path("pods", ns), pod(name, labels=labels, **extra))
        running = api.get(ns_path("pods", ns, "p-web-prod")).json()
        running["status"]["phase"] = "Running"
        assert api.put(ns_path("pods", ns, "p-web-prod") + "/status", json=running).status_code == 200
    return {"namespace": ns}


@pytest.mark.parametrize(("selector", "expected"), [
    pytest.param("app=web", {"p-web-prod", "p-web-dev"}, id="equality"),
    pytest.param("app==web,env=prod", {"p-web-prod"}, id="double equals and conjunction"),
    pytest.param("app!=web", {"p-db-prod", "p-cache", "p-plain"}, id="inequality includes unlabelled"),
    pytest.param("env in (prod,dev)", {"p-web-prod", "p-web-dev", "p-db-prod"}, id="in"),
    pytest.param("env notin (prod)", {"p-web-dev", "p-cache", "p-plain"}, id="notin"),
    pytest.param("!env", {"p-cache", "p-plain"}, id="does not exist"),
    pytest.param("canary", {"p-db-prod"}, id="exists"),
    pytest.param("app in (web, db),!canary", {"p-web-prod", "p-web-dev"}, id="set-based combined"),
])
def test_label_selector(api: httpx.Client, labelled_pods: dict[str, str], selector: str, expected: set[str]) -> None:
    resp = api.get(ns_path("pods", labelled_pods["namespace"]), params={"labelSelector": selector})
    assert resp.status_code == 200, resp.text
    assert names(resp.json()["items"]) == expected


@pytest.mark.parametrize(("selector", "expected"), [
    pytest.param("spec.nodeName=node-1", {"p-web-prod", "p-db-prod"}, id="nodeName"),
    pytest.param("spec.nodeName=", {"p-cache", "p-plain"}, id="unscheduled"),
    pytest.param("metadata.name=p-cache", {"p-cache"}, id="name"),
    pytest.param("status.phase!=Running", {"p-web-dev", "p-db-prod", "p-cache", "p-plain"}, id="phase not"),
    pytest.param("spec.nodeName=node-1,status.phase!=Succeeded,status.phase!=Failed", {"p-web-prod", "p-db-prod"},
                 id="kubectl describe node"),
])
def test_field_selector_on_pods(api: httpx.Client, labelled_pods: dict[str, str], selector: str,
                                expected: set[str]) -> None:
    resp = api.get(ns_path("pods", labelled_pods["namespace"]), params={"fieldSelector": selector})
    assert resp.status_code == 200, resp.text
    assert names(resp.json()["items"]) == expected


def test_label_and_field_selectors_combine(api: httpx.Client, labelled_pods: dict[str, str]) -> None:
    resp = api.get(ns_path("pods", labelled_pods["namespace"]),
                   params={"labelSelector": "env=prod", "fieldSelector": "status.phase=Pending"})
    assert names(resp.json()["items"]) == {"p-db-prod"}


def test_unsupported_field_label_is_bad_request(api: httpx.Client) -> None:
    resp = api.get(ns_path("pods"), params={"fieldSelector": "spec.foo=bar"})
    assert_status(resp, 400, "BadRequest", 'field label not supported: spec.foo')


def test_unparseable_label_selector_is_bad_request(api: httpx.Client) -> None:
    resp = api.get(ns_path("pods"), params={"labelSelector": "app in web"})
    body = assert_status(resp, 400, "BadRequest")
    assert "unable to parse requirement" in body["message"]
