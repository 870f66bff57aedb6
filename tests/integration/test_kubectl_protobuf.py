"""kubectl 1.32+ sends the objects its generators build as protobuf (`application/vnd.kubernetes.
protobuf`); 1.31 sends the same objects as JSON. The same commands through both must create the same
objects, and each protobuf body must decode to exactly the JSON body 1.31 sent. A recording proxy in
front of the API server keeps the bodies."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from apitools import CORE, assert_status, unique_name
from kubectltools import Kubectl, RecordingProxy, write_kubeconfig

from apiserver.protobuf import decode_object

PROTOBUF = "application/vnd.kubernetes.protobuf"
# (resource path, kubectl arguments), in order: `expose` and `scale` need the deployment.
GENERATORS: list[tuple[str, list[str]]] = [
    ("apis/apps/v1/namespaces/{ns}/deployments/web",
     ["create", "deployment", "web", "--image=nginx:1.27", "--replicas=2", "--port=80"]),
    ("api/v1/namespaces/{ns}/services/cip", ["create", "service", "clusterip", "cip", "--tcp=5678:8080", "--tcp=443"]),
    ("api/v1/namespaces/{ns}/services/np", ["create", "service", "nodeport", "np", "--tcp=80:8080"]),
    ("api/v1/namespaces/{ns}/services/lb", ["create", "service", "loadbalancer", "lb", "--tcp=80"]),
    ("api/v1/namespaces/{ns}/services/en", ["create", "service", "externalname", "en", "--external-name=example.com"]),
    ("api/v1/namespaces/{ns}/configmaps/cm", ["create", "configmap", "cm", "--from-literal=a=b", "--from-literal=c=d"]),
    ("api/v1/namespaces/{ns}/secrets/s", ["create", "secret", "generic", "s", "--from-literal=x=y"]),
    ("api/v1/namespaces/{ns}/serviceaccounts/sa", ["create", "serviceaccount", "sa"]),
    ("api/v1/namespaces/{ns}/pods/pod1",
     ["run", "pod1", "--image=nginx:1.27", "--labels=app=p,tier=fe", "--port=80", "--env=A=1", "--restart=Never"]),
    ("api/v1/namespaces/{ns}/services/webexp", ["expose", "deployment", "web", "--port=8080", "--name=webexp"]),
]
# Set by the server, or allocated: never equal between two creations.
VOLATILE_META = ("namespace", "uid", "resourceVersion", "creationTimestamp", "managedFields", "generation")


def without_nulls(value: Any) -> Any:
    """encoding/json writes a zero metav1.Time as null; the protobuf form has nothing there."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def comparable(obj: dict[str, Any]) -> dict[str, Any]:
    obj = json.loads(json.dumps(obj))
    for key in VOLATILE_META:
        obj.get("metadata", {}).pop(key, None)
    spec = obj.get("spec") or {}
    spec.pop("clusterIP", None)
    spec.pop("clusterIPs", None)
    for port in spec.get("ports") or []:
        port.pop("nodePort", None)
    obj.pop("status", None)
    return obj


