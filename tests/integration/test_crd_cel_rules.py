"""x-kubernetes-validations CEL rules on CustomResourceDefinitions, against a real API server and etcd, through
httpx, the real kubectl and the official Python client: rules compiled when the definition is written (a rule
that does not compile is refused in kube's words), every rule run on each write of a custom object with kube's
422 Status (`spec: Invalid value: "object": <message>`), message, messageExpression, reason and fieldPath,
transition rules (oldSelf) on update only and optionalOldSelf, and hostile objects and rules answered with a
Status, never a 5xx, the stored object unchanged."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from apitools import assert_status, unique_name
from kubectltools import Kubectl, wait_for
from kubernetes import client
from kubernetes.client.rest import ApiException

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

SPEC_RULES = [
    {"rule": "self.replicas <= self.maxReplicas", "message": "replicas must not exceed maxReplicas"},
    {"rule": "self.replicas >= oldSelf.replicas",
     "messageExpression": "'replicas may not shrink from ' + string(oldSelf.replicas) + ' to ' + "
                          "string(self.replicas)"},
    {"rule": "!has(self.mode) || self.mode.lowerAscii() == self.mode", "reason": "FieldValueForbidden",
     "fieldPath": ".mode", "message": "mode must be lower case"},
    {"rule": "has(self.owner) || self.replicas < 3", "reason": "FieldValueRequired", "fieldPath": ".owner",
     "message": "an owner is needed from 3 replicas"},
    {"rule": "!has(self.tags) || self.tags.size() == self.tags.map(t, t).filter(t, self.tags.exists_one(u, u == t))"
             ".size()", "reason": "FieldValueDuplicate", "fieldPath": ".tags"},
]
SCHEMA: dict[str, Any] = {"openAPIV3Schema": {
    "type": "object",
    "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('w')",
                                  "message": "names start with w"}],
    "properties": {
        "spec": {
            "type": "object",
            "x-kubernetes-validations": SPEC_RULES,
            "properties": {
                "replicas": {"type": "integer"},
                "maxReplicas": {"type": "integer"},
                "mode": {"type": "string", "x-kubernetes-validations": [
                    {"rule": "oldSelf.hasValue() || self == 'init'", "optionalOldSelf": True,
                     "message": "a new widget starts in mode init"}]},
                "owner": {"type": "string"},
                "host": {"type": "string", "x-kubernetes-validations": [
                    {"rule": "self.matches('^[a-z0-9.-]+$') && self.split('.').size() >= 2",
                     "messageExpression": "'host ' + self + ' is not a domain name'"}]},
                "ports": {"type": "array", "items": {"type": "integer"},
                          "x-kubernetes-validations": [{"rule": "self.isSorted()", "message": "ports are sorted"},
                                                       {"rule": "self.sum() < 70000"}]},
                "ratio": {"type": "number", "x-kubernetes-validations": [{"rule": "self <= 1.0"}]},
                "timeout": {"type": "string", "format": "duration",
                            "x-kubernetes-validations": [{"rule": "self <= duration('1h')"}]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "limits": {"type": "object", "additionalProperties": {
                    "type": "integer", "x-kubernetes-validations": [{"rule": "self > 0"}]}},
                "rules": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "required": ["name"], "properties": {
                              "name": {"type": "string"}, "weight": {"type": "integer"}},
                              "x-kubernetes-validations": [{"rule": "self.weight >= oldSelf.weight",
                                                            "message": "a rule's weight only grows"}]}},
                "items": {"type": "array", "items": {"type": "integer"}},
            },
        },
    },
}}


def definition(group: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"widgets.{group}"},
            "spec": {"group": group, "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": copy.deepcopy(schema or SCHEMA)}]}}


def established(api: httpx.Client, name: str) -> None:
    def check() -> bool | None:
        crd = api.get(f"{CRDS}/{name}").json()
        conditions = {c["type"]: c for c in crd.get("status", {}).get("conditions") or []}
        return True if conditions.get("Established", {}).get("status") == "True" else None
    wait_for(f"{name} Established", check)


@pytest.fixture
def group() -> str:
    return f"{unique_name('cel')}.example.com"


@pytest.fixture
def widgets(api: httpx.Client, group: str) -> Iterator[str]:
    crd = definition(group)
    created = api.post(CRDS, json=crd)
    assert created.status_code == 201, created.text
    established(api, crd["metadata"]["name"])
    yield f"/apis/{group}/v1/namespaces/default/widgets"
    api.delete(f"{CRDS}/{crd['metadata']['name']}")


def widget(group: str, name: str = "w1", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": name},
            "spec": {"replicas": 1, "maxReplicas": 5, "mode": "init", **spec}}


# --- objects -----------------------------------------------------------------------------------------------

def test_a_valid_object_passes_every_rule(api: httpx.Client, widgets: str, group: str) -> None:
    body = widget(group, host="example.com", ports=[80, 443], ratio=0.5, timeout="30m", tags=["a", "b"],
                  limits={"cpu": 2}, rules=[{"name": "r", "weight": 1}])
    created = api.post(widgets, json=body)
    assert created.status_code == 201, created.text
    assert created.json()["spec"]["ports"] == [80, 443]


@pytest.mark.parametrize(("spec", "name", "message"), [
    pytest.param({"replicas": 7}, "w1", 'spec: Invalid value: "object": replicas must not exceed maxReplicas',
                 id="message"),
    pytest.param({}, "x1", '<nil>: Invalid value: "object": names start with w', id="root rule"),
    pytest.param({"host": "Nope"}, "w1", 'spec.host: Invalid value: "string": host Nope is not a domain name',
                 id="messageExpression"),
    pytest.param({"mode": "Init"}, "w1", "spec.mode: Forbidden: mode must be lower case",
                 id="reason Forbidden and fieldPath"),
    pytest.param({"replicas": 3}, "w1", "spec.owner: Required value: an owner is needed from 3 replicas",
                 id="reason Required"),
    pytest.param({"tags": ["a", "a"]}, "w1", 'spec.tags: Duplicate value: "object"', id="reason Duplicate"),
    pytest.param({"ports": [443, 80]}, "w1", 'spec.ports: Invalid value: "array": ports are sorted',
                 id="lists isSorted"),
    pytest.param({"ports": [40000, 40001]}, "w1", 'spec.ports: Invalid value: "array": failed rule: '
                                                  "self.sum() < 70000", id="lists sum"),
    pytest.param({"ratio": 2}, "w1", 'spec.ratio: Invalid value: "number": failed rule: self <= 1.0',
                 id="number as double"),
    pytest.param({"timeout": "2h"}, "w1", 'spec.timeout: Invalid value: "string": failed rule: '
                                          "self <= duration('1h')", id="duration format"),
    pytest.param({"limits": {"cpu": 0}}, "w1", 'spec.limits[cpu]: Invalid value: "integer": failed rule: self > 0',
                 id="additionalProperties"),
    pytest.param({"mode": "run"}, "w1", 'spec.mode: Invalid value: "string": a new widget starts in mode init',
                 id="optionalOldSelf on create"),
])
def test_an_object_breaking_a_rule_is_refused_in_kubes_words(api: httpx.Client, widgets: str, group: str,
                                                             spec: dict[str, Any], name: str, message: str) -> None:
    status = assert_status(api.post(widgets, json=widget(group, name, **spec)), 422, "Invalid")
    assert status["message"].startswith(f'Widget.{group} "{name}" is invalid: '), status["message"]
    assert message in status["message"], status["message"]
    field, _, body = message.partition(": ")
    assert {"field": field, "message": body} in [{k: c[k] for k in ("field", "message")}
                                                 for c in status["details"]["causes"]], status
    assert api.get(f"{widgets}/{name}").status_code == 404


def test_a_rule_that_errs_says_so(api: httpx.Client, group: str) -> None:
    schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"a": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "self.a > 0"}, {"rule": "1 / (self.a - self.a) == 1"}]}}}}
    crd = definition(group, schema)
    assert api.post(CRDS, json=crd).status_code == 201
    try:
        established(api, crd["metadata"]["name"])
        path = f"/apis/{group}/v1/namespaces/default/widgets"
        body = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}}
        status = assert_status(api.post(path, json=body), 422, "Invalid")
        assert 'spec: Invalid value: "object": no such key: a evaluating rule: self.a > 0' in status["message"]
        body["spec"] = {"a": 2}
        status = assert_status(api.post(path, json=body), 422, "Invalid")
        assert ('spec: Invalid value: "object": division by zero evaluating rule: 1 / (self.a - self.a) == 1'
                in status["message"]), status["message"]
    finally:
        api.delete(f"{CRDS}/{crd['metadata']['name']}")


def test_transition_rules_run_on_update_only(api: httpx.Client, widgets: str, group: str) -> None:
    body = widget(group, replicas=4, owner="me", rules=[{"name": "a", "weight": 5}])
    created = api.post(widgets, json=body)
    assert created.status_code == 201, created.text  # oldSelf rules do not run on create
    stored = created.json()
    shrunk = copy.deepcopy(stored)
    shrunk["spec"]["replicas"] = 2
    status = assert_status(api.put(f"{widgets}/w1", json=shrunk), 422, "Invalid")
    assert 'spec: Invalid value: "object": replicas may not shrink from 4 to 2' in status["message"]
    lighter = copy.deepcopy(stored)
    lighter["spec"]["rules"] = [{"name": "a", "weight": 1}, {"name": "b", "weight": 0}]
    status = assert_status(api.put(f"{widgets}/w1", json=lighter), 422, "Invalid")
    # The map-type list's item is matched by its key; the new item "b" has no old value, so no error for it.
    assert "spec.rules[0]: Invalid value: \"object\": a rule's weight only grows" in status["message"]
    assert "spec.rules[1]" not in status["message"]
    assert api.get(f"{widgets}/w1").json()["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    # optionalOldSelf: on update oldSelf has a value, so a widget may leave mode init.
    grown = copy.deepcopy(stored)
    grown["spec"].update(replicas=5, mode="run")
    updated = api.put(f"{widgets}/w1", json=grown)
    assert updated.status_code == 200, updated.text
    patched = api.patch(f"{widgets}/w1", json={"spec": {"replicas": 1}},
                        headers={"Content-Type": "application/merge-patch+json"})
    status = assert_status(patched, 422, "Invalid")
    assert "replicas may not shrink from 5 to 1" in status["message"]


def test_a_rule_added_later_ratchets_values_the_update_leaves_alone(api: httpx.Client, widgets: str,
                                                                     group: str) -> None:
    """CRDValidationRatcheting (on by default since 1.30): an unchanged value may keep failing a new rule."""
    stored = api.post(widgets, json=widget(group, owner="me", host="a.example")).json()
    crd = api.get(f"{CRDS}/widgets.{group}").json()
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["owner"][
        "x-kubernetes-validations"] = [{"rule": "self.startsWith('team-')", "message": "owners are teams"}]
    assert api.put(f"{CRDS}/widgets.{group}", json=crd).status_code == 200

    def refused() -> dict[str, Any] | None:
        answer = api.post(widgets, json=widget(group, "w2", owner="me"))
        return answer.json() if answer.status_code == 422 else None
    status = wait_for("the new rule", refused)
    assert 'spec.owner: Invalid value: "string": owners are teams' in status["message"]
    relabelled = copy.deepcopy(stored)
    relabelled["metadata"]["labels"] = {"a": "b"}
    relabelled["spec"]["host"] = "b.example"
    answer = api.put(f"{widgets}/w1", json=relabelled)
    assert answer.status_code == 200, answer.text  # spec.owner unchanged: ratcheted
    changed = answer.json()
    changed["spec"]["owner"] = "you"
    status = assert_status(api.put(f"{widgets}/w1", json=changed), 422, "Invalid")
    assert 'spec.owner: Invalid value: "string": owners are teams' in status["message"]


# --- the definition ----------------------------------------------------------------------------------------

ROOT = "spec.versions[0].schema.openAPIV3Schema"


def _with_rules(rules: list[dict[str, Any]], *, node: str = "spec") -> dict[str, Any]:
    schema = copy.deepcopy(SCHEMA)
    if node == "spec":
        schema["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"] = rules
    else:
        schema["openAPIV3Schema"]["properties"]["spec"]["properties"][node]["x-kubernetes-validations"] = rules
    return schema


@pytest.mark.parametrize(("schema", "message"), [
    pytest.param(_with_rules([{"rule": "self.replicas >"}]),
                 f"{ROOT}.properties[spec].x-kubernetes-validations[0].rule: Invalid value: "
                 'apiextensions.ValidationRule{Rule:"self.replicas >", Message:"", MessageExpression:"", '
                 "Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: "
                 "compilation failed: ERROR: <input>:1:16: Syntax error: mismatched input '<EOF>' expecting",
                 id="syntax error"),
    pytest.param(_with_rules([{"rule": "self.replicas.frobnicate()"}]),
                 "compilation failed: ERROR: <input>:1:25: undeclared reference to 'frobnicate' (in container '')", id="undeclared"),
    pytest.param(_with_rules([{"rule": "self.size() > 'a'"}], node="host"),
                 f"{ROOT}.properties[spec].properties[host].x-kubernetes-validations[0].rule: Invalid value: "
                 "apiextensions.ValidationRule{Rule:\"self.size() > 'a'\"",
                 id="typed self"),
    pytest.param(_with_rules([{"rule": "self + 'x'"}], node="host"), "cel expression must evaluate to a bool",
                 id="not a bool"),
    pytest.param(_with_rules([{"rule": "self == 'a'", "messageExpression": "42"}], node="host"),
                 f"{ROOT}.properties[spec].properties[host].x-kubernetes-validations[0].messageExpression: Invalid "
                 "value: apiextensions.ValidationRule{Rule:\"self == 'a'\", Message:\"\", MessageExpression:\"42\"",
                 id="messageExpression not a string"),
    pytest.param(_with_rules([{"rule": "self == 'a'", "optionalOldSelf": True}], node="host"),
                 f"{ROOT}.properties[spec].properties[host].x-kubernetes-validations[0].optionalOldSelf: Invalid "
                 "value: true: may not be set if oldSelf is not used in rule", id="optionalOldSelf without oldSelf"),
    pytest.param(_with_rules([{"rule": "true", "reason": "FieldValueOther"}]),
                 f"{ROOT}.properties[spec].x-kubernetes-validations[0].reason: Unsupported value: \"FieldValueOther\": "
                 'supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", '
                 '"FieldValueRequired"', id="reason"),
    pytest.param(_with_rules([{"rule": "true", "fieldPath": ".nothere"}]),
                 f'{ROOT}.properties[spec].x-kubernetes-validations[0].fieldPath: Invalid value: ".nothere": '
                 "fieldPath must be a valid path", id="fieldPath"),
    pytest.param(_with_rules([{"rule": " "}]),
                 f"{ROOT}.properties[spec].x-kubernetes-validations[0].rule: Required value: rule is not specified",
                 id="empty rule"),
    pytest.param(_with_rules([{"rule": "true", "message": "two\nlines"}]),
                 f'{ROOT}.properties[spec].x-kubernetes-validations[0].message: Invalid value: "two\\nlines": '
                 "message must not contain line breaks", id="message line break"),
])
def test_a_rule_that_does_not_compile_refuses_the_definition(api: httpx.Client, group: str,
                                                             schema: dict[str, Any], message: str) -> None:
    crd = definition(group, schema)
    status = assert_status(api.post(CRDS, json=crd), 422, "Invalid")
    assert status["message"].startswith(f'CustomResourceDefinition.apiextensions.k8s.io "widgets.{group}" is '
                                         "invalid: "), status["message"]
    assert message in status["message"], status["message"]
    assert api.get(f"{CRDS}/widgets.{group}").status_code == 404


def test_oldself_under_an_atomic_list_is_refused(api: httpx.Client, group: str) -> None:
    schema = copy.deepcopy(SCHEMA)
    items = schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["items"]["items"]
    items["x-kubernetes-validations"] = [{"rule": "self >= oldSelf"}]
    status = assert_status(api.post(CRDS, json=definition(group, schema)), 422, "Invalid")
    assert (f'{ROOT}.properties[spec].properties[items].items.x-kubernetes-validations[0].rule: Invalid value: '
            '"self >= oldSelf": oldSelf cannot be used on the uncorrelatable portion of the schema within '
            f"{ROOT}.properties[spec].properties[items]") in status["message"], status["message"]


def test_a_definition_update_with_a_bad_rule_is_refused(api: httpx.Client, widgets: str, group: str) -> None:
    crd = api.get(f"{CRDS}/widgets.{group}").json()
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"] = [{"rule": "self.("}]
    status = assert_status(api.put(f"{CRDS}/widgets.{group}", json=crd), 422, "Invalid")
    assert f"{ROOT}.x-kubernetes-validations[0].rule: Invalid value: " in status["message"]
    assert "compilation failed: ERROR: <input>:1:6: Syntax error" in status["message"], status["message"]


# --- clients -----------------------------------------------------------------------------------------------

def test_kubectl_shows_the_rule_message(api: httpx.Client, kubectl: Kubectl, widgets: str, group: str,
                                        tmp_path: Any) -> None:
    manifest = tmp_path / "w.json"
    manifest.write_text(json.dumps(widget(group, replicas=9, owner="me")))
    result = kubectl("apply", "-f", str(manifest))
    assert result.returncode != 0
    assert ('The Widget "w1" is invalid: spec: Invalid value: "object": replicas must not exceed maxReplicas'
            in result.stderr), result.stderr
    manifest.write_text(json.dumps(widget(group, replicas=2)))
    kubectl.ok("apply", "-f", str(manifest))
    assert api.get(f"{widgets}/w1").json()["spec"]["replicas"] == 2


def test_the_python_client_gets_the_422(apiserver: str, widgets: str, group: str) -> None:
    with client.ApiClient(client.Configuration(host=apiserver)) as api_client:
        custom = client.CustomObjectsApi(api_client)
        with pytest.raises(ApiException) as raised:
            custom.create_namespaced_custom_object(group, "v1", "default", "widgets",
                                                   widget(group, host="bad host"))
        assert raised.value.status == 422
        status = json.loads(raised.value.body)
        assert status["details"]["causes"][0] == {"reason": "FieldValueInvalid", "field": "spec.host",
                                                  "message": 'Invalid value: "string": host bad host is not a '
                                                             "domain name"}
        created = custom.create_namespaced_custom_object(group, "v1", "default", "widgets",
                                                         widget(group, host="a.example"))
        assert created["spec"]["host"] == "a.example"


# --- hostile input -----------------------------------------------------------------------------------------

def test_a_rule_over_its_iteration_budget_is_refused_with_kubes_cost_words(api: httpx.Client, group: str) -> None:
    schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"items": {"type": "array", "items": {"type": "integer"}}},
        "x-kubernetes-validations": [{"rule": "self.items.all(x, self.items.all(y, x == y || x != y))"},
                                     {"rule": "self.items.size() < 100000"}]}}}}
    crd = definition(group, schema)
    assert api.post(CRDS, json=crd).status_code == 201
    try:
        established(api, crd["metadata"]["name"])
        path = f"/apis/{group}/v1/namespaces/default/widgets"
        body = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"},
                "spec": {"items": list(range(50))}}
        assert api.post(path, json=body).status_code == 201
        body["metadata"]["name"] = "w2"
        body["spec"]["items"] = list(range(1000))  # 1,000,000 iterations
        status = assert_status(api.post(path, json=body), 422, "Invalid")
        assert ("spec: Invalid value: \"object\": 'operation cancelled: actual cost limit exceeded': no further "
                "validation rules will be run due to call cost exceeds limit for rule: "
                "self.items.all(x, self.items.all(y, x == y || x != y))") in status["message"], status["message"]
        assert api.get(f"{path}/w2").status_code == 404
    finally:
        api.delete(f"{CRDS}/{crd['metadata']['name']}")


@pytest.fixture
def patient(apiserver: str) -> Iterator[httpx.Client]:
    """A client that waits for big bodies on a loaded machine (the answer is asserted, never its time)."""
    with httpx.Client(base_url=apiserver, timeout=180) as slow:
        yield slow


def test_an_object_with_more_rule_evaluations_than_the_budget_is_refused(patient: httpx.Client, widgets: str,
                                                                         group: str) -> None:
    api = patient
    limits = {f"k{i}": 1 for i in range(12_000)}
    status = assert_status(api.post(widgets, json=widget(group, limits=limits)), 422, "Invalid")
    assert ("validation failed due to running out of cost budget, no further validation rules will be run"
            in status["message"]), status["message"]
    few = {f"k{i}": 1 for i in range(2_000)}
    assert api.post(widgets, json=widget(group, limits=few)).status_code == 201


HOSTILE_VALUES: list[Any] = [None, True, 0, -1, 2**63 - 1, -(2**63), 1.5, 1e308, "", "x" * 100_000, "é\u0000☃",
                             [], [None], [1, "a"], {}, {"a": {"b": {"c": []}}}, "(a+)+$", "1h", "-1.5h", "99999999h"]


def _hostile_specs(seed: int) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    fields = list(SCHEMA["openAPIV3Schema"]["properties"]["spec"]["properties"])
    for name in fields:
        for value in HOSTILE_VALUES:
            yield {name: value}
    for _ in range(120):
        yield {rng.choice(fields): rng.choice(HOSTILE_VALUES) for _ in range(rng.randint(1, 5))}
    yield {"host": "a" * 50_000 + "!"}  # RE2: linear
    yield {"ports": list(range(50_000))}
    yield {"rules": [{"name": str(i), "weight": i} for i in range(3_000)]}
    yield {"limits": {str(i): -i for i in range(3_000)}}


def test_hostile_objects_never_get_a_5xx(patient: httpx.Client, widgets: str, group: str) -> None:
    api = patient
    created = api.post(widgets, json=widget(group, "wbase", owner="o", rules=[{"name": "a", "weight": 1}]))
    assert created.status_code == 201, created.text
    stored = created.json()
    tried = 0
    for i, spec in enumerate(_hostile_specs(23)):
        body = widget(group, f"w{i}", **spec)
        answer = api.post(widgets, json=body)
        assert answer.status_code in (201, 400, 413, 422), (spec, answer.status_code, answer.text[:400])
        if answer.status_code != 201:
            assert answer.json()["kind"] == "Status"
        update = copy.deepcopy(stored)
        update["spec"].update(spec)
        answer = api.put(f"{widgets}/wbase", json=update)
        assert answer.status_code in (200, 400, 409, 413, 422), (spec, answer.status_code, answer.text[:400])
        if answer.status_code == 200:
            stored = answer.json()
        tried += 2
    assert tried >= 600
    print(f"hostile writes: {tried}")
