"""What kubectl reads before touching a resource: /version, health, legacy discovery and /openapi/v3;
and the Status answer for paths that do not exist."""

from __future__ import annotations

import re

import httpx
import pytest
from apitools import CORE, assert_status


def test_version(api: httpx.Client) -> None:
    resp = api.get("/version", params={"timeout": "32s"})
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()
    assert body["major"] == "1"
    assert body["minor"] == "32"
    match = re.fullmatch(r"v(\d+)\.(\d+)\.(\d+)([-+][0-9A-Za-z.+-]*)?", body["gitVersion"])
    assert match, body["gitVersion"]
    assert (match[1], match[2]) == ("1", "32")


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/livez"])
def test_health(api: httpx.Client, path: str) -> None:
    resp = api.get(path)
    assert resp.status_code == 200
    assert resp.text == "ok"


def test_readyz_verbose_lists_etcd(api: httpx.Client) -> None:
    resp = api.get("/readyz", params={"verbose": ""})
    assert resp.status_code == 200
    assert "[+]etcd ok" in resp.text.splitlines()
    assert resp.text.rstrip().endswith("readyz check passed")


def test_api_versions(api: httpx.Client) -> None:
    body = api.get("/api").json()
    assert body["kind"] == "APIVersions"
    assert body["versions"] == ["v1"]
    assert body["serverAddressByClientCIDRs"][0]["clientCIDR"] == "0.0.0.0/0"


def test_api_groups(api: httpx.Client) -> None:
    body = api.get("/apis").json()
    assert body["kind"] == "APIGroupList"
    groups = {g["name"]: g for g in body["groups"]}
    assert {"discovery.k8s.io", "coordination.k8s.io"} <= set(groups)
    assert groups["discovery.k8s.io"]["preferredVersion"] == {"groupVersion": "discovery.k8s.io/v1", "version": "v1"}


def test_core_resource_list(api: httpx.Client) -> None:
    body = api.get(f"{CORE}", params={"timeout": "32s"}).json()
    assert body["kind"] == "APIResourceList"
    assert body["groupVersion"] == "v1"
    resources = {r["name"]: r for r in body["resources"]}
    assert resources["services"]["shortNames"] == ["svc"]
    assert resources["services"]["categories"] == ["all"]
    assert resources["services"]["namespaced"] is True
    assert resources["services"]["kind"] == "Service"
    assert {"create", "delete", "get", "list", "patch", "update", "watch"} <= set(resources["services"]["verbs"])
    assert resources["pods"]["shortNames"] == ["po"]
    assert resources["pods"]["categories"] == ["all"]
    assert resources["nodes"]["namespaced"] is False
    assert resources["nodes"]["shortNames"] == ["no"]
    assert resources["namespaces"]["shortNames"] == ["ns"]
    assert resources["endpoints"]["shortNames"] == ["ep"]
    assert resources["events"]["shortNames"] == ["ev"]
    assert resources["pods/binding"]["kind"] == "Binding"
    assert resources["pods/binding"]["verbs"] == ["create"]
    assert resources["pods/status"]["kind"] == "Pod"
    assert "categories" not in resources["nodes"]


def test_group_resource_lists(api: httpx.Client) -> None:
    slices = api.get("/apis/discovery.k8s.io/v1").json()
    assert slices["groupVersion"] == "discovery.k8s.io/v1"
    assert [r["kind"] for r in slices["resources"]] == ["EndpointSlice"]
    leases = api.get("/apis/coordination.k8s.io/v1").json()
    assert [(r["name"], r["namespaced"]) for r in leases["resources"]] == [("leases", True)]


def test_openapi_v3_index_and_group_version_doc(api: httpx.Client) -> None:
    index = api.get("/openapi/v3").json()
    assert {"api/v1", "apis/discovery.k8s.io/v1", "apis/coordination.k8s.io/v1"} <= set(index["paths"])
    url = index["paths"]["api/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/api/v1")

    doc = api.get(url).json()
    assert doc["openapi"].startswith("3.")
    op = doc["paths"]["/api/v1/namespaces/{namespace}/services/{name}"]["patch"]
    assert op["x-kubernetes-group-version-kind"] == {"group": "", "version": "v1", "kind": "Service"}
    assert any(p["name"] == "fieldValidation" and p["in"] == "query" for p in op["parameters"])
    # A requestBody without components makes kubectl warn on every apply (reference §3).
    assert "requestBody" not in op
    node_op = doc["paths"]["/api/v1/nodes/{name}"]["patch"]
    assert node_op["x-kubernetes-group-version-kind"]["kind"] == "Node"

    slices = api.get(index["paths"]["apis/discovery.k8s.io/v1"]["serverRelativeURL"]).json()
    op = slices["paths"]["/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices/{name}"]["patch"]
    assert op["x-kubernetes-group-version-kind"] == {"group": "discovery.k8s.io", "version": "v1",
                                                     "kind": "EndpointSlice"}


@pytest.mark.parametrize("path", ["/version", "/api", "/apis", "/api/v1", "/apis/apps", "/apis/apps/v1",
                                  "/apis/discovery.k8s.io/v1"])
def test_discovery_paths_with_a_trailing_slash_serve_the_document(api: httpx.Client, path: str) -> None:
    """kube serves `/apis/`, `/api/v1/`, `/version/` as without the slash (200 and the same bytes); kubelab
    answered 307 with an empty body (Starlette's redirect_slashes) or 404 (`/api/v1/`)."""
    plain = api.get(path, follow_redirects=False)
    slashed = api.get(path + "/", follow_redirects=False)
    assert plain.status_code == 200
    assert (slashed.status_code, slashed.headers["content-type"], slashed.content) == (
        200, plain.headers["content-type"], plain.content)


@pytest.mark.parametrize("path", ["/healthz/", "/api/v2/", "/apis/example.com/", "/apis/example.com/v1/"])
def test_unserved_paths_with_a_trailing_slash_are_not_redirected(api: httpx.Client, path: str) -> None:
    assert_status(api.get(path, follow_redirects=False), 404, "NotFound",
                  "the server could not find the requested resource")


@pytest.mark.parametrize(("method", "path"), [
    pytest.param("GET", "/nope", id="unknown root"),
    pytest.param("GET", "/api/v2", id="unknown core version"),
    pytest.param("GET", "/apis/example.com/v1", id="unknown group"),
    pytest.param("GET", "/api/v1/widgets", id="unknown resource"),
    pytest.param("GET", "/api/v1/namespaces/default/widgets/x", id="unknown namespaced resource"),
    pytest.param("GET", "/apis/discovery.k8s.io/v2/endpointslices", id="unknown group version"),
    pytest.param("GET", "/openapi/v3/apis/batch/v2", id="unknown openapi group version"),
    pytest.param("POST", "/api/v1/namespaces/default/widgets", id="post to unknown resource"),
])
def test_unknown_paths_are_not_found_statuses(api: httpx.Client, method: str, path: str) -> None:
    resp = api.request(method, path, json={})
    status = assert_status(resp, 404, "NotFound", "the server could not find the requested resource")
    assert "detail" not in status


def test_wrong_method_is_method_not_allowed(api: httpx.Client) -> None:
    assert_status(api.post("/version", json={}), 405, "MethodNotAllowed")
    assert_status(api.put(f"{CORE}/namespaces/default/services", json={}), 405, "MethodNotAllowed")
