"""PATCH by content type: JSON merge patch, JSON patch, strategic merge patch with its directives, and
server-side apply's create-or-merge."""

from __future__ import annotations

from typing import Any

import httpx
from apitools import assert_status, create, ns_path, service, unique_name

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"


def patch(api: httpx.Client, path: str, body: Any, content_type: str, **params: str) -> httpx.Response:
    return api.patch(path, json=body, headers={"Content-Type": content_type}, params=params)


def two_port_service(name: str) -> dict[str, Any]:
    return service(name, ports=[{"name": "http", "port": 80, "targetPort": 8080},
                                {"name": "https", "port": 443, "targetPort": 8443}])


def test_merge_patch(api: httpx.Client) -> None:
    name = unique_name("merge")
    created = create(api, ns_path("services"), service(name))
    created_ip = created["spec"]["clusterIP"]
    resp = patch(api, ns_path("services", name=name),
                 {"metadata": {"labels": {"team": "a"}}, "spec": {"selector": {"app": None, "tier": "web"}}}, MERGE)
    assert resp.status_code == 200, resp.text
    stored = api.get(ns_path("services", name=name)).json()
    assert stored == resp.json()
    assert stored["metadata"]["labels"] == {"team": "a"}
    assert stored["spec"]["selector"] == {"tier": "web"}
    assert stored["spec"]["clusterIP"] == created_ip
    assert int(stored["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


def test_merge_patch_replaces_lists(api: httpx.Client) -> None:
    name = unique_name("merge-list")
    create(api, ns_path("services"), two_port_service(name))
    resp = patch(api, ns_path("services", name=name), {"spec": {"ports": [{"port": 9090}]}}, MERGE)
    assert resp.status_code == 200, resp.text
    assert resp.json()["spec"]["ports"] == [{"protocol": "TCP", "port": 9090, "targetPort": 9090}]


def test_json_patch(api: httpx.Client) -> None:
    name = unique_name("jsonpatch")
    create(api, ns_path("services"), two_port_service(name))
    ops = [{"op": "replace", "path": "/spec/ports/0/port", "value": 8000},
           {"op": "remove", "path": "/spec/ports/1"},
           {"op": "add", "path": "/metadata/labels", "value": {"patched": "json"}}]
    resp = patch(api, ns_path("services", name=name), ops, JSON_PATCH)
    assert resp.status_code == 200, resp.text
    stored = api.get(ns_path("services", name=name)).json()
    assert [(p["name"], p["port"], p["targetPort"]) for p in stored["spec"]["ports"]] == [("http", 8000, 8080)]
    assert stored["metadata"]["labels"] == {"patched": "json"}


def test_json_patch_failing_test_op_changes_nothing(api: httpx.Client) -> None:
    name = unique_name("jsontest")
    created = create(api, ns_path("services"), service(name))
    ops = [{"op": "test", "path": "/spec/type", "value": "NodePort"},
           {"op": "replace", "path": "/spec/selector", "value": {"app": "other"}}]
    resp = patch(api, ns_path("services", name=name), ops, JSON_PATCH)
    assert 400 <= resp.status_code < 500
    assert resp.json()["kind"] == "Status"
    assert api.get(ns_path("services", name=name)).json() == created


def test_strategic_merge_patch_merges_ports_by_port(api: httpx.Client) -> None:
    name = unique_name("smp")
    create(api, ns_path("services"), two_port_service(name))
    resp = patch(api, ns_path("services", name=name),
                 {"spec": {"ports": [{"port": 443, "targetPort": 9443}, {"name": "admin", "port": 9000}]}}, STRATEGIC)
    assert resp.status_code == 200, resp.text
    ports = [(p["name"], p["port"], p["targetPort"]) for p in resp.json()["spec"]["ports"]]
    assert ports == [("http", 80, 8080), ("https", 443, 9443), ("admin", 9000, 9000)]


def test_strategic_merge_patch_delete_directive_and_element_order(api: httpx.Client) -> None:
    # What `kubectl apply` sends when a manifest drops port 80 and renames its selector (reference §4).
    name = unique_name("smp-apply")
    create(api, ns_path("services"), two_port_service(name))
    body = {"metadata": {"labels": {"app": "demo2"}},
            "spec": {"$setElementOrder/ports": [{"port": 443}, {"port": 81}],
                     "ports": [{"name": "web", "port": 81, "targetPort": 8081}, {"$patch": "delete", "port": 80}],
                     "selector": {"app": "demo2"}}}
    resp = patch(api, ns_path("services", name=name), body, STRATEGIC)
    assert resp.status_code == 200, resp.text
    stored = api.get(ns_path("services", name=name)).json()
    assert [(p["name"], p["port"]) for p in stored["spec"]["ports"]] == [("https", 443), ("web", 81)]
    assert stored["spec"]["selector"] == {"app": "demo2"}
    # Directives are applied, never stored.
    text = str(stored)
    assert "$patch" not in text and "$setElementOrder" not in text


def test_strategic_merge_patch_null_deletes(api: httpx.Client) -> None:
    name = unique_name("smp-null")
    create(api, ns_path("services"), {**service(name), "metadata": {"name": name, "labels": {"a": "1", "b": "2"}}})
    resp = patch(api, ns_path("services", name=name), {"metadata": {"labels": {"a": None}}}, STRATEGIC)
    assert resp.status_code == 200, resp.text
    assert resp.json()["metadata"]["labels"] == {"b": "2"}


def test_patch_with_a_stale_resource_version_conflicts(api: httpx.Client) -> None:
    name = unique_name("patch-stale")
    created = create(api, ns_path("services"), service(name))
    assert patch(api, ns_path("services", name=name), {"metadata": {"labels": {"v": "1"}}}, MERGE).status_code == 200
    resp = patch(api, ns_path("services", name=name),
                 {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"], "labels": {"v": "2"}}}, MERGE)
    assert_status(resp, 409, "Conflict",
                  f'Operation cannot be fulfilled on services "{name}": the object has been modified; '
                  "please apply your changes to the latest version and try again")
    assert api.get(ns_path("services", name=name)).json()["metadata"]["labels"] == {"v": "1"}


def test_patch_of_a_missing_object_is_not_found(api: httpx.Client) -> None:
    name = unique_name("patch-none")
    for content_type in (MERGE, STRATEGIC):
        resp = patch(api, ns_path("services", name=name), {"metadata": {"labels": {"a": "b"}}}, content_type)
        assert_status(resp, 404, "NotFound", f'services "{name}" not found')


def test_patch_with_an_unknown_content_type_is_unsupported(api: httpx.Client) -> None:
    name = unique_name("patch-type")
    created = create(api, ns_path("services"), service(name))
    resp = api.patch(ns_path("services", name=name), content=b'{"metadata":{}}',
                     headers={"Content-Type": "text/plain"})
    assert_status(resp, 415, "UnsupportedMediaType")
    assert api.get(ns_path("services", name=name)).json() == created


def test_patch_that_makes_the_object_invalid_is_refused(api: httpx.Client) -> None:
    name = unique_name("patch-invalid")
    created = create(api, ns_path("services"), service(name))
    resp = patch(api, ns_path("services", name=name), {"spec": {"ports": [{"port": 0}]}}, MERGE)
    status = assert_status(resp, 422, "Invalid")
    assert status["details"]["kind"] == "Service"
    assert status["details"]["causes"][0]["field"] == "spec.ports[0].port"
    assert api.get(ns_path("services", name=name)).json() == created


def test_apply_patch_creates_when_absent_then_merges(api: httpx.Client) -> None:
    name = unique_name("ssa")
    manifest = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
                "spec": {"selector": {"app": "demo"}, "ports": [{"name": "http", "port": 80}]}}
    resp = patch(api, ns_path("services", name=name), manifest, APPLY, fieldManager="kubectl", force="false")
    assert resp.status_code == 201, resp.text
    created = resp.json()
    assert created["metadata"]["uid"]
    assert created["spec"]["clusterIP"]
    assert created["spec"]["ports"] == [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 80}]

    # kubectl 1.29+'s second apply, from another manager, carries only an annotation: it must not wipe spec.
    last_applied = {"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": name, "namespace": "default",
                                 "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}}}
    resp = patch(api, ns_path("services", name=name), last_applied, APPLY, fieldManager="kubectl-last-applied")
    assert resp.status_code == 200, resp.text
    stored = api.get(ns_path("services", name=name)).json()
    assert stored["metadata"]["annotations"] == {"kubectl.kubernetes.io/last-applied-configuration": "{}"}
    assert stored["spec"]["selector"] == {"app": "demo"}
    assert stored["spec"]["clusterIP"] == created["spec"]["clusterIP"]


def test_apply_patch_accepts_yaml_text(api: httpx.Client) -> None:
    name = unique_name("ssa-yaml")
    text = (f"apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\nspec:\n  selector:\n    app: y\n"
            "  ports:\n  - port: 8080\n")
    resp = api.patch(ns_path("services", name=name), content=text, headers={"Content-Type": APPLY},
                     params={"fieldManager": "test"})
    assert resp.status_code == 201, resp.text
    assert api.get(ns_path("services", name=name)).json()["spec"]["ports"][0]["port"] == 8080


def test_dry_run_patch_is_not_persisted(api: httpx.Client) -> None:
    name = unique_name("dry")
    created = create(api, ns_path("services"), service(name))
    resp = patch(api, ns_path("services", name=name), {"metadata": {"labels": {"dry": "run"}}}, MERGE, dryRun="All")
    assert resp.status_code == 200, resp.text
    assert resp.json()["metadata"]["labels"] == {"dry": "run"}
    assert api.get(ns_path("services", name=name)).json() == created
