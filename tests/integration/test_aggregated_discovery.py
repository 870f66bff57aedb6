"""Aggregated discovery (apidiscovery.k8s.io/v2 and v2beta1) at /api and /apis, against a real API server and
etcd and the real kubectl: the documents compared with what kube-apiserver 1.32 sends for pods (with their
subresources), deployments (with scale) and a CustomResourceDefinition's kind (shortNames, categories, status,
scale, versions in kube-aware order); a definition's group appearing once Established and going when deleted,
with the ETag following; ETag/304, Vary and the Content-Type; Accept headers kube passes over; and kubectl 1.27
(v2beta1) to 1.33 (v2) finding every resource in two GETs, where the legacy documents cost one GET per group
version, with `kubectl api-resources` printing the same either way."""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from apitools import unique_name
from kubectltools import Kubectl, RecordingProxy, wait_for, write_kubeconfig

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
PROTOBUF_V2 = "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
KUBECTL_ACCEPT = f"{V2},{V2BETA1},application/json"  # what client-go 1.30+ sends to /api and /apis
ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
ETAG = re.compile(r'"[0-9A-F]{128}"')


def kind(name: str, group: str = "", version: str = "") -> dict[str, str]:
    return {"group": group, "version": version, "kind": name}


def sub(name: str, response: dict[str, str], verbs: list[str]) -> dict[str, Any]:
    return {"subresource": name, "responseKind": response, "verbs": verbs}


# kube-apiserver 1.32's /api (v2) entry for pods: ConvertGroupVersionIntoToDiscovery over the installer's sorted
# paths. kube also lists ephemeralcontainers (and resize in 1.33), which kubelab does not serve.
KUBE_PODS = {
    "resource": "pods", "responseKind": kind("Pod"), "scope": "Namespaced", "singularResource": "pod",
    "verbs": ALL_VERBS, "shortNames": ["po"], "categories": ["all"],
    "subresources": [
        sub("attach", kind("PodAttachOptions"), ["create", "get"]),
        sub("binding", kind("Binding"), ["create"]),
        sub("ephemeralcontainers", kind("Pod"), ["get", "patch", "update"]),
        sub("eviction", kind("Eviction", "policy", "v1"), ["create"]),
        sub("exec", kind("PodExecOptions"), ["create", "get"]),
        sub("log", kind("Pod"), ["get"]),
        sub("portforward", kind("PodPortForwardOptions"), ["create", "get"]),
        sub("proxy", kind("PodProxyOptions"), ["create", "delete", "get", "patch", "update"]),
        sub("status", kind("Pod"), ["get", "patch", "update"]),
    ]}
NOT_SERVED = {"ephemeralcontainers"}
KUBE_DEPLOYMENTS = {
    "resource": "deployments", "responseKind": kind("Deployment"), "scope": "Namespaced",
    "singularResource": "deployment", "verbs": ALL_VERBS, "shortNames": ["deploy"], "categories": ["all"],
    "subresources": [sub("scale", kind("Scale", "autoscaling", "v1"), ["get", "patch", "update"]),
                     sub("status", kind("Deployment"), ["get", "patch", "update"])]}
KUBE_NODES = {
    "resource": "nodes", "responseKind": kind("Node"), "scope": "Cluster", "singularResource": "node",
    "verbs": ALL_VERBS, "shortNames": ["no"],
    "subresources": [sub("proxy", kind("NodeProxyOptions"), ["create", "delete", "get", "patch", "update"]),
                     sub("status", kind("Node"), ["get", "patch", "update"])]}


def kube_custom(group: str, version: str, *, scale: bool) -> dict[str, Any]:
    """apiextensions' discovery controller's entry for a served version of a definition: responseKind with its
    group version, the custom verb order, status then scale."""
    subs = [sub("status", kind("Gadget", group, version), ["get", "patch", "update"])]
    if scale:
        subs.append(sub("scale", kind("Scale", "autoscaling", "v1"), ["get", "patch", "update"]))
    return {"resource": "gadgets", "responseKind": kind("Gadget", group, version), "scope": "Namespaced",
            "singularResource": "gadget",
            "verbs": ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"],
            "shortNames": ["gdt"], "categories": ["all", "toys"], "subresources": subs}


