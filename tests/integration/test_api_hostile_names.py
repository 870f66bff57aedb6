"""Every field that holds a name, a label, a port name or a key refuses what kube-apiserver refuses, through
the real API: a trailing or leading newline, CR, NUL, a space, a zero-width space, the Kelvin sign,
full-width letters, a non-ASCII digit, 63 characters that are 64 bytes. Before, Python's `$` let a value
ending in "\\n" through every one of them (a Service named "evil\\n" broke every node's iptables-restore).

Each case expects exactly what kube's validator says about the value (kubelab/validation.py, which
tests/unit/test_validation_go.py holds to Go's own answers on thousands of strings): a 422 Invalid whose
causes carry kube's field path and message, the value quoted as Go's %q quotes it, and nothing stored;
or, where kube accepts the value (an annotation key with the Kelvin sign lowers to 'k' in Go too), a 201.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx
import orjson
import pytest
from apitools import unique_name

from kubelab import validation
from kubelab.validation import go_quote

HOSTILE: list[tuple[str, Callable[[str], str]]] = [
    ("trailing newline", lambda v: v + "\n"),
    ("leading newline", lambda v: "\n" + v),
    ("carriage return", lambda v: v + "\r"),
    ("CRLF inside", lambda v: v[:1] + "\r\n" + v[1:]),
    ("NUL", lambda v: v + "\x00"),
    ("trailing space", lambda v: v + " "),
    ("zero-width space", lambda v: v[:1] + "\u200b" + v[1:]),
    ("Kelvin sign", lambda v: v + "\u212a"),
    ("full-width letters", lambda v: "ｗｅｂ"),
    ("superscript two", lambda v: v + "²"),
    ("63 characters, 64 bytes", lambda v: v[:1] + "a" * 61 + "é"),
]
IP_HOSTILE = ["192.0.2.10\n", "\n192.0.2.10", "fe80::1%eth0", "fe80::1%a\nb", "１92.0.2.10", "192.0.2.1²"]
IP_MESSAGE = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
NS = "default"
COUNTS = {"cases": 0, "refused": 0, "accepted": 0}

Body = Callable[[str, str], dict[str, Any]]  # (object name, hostile value) -> body


def _meta(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, **extra}


def configmap(name: str, **meta: Any) -> dict[str, Any]:
    return {"metadata": _meta(name, **meta), "data": {"k": "v"}}


def svc(name: str, *, port_name: str = "http", target: Any = 8080, selector: str = "web", **spec: Any
        ) -> dict[str, Any]:
    return {"metadata": _meta(name), "spec": {"selector": {"app": selector}, "ports": [
        {"name": port_name, "port": 80, "targetPort": target}], **spec}}


def pod(name: str, *, container: str = "c", port_name: str = "http", **spec: Any) -> dict[str, Any]:
    return {"metadata": _meta(name), "spec": {"containers": [
        {"name": container, "image": "nginx", "ports": [{"name": port_name, "containerPort": 8080}]}], **spec}}


def eps(name: str, *, port_name: str = "http", service: str = "web", address: str = "10.244.1.5",
        **endpoint: Any) -> dict[str, Any]:
    return {"metadata": _meta(name, labels={"kubernetes.io/service-name": service}), "addressType": "IPv4",
            "endpoints": [{"addresses": [address], "conditions": {"ready": True}, **endpoint}],
            "ports": [{"name": port_name, "port": 8080, "protocol": "TCP"}]}


CORE = f"/api/v1/namespaces/{NS}"
SLICES = f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices"
# (id, collection path, body, base value, field path of the cause, kube's check of the value, kind)
FIELDS: list[tuple[str, str, Body, str, str, Callable[[str], list[str]]]] = [
    ("namespace name", "/api/v1/namespaces", lambda n, v: {"metadata": _meta(v)}, "team",
     "metadata.name", validation.dns1123_label_errors),
    ("service name", f"{CORE}/services", lambda n, v: svc(v), "web", "metadata.name", validation.dns1035_label_errors),
    ("configmap name", f"{CORE}/configmaps", lambda n, v: configmap(v), "settings", "metadata.name",
     validation.dns1123_subdomain_errors),
    ("node name", "/api/v1/nodes", lambda n, v: {"metadata": _meta(v)}, "node-x", "metadata.name",
     validation.dns1123_subdomain_errors),
    ("label value", f"{CORE}/configmaps", lambda n, v: configmap(n, labels={"app": v}), "web", "metadata.labels",
     validation.label_value_errors),
    ("label key", f"{CORE}/configmaps", lambda n, v: configmap(n, labels={v: "web"}), "app", "metadata.labels",
     validation.qualified_name_errors),
    ("annotation key", f"{CORE}/configmaps", lambda n, v: configmap(n, annotations={v: "x"}), "note",
     "metadata.annotations", lambda v: validation.qualified_name_errors(validation.go_lower(v))),
    ("configmap key", f"{CORE}/configmaps", lambda n, v: {"metadata": _meta(n), "data": {v: "x"}}, "key",
     "data[{value}]", validation.config_map_key_errors),
    ("secret key", f"{CORE}/secrets", lambda n, v: {"metadata": _meta(n), "data": {v: base64.b64encode(b"x").decode()}},
     "key", "data[{value}]", validation.config_map_key_errors),
    ("service port name", f"{CORE}/services", lambda n, v: svc(n, port_name=v), "http", "spec.ports[0].name",
     validation.dns1123_label_errors),
    ("service target port name", f"{CORE}/services", lambda n, v: svc(n, target=v), "http",
     "spec.ports[0].targetPort", validation.port_name_errors),
    ("service selector value", f"{CORE}/services", lambda n, v: svc(n, selector=v), "web", "spec.selector",
     validation.label_value_errors),
    ("container name", f"{CORE}/pods", lambda n, v: pod(n, container=v), "web", "spec.containers[0].name",
     validation.dns1123_label_errors),
    ("container port name", f"{CORE}/pods", lambda n, v: pod(n, port_name=v), "http",
     "spec.containers[0].ports[0].name", validation.port_name_errors),
    ("pod hostname", f"{CORE}/pods", lambda n, v: pod(n, hostname=v), "host", "spec.hostname",
     validation.dns1123_label_errors),
    ("pod subdomain", f"{CORE}/pods", lambda n, v: pod(n, subdomain=v), "web", "spec.subdomain",
     validation.dns1123_label_errors),
    ("pod node selector value", f"{CORE}/pods", lambda n, v: pod(n, nodeSelector={"disk": v}), "ssd",
     "spec.nodeSelector", validation.label_value_errors),
    ("pod node name", f"{CORE}/pods", lambda n, v: pod(n, nodeName=v), "node-1", "spec.nodeName",
     validation.dns1123_subdomain_errors),
    ("slice port name", SLICES, lambda n, v: eps(n, port_name=v), "http", "ports[0].name",
     validation.dns1123_label_errors),
    ("slice endpoint hostname", SLICES, lambda n, v: eps(n, hostname=v), "host", "endpoints[0].hostname",
     validation.dns1123_label_errors),
    ("slice endpoint node name", SLICES, lambda n, v: eps(n, nodeName=v), "node-1", "endpoints[0].nodeName",
     validation.dns1123_subdomain_errors),
    ("slice service-name label", SLICES, lambda n, v: eps(n, service=v), "web", "metadata.labels",
     validation.label_value_errors),
    ("endpoints port name", f"{CORE}/endpoints", lambda n, v: {"metadata": _meta(n), "subsets": [
        {"addresses": [{"ip": "10.244.1.5"}], "ports": [{"name": v, "port": 8080}]}]}, "http",
     "subsets[0].ports[0].name", validation.dns1123_label_errors),
    ("deployment template label value", f"/apis/apps/v1/namespaces/{NS}/deployments", lambda n, v: {
        "metadata": _meta(n), "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web", "tier": v}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}},
     "front", "spec.template.metadata.labels", validation.label_value_errors),
]
IP_FIELDS: list[tuple[str, str, Body, str]] = [
    ("service external IP", f"{CORE}/services", lambda n, v: svc(n, externalIPs=[v]), "spec.externalIPs[0]"),
    ("slice endpoint address", SLICES, lambda n, v: eps(n, address=v), "endpoints[0].addresses[0]"),
    ("endpoints address", f"{CORE}/endpoints", lambda n, v: {"metadata": _meta(n), "subsets": [
        {"addresses": [{"ip": v}], "ports": [{"name": "http", "port": 8080}]}]}, "subsets[0].addresses[0].ip"),
]


@pytest.fixture(scope="module", autouse=True)
def report_counts() -> Any:
    yield
    path = os.environ.get("KUBELAB_FAULT_REPORT")
    if path:
        with open(path, "a") as out:
            out.write(orjson.dumps({"test": "tests/integration/test_api_hostile_names.py", **COUNTS}).decode() + "\n")


def _object_path(collection: str, body: dict[str, Any]) -> str:
    return f"{collection}/{quote(body['metadata']['name'], safe='')}"


def _check(api: httpx.Client, collection: str, body: dict[str, Any], field: str, value: str,
           problems: list[str]) -> None:
    before = api.get(collection).json()["items"]
    resp = api.post(collection, content=orjson.dumps(body), headers={"Content-Type": "application/json"})
    COUNTS["cases"] += 1
    if not problems:  # kube takes it: so does kubelab
        assert resp.status_code == 201, resp.text
        COUNTS["accepted"] += 1
        api.delete(_object_path(collection, body), params={"gracePeriodSeconds": 0})
        return
    COUNTS["refused"] += 1
    assert resp.status_code == 422, resp.text
    status = resp.json()
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Invalid", 422)
    causes = status["details"]["causes"]
    for problem in problems:
        want = {"reason": "FieldValueInvalid", "field": field, "message": f"Invalid value: {go_quote(value)}: {problem}"}
        assert want in causes, (want, causes)
        assert f"{field}: Invalid value: {go_quote(value)}: {problem}" in status["message"]
    # Every value is quoted as %q; only a map key inside a field path stays raw, as in kube (`data[k\n]`).
    outside_paths = status["message"].replace(field, "")
    assert "\n" not in outside_paths and "\r" not in outside_paths
    assert api.get(collection).json()["items"] == before  # nothing stored


@pytest.mark.parametrize(("how", "make"), HOSTILE, ids=[h for h, _ in HOSTILE])
@pytest.mark.parametrize(("collection", "body", "base", "field", "check"), [f[1:] for f in FIELDS],
                         ids=[f[0] for f in FIELDS])
def test_hostile_names_get_kubes_422(api: httpx.Client, collection: str, body: Body, base: str, field: str,
                                     check: Callable[[str], list[str]], how: str, make: Callable[[str], str]) -> None:
    value = make(base)
    problems = check(value)
    assert problems or how in ("Kelvin sign",), f"kube would take {value!r} as {field}?"
    _check(api, collection, body(unique_name("hostile"), value), field.format(value=value), value, problems)


@pytest.mark.parametrize("value", IP_HOSTILE)
@pytest.mark.parametrize(("collection", "body", "field"), [f[1:] for f in IP_FIELDS], ids=[f[0] for f in IP_FIELDS])
def test_hostile_addresses_get_kubes_422(api: httpx.Client, collection: str, body: Body, field: str,
                                         value: str) -> None:
    _check(api, collection, body(unique_name("hostile"), value), field, value, [IP_MESSAGE])


def test_a_name_with_a_newline_is_quoted_in_the_message(api: httpx.Client) -> None:
    """What kubectl prints: `The Service "evil\\n" is invalid: metadata.name: Invalid value: "evil\\n": ...`."""
    resp = api.post(f"{CORE}/services", json=svc("evil\n"))
    assert resp.status_code == 422
    assert resp.json()["message"].startswith('Service "evil\\n" is invalid: metadata.name: Invalid value: "evil\\n": '
                                             "a DNS-1035 label must consist of")