@pytest.fixture(scope="module")
def runs(apiserver: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The generators run by kubectl 1.31 (JSON), 1.33 (protobuf) and the dispatcher (1.32), each in
    its own namespace, through one recording proxy."""
    results: dict[str, Any] = {}
    with RecordingProxy(apiserver) as proxy, httpx.Client(base_url=apiserver, timeout=10) as api:
        kubeconfig = write_kubeconfig(tmp_path_factory.mktemp("proxy"), proxy.url)
        for version in ("1.31", "1.33", "dispatcher"):
            kubectl = Kubectl(version, kubeconfig, tmp_path_factory.mktemp(f"cache-{version}"))
            ns = unique_name(f"pb{version.replace('.', '')[:3]}")
            start = len(proxy.requests)
            outputs = [kubectl.ok("create", "namespace", ns)]
            outputs += [kubectl.ok(*args, "-n", ns) for _, args in GENERATORS]
            outputs.append(kubectl.ok("scale", "deployment", "web", "--replicas=3", "-n", ns))
            objects = {path: api.get("/" + path.format(ns=ns)).json() for path, _ in GENERATORS}
            posts = [(p, c, b) for m, p, c, b in proxy.requests[start:] if m == "POST"]
            scale = [(c, b) for m, p, c, b in proxy.requests[start:] if m == "PATCH" and p.split("?")[0].endswith(
                "/scale")]
            results[version] = {"ns": ns, "outputs": outputs, "objects": objects, "posts": posts, "scale": scale}
        yield results


def test_outputs_are_the_same_whatever_the_wire_format(runs: dict[str, Any]) -> None:
    for version in ("1.31", "1.33", "dispatcher"):
        ns = runs[version]["ns"]
        assert runs[version]["outputs"] == [
            f"namespace/{ns} created\n", "deployment.apps/web created\n", "service/cip created\n",
            "service/np created\n", "service/lb created\n", "service/en created\n", "configmap/cm created\n",
            "secret/s created\n", "serviceaccount/sa created\n", "pod/pod1 created\n", "service/webexp exposed\n",
            "deployment.apps/web scaled\n"], version


def test_newer_kubectl_sends_protobuf_and_older_json(runs: dict[str, Any]) -> None:
    generator_posts = 9  # namespace, deployment, four services, configmap, secret, serviceaccount
    for version, expected in (("1.31", "application/json"), ("1.33", PROTOBUF), ("dispatcher", PROTOBUF)):
        types = [ctype for _, ctype, _ in runs[version]["posts"]]
        assert types[:generator_posts] == [expected] * generator_posts, (version, types)
        assert types[generator_posts:] == ["application/json", "application/json"], (version, types)  # run, expose


def test_protobuf_bodies_decode_to_the_json_bodies(runs: dict[str, Any]) -> None:
    json_posts, proto_posts = runs["1.31"]["posts"], runs["1.33"]["posts"]
    assert len(json_posts) == len(proto_posts)
    json_ns, proto_ns = runs["1.31"]["ns"], runs["1.33"]["ns"]
    for (path, _, json_body), (_, ctype, proto_body) in zip(json_posts, proto_posts, strict=True):
        if ctype != PROTOBUF:
            continue
        sent_as_json = without_nulls(json.loads(json_body))
        decoded = decode_object(proto_body)
        assert json.loads(json.dumps(decoded).replace(proto_ns, json_ns)) == sent_as_json, path


def test_the_same_objects_are_created(runs: dict[str, Any]) -> None:
    for path, _ in GENERATORS:
        reference = comparable(runs["1.31"]["objects"][path])
        assert reference.get("kind"), (path, reference)
        for version in ("1.33", "dispatcher"):
            assert comparable(runs[version]["objects"][path]) == reference, (version, path)
    deployment = runs["1.33"]["objects"]["apis/apps/v1/namespaces/{ns}/deployments/web"]
    assert deployment["spec"]["replicas"] == 3
    secret = runs["1.33"]["objects"]["api/v1/namespaces/{ns}/secrets/s"]
    assert (secret["type"], secret["data"]) == ("Opaque", {"x": "eQ=="})


def test_kubectl_scale_patches_the_scale_subresource_with_json(runs: dict[str, Any]) -> None:
    for version in ("1.31", "1.33", "dispatcher"):
        assert runs[version]["scale"] == [("application/merge-patch+json", b'{"spec":{"replicas":3}}')], version


def field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (numbers and lengths below 128 fit in one byte)."""
    return bytes([number << 3 | 2, len(payload)]) + payload


def test_bad_protobuf_is_a_400(api: httpx.Client) -> None:
    headers = {"Content-Type": PROTOBUF}
    type_meta = field(1, b"v1") + field(2, b"Namespace")
    unknown = b"\xf8\x06\x01"  # field 111, a varint: ObjectMeta has no such field
    body = b"k8s\x00" + field(1, type_meta) + field(2, field(1, unknown))
    resp = api.post(f"{CORE}/namespaces", content=body, headers=headers)
    assert_status(resp, 400, "BadRequest", "the object provided is unrecognized: field number 111 of ObjectMeta at "
                                           "metadata is unknown to kubelab's protobuf decoder; send the object as JSON")
    resp = api.post(f"{CORE}/namespaces", content=b'{"metadata":{"name":"x"}}', headers=headers)
    assert_status(resp, 400, "BadRequest", "the object provided is unrecognized: provided data does not appear to "
                                           "be a protobuf message, expected prefix [107, 56, 115, 0]")
    resp = api.post(f"{CORE}/namespaces", content=b"k8s\x00\x0a\x05", headers=headers)
    assert_status(resp, 400, "BadRequest", "the object provided is unrecognized: malformed protobuf envelope: field 1 "
                                           "claims 5 bytes, 0 remain")