def definition(group: str) -> dict[str, Any]:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    scale = {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}
    # Listed out of kube's order on purpose: discovery sorts them (v1, v1beta1, v1alpha1: v1 is preferred).
    versions = [{"name": "v1alpha1", "served": True, "storage": False, "schema": copy.deepcopy(schema),
                 "subresources": {"status": {}}},
                {"name": "v1", "served": True, "storage": True, "schema": copy.deepcopy(schema),
                 "subresources": {"status": {}, "scale": scale}},
                {"name": "v1beta1", "served": True, "storage": False, "schema": copy.deepcopy(schema),
                 "subresources": {"status": {}}}]
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"gadgets.{group}"},
            "spec": {"group": group, "scope": "Namespaced", "versions": versions,
                     "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "shortNames": ["gdt"],
                               "categories": ["all", "toys"]}}}


def established(api: httpx.Client, name: str) -> None:
    def check() -> bool:
        crd = api.get(f"{CRDS}/{name}").json()
        return any(c["type"] == "Established" and c["status"] == "True"
                   for c in (crd.get("status") or {}).get("conditions") or [])
    wait_for(f"{name} Established", check)


def aggregated(api: httpx.Client, path: str, accept: str = KUBECTL_ACCEPT) -> httpx.Response:
    resp = api.get(path, headers={"Accept": accept})
    assert resp.status_code == 200, resp.text
    return resp


def group_item(document: dict[str, Any], group: str) -> dict[str, Any] | None:
    return next((item for item in document["items"] if item["metadata"].get("name") == group), None)


def resource(version: dict[str, Any], name: str) -> dict[str, Any]:
    return next(r for r in version["resources"] if r["resource"] == name)


@pytest.fixture
def gadgets(api: httpx.Client) -> Iterator[str]:
    """An Established Gadget kind in three served versions; its group. Deleted at the end."""
    group = f"{unique_name('toys')}.example.com"
    crd = definition(group)
    assert api.post(CRDS, json=crd).status_code == 201
    try:
        established(api, crd["metadata"]["name"])
        yield group
    finally:
        api.delete(f"{CRDS}/{crd['metadata']['name']}")


# --- the documents --------------------------------------------------------------------------------


def test_core_document_lists_pods_as_kube_does(api: httpx.Client) -> None:
    resp = aggregated(api, "/api")
    assert resp.headers["content-type"] == V2
    body = resp.json()
    assert (body["kind"], body["apiVersion"], body["metadata"]) == ("APIGroupDiscoveryList", "apidiscovery.k8s.io/v2",
                                                                    {})
    [core] = body["items"]
    assert core["metadata"] == {"creationTimestamp": None}
    [v1] = core["versions"]
    assert (v1["version"], v1["freshness"]) == ("v1", "Current")
    served = resource(v1, "pods")
    expected = {**KUBE_PODS, "subresources": [s for s in KUBE_PODS["subresources"]
                                              if s["subresource"] not in NOT_SERVED]}
    assert served == expected
    assert resource(v1, "nodes") == KUBE_NODES
    names = [r["resource"] for r in v1["resources"]]
    assert names == sorted(names), "kube lists a group version's resources sorted"
    assert all("/" not in name for name in names), "subresources are folded into their parents"


def test_groups_list_deployments_with_scale_in_kube_order(api: httpx.Client) -> None:
    body = aggregated(api, "/apis").json()
    groups = [item["metadata"]["name"] for item in body["items"]]
    # kube-aggregator's own group first, then by APIService groupPriorityMinimum: apps 17800, events 17750, ...
    assert groups[:3] == ["apiregistration.k8s.io", "apps", "events.k8s.io"], groups
    assert groups.index("batch") < groups.index("policy") < groups.index("coordination.k8s.io") \
        < groups.index("discovery.k8s.io") < groups.index("metrics.k8s.io")
    apps = group_item(body, "apps")
    assert apps is not None
    assert resource(apps["versions"][0], "deployments") == KUBE_DEPLOYMENTS
    legacy = api.get("/apis").json()
    assert [g["name"] for g in legacy["groups"]] == groups, "/apis lists the same groups in the same order"


