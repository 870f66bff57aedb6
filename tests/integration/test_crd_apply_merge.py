"""Server-side apply on custom objects merges by the CRD's structural schema, as kube's structured-merge-diff
does with the type it builds from it: `x-kubernetes-list-type: map` lists merge item by item on their
`x-kubernetes-list-map-keys`, `set` lists by value, `atomic` lists (and lists that say nothing) whole;
`x-kubernetes-map-type: atomic` maps whole, `granular` ones key by key. Two field managers applying different
items of a keyed list each own their own; changing another's item is a conflict naming its path. Against a
real API server and etcd, with httpx and the real kubectl."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from apitools import assert_status, unique_name
from kubectltools import Kubectl, wait_for
from kubernetes import client

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
APPLY = {"Content-Type": "application/apply-patch+yaml"}
SPEC = {"type": "object", "properties": {
    "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "protocol"],
              "items": {"type": "object", "required": ["name", "protocol"], "properties": {
                  "name": {"type": "string"}, "protocol": {"type": "string"},
                  "port": {"type": "integer"},
                  "hosts": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}}},
    "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
    "args": {"type": "array", "items": {"type": "string"}},
    "pinned": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "string"}},
    "selector": {"type": "object", "x-kubernetes-map-type": "atomic", "additionalProperties": {"type": "string"}},
    "settings": {"type": "object", "x-kubernetes-map-type": "granular",
                 "additionalProperties": {"type": "string"}},
    "routes": {"type": "object", "additionalProperties": {
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["path"],
        "items": {"type": "object", "properties": {"path": {"type": "string"}, "to": {"type": "string"}}}}}}}


@pytest.fixture
def mixers(api: httpx.Client) -> Iterator[str]:
    """An Established Mixer kind whose spec uses every list and map type; the path of its objects."""
    group = f"{unique_name('ssa')}.example.com"
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"mixers.{group}"},
           "spec": {"group": group, "scope": "Namespaced", "names": {"plural": "mixers", "kind": "Mixer"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "properties": {"spec": SPEC}}}}]}}
    assert api.post(CRDS, json=crd).status_code == 201

    def ready() -> bool:
        conditions = api.get(f"{CRDS}/mixers.{group}").json()["status"].get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)
    wait_for("mixers Established", ready)
    yield f"/apis/{group}/v1/namespaces/default/mixers"
    api.delete(f"{CRDS}/mixers.{group}")


def apply(api: httpx.Client, path: str, manager: str, spec: dict[str, Any], *, force: bool = False
          ) -> httpx.Response:
    group_version = path.split("/apis/")[1].split("/namespaces")[0]
    body = {"apiVersion": group_version, "kind": "Mixer", "metadata": {"name": "m"}, "spec": spec}
    params = {"fieldManager": manager, **({"force": "true"} if force else {})}
    return api.patch(f"{path}/m", content=json.dumps(body), headers=APPLY, params=params)


def owned(obj: dict[str, Any], manager: str) -> dict[str, Any]:
    entry = next(e for e in obj["metadata"]["managedFields"] if e["manager"] == manager)
    fields: dict[str, Any] = entry["fieldsV1"]["f:spec"]
    return fields


def test_two_managers_own_their_own_items_of_a_keyed_list(api: httpx.Client, mixers: str) -> None:
    first = apply(api, mixers, "alice", {"ports": [{"name": "http", "protocol": "TCP", "port": 80}], "tags": ["a"],
                                         "settings": {"color": "red"}, "routes": {"web": [{"path": "/", "to": "x"}]}})
    assert first.status_code == 201, first.text
    second = apply(api, mixers, "bob", {"ports": [{"name": "dns", "protocol": "UDP", "port": 53}], "tags": ["b"],
                                        "settings": {"size": "L"}, "routes": {"web": [{"path": "/api", "to": "y"}]}})
    assert second.status_code == 200, second.text
    spec = second.json()["spec"]
    assert spec["ports"] == [{"name": "http", "protocol": "TCP", "port": 80},
                             {"name": "dns", "protocol": "UDP", "port": 53}]
    assert spec["tags"] == ["a", "b"]
    assert spec["settings"] == {"color": "red", "size": "L"}
    assert spec["routes"] == {"web": [{"path": "/", "to": "x"}, {"path": "/api", "to": "y"}]}
    bobs = owned(second.json(), "bob")
    assert set(bobs["f:ports"]) == {'k:{"name":"dns","protocol":"UDP"}'}
    assert set(bobs["f:tags"]) == {'v:"b"'}
    assert set(owned(second.json(), "alice")["f:ports"]) == {'k:{"name":"http","protocol":"TCP"}'}
    # Alice applies again without her item: hers goes, Bob's stays.
    again = apply(api, mixers, "alice", {"tags": ["a"]})
    assert again.status_code == 200, again.text
    assert again.json()["spec"]["ports"] == [{"name": "dns", "protocol": "UDP", "port": 53}]
    assert again.json()["spec"]["tags"] == ["a", "b"]
    assert again.json()["spec"]["settings"] == {"size": "L"}
    assert again.json()["spec"]["routes"] == {"web": [{"path": "/api", "to": "y"}]}


def test_changing_another_managers_item_is_a_conflict_on_its_path(api: httpx.Client, mixers: str) -> None:
    assert apply(api, mixers, "alice", {"ports": [{"name": "http", "protocol": "TCP", "port": 80, "hosts": ["a.example"]}],
                                        "args": ["--one"], "pinned": ["p"], "selector": {"app": "x"}}
                 ).status_code == 201
    before = api.get(f"{mixers}/m").json()
    conflict = assert_status(apply(api, mixers, "bob", {"ports": [{"name": "http", "protocol": "TCP", "port": 8080}]}), 409,
                             "Conflict", 'Apply failed with 1 conflict: conflict with "alice": '
                                         '.spec.ports[name="http",protocol="TCP"].port')
    assert conflict["details"]["causes"] == [{"reason": "FieldManagerConflict", "message": 'conflict with "alice"',
                                              "field": '.spec.ports[name="http",protocol="TCP"].port'}]
    # Atomic lists and maps are owned whole: another value anywhere in them is a conflict on the whole.
    assert_status(apply(api, mixers, "bob", {"args": ["--two"]}), 409, "Conflict",
                  'Apply failed with 1 conflict: conflict with "alice": .spec.args')
    assert_status(apply(api, mixers, "bob", {"pinned": ["p", "q"]}), 409, "Conflict",
                  'Apply failed with 1 conflict: conflict with "alice": .spec.pinned')
    assert_status(apply(api, mixers, "bob", {"selector": {"tier": "y"}}), 409, "Conflict",
                  'Apply failed with 1 conflict: conflict with "alice": .spec.selector')
    # A set item of one's own inside another's keyed item merges without a conflict.
    added = apply(api, mixers, "bob", {"ports": [{"name": "http", "protocol": "TCP", "hosts": ["b.example"]}]})
    assert added.status_code == 200, added.text
    assert added.json()["spec"]["ports"][0]["hosts"] == ["a.example", "b.example"]
    assert api.get(f"{mixers}/m").json()["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"]
    forced = apply(api, mixers, "bob", {"ports": [{"name": "http", "protocol": "TCP", "port": 8080}]}, force=True)
    assert forced.status_code == 200 and forced.json()["spec"]["ports"][0]["port"] == 8080


def test_kubectl_server_side_applies_of_two_managers_merge_and_conflict(
        api: httpx.Client, kubectl: Kubectl, mixers: str, tmp_path: Path) -> None:
    group_version = mixers.split("/apis/")[1].split("/namespaces")[0]

    def manifest(name: str, spec: dict[str, Any]) -> str:
        path = tmp_path / name
        path.write_text(json.dumps({"apiVersion": group_version, "kind": "Mixer", "metadata": {"name": "m"},
                                    "spec": spec}))
        return str(path)

    one = manifest("one.json", {"ports": [{"name": "http", "protocol": "TCP", "port": 80}]})
    two = manifest("two.json", {"ports": [{"name": "grpc", "protocol": "TCP", "port": 9090}]})
    kubectl.ok("apply", "--server-side", "--field-manager=team-one", "-f", one)
    kubectl.ok("apply", "--server-side", "--field-manager=team-two", "-f", two)
    ports = api.get(f"{mixers}/m").json()["spec"]["ports"]
    assert [(p["name"], p["port"]) for p in ports] == [("http", 80), ("grpc", 9090)]
    clash = kubectl("apply", "--server-side", "--field-manager=team-two", "-f",
                    manifest("three.json", {"ports": [{"name": "grpc", "protocol": "TCP", "port": 9090}, {"name": "http", "protocol": "TCP", "port": 81}]}))
    assert clash.returncode != 0
    assert 'conflict with "team-one": .spec.ports[name="http",protocol="TCP"].port' in clash.stderr


def test_duplicate_set_items_and_map_keys_are_refused_in_kubes_words(api: httpx.Client, mixers: str) -> None:
    # apiextensions' ValidateListSetsAndMaps: each repeated value once, at its second index.
    refused = assert_status(apply(api, mixers, "alice", {
        "tags": ["a", "b", "a", "a", "b"],
        "ports": [{"name": "http", "protocol": "TCP"}, {"name": "http", "protocol": "TCP", "port": 1}],
        "routes": {"web": [{"path": "/"}, {"path": "/"}]}}), 422, "Invalid")
    assert sorted(c["field"] for c in refused["details"]["causes"]) == [
        "spec.ports[1]", "spec.routes[web][1]", "spec.tags[2]", "spec.tags[4]"]
    messages = {c["field"]: c["message"] for c in refused["details"]["causes"]}
    assert messages["spec.tags[2]"] == 'Duplicate value: "a"'
    assert messages["spec.ports[1]"] == 'Duplicate value: map[string]interface {}{"name":"http", "protocol":"TCP"}'
    assert api.get(f"{mixers}/m").status_code == 404  # nothing was created


HOSTILE: list[Any] = [
    {"ports": "http"}, {"ports": ["http", 80]}, {"ports": [None, None]}, {"ports": [{"name": 1, "protocol": "TCP"}]},
    {"ports": [{}, {}]}, {"ports": [{"name": "a", "protocol": "TCP", "hosts": [1, 1, "1"]}]},
    {"tags": [{"a": 1}, {"a": 1}]}, {"tags": [1, 1.0, True, "1"]}, {"tags": [None, None]},
    {"selector": ["x"]}, {"selector": {"a": None}}, {"settings": {"a": {"b": "c"}}}, {"routes": {"w": "x"}},
    {"routes": {"w": [{"path": "/"}, "x"]}}, {"args": {"a": "b"}}, {"pinned": [["x"], ["x"]]},
    {"ports": [{"name": "é\u0000", "protocol": "TCP"}] * 3}, {"tags": ["x"] * 2000},
]


def test_hostile_applies_never_get_a_5xx_and_change_nothing_they_fail(api: httpx.Client, mixers: str) -> None:
    assert apply(api, mixers, "owner", {"tags": ["keep"]}).status_code == 201
    before = api.get(f"{mixers}/m").json()
    for spec in HOSTILE:
        for manager in ("owner", "other"):
            resp = apply(api, mixers, manager, spec)
            assert resp.status_code < 500, (spec, resp.text)
            if resp.status_code >= 400:
                assert resp.json()["kind"] == "Status"
                assert api.get(f"{mixers}/m").json()["metadata"]["resourceVersion"] == \
                    before["metadata"]["resourceVersion"], spec
            else:
                before = resp.json()


def test_the_python_client_applies_as_two_managers(apiserver: str, mixers: str) -> None:
    group, version = mixers.split("/apis/")[1].split("/namespaces")[0].split("/")
    with client.ApiClient(client.Configuration(host=apiserver)) as api_client:
        objects = client.CustomObjectsApi(api_client)

        def apply_as(manager: str, name: str, port: int) -> Any:
            body = {"apiVersion": f"{group}/{version}", "kind": "Mixer", "metadata": {"name": "m"},
                    "spec": {"ports": [{"name": name, "protocol": "TCP", "port": port}]}}
            return objects.patch_namespaced_custom_object(group, version, "default", "mixers", "m", body,
                                                          field_manager=manager,
                                                          _content_type="application/apply-patch+yaml")

        apply_as("one", "http", 80)
        merged = apply_as("two", "grpc", 9090)
        assert [(p["name"], p["port"]) for p in merged["spec"]["ports"]] == [("http", 80), ("grpc", 9090)]
        with pytest.raises(client.ApiException) as refused:
            apply_as("two", "http", 81)
        assert refused.value.status == 409
        assert '.spec.ports[name=\\"http\\",protocol=\\"TCP\\"].port' in str(refused.value.body)
