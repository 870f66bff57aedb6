"""kube-apiserver's validation, defaulting and errors, as kubectl prints them: names, labels, ports
and protocols, duplicate ports, selectors, generateName and the fields the server sets, ClusterIP and
NodePort allocation, field validation against unknown fields, namespaces that are missing, and the
`kubernetes` Service."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from apitools import CORE, create, ns_path, release_node_port, unique_name
from kubectltools import VERSIONS, Kubectl, cells, manifest, table

LABEL_VALUE = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
               "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
               "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
DNS_1035 = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
            "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
            "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
DNS_1123 = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
            "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")


@pytest.fixture(scope="module")
def ns(apiserver: str) -> str:
    name = unique_name("kval")
    with httpx.Client(base_url=apiserver, timeout=10) as api:
        create(api, f"{CORE}/namespaces", {"metadata": {"name": name}})
    return name


@pytest.fixture
def api(apiserver: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=apiserver, timeout=10) as client:
        yield client


def write(tmp_path: Path, doc: dict[str, Any], name: str = "obj.yaml") -> str:
    path = tmp_path / name
    path.write_text(manifest(doc))
    return str(path)


def service(name: str, ns: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}], **spec}}


@pytest.mark.parametrize(("doc", "error"), [
    pytest.param({"metadata": {"name": "Bad_Name"}},
                 f'The Service "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": {DNS_1035}',
                 id="service name is a DNS-1035 label"),
    pytest.param({"metadata": {"name": "lbl", "labels": {"tier": "front end"}}},
                 f'The Service "lbl" is invalid: metadata.labels: Invalid value: "front end": {LABEL_VALUE}',
                 id="label value"),
    pytest.param({"spec": {"ports": [{"port": 70000, "targetPort": 80}]}},
                 'The Service "{name}" is invalid: spec.ports[0].port: Invalid value: 70000: must be between 1 and '
                 "65535, inclusive", id="port out of range"),
    pytest.param({"spec": {"ports": [{"port": 70000}]}},
                 'The Service "{name}" is invalid: \n* spec.ports[0].port: Invalid value: 70000: must be between 1 '
                 "and 65535, inclusive\n* spec.ports[0].targetPort: Invalid value: 70000: must be between 1 and "
                 "65535, inclusive", id="targetPort defaults to port and is checked too"),
    pytest.param({"spec": {"ports": [{"port": 80, "protocol": "HTTP"}]}},
                 'The Service "{name}" is invalid: spec.ports[0].protocol: Unsupported value: "HTTP": supported '
                 'values: "SCTP", "TCP", "UDP"', id="protocol"),
    pytest.param({"spec": {"ports": [{"name": "a", "port": 80}, {"name": "b", "port": 80}]}},
                 'The Service "{name}" is invalid: spec.ports[1]: Duplicate value: core.ServicePort{Name:"b", '
                 'Protocol:"TCP", AppProtocol:(*string)(nil), Port:80, TargetPort:intstr.IntOrString{Type:0, '
                 'IntVal:80, StrVal:""}, NodePort:0}', id="duplicate port"),
    pytest.param({"spec": {"selector": {"app": "no/slash!"}}},
                 'The Service "{name}" is invalid: spec.selector: Invalid value: "no/slash!": ' + LABEL_VALUE,
                 id="selector value"),
    pytest.param({"spec": {"ports": [{"port": 80, "nodePort": 30100}]}},
                 'The Service "{name}" is invalid: spec.ports[0].nodePort: Forbidden: may not be used when `type` is '
                 "'ClusterIP'", id="nodePort on a ClusterIP service"),
    pytest.param({"spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 40000}]}},
                 'The Service "{name}" is invalid: spec.ports[0].nodePort: Invalid value: 40000: provided port is not '
                 "in the valid range. The range of valid ports is 30000-32767", id="nodePort out of range"),
    pytest.param({"spec": {"clusterIP": "192.168.1.1"}},
                 'The Service "{name}" is invalid: spec.clusterIPs: Invalid value: []string{"192.168.1.1"}: failed to '
                 "allocate IP 192.168.1.1: the provided IP (192.168.1.1) is not in the valid range. The range of "
                 "valid IPs is 10.96.0.0/12", id="clusterIP out of range"),
    pytest.param({"spec": {"clusterIP": "10.96.0.1"}},
                 'The Service "{name}" is invalid: spec.clusterIPs: Invalid value: []string{"10.96.0.1"}: failed to '
                 "allocate IP 10.96.0.1: provided IP is already allocated", id="clusterIP taken"),
])
def test_service_validation(kubectl: Kubectl, ns: str, tmp_path: Path, doc: dict[str, Any], error: str) -> None:
    name = unique_name("v")
    obj = service(name, ns)
    obj["metadata"].update(doc.get("metadata", {}))
    obj["spec"].update(doc.get("spec", {}))
    result = kubectl("apply", "-f", write(tmp_path, obj)).failed()
    assert result.stderr == error.replace("{name}", name) + "\n"


def test_several_causes_are_listed_one_per_line(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "namespace": ns},
           "spec": {"containers": [{"name": "C_1", "image": "nginx",
                                    "ports": [{"containerPort": 70000, "protocol": "ICMP"}]}]}}
    result = kubectl("create", "-f", write(tmp_path, pod)).failed()
    assert result.stderr == (
        'The Pod "p1" is invalid: \n'
        f'* spec.containers[0].name: Invalid value: "C_1": {DNS_1123}\n'
        "* spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive\n"
        '* spec.containers[0].ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"\n')


@pytest.mark.parametrize("version", VERSIONS)
def test_node_port_already_allocated(kubectl_for: Callable[[str], Kubectl], ns: str, api: httpx.Client,
                                     tmp_path: Path, version: str) -> None:
    kubectl = kubectl_for(version)
    release_node_port(api, 31122)
    first = service(unique_name("np"), ns, type="NodePort", ports=[{"port": 3017, "targetPort": 5003,
                                                                    "nodePort": 31122}])
    kubectl.ok("apply", "-f", write(tmp_path, first))
    second = service("dup-np", ns, type="NodePort", ports=[{"port": 80, "nodePort": 31122}])
    result = kubectl("apply", "-f", write(tmp_path, second, "second.yaml")).failed()
    assert result.stderr == ('The Service "dup-np" is invalid: spec.ports[0].nodePort: Invalid value: 31122: '
                             "provided port is already allocated\n")
    # Deleting the holder frees the port for the next Service.
    kubectl.ok("delete", "svc", first["metadata"]["name"], "-n", ns)
    assert kubectl.ok("apply", "-f", write(tmp_path, second, "second.yaml")) == "service/dup-np created\n"
    kubectl.ok("delete", "svc", "dup-np", "-n", ns)


@pytest.mark.parametrize("version", VERSIONS)
def test_unknown_fields_are_refused_under_strict_validation(kubectl_for: Callable[[str], Kubectl], ns: str,
                                                            api: httpx.Client, tmp_path: Path, version: str) -> None:
    kubectl = kubectl_for(version)
    name = unique_name("unk")
    obj = service(name, ns, foo="bar")
    obj["spec"]["ports"][0]["bogus"] = 1
    path = write(tmp_path, obj)
    strict = ('Service in version "v1" cannot be handled as a Service: strict decoding error: unknown field '
              '"spec.foo", unknown field "spec.ports[0].bogus"')
    for verb in ("apply", "create"):
        result = kubectl(verb, "-f", path).failed()
        assert result.stderr == f'Error from server (BadRequest): error when creating "{path}": {strict}\n'
    result = kubectl("apply", "--server-side", "-f", path).failed()
    assert result.stderr == f"Error from server (BadRequest): {strict}\n"
    assert api.get(ns_path("services", ns, name)).status_code == 404
    # --validate=warn creates it and prints the server's warnings; --validate=false drops them silently.
    warned = kubectl("create", "-f", path, "--validate=warn").ok()
    assert warned.stdout == f"service/{name} created\n"
    assert warned.stderr == 'Warning: unknown field "spec.foo"\nWarning: unknown field "spec.ports[0].bogus"\n'
    assert "foo" not in api.get(ns_path("services", ns, name)).json()["spec"]
    kubectl.ok("delete", "svc", name, "-n", ns)
    assert kubectl("apply", "-f", path, "--validate=false").ok().stderr == ""


def test_server_sets_identity_and_generate_name(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    obj = service("ignored", ns)
    obj["metadata"] = {"generateName": "gen-", "namespace": ns, "uid": "client-uid",
                       "creationTimestamp": "2000-01-01T00:00:00Z"}
    out = kubectl.ok("create", "-f", write(tmp_path, obj), "-o", "json")
    created = json.loads(out)
    name = created["metadata"]["name"]
    assert name.startswith("gen-") and len(name) == len("gen-") + 5
    assert created["metadata"]["uid"] != "client-uid" and len(created["metadata"]["uid"]) == 36
    assert created["metadata"]["creationTimestamp"] != "2000-01-01T00:00:00Z"
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "gen-dep", "namespace": ns},
           "spec": {"selector": {"matchLabels": {"app": "g"}},
                    "template": {"metadata": {"labels": {"app": "g"}},
                                 "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    created = json.loads(kubectl.ok("create", "-f", write(tmp_path, dep, "dep.yaml"), "-o", "json"))
    assert (created["metadata"]["generation"], created["spec"]["replicas"]) == (1, 1)
    kubectl.ok("scale", "deployment", "gen-dep", "-n", ns, "--replicas=3")
    assert json.loads(kubectl.ok("get", "deploy", "gen-dep", "-n", ns, "-o", "json"))["metadata"]["generation"] == 2


@pytest.mark.parametrize("version", VERSIONS)
def test_missing_namespace(kubectl_for: Callable[[str], Kubectl], tmp_path: Path, version: str) -> None:
    kubectl = kubectl_for(version)
    path = write(tmp_path, service("x", "no-such-ns", ports=[{"port": 0}]))
    result = kubectl("create", "-f", path).failed()
    assert result.stderr == f'Error from server (NotFound): error when creating "{path}": namespaces "no-such-ns" ' \
                            "not found\n"
    assert kubectl("get", "svc", "-n", "no-such-ns").ok().stderr == "No resources found in no-such-ns namespace.\n"
    result = kubectl("create", "namespace", "Bad_NS").failed()
    assert result.stderr == f'The Namespace "Bad_NS" is invalid: metadata.name: Invalid value: "Bad_NS": {DNS_1123}\n'


def test_not_found_and_default_namespaces(kubectl: Kubectl, apiserver: str) -> None:
    assert kubectl("get", "svc", "nope").failed().stderr == 'Error from server (NotFound): services "nope" not found\n'
    assert kubectl("get", "ns", "nope").failed().stderr == \
        'Error from server (NotFound): namespaces "nope" not found\n'
    names = {r["NAME"] for r in table(kubectl.ok("get", "namespaces"))}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names
    svc = cells(table(kubectl.ok("get", "svc", "kubernetes", "-n", "default")), "NAME", "kubernetes")
    assert (svc["TYPE"], svc["CLUSTER-IP"], svc["PORT(S)"]) == ("ClusterIP", "10.96.0.1", "443/TCP")
    port = apiserver.rsplit(":", 1)[1]
    assert cells(table(kubectl.ok("get", "endpoints", "kubernetes", "-n", "default")), "NAME", "kubernetes")[
        "ENDPOINTS"] == f"127.0.0.1:{port}"


ALL_KUBECTLS = ["1.27", "1.28", "1.29", "1.30", "1.31", "1.32", "1.33"]


@pytest.mark.parametrize("version", ALL_KUBECTLS)
def test_an_unknown_kind_is_kubes_no_matches_error(kubectl_for: Callable[[str], Kubectl], tmp_path: Path,
                                                   version: str) -> None:
    """kubectl validates a kind /openapi/v3 does not list against /openapi/v2 (protobuf); with no v2
    document (kubelab answered 404) it printed "the server could not find the requested resource".
    kube's answer: validation skips the unknown kind and the REST mapping fails, CRDs suggested."""
    path = tmp_path / "widget.yaml"
    path.write_text("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: default\n")
    result = kubectl_for(version)("apply", "-f", str(path)).failed()
    assert result.stderr == (f'error: resource mapping not found for name: "w" namespace: "default" from "{path}": '
                             'no matches for kind "Widget" in version "example.com/v1"\n'
                             "ensure CRDs are installed first\n")


def test_openapi_v2_is_served_as_json_and_as_kubectls_protobuf(api: httpx.Client) -> None:
    doc = api.get("/openapi/v2")
    assert (doc.status_code, doc.headers["content-type"]) == (200, "application/json")
    assert doc.json()["swagger"] == "2.0"
    assert doc.json()["info"] == {"title": "Kubernetes", "version": api.get("/version").json()["gitVersion"]}
    # kubectl's Accept has an "@" that Go's mime package cannot parse back: the answer names the other spelling.
    pb = api.get("/openapi/v2", headers={"accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"})
    assert (pb.status_code, pb.headers["content-type"]) == (
        200, "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
    assert pb.content.startswith(b"\x0a\x032.0\x12")  # Document.swagger = "2.0", then Document.info