def test_a_definition_appears_once_established_and_goes_when_deleted(api: httpx.Client) -> None:
    group = f"{unique_name('toys')}.example.com"
    crd = definition(group)
    before = aggregated(api, "/apis")
    assert group_item(before.json(), group) is None
    assert api.post(CRDS, json=crd).status_code == 201
    try:
        established(api, crd["metadata"]["name"])
        after = aggregated(api, "/apis")
        assert after.headers["etag"] != before.headers["etag"]
        item = group_item(after.json(), group)
        assert item is not None
        assert [v["version"] for v in item["versions"]] == ["v1", "v1beta1", "v1alpha1"]
        assert all(v["freshness"] == "Current" for v in item["versions"])
        assert resource(item["versions"][0], "gadgets") == kube_custom(group, "v1", scale=True)
        assert resource(item["versions"][1], "gadgets") == kube_custom(group, "v1beta1", scale=False)
        legacy = next(g for g in api.get("/apis").json()["groups"] if g["name"] == group)
        assert legacy["preferredVersion"]["version"] == "v1"
        assert [v["version"] for v in legacy["versions"]] == ["v1", "v1beta1", "v1alpha1"]
    finally:
        assert api.delete(f"{CRDS}/{crd['metadata']['name']}").status_code == 200

    def gone() -> httpx.Response | None:
        resp = aggregated(api, "/apis")
        return resp if group_item(resp.json(), group) is None else None
    final = wait_for(f"{group} gone from aggregated discovery", gone)
    assert final.headers["etag"] != after.headers["etag"]
    assert api.get(f"/apis/{group}/v1").status_code == 404


# --- headers and negotiation ------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/api", "/apis", "/apis/"])
def test_etag_vary_and_304(api: httpx.Client, path: str) -> None:
    first = aggregated(api, path)
    etag = first.headers["etag"]
    assert ETAG.fullmatch(etag), etag
    assert (first.headers["vary"], first.headers["cache-control"]) == ("Accept", "public")
    # One ETag for every version and encoding of the document (kube hashes the v2 JSON only).
    assert aggregated(api, path, V2BETA1).headers["etag"] == etag
    not_modified = api.get(path, headers={"Accept": KUBECTL_ACCEPT, "If-None-Match": etag})
    assert not_modified.status_code == 304
    assert not_modified.content == b""
    assert (not_modified.headers["etag"], not_modified.headers["vary"]) == (etag, "Accept")
    for stale in (etag.strip('"'), '"' + "0" * 128 + '"', f"W/{etag}", "*"):
        resp = api.get(path, headers={"Accept": KUBECTL_ACCEPT, "If-None-Match": stale})
        assert resp.status_code == 200 and resp.json()["items"], stale
    legacy = api.get(path, headers={"If-None-Match": etag})
    assert legacy.status_code == 200 and "etag" not in legacy.headers, "the legacy document has no ETag"


def test_v2beta1_as_kubectl_127_asks(api: httpx.Client) -> None:
    resp = aggregated(api, "/apis", f"{V2BETA1},application/json")
    assert resp.headers["content-type"] == V2BETA1
    body = resp.json()
    assert body["apiVersion"] == "apidiscovery.k8s.io/v2beta1"
    v2 = aggregated(api, "/apis").json()
    assert body["items"] == v2["items"]


@pytest.mark.parametrize(("accept", "served"), [
    # kube's negotiation: the first clause (by q, then specificity) naming an aggregated GVK wins.
    (f"{V2BETA1},{V2}", V2BETA1),
    (f"{V2};q=0.5,{V2BETA1}", V2BETA1),
    ("*/*;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", V2),
    ("application/*;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList", V2BETA1),
    (f"{V2};pretty=1;profile=nopeer", V2),
    (V2.replace(";", " ; "), V2),
    # No protobuf encoder in kubelab: the JSON document, with the JSON Content-Type client-go decodes by.
    (f"{PROTOBUF_V2},{V2},application/json", V2),
    (PROTOBUF_V2, V2),
    ("application/yaml;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
     "application/yaml;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"),
])
def test_accept_negotiation(api: httpx.Client, accept: str, served: str) -> None:
    resp = aggregated(api, "/apis", accept)
    assert resp.headers["content-type"] == served
    body = yaml.safe_load(resp.text) if "yaml" in served else resp.json()
    assert body["kind"] == "APIGroupDiscoveryList"
    assert body["apiVersion"] == f"apidiscovery.k8s.io/{served.split('v=')[1].split(';')[0]}"


@pytest.mark.parametrize("accept", [
    "application/json",
    "",
    "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList",
    "application/json;g=apidiscovery.k8s.io;v=v2",
    "application/json;g=apidiscovery.k8s.io;as=APIGroupDiscoveryList",
    "application/json;v=v2;as=APIGroupDiscoveryList",
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscovery",
    "application/json;g=APIDISCOVERY.K8S.IO;v=v2;as=APIGroupDiscoveryList",
    "application/json;g=apidiscovery.k8s.io;v=V2;as=APIGroupDiscoveryList",
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupList",
    "text/html;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
    "application/cbor;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
    "application/json;g=\"apidiscovery.k8s.io\";v=\"v2\";as=\"APIGroupDiscoveryList\"",
    ";;;,,,;=;g;v;as",
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;g=example.com",
    "/;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
    "application/json;" + "x=y;" * 2000,
])
@pytest.mark.parametrize("path", ["/api", "/apis"])
def test_other_accept_headers_get_the_legacy_document(api: httpx.Client, path: str, accept: str) -> None:
    resp = api.get(path, headers={"Accept": accept})
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"] == "application/json"
    assert resp.json()["kind"] == ("APIVersions" if path == "/api" else "APIGroupList")
    assert "etag" not in resp.headers


