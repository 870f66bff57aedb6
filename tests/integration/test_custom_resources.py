"""apiextensions.k8s.io/v1 CustomResourceDefinitions and the kinds they define, against a real API server and
etcd: kube's validation words, the naming and establishing controllers' status, discovery as soon as a
definition is Established, custom objects with everything built-in kinds get (resourceVersion, 409s,
selectors, watch, patches, generateName, deletecollection, the status subresource), several versions on one
storage version, and deleting a definition deleting its objects; through httpx, the real kubectl and the
official Python client (ApiextensionsV1Api, CustomObjectsApi)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from apitools import assert_status, unique_name, watch_events
from kubectltools import Kubectl, wait_for
from kubernetes import client

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
SCHEMA = {"openAPIV3Schema": {"type": "object", "properties": {
    "spec": {"type": "object", "properties": {"size": {"type": "integer"}, "color": {"type": "string"}}},
    "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}}


def definition(group: str, *, kind: str = "Widget", plural: str = "widgets", scope: str = "Namespaced",
               versions: list[dict[str, Any]] | None = None, short_names: list[str] | None = None
               ) -> dict[str, Any]:
    names: dict[str, Any] = {"plural": plural, "kind": kind}
    if short_names:
        names["shortNames"] = short_names
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": scope, "names": names,
                     "versions": versions or [{"name": "v1", "served": True, "storage": True,
                                               "schema": copy.deepcopy(SCHEMA),
                                               "subresources": {"status": {}}}]}}


def established(api: httpx.Client, name: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        crd = api.get(f"{CRDS}/{name}").json()
        conditions = {c["type"]: c for c in crd["status"].get("conditions") or []}
        return crd if conditions.get("Established", {}).get("status") == "True" else None
    return wait_for(f"{name} Established", check)


@pytest.fixture
def group() -> str:
    return f"{unique_name('g')}.example.com"


@pytest.fixture
def widgets(api: httpx.Client, group: str) -> Iterator[str]:
    """An Established namespaced Widget kind; the path of its objects in `default`."""
    crd = definition(group, short_names=["wg"])
    assert api.post(CRDS, json=crd).status_code == 201
    established(api, crd["metadata"]["name"])
    yield f"/apis/{group}/v1/namespaces/default/widgets"
    api.delete(f"{CRDS}/{crd['metadata']['name']}")


def widget(group: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


# --- the definition ----------------------------------------------------------------------------------------

def _without(crd: dict[str, Any], *path: str) -> dict[str, Any]:
    crd = copy.deepcopy(crd)
    target = crd
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return crd


def _with(crd: dict[str, Any], value: Any, *path: str | int) -> dict[str, Any]:
    crd = copy.deepcopy(crd)
    target = crd
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return crd


GOOD = definition("shapes.example.com")
V1 = GOOD["spec"]["versions"][0]


@pytest.mark.parametrize(("body", "message"), [
    pytest.param(_with(GOOD, "widgets.other.example.com", "metadata", "name"),
                 'metadata.name: Invalid value: "widgets.other.example.com": must be spec.names.plural+"."+spec.group',
                 id="name not plural.group"),
    pytest.param(_with(_with(GOOD, "shapes", "spec", "group"), "widgets.shapes", "metadata", "name"),
                 'spec.group: Invalid value: "shapes": should be a domain with at least one dot', id="group one label"),
    pytest.param(_with(GOOD, "Everywhere", "spec", "scope"),
                 'spec.scope: Unsupported value: "Everywhere": supported values: "Cluster", "Namespaced"',
                 id="scope"),
    pytest.param(_without(GOOD, "spec", "scope"), "spec.scope: Required value", id="no scope"),
    pytest.param(_with(GOOD, [{**V1, "storage": False}], "spec", "versions"),
                 "must have exactly one version marked as storage version", id="no storage version"),
    pytest.param(_with(GOOD, [V1, V1], "spec", "versions"), "must contain unique version names",
                 id="duplicate versions"),
    pytest.param(_with(GOOD, [{**V1, "name": "V1"}], "spec", "versions"),
                 "spec.versions[0].name: Invalid value: \"V1\": a DNS-1035 label must consist of lower case "
                 "alphanumeric characters or '-'", id="version name"),
    pytest.param(_with(GOOD, [{k: v for k, v in V1.items() if k != "schema"}], "spec", "versions"),
                 "spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required", id="no schema"),
    pytest.param(_with(GOOD, {"type": "object", "properties": {"spec": {"properties": {}}}}, "spec", "versions", 0,
                       "schema", "openAPIV3Schema"),
                 "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty "
                 "for specified object fields", id="untyped field"),
    pytest.param(_with(GOOD, "Widget", "spec", "names", "listKind"),
                 'spec.names.listKind: Invalid value: "Widget": kind and listKind may not be the same',
                 id="listKind is kind"),
    pytest.param(_with(GOOD, "Wid get", "spec", "names", "kind"),
                 'spec.names.kind: Invalid value: "Wid get": may have mixed case, but should otherwise match: a '
                 "DNS-1035 label", id="kind not a label"),
    pytest.param(_with(GOOD, ["w_g"], "spec", "names", "shortNames"),
                 'spec.names.shortNames[0]: Invalid value: "w_g": a DNS-1035 label', id="short name"),
    pytest.param(_without(GOOD, "spec", "names", "plural"), "spec.names.plural: Required value", id="no plural"),
    pytest.param(_with(_with(GOOD, "things.k8s.io", "spec", "group"), "widgets.things.k8s.io", "metadata", "name"),
                 'metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have '
                 'approval annotation "api-approved.kubernetes.io", see '
                 "https://github.com/kubernetes/enhancements/pull/1111", id="protected group"),
])
def test_bad_definitions_are_refused_with_kubes_words(api: httpx.Client, body: dict[str, Any], message: str) -> None:
    resp = api.post(CRDS, json=body)
    status = assert_status(resp, 422, "Invalid")
    assert message in status["message"]
    assert status["message"].startswith(f'CustomResourceDefinition.apiextensions.k8s.io "{body["metadata"]["name"]}" '
                                        "is invalid: ")
    assert api.get(f"{CRDS}/{body['metadata']['name']}").status_code == 404


def test_a_definition_is_defaulted_named_and_established(api: httpx.Client, group: str) -> None:
    crd = definition(group, short_names=["wg"])
    created = api.post(CRDS, json=crd)
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["metadata"]["generation"] == 1
    assert body["spec"]["names"] == {"plural": "widgets", "singular": "widget", "kind": "Widget",
                                     "listKind": "WidgetList", "shortNames": ["wg"]}
    assert body["spec"]["conversion"] == {"strategy": "None"}
    assert body["status"]["storedVersions"] == ["v1"]
    got = established(api, crd["metadata"]["name"])
    conditions = {c["type"]: c for c in got["status"]["conditions"]}
    assert (conditions["NamesAccepted"]["status"], conditions["NamesAccepted"]["reason"],
            conditions["NamesAccepted"]["message"]) == ("True", "NoConflicts", "no conflicts found")
    assert (conditions["Established"]["reason"], conditions["Established"]["message"]) == (
        "InitialNamesAccepted", "the initial names have been accepted")
    assert got["status"]["acceptedNames"] == body["spec"]["names"]
    # Discovery lists the kind as soon as it is Established.
    resources = api.get(f"/apis/{group}/v1").json()["resources"]
    entries = {r["name"]: r for r in resources}
    assert entries["widgets"]["kind"] == "Widget" and entries["widgets"]["namespaced"] is True
    assert entries["widgets"]["shortNames"] == ["wg"] and entries["widgets"]["singularName"] == "widget"
    assert entries["widgets/status"]["verbs"] == ["get", "patch", "update"]
    groups = {g["name"]: g for g in api.get("/apis").json()["groups"]}
    assert groups[group]["preferredVersion"]["version"] == "v1"
    assert "apiextensions.k8s.io" in groups
    # The definition's own table: NAME, CREATED AT.
    table = api.get(f"{CRDS}/{crd['metadata']['name']}",
                    headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Created At"]
    api.delete(f"{CRDS}/{crd['metadata']['name']}")


def test_a_kind_another_definition_holds_is_not_accepted(api: httpx.Client, widgets: str, group: str) -> None:
    clash = definition(group, plural="gadgets", kind="Widget")
    clash["spec"]["names"]["listKind"] = "GadgetList"  # the kind alone clashes (the last clash names the reason)
    assert api.post(CRDS, json=clash).status_code == 201

    def not_accepted() -> dict[str, Any] | None:
        conditions = {c["type"]: c for c in api.get(f"{CRDS}/gadgets.{group}").json()["status"].get("conditions")
                      or []}
        return conditions.get("NamesAccepted") if conditions.get("NamesAccepted", {}).get("status") == "False" \
            else None

    cond = wait_for("NamesAccepted False", not_accepted)
    assert (cond["reason"], cond["message"]) == ("KindConflict", '"Widget" is already in use')
    assert api.get(f"/apis/{group}/v1/namespaces/default/gadgets").status_code == 404
    api.delete(f"{CRDS}/gadgets.{group}")


# --- custom objects ---------------------------------------------------------------------------------------

def test_custom_objects_are_stored_and_served_like_built_in_ones(api: httpx.Client, widgets: str, group: str
                                                                 ) -> None:
    created = api.post(widgets, json={**widget(group, "a", size=1), "status": {"phase": "ignored"}})
    assert created.status_code == 201, created.text
    a = created.json()
    assert a["metadata"]["generation"] == 1 and a["metadata"]["uid"] and "status" not in a
    assert api.post(widgets, json=widget(group, "a")).status_code == 409
    generated = api.post(widgets, json={**widget(group, ""), "metadata": {"generateName": "w-",
                                                                           "labels": {"tier": "x"}}}).json()
    assert generated["metadata"]["name"].startswith("w-") and len(generated["metadata"]["name"]) == 7
    # A stale resourceVersion is kube's 409.
    stale = {**a, "spec": {"size": 2}}
    assert api.put(f"{widgets}/a", json=stale).json()["metadata"]["generation"] == 2
    assert_status(api.put(f"{widgets}/a", json={**a, "spec": {"size": 3}}), 409, "Conflict",
                  f'Operation cannot be fulfilled on widgets.{group} "a": the object has been modified; please apply '
                  "your changes to the latest version and try again")
    # Selectors.
    assert [i["metadata"]["name"] for i in api.get(widgets, params={"labelSelector": "tier=x"}).json()["items"]] \
        == [generated["metadata"]["name"]]
    assert [i["metadata"]["name"] for i in api.get(widgets, params={"fieldSelector": "metadata.name=a"}).json()[
        "items"]] == ["a"]
    assert_status(api.get(widgets, params={"fieldSelector": "spec.size=1"}), 400, "BadRequest",
                  "field label not supported: spec.size")
    listed = api.get(widgets).json()
    assert listed["kind"] == "WidgetList" and listed["apiVersion"] == f"{group}/v1"
    # Patches: merge and JSON patch; strategic merge is kube's 415.
    merged = api.patch(f"{widgets}/a", content=json.dumps({"spec": {"color": "red"}}),
                       headers={"Content-Type": "application/merge-patch+json"}).json()
    assert merged["spec"] == {"size": 2, "color": "red"}
    patched = api.patch(f"{widgets}/a", content=json.dumps([{"op": "replace", "path": "/spec/size", "value": 5}]),
                        headers={"Content-Type": "application/json-patch+json"}).json()
    assert patched["spec"]["size"] == 5
    assert_status(api.patch(f"{widgets}/a", content="{}",
                            headers={"Content-Type": "application/strategic-merge-patch+json"}),
                  415, "UnsupportedMediaType",
                  "the body of the request was in an unknown format - accepted media types include: "
                  "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")
    # Server-side apply creates and merges.
    applied = api.patch(f"{widgets}/b", params={"fieldManager": "test"},
                        content=json.dumps(widget(group, "b", size=7)),
                        headers={"Content-Type": "application/apply-patch+yaml"})
    assert applied.status_code == 201, applied.text
    assert applied.json()["metadata"]["managedFields"][0]["manager"] == "test"
    # The status subresource: main writes keep status, status writes change only status.
    current = api.get(f"{widgets}/a").json()
    status_write = api.put(f"{widgets}/a/status", json={**current, "spec": {"size": 99}, "status": {"phase": "Ok"}})
    assert status_write.status_code == 200, status_write.text
    assert status_write.json()["status"] == {"phase": "Ok"} and status_write.json()["spec"]["size"] == 5
    assert status_write.json()["metadata"]["generation"] == current["metadata"]["generation"]
    main = api.patch(f"{widgets}/a", content=json.dumps({"status": {"phase": "Lost"}, "spec": {"size": 6}}),
                     headers={"Content-Type": "application/merge-patch+json"}).json()
    assert main["status"] == {"phase": "Ok"} and main["spec"]["size"] == 6
    # Table: NAME, AGE.
    table = api.get(widgets, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Age"]
    # deletecollection.
    assert api.delete(widgets, params={"labelSelector": "tier=x"}).status_code == 200
    assert sorted(i["metadata"]["name"] for i in api.get(widgets).json()["items"]) == ["a", "b"]


def test_custom_objects_are_watched(api: httpx.Client, widgets: str, group: str) -> None:
    first = api.post(widgets, json=widget(group, "w1")).json()
    rv = first["metadata"]["resourceVersion"]
    api.post(widgets, json=widget(group, "w2"))
    api.delete(f"{widgets}/w1")
    events = list(watch_events(api, widgets, count=2, resourceVersion=rv))
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "w2"), ("DELETED", "w1")]
    assert all(e["object"]["apiVersion"] == f"{group}/v1" for e in events)


def test_several_versions_share_one_storage_version(api: httpx.Client, group: str) -> None:
    versions = [{"name": "v1beta1", "served": True, "storage": False, "schema": copy.deepcopy(SCHEMA)},
                {"name": "v1", "served": True, "storage": True, "schema": copy.deepcopy(SCHEMA)}]
    crd = definition(group, versions=versions)
    assert api.post(CRDS, json=crd).status_code == 201
    established(api, crd["metadata"]["name"])
    old = f"/apis/{group}/v1beta1/namespaces/default/widgets"
    new = f"/apis/{group}/v1/namespaces/default/widgets"
    made = api.post(old, json={**widget(group, "x", size=1), "apiVersion": f"{group}/v1beta1"})
    assert made.status_code == 201, made.text
    assert made.json()["apiVersion"] == f"{group}/v1beta1"
    assert api.get(f"{new}/x").json()["apiVersion"] == f"{group}/v1"
    assert api.get(old).json()["items"][0]["apiVersion"] == f"{group}/v1beta1"
    events = list(watch_events(api, old, count=1))
    assert events[0]["object"]["apiVersion"] == f"{group}/v1beta1"
    api.delete(f"{CRDS}/{crd['metadata']['name']}")


def test_deleting_a_definition_deletes_its_objects_and_stops_serving(api: httpx.Client, group: str) -> None:
    crd = definition(group, scope="Cluster")
    name = crd["metadata"]["name"]
    assert api.post(CRDS, json=crd).status_code == 201
    established(api, name)
    path = f"/apis/{group}/v1/widgets"
    for i in range(3):
        assert api.post(path, json=widget(group, f"c{i}")).status_code == 201
    held = api.post(path, json={**widget(group, "held"), "metadata": {"name": "held", "finalizers": ["x/y"]}})
    assert held.status_code == 201
    deleted = api.delete(f"{CRDS}/{name}")
    assert deleted.status_code == 200
    assert "customresourcecleanup.apiextensions.k8s.io" in deleted.json()["metadata"]["finalizers"]
    # Objects with finalizers of their own hold the definition; no new objects meanwhile.
    wait_for("the other objects gone", lambda: [i["metadata"]["name"] for i in api.get(path).json()["items"]]
             == ["held"])
    assert_status(api.post(path, json=widget(group, "late")), 405, "MethodNotAllowed",
                  "create not allowed while custom resource definition is terminating")
    terminating = {c["type"]: c for c in api.get(f"{CRDS}/{name}").json()["status"]["conditions"]}["Terminating"]
    assert terminating["status"] == "True"
    api.patch(f"{path}/held", content=json.dumps({"metadata": {"finalizers": None}}),
              headers={"Content-Type": "application/merge-patch+json"})
    wait_for("the definition gone", lambda: api.get(f"{CRDS}/{name}").status_code == 404)
    wait_for("the endpoint gone", lambda: api.get(path).status_code == 404)
    assert group not in {g["name"] for g in api.get("/apis").json()["groups"]}


# --- the real kubectl and the Python client ----------------------------------------------------------------

def test_kubectl_applies_gets_and_deletes_custom_objects(api: httpx.Client, kubectl: Kubectl, group: str,
                                                         tmp_path: Any) -> None:
    crd = definition(group, short_names=["wg"])
    (tmp_path / "crd.json").write_text(json.dumps(crd))
    kubectl.ok("apply", "-f", str(tmp_path / "crd.json"))
    kubectl.ok("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}", "--timeout=60s")
    cr = f"apiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: k1\nspec:\n  size: 3\n"
    (tmp_path / "cr.yaml").write_text(cr)
    assert f"widget.{group}/k1 created" in kubectl.ok("apply", "-f", str(tmp_path / "cr.yaml"))
    assert "unchanged" in kubectl.ok("apply", "-f", str(tmp_path / "cr.yaml"))
    for name in ("widgets", "wg", "widget", "Widget", f"widgets.{group}"):
        out = kubectl.ok("get", name)
        assert out.splitlines()[0].split() == ["NAME", "AGE"] and out.splitlines()[1].startswith("k1 ")
    assert "widgets" in kubectl.ok("api-resources", f"--api-group={group}")
    assert kubectl.ok("get", "crd", crd["metadata"]["name"]).splitlines()[0].split() == ["NAME", "CREATED", "AT"]
    assert f'widget.{group} "k1" deleted' in kubectl.ok("delete", "-f", str(tmp_path / "cr.yaml"))
    kubectl.ok("delete", "-f", str(tmp_path / "crd.json"))
    wait_for("the definition gone", lambda: api.get(f"{CRDS}/{crd['metadata']['name']}").status_code == 404)


def test_the_python_client_drives_definitions_and_custom_objects(apiserver: str, group: str) -> None:
    with client.ApiClient(client.Configuration(host=apiserver)) as api_client:
        ext = client.ApiextensionsV1Api(api_client)
        objects = client.CustomObjectsApi(api_client)
        crd = definition(group)
        ext.create_custom_resource_definition(crd)
        name = crd["metadata"]["name"]
        wait_for("Established", lambda: any(c.type == "Established" and c.status == "True" for c in
                                            ext.read_custom_resource_definition(name).status.conditions or []))
        read = ext.read_custom_resource_definition(name)
        assert read.spec.names.list_kind == "WidgetList" and read.status.stored_versions == ["v1"]
        objects.create_namespaced_custom_object(group, "v1", "default", "widgets", widget(group, "p1", size=1))
        got = objects.get_namespaced_custom_object(group, "v1", "default", "widgets", "p1")
        assert got["spec"] == {"size": 1}
        objects.patch_namespaced_custom_object(group, "v1", "default", "widgets", "p1", {"spec": {"size": 4}})
        listed = objects.list_namespaced_custom_object(group, "v1", "default", "widgets")
        assert [(i["metadata"]["name"], i["spec"]["size"]) for i in listed["items"]] == [("p1", 4)]
        objects.patch_namespaced_custom_object_status(group, "v1", "default", "widgets", "p1",
                                                      {"status": {"phase": "Ready"}})
        assert objects.get_namespaced_custom_object_status(group, "v1", "default", "widgets", "p1")[
            "status"] == {"phase": "Ready"}
        objects.delete_namespaced_custom_object(group, "v1", "default", "widgets", "p1")
        with pytest.raises(client.ApiException) as raised:
            objects.get_namespaced_custom_object(group, "v1", "default", "widgets", "p1")
        assert raised.value.status == 404
        assert json.loads(raised.value.body)["message"] == f'widgets.{group} "p1" not found'
        ext.delete_custom_resource_definition(name)


# --- structural schemas ------------------------------------------------------------------------------------

RICH = {"openAPIV3Schema": {"type": "object", "properties": {
    "spec": {"type": "object", "required": ["size"], "properties": {
        "size": {"type": "integer", "minimum": 1, "maximum": 10},
        "color": {"type": "string", "enum": ["red", "green"], "default": "red"},
        "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
        "port": {"x-kubernetes-int-or-string": True},
        "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
        "note": {"type": "string", "nullable": True},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                     "x-kubernetes-preserve-unknown-fields": True}}},
    "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}}


@pytest.fixture
def gadgets(api: httpx.Client, group: str) -> Iterator[str]:
    crd = definition(group, kind="Gadget", plural="gadgets",
                     versions=[{"name": "v1", "served": True, "storage": True, "schema": copy.deepcopy(RICH)}])
    created = api.post(CRDS, json=crd)
    assert created.status_code == 201, created.text
    established(api, crd["metadata"]["name"])
    yield f"/apis/{group}/v1/namespaces/default/gadgets"
    api.delete(f"{CRDS}/{crd['metadata']['name']}")


@pytest.mark.parametrize(("spec", "message"), [
    pytest.param({"size": "big"}, 'spec.size: Invalid value: "string": spec.size in body must be of type integer: '
                                  '"string"', id="type"),
    pytest.param({}, "spec.size: Required value", id="required"),
    pytest.param({"size": 0}, "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1",
                 id="minimum"),
    pytest.param({"size": 11}, "spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10",
                 id="maximum"),
    pytest.param({"size": 1, "color": "blue"}, 'spec.color: Unsupported value: "blue": supported values: "red", '
                                               '"green"', id="enum"),
    pytest.param({"size": 1, "name": "A1"}, "spec.name: Invalid value: \"A1\": spec.name in body should match "
                                            "'^[a-z]+$'", id="pattern"),
    pytest.param({"size": 1, "name": "abcdef"}, 'spec.name: Too long: may not be more than 5 bytes', id="maxLength"),
    pytest.param({"size": 1, "port": True}, 'spec.port: Invalid value: "boolean": spec.port in body must be of type '
                                            'integer,string: "boolean"', id="int-or-string"),
    pytest.param({"size": 1, "tags": ["a", "b", "c"]}, "spec.tags: Too many: 3: must have at most 2 items",
                 id="maxItems"),
    pytest.param({"size": 1, "template": {"metadata": {"name": "x"}}},
                 "spec.template.apiVersion: Required value: must not be empty", id="embedded resource"),
])
def test_custom_objects_are_validated_against_their_schema(api: httpx.Client, gadgets: str, group: str,
                                                           spec: dict[str, Any], message: str) -> None:
    body = {"apiVersion": f"{group}/v1", "kind": "Gadget", "metadata": {"name": "bad"}, "spec": spec}
    status = assert_status(api.post(gadgets, json=body), 422, "Invalid")
    assert status["message"].startswith(f'Gadget.{group} "bad" is invalid: ')
    assert message in status["message"]
    assert api.get(f"{gadgets}/bad").status_code == 404


def test_custom_objects_are_pruned_and_defaulted(api: httpx.Client, gadgets: str, group: str) -> None:
    body = {"apiVersion": f"{group}/v1", "kind": "Gadget", "metadata": {"name": "ok"}, "extra": 1,
            "spec": {"size": 2, "port": "http", "note": None, "unknown": True, "free": {"any": {"thing": 1}},
                     "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}}}
    created = api.post(gadgets, json=body)
    assert created.status_code == 201, created.text
    assert created.headers.get_list("warning") == ['299 - "unknown field \\"extra\\""',
                                                   '299 - "unknown field \\"spec.unknown\\""']
    spec = created.json()["spec"]
    assert "extra" not in created.json() and "unknown" not in spec
    assert spec["color"] == "red" and spec["free"] == {"any": {"thing": 1}} and spec["note"] is None
    assert spec["template"]["metadata"] == {"name": "p"}
    strict = api.post(gadgets, params={"fieldValidation": "Strict"}, json={**body, "metadata": {"name": "ok2"}})
    assert_status(strict, 400, "BadRequest")
    assert 'unknown field "spec.unknown"' in strict.json()["message"]


def test_additional_printer_columns_make_the_table(api: httpx.Client, kubectl: Kubectl, group: str) -> None:
    columns = [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
               {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1},
               {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
               {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    schema = copy.deepcopy(SCHEMA)
    schema["openAPIV3Schema"]["properties"]["status"]["x-kubernetes-preserve-unknown-fields"] = True
    crd = definition(group, versions=[{"name": "v1", "served": True, "storage": True, "schema": schema,
                                       "subresources": {"status": {}}, "additionalPrinterColumns": columns}])
    assert api.post(CRDS, json=crd).status_code == 201
    established(api, crd["metadata"]["name"])
    path = f"/apis/{group}/v1/namespaces/default/widgets"
    api.post(path, json=widget(group, "t1", size=3, color="red"))
    api.patch(f"{path}/t1/status", content=json.dumps({"status": {"conditions": [
        {"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]}}),
        headers={"Content-Type": "application/merge-patch+json"})
    api.post(path, json=widget(group, "t2"))
    table = api.get(path, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}).json()
    assert [(c["name"], c["type"], c["priority"]) for c in table["columnDefinitions"]] == [
        ("Name", "string", 0), ("Size", "integer", 0), ("Color", "string", 1), ("Ready", "string", 0),
        ("Age", "date", 0)]
    cells = {r["cells"][0]: r["cells"][1:4] for r in table["rows"]}
    assert cells == {"t1": [3, "red", "True"], "t2": [None, None, None]}
    # Fully qualified: the module's kubectl cache knows other tests' (deleted) widgets groups.
    lines = [line.split() for line in kubectl.ok("get", f"widgets.{group}", "-o", "wide").splitlines()]
    assert lines[0] == ["NAME", "SIZE", "COLOR", "READY", "AGE"]
    assert lines[1][:4] == ["t1", "3", "red", "True"] and lines[2][0] == "t2"
    assert kubectl.ok("get", f"widgets.{group}").splitlines()[0].split() == ["NAME", "SIZE", "READY", "AGE"]
    api.delete(f"{CRDS}/{crd['metadata']['name']}")


def test_kubectl_explains_definitions_and_custom_kinds(api: httpx.Client, kubectl: Kubectl, group: str) -> None:
    out = kubectl.ok("explain", "crd.spec.names")
    assert out.startswith("GROUP:      apiextensions.k8s.io\nKIND:       CustomResourceDefinition\nVERSION:    v1\n")
    assert "  kind\t<string> -required-\n" in out and "  shortNames\t<[]string>\n" in out
    schema = copy.deepcopy(SCHEMA)
    schema["openAPIV3Schema"]["properties"]["spec"]["description"] = "What a widget should be."
    schema["openAPIV3Schema"]["properties"]["spec"]["required"] = ["size"]
    crd = definition(group, versions=[{"name": "v1", "served": True, "storage": True, "schema": schema}])
    assert api.post(CRDS, json=crd).status_code == 201
    established(api, crd["metadata"]["name"])
    out = kubectl.ok("explain", "widgets.spec", f"--api-version={group}/v1")
    assert out.startswith(f"GROUP:      {group}\nKIND:       Widget\nVERSION:    v1\n\nFIELD: spec <Object>\n")
    assert "What a widget should be." in out and "  size\t<integer> -required-\n" in out
    assert "  metadata\t<ObjectMeta>" in kubectl.ok("explain", "widgets", f"--api-version={group}/v1")
    api.delete(f"{CRDS}/{crd['metadata']['name']}")


def test_a_changed_schema_applies_to_the_next_write(api: httpx.Client, gadgets: str, group: str) -> None:
    name = f"gadgets.{group}"
    assert api.post(gadgets, json={"apiVersion": f"{group}/v1", "kind": "Gadget", "metadata": {"name": "g"},
                                   "spec": {"size": 10}}).status_code == 201
    crd = api.get(f"{CRDS}/{name}").json()
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"][
        "maximum"] = 20
    updated = api.put(f"{CRDS}/{name}", json=crd)
    assert updated.status_code == 200, updated.text
    assert updated.json()["metadata"]["generation"] == 2

    def accepted() -> bool:
        resp = api.patch(f"{gadgets}/g", content=json.dumps({"spec": {"size": 15}}),
                         headers={"Content-Type": "application/merge-patch+json"})
        return resp.status_code == 200
    wait_for("the new maximum", accepted)


def test_a_definition_with_an_unknown_field_is_refused_when_strict(api: httpx.Client) -> None:
    body = _with(GOOD, True, "spec", "bogus")
    resp = api.post(CRDS, params={"fieldValidation": "Strict"}, json=body)
    status = assert_status(resp, 400, "BadRequest")
    assert 'unknown field "spec.bogus"' in status["message"]


def test_kubectl_scales_a_custom_object(api: httpx.Client, kubectl: Kubectl, group: str) -> None:
    schema = copy.deepcopy(SCHEMA)
    schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"] = {"type": "integer", "minimum": 0}
    schema["openAPIV3Schema"]["properties"]["status"]["properties"].update(
        {"replicas": {"type": "integer"}, "selector": {"type": "string"}})
    scale = {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
             "labelSelectorPath": ".status.selector"}
    crd = definition(group, versions=[{"name": "v1", "served": True, "storage": True, "schema": schema,
                                       "subresources": {"status": {}, "scale": scale}}])
    assert api.post(CRDS, json=crd).status_code == 201
    established(api, crd["metadata"]["name"])
    path = f"/apis/{group}/v1/namespaces/default/widgets"
    api.post(path, json=widget(group, "s1", replicas=1))
    api.patch(f"{path}/s1/status", content=json.dumps({"status": {"replicas": 1, "selector": "app=s1"}}),
              headers={"Content-Type": "application/merge-patch+json"})
    got = api.get(f"{path}/s1/scale").json()
    assert (got["kind"], got["apiVersion"], got["spec"], got["status"]) == (
        "Scale", "autoscaling/v1", {"replicas": 1}, {"replicas": 1, "selector": "app=s1"})
    assert f"widget.{group}/s1 scaled" in kubectl.ok("scale", f"widgets.{group}/s1", "--replicas=4")
    after = api.get(f"{path}/s1").json()
    assert after["spec"]["replicas"] == 4 and after["status"]["replicas"] == 1
    assert after["metadata"]["generation"] == 2
    refused = api.patch(f"{path}/s1/scale", content=json.dumps({"spec": {"replicas": -1}}),
                        headers={"Content-Type": "application/merge-patch+json"})
    assert refused.status_code == 422
    api.delete(f"{CRDS}/{crd['metadata']['name']}")


# --- hostile input -------------------------------------------------------------------------------------------

HOSTILE: list[Any] = [None, 0, -1, 1.5, True, "", "x", "\u0000", "UPPER", [], [1], ["a", "a"], {}, {"a": 1},
                      [{"name": []}], {"type": []}, "a" * 300]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, (*prefix, i))


def _replaced(body: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    body = copy.deepcopy(body)
    target = body
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return body


def test_hostile_definitions_and_objects_never_get_a_5xx(api: httpx.Client, gadgets: str, group: str) -> None:
    """Every node of a good definition, and of a good custom object, replaced by each hostile value: a Status
    every time, never a 5xx; what is accepted is deleted again."""
    good = definition(f"hostile.{group}")
    tried = 0
    for path in list(_paths(good))[1:]:
        if path[0] in ("apiVersion", "kind"):
            continue
        for value in HOSTILE:
            body = _replaced(good, path, value)
            resp = api.post(CRDS, json=body)
            tried += 1
            assert resp.status_code < 500, (path, value, resp.text)
            assert resp.json()["kind"] in ("Status", "CustomResourceDefinition"), (path, value)
            if resp.status_code == 201:
                api.delete(f"{CRDS}/{resp.json()['metadata']['name']}")
    obj = {"apiVersion": f"{group}/v1", "kind": "Gadget", "metadata": {"name": "h"},
           "spec": {"size": 2, "color": "red", "name": "abc", "port": 80, "tags": ["a"], "note": "n",
                    "free": {"a": {"b": 1}}, "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {}}}}
    for path in list(_paths(obj))[1:]:
        for value in HOSTILE:
            resp = api.post(gadgets, json=_replaced(obj, path, value))
            tried += 1
            assert resp.status_code < 500, (path, value, resp.text)
            if resp.status_code == 201:
                api.delete(f"{gadgets}/{resp.json()['metadata']['name']}")
    assert tried > 500
