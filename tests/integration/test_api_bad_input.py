"""Bad input gets a 4xx Status, never a 500, and stores nothing: every case checks the object is
absent afterwards (or unchanged, for updates)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from apitools import CORE, assert_status, create, names, ns_path, pod, service, unique_name

DNS1035 = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
           "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
           "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
DNS1123_SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                     "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                     "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
MIB = 1024 * 1024


def services_named(api: httpx.Client, name: str) -> set[str]:
    return names(api.get(ns_path("services")).json()["items"]) & {name}


def post_raw(api: httpx.Client, path: str, content: bytes | str, content_type: str) -> httpx.Response:
    return api.post(path, content=content, headers={"Content-Type": content_type})


# --- bodies that are not objects -----------------------------------------------------------------------

@pytest.mark.parametrize(("content", "content_type", "words"), [
    pytest.param(b'{"metadata": {"name": "x"', "application/json", "json parse error", id="truncated json"),
    pytest.param(b"{'metadata': 1}", "application/json", "json parse error", id="single quotes"),
    pytest.param(b"metadata: [unclosed\n", "application/yaml", "error converting YAML to JSON: yaml: ",
                 id="malformed yaml"),
    pytest.param(b"metadata:\n  name: a\n name: b\n", "application/yaml", "error converting YAML to JSON: yaml: ",
                 id="bad yaml indentation"),
    pytest.param(b"[1, 2]", "application/json", "", id="json list"),
    pytest.param(b'"hello"', "application/json", "", id="json string"),
    pytest.param(b"42", "application/json", "", id="json number"),
    pytest.param(b"null", "application/json", "", id="json null"),
    pytest.param(b"- a\n- b\n", "application/yaml", "", id="yaml list"),
    pytest.param(b"", "application/json", "", id="empty body"),
    pytest.param(b"[" * 100_000, "application/json", "", id="deeply nested json"),
    pytest.param(b"[" * 100_000, "application/yaml", "", id="deeply nested yaml"),
    pytest.param(b"a: " + b"{b: " * 10_000 + b"}" * 10_000, "application/yaml", "", id="deeply nested yaml map"),
])
def test_bodies_that_are_not_objects_are_bad_requests(api: httpx.Client, content: bytes, content_type: str,
                                                      words: str) -> None:
    before = api.get(ns_path("services")).json()["items"]
    resp = post_raw(api, ns_path("services"), content, content_type)
    status = assert_status(resp, 400, "BadRequest")
    assert words in status["message"]
    assert len(status["message"]) < 2000  # the body is summarised, never echoed whole
    assert names(api.get(ns_path("services")).json()["items"]) == names(before)


def test_yaml_alias_bomb_is_refused(api: httpx.Client) -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i, letter in enumerate("bcdefghi"):
        prev = "abcdefghi"[i]
        lines.append(f"{letter}: &{letter} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]")
    name = unique_name("bomb")
    text = f"apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  annotations: {{}}\n" + "\n".join(lines) + "\n"
    resp = post_raw(api, ns_path("services"), text, "application/yaml")
    status = assert_status(resp, 400, "BadRequest")
    assert "excessive aliasing" in status["message"]
    assert_status(api.get(ns_path("services", name=name)), 404, "NotFound")


def test_yaml_recursive_alias_is_refused(api: httpx.Client) -> None:
    name = unique_name("loop")
    text = f"metadata:\n  name: {name}\nspec:\n  ports: [{{port: 80}}]\nloop: &a [*a]\n"
    status = assert_status(post_raw(api, ns_path("services"), text, "application/yaml"), 400, "BadRequest")
    assert "recursive alias" in status["message"]
    assert_status(api.get(ns_path("services", name=name)), 404, "NotFound")


def test_deeply_nested_unknown_field_is_refused(api: httpx.Client) -> None:
    # Unknown fields are kept, so a valid object can carry any JSON: nesting is bounded at decode time
    # rather than failing later when the object is stored or streamed.
    name = unique_name("deep")
    body = service(name)
    body["spec"]["extra"] = [[[[[]]]]]
    inner = body["spec"]["extra"]
    for _ in range(300):
        inner.append([])
        inner = inner[-1]
    resp = api.post(ns_path("services"), json=body)
    status = assert_status(resp, 400, "BadRequest")
    assert "exceeded max depth" in status["message"]
    assert_status(api.get(ns_path("services", name=name)), 404, "NotFound")


def test_yaml_anchors_used_a_few_times_are_fine(api: httpx.Client) -> None:
    name = unique_name("anchors")
    text = (f"metadata:\n  name: {name}\n  labels: &labels {{app: web, tier: front}}\n"
            "spec:\n  selector: *labels\n  ports: [{port: 80}]\n")
    resp = post_raw(api, ns_path("services"), text, "application/yaml")
    assert resp.status_code == 201, resp.text
    assert resp.json()["spec"]["selector"] == {"app": "web", "tier": "front"}


def test_yaml_unquoted_timestamps_and_number_keys_read_as_strings(api: httpx.Client) -> None:
    # sigs.k8s.io/yaml's YAML-to-JSON: timestamps stay text, object keys become strings.
    name = unique_name("yamlish")
    text = (f"metadata:\n  name: {name}\n  creationTimestamp: 2024-01-01T00:00:00Z\n"
            "  labels:\n    1: one\nspec:\n  ports: [{port: 80}]\n")
    resp = post_raw(api, ns_path("services"), text, "application/yaml")
    assert resp.status_code == 201, resp.text
    assert resp.json()["metadata"]["labels"] == {"1": "one"}


def test_yaml_booleans_are_yaml_1_1(api: httpx.Client) -> None:
    # `yes` is a boolean in YAML 1.1 (go-yaml v2, as kube-apiserver reads YAML), so not a label value.
    name = unique_name("yes")
    text = f"metadata:\n  name: {name}\n  labels:\n    enabled: yes\nspec:\n  ports: [{{port: 80}}]\n"
    status = assert_status(post_raw(api, ns_path("services"), text, "application/yaml"), 400, "BadRequest")
    assert status["message"] == ('Service in version "v1" cannot be handled as a Service: json: cannot unmarshal '
                                 "bool into Go struct field ObjectMeta.metadata.labels of type string")
    assert_status(api.get(ns_path("services", name=name)), 404, "NotFound")


def test_unknown_content_type_is_unsupported_media_type(api: httpx.Client) -> None:
    name = unique_name("media")
    resp = post_raw(api, ns_path("services"), f"name: {name}", "text/plain")
    status = assert_status(resp, 415, "UnsupportedMediaType")
    assert status["message"] == ("the body of the request was in an unknown format - accepted media types include: "
                                 "application/json, application/yaml, application/vnd.kubernetes.protobuf")
    assert not services_named(api, name)


# --- objects of the wrong kind or place ------------------------------------------------------------------

def test_wrong_kind_for_the_url(api: httpx.Client) -> None:
    name = unique_name("wrongkind")
    resp = api.post(ns_path("services"), json=pod(name))
    # What decoding a v1 Pod into a Service says in kube-apiserver (transformDecodeError).
    assert_status(resp, 400, "BadRequest", 'Pod in version "v1" cannot be handled as a Service: converting '
                                           "(v1.Pod) to (core.Service): unknown conversion")
    assert_status(api.get(ns_path("services", name=name)), 404, "NotFound")
    assert_status(api.get(ns_path("pods", name=name)), 404, "NotFound")


def test_unknown_kind(api: httpx.Client) -> None:
    name = unique_name("widget")
    resp = api.post(ns_path("services"), json={"apiVersion": "v1", "kind": "Widget", "metadata": {"name": name}})
    status = assert_status(resp, 400, "BadRequest")
    assert status["message"].startswith('Widget in version "v1" cannot be handled as a Service: no kind "Widget" is '
                                        'registered for version "v1"')
    assert not services_named(api, name)


def test_wrong_api_version_for_the_url(api: httpx.Client) -> None:
    name = unique_name("wrongapi")
    body = {**service(name), "apiVersion": "discovery.k8s.io/v1"}
    resp = api.post(ns_path("services"), json=body)
    assert_status(resp, 400, "BadRequest")
    assert not services_named(api, name)


def test_namespace_mismatch_between_url_and_body(api: httpx.Client) -> None:
    name = unique_name("nsmismatch")
    body = service(name)
    body["metadata"]["namespace"] = "kube-system"
    resp = api.post(ns_path("services", "default"), json=body)
    assert_status(resp, 400, "BadRequest",
                  "the namespace of the provided object does not match the namespace sent on the request")
    assert not services_named(api, name)
    assert name not in names(api.get(ns_path("services", "kube-system")).json()["items"])


def test_namespace_mismatch_on_update(api: httpx.Client) -> None:
    name = unique_name("nsmismatch-put")
    created = create(api, ns_path("services"), service(name))
    body = {**created, "metadata": {**created["metadata"], "namespace": "kube-system", "labels": {"x": "y"}}}
    resp = api.put(ns_path("services", name=name), json=body)
    assert_status(resp, 400, "BadRequest",
                  "the namespace of the provided object does not match the namespace sent on the request")
    assert api.get(ns_path("services", name=name)).json() == created


# --- invalid objects -----------------------------------------------------------------------------------

def test_invalid_service_name(api: httpx.Client) -> None:
    resp = api.post(ns_path("services"), json=service("Bad_Name"))
    status = assert_status(resp, 422, "Invalid",
                           f'Service "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": {DNS1035}')
    assert status["details"] == {"name": "Bad_Name", "kind": "Service", "causes": [
        {"reason": "FieldValueInvalid", "message": f'Invalid value: "Bad_Name": {DNS1035}',
         "field": "metadata.name"}]}
    assert_status(api.get(ns_path("services", name="Bad_Name")), 404, "NotFound")


def test_invalid_pod_name(api: httpx.Client) -> None:
    resp = api.post(ns_path("pods"), json=pod("Bad_Name"))
    assert_status(resp, 422, "Invalid",
                  f'Pod "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": {DNS1123_SUBDOMAIN}')
    assert "Bad_Name" not in names(api.get(ns_path("pods")).json()["items"])


def test_too_long_service_name(api: httpx.Client) -> None:
    name = "s" * 64
    resp = api.post(ns_path("services"), json={"metadata": {"name": name}, "spec": {"ports": [{"port": 80}]}})
    status = assert_status(resp, 422, "Invalid")
    assert status["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "metadata.name",
                                            "message": f'Invalid value: "{name}": must be no more than 63 characters'}]


def test_missing_name(api: httpx.Client) -> None:
    resp = api.post(ns_path("services"), json={"spec": {"ports": [{"port": 80}]}})
    status = assert_status(resp, 422, "Invalid")
    assert status["details"]["causes"][0]["field"] == "metadata.name"
    assert status["details"]["causes"][0]["reason"] == "FieldValueRequired"


@pytest.mark.parametrize(("resource", "body", "field"), [
    pytest.param("services", {"spec": {"selector": {"app": "x"}}}, "spec.ports", id="service without ports"),
    pytest.param("pods", {"spec": {}}, "spec.containers", id="pod without containers"),
    pytest.param("pods", {"spec": {"containers": [{"name": "c"}]}}, "spec.containers[0].image",
                 id="container without image"),
    pytest.param("pods", {"spec": {"containers": [{"image": "nginx"}]}}, "spec.containers[0].name",
                 id="container without name"),
])
def test_missing_required_fields(api: httpx.Client, resource: str, body: dict[str, Any], field: str) -> None:
    name = unique_name("required")
    kind = {"services": "Service", "pods": "Pod"}[resource]
    resp = api.post(ns_path(resource), json={"metadata": {"name": name}, **body})
    assert_status(resp, 422, "Invalid", f'{kind} "{name}" is invalid: {field}: Required value')
    assert_status(api.get(ns_path(resource, name=name)), 404, "NotFound")


LABEL_VALUE = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
               "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex "
               "used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")


def test_invalid_selector_value(api: httpx.Client) -> None:
    name = unique_name("selector")
    body = service(name)
    body["spec"]["selector"] = {"app": "not a valid value!"}
    status = assert_status(api.post(ns_path("services"), json=body), 422, "Invalid")
    # ValidateLabels puts a bad value at the map's path, without the key.
    assert status["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "spec.selector",
                                            "message": f'Invalid value: "not a valid value!": {LABEL_VALUE}'}]
    assert not services_named(api, name)


def test_invalid_label_value(api: httpx.Client) -> None:
    name = unique_name("label")
    body = service(name)
    body["metadata"]["labels"] = {"app": "not a valid value!"}
    status = assert_status(api.post(ns_path("services"), json=body), 422, "Invalid")
    assert not services_named(api, name)
    assert status["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "metadata.labels",
                                            "message": f'Invalid value: "not a valid value!": {LABEL_VALUE}'}]


# --- wrong JSON types --------------------------------------------------------------------------------

@pytest.mark.parametrize(("mutate", "where"), [
    pytest.param(lambda b: b["spec"]["ports"][0].update(port="80"), "spec.ports.port", id="port as a string"),
    pytest.param(lambda b: b["spec"].update(ports={"port": 80}), "spec.ports", id="ports as an object"),
    pytest.param(lambda b: b["metadata"].update(labels=["a"]), "metadata.labels", id="labels as a list"),
    pytest.param(lambda b: b["metadata"].update(labels={"a": 1}), "metadata.labels", id="label value a number"),
    pytest.param(lambda b: b.update(metadata="x"), "metadata", id="metadata a string"),
    pytest.param(lambda b: b["spec"].update(selector="app=web"), "spec.selector", id="selector as a string"),
])
def test_wrong_json_types_are_bad_requests(api: httpx.Client, mutate: Any, where: str) -> None:
    name = unique_name("types")
    body = service(name)
    mutate(body)
    resp = api.post(ns_path("services"), json=body)
    status = assert_status(resp, 400, "BadRequest")
    assert status["message"].startswith('Service in version "v1" cannot be handled as a Service: json: cannot '
                                        "unmarshal "), status["message"]
    assert where in status["message"]
    assert not services_named(api, name)


def test_port_as_a_string_reads_like_kube(api: httpx.Client) -> None:
    body = service(unique_name("port-string"))
    body["spec"]["ports"][0]["port"] = "80"
    status = assert_status(api.post(ns_path("services"), json=body), 400, "BadRequest")
    assert status["message"] == ('Service in version "v1" cannot be handled as a Service: json: cannot unmarshal '
                                 "string into Go struct field ServicePort.spec.ports.port of type int32")


def test_wrong_types_on_update_change_nothing(api: httpx.Client) -> None:
    name = unique_name("types-put")
    created = create(api, ns_path("services"), service(name))
    body = {**created, "spec": {**created["spec"], "ports": [{"port": "eighty"}]}}
    assert_status(api.put(ns_path("services", name=name), json=body), 400, "BadRequest")
    assert api.get(ns_path("services", name=name)).json() == created


# --- size ----------------------------------------------------------------------------------------------

def oversized_service(name: str) -> bytes:
    filler = "x" * (3 * MIB + 1)
    return f'{{"metadata":{{"name":"{name}","annotations":{{"filler":"{filler}"}}}},"spec":{{"ports":[{{"port":80}}]}}}}'.encode()


def test_oversized_body_is_request_entity_too_large(api: httpx.Client) -> None:
    name = unique_name("huge")
    resp = post_raw(api, ns_path("services"), oversized_service(name), "application/json")
    assert_status(resp, 413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728")
    assert not services_named(api, name)


def test_oversized_chunked_body_is_request_entity_too_large(api: httpx.Client) -> None:
    # No Content-Length to go by: the limit applies while reading.
    name = unique_name("huge-chunked")
    data = oversized_service(name)

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(data), 64 * 1024):
            yield data[i:i + 64 * 1024]

    resp = api.post(ns_path("services"), content=chunks(), headers={"Content-Type": "application/json"})
    assert_status(resp, 413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728")
    assert not services_named(api, name)


def test_a_body_just_under_the_limit_is_accepted(api: httpx.Client) -> None:
    # Annotations are limited to 256 KiB in total, so a large body is spread over many labels-free
    # annotations would still be refused: use a big but valid object instead.
    name = unique_name("big")
    annotations = {f"k{i}": "v" * 1000 for i in range(200)}
    body = {"metadata": {"name": name, "annotations": annotations}, "spec": {"ports": [{"port": 80}]}}
    resp = api.post(ns_path("services"), json=body)
    assert resp.status_code == 201, resp.text[:500]
    assert len(api.get(ns_path("services", name=name)).json()["metadata"]["annotations"]) == 200


# --- paths ---------------------------------------------------------------------------------------------

def test_invalid_namespace_in_the_path(api: httpx.Client) -> None:
    # kube-apiserver's NamespaceLifecycle admission answers 404 before validation runs; kubelab
    # validates first (422 on metadata.namespace). Either way: a Status, and nothing stored.
    name = unique_name("badns")
    resp = api.post(ns_path("services", "Bad_NS"), json=service(name))
    assert resp.status_code in (404, 422), resp.text
    assert resp.json()["kind"] == "Status"
    assert name not in names(api.get(f"{CORE}/services").json()["items"])


def test_cluster_scoped_kind_under_a_namespace_is_not_found(api: httpx.Client) -> None:
    assert_status(api.get(f"{CORE}/namespaces/default/nodes"), 404, "NotFound")
    assert_status(api.get(f"{CORE}/namespaces/default/namespaces/x"), 404, "NotFound")


# --- delete options ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("content", "params", "code"), [
    pytest.param(b"[1]", {}, 400, id="body a list"),
    pytest.param(b'{"preconditions": "x"}', {}, 400, id="preconditions a string"),
    pytest.param(b'{"preconditions": {"uid": 5}}', {}, 400, id="uid a number"),
    pytest.param(b'{"gracePeriodSeconds": "30"}', {}, 400, id="grace period a string"),
    # ValidateDeleteOptions: 422 DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ...
    pytest.param(b'{"dryRun": ["Maybe"]}', {}, 422, id="unknown dry run"),
    pytest.param(b"", {"gracePeriodSeconds": "abc"}, 400, id="grace period query not a number"),
])
def test_bad_delete_options_delete_nothing(api: httpx.Client, content: bytes, params: dict[str, str],
                                           code: int) -> None:
    name = unique_name("keep")
    created = create(api, ns_path("services"), service(name))
    resp = api.request("DELETE", ns_path("services", name=name), content=content, params=params,
                       headers={"Content-Type": "application/json"})
    assert_status(resp, code, "BadRequest" if code == 400 else "Invalid")
    assert api.get(ns_path("services", name=name)).json() == created


def test_delete_preconditions(api: httpx.Client) -> None:
    name = unique_name("precond")
    created = create(api, ns_path("services"), service(name))
    resp = api.request("DELETE", ns_path("services", name=name), json={"preconditions": {"uid": "not-the-uid"}})
    assert_status(resp, 409, "Conflict", f'Operation cannot be fulfilled on services "{name}": Precondition failed: '
                                         f'UID in precondition: not-the-uid, UID in object meta: '
                                         f'{created["metadata"]["uid"]}')
    assert api.get(ns_path("services", name=name)).status_code == 200
    resp = api.request("DELETE", ns_path("services", name=name),
                       json={"preconditions": {"uid": created["metadata"]["uid"]}, "propagationPolicy": "Background"})
    assert resp.status_code == 200, resp.text
    assert_status(api.get(ns_path("services", name=name)), 404, "NotFound")


def test_dry_run_delete_in_the_body_keeps_the_object(api: httpx.Client) -> None:
    # kubectl delete --dry-run=server puts dryRun in the DeleteOptions body, not the query.
    name = unique_name("drydel")
    created = create(api, ns_path("services"), service(name))
    resp = api.request("DELETE", ns_path("services", name=name),
                       json={"propagationPolicy": "Background", "dryRun": ["All"]})
    assert resp.status_code == 200, resp.text
    assert api.get(ns_path("services", name=name)).json() == created


# --- bindings ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "message"), [
    pytest.param([1], "the object provided is unrecognized (must be of type Binding)", id="a list"),
    pytest.param({"target": "node-1"}, 'Binding in version "v1" cannot be handled as a Binding: json: cannot '
                                       "unmarshal string into Go struct field Binding.target of type v1.ObjectReference",
                 id="target a string"),
])
def test_bad_binding_bodies(api: httpx.Client, body: Any, message: str) -> None:
    name = unique_name("badbind")
    create(api, ns_path("pods"), pod(name))
    status = assert_status(api.post(ns_path("pods", name=name) + "/binding", json=body), 400, "BadRequest")
    assert status["message"].startswith(message)
    assert "nodeName" not in api.get(ns_path("pods", name=name)).json()["spec"]