# --- kubectl ------------------------------------------------------------------------------------------


GETS = re.compile(r'(?:\] GET (\S+) \d{3}|verb="GET" url="([^"]+)")')


def gets(stderr: str) -> list[str]:
    """The URL paths of the GETs in kubectl -v=6 output (1.27-1.32 and 1.33's structured form)."""
    found = [a or b for a, b in GETS.findall(stderr)]
    return [httpx.URL(url).path for url in found]


@pytest.fixture
def fresh_kubectl(kubeconfig: Path, tmp_path: Path) -> Callable[..., Kubectl]:
    """kubectl of a version with a cache of its own (every call of this makes a new empty one)."""
    made = itertools.count()

    def make(version: str, *, config: Path = kubeconfig) -> Kubectl:
        return Kubectl(version, config, tmp_path / f"cache-{version}-{next(made)}")
    return make


@pytest.fixture
def legacy_proxy(apiserver: str, tmp_path: Path) -> Iterator[tuple[RecordingProxy, Path]]:
    """A proxy that asks the API server for plain JSON, as a client without aggregated discovery does; a
    kubeconfig pointing at it."""
    with RecordingProxy(apiserver, accept="application/json") as proxy:
        yield proxy, write_kubeconfig(tmp_path, proxy.url)


@pytest.mark.parametrize("version", ["1.27", "1.29", "1.33", "dispatcher"])
def test_kubectl_discovers_everything_in_two_gets(fresh_kubectl: Callable[..., Kubectl], version: str,
                                                  legacy_proxy: tuple[RecordingProxy, Path]) -> None:
    result = fresh_kubectl(version)("-v=6", "api-resources").ok()
    assert gets(result.stderr) == ["/api", "/apis"], result.stderr
    # The same kubectl given the legacy documents walks every group version: what kubelab made it do before.
    proxy, config = legacy_proxy
    fresh_kubectl(version, config=config)("api-resources").ok()
    paths = [path for method, path, _, _ in proxy.requests if method == "GET"]
    assert {"/api/v1?timeout=32s", "/apis/apps/v1?timeout=32s", "/apis/batch/v1?timeout=32s"} <= set(paths), paths


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_api_resources_print_the_same_either_way(fresh_kubectl: Callable[..., Kubectl], gadgets: str,
                                                 legacy_proxy: tuple[RecordingProxy, Path], version: str) -> None:
    _, config = legacy_proxy
    for args in (("api-resources",), ("api-resources", "-o", "wide"), ("api-resources", f"--api-group={gadgets}"),
                 ("api-resources", "--categories=toys"), ("api-versions",)):
        direct = fresh_kubectl(version).ok(*args)
        legacy = fresh_kubectl(version, config=config).ok(*args)
        assert direct == legacy, args
    wide = fresh_kubectl(version).ok("api-resources", f"--api-group={gadgets}", "-o", "wide")
    assert "gdt" in wide and "all,toys" in wide and f"{gadgets}/v1 " in wide, wide


@pytest.mark.parametrize("version", ["1.29", "dispatcher"])
def test_kubectl_gets_a_new_definition_by_short_name(api: httpx.Client, fresh_kubectl: Callable[..., Kubectl],
                                                     version: str) -> None:
    kubectl = fresh_kubectl(version)
    kubectl.ok("api-resources")  # a warm discovery cache from before the definition existed
    group = f"{unique_name('toys')}.example.com"
    crd = definition(group)
    assert api.post(CRDS, json=crd).status_code == 201
    try:
        established(api, crd["metadata"]["name"])
        result = kubectl("-v=6", "get", "gdt", "-n", "default").ok()
        paths = gets(result.stderr)
        assert paths[-1] == f"/apis/{group}/v1/namespaces/default/gadgets", paths
        assert set(paths[:-1]) <= {"/api", "/apis"}, paths
        assert "No resources found" in result.stderr
        result = fresh_kubectl(version)("-v=6", "get", "toys", "-n", "default").ok()
        assert set(gets(result.stderr)) == {"/api", "/apis", f"/apis/{group}/v1/namespaces/default/gadgets"}
    finally:
        api.delete(f"{CRDS}/{crd['metadata']['name']}")
