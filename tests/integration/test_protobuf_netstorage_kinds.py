"""networking.k8s.io/v1 IngressClass and NetworkPolicy and storage.k8s.io/v1 CSIStorageCapacity taken as
protobuf bodies (`application/vnd.kubernetes.protobuf`), as a client-go program that prefers protobuf sends
them (a CSI driver's external-provisioner writes its CSIStorageCapacity objects so; kubectl's own commands
build none of these kinds, its `create -f` sends JSON). Each body is written here field by field after
k8s.io/api's generated.proto, the way gogo marshals it (every non-pointer field, zero or not); the object
it creates must be, read back through the real kubectl, the same as its JSON twin created by `kubectl
create -f`. Before, the API server refused these bodies (`no kind ... is registered`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from apitools import unique_name
from kubectltools import Kubectl

PROTOBUF = "application/vnd.kubernetes.protobuf"
VOLATILE_META = ("name", "uid", "resourceVersion", "creationTimestamp", "managedFields", "generation")


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | 0x80 if value else byte)
        if not value:
            return bytes(out)


def field(number: int, value: int | bytes | str) -> bytes:
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    data = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(data)) + data


def msg(*parts: bytes) -> bytes:
    return b"".join(parts)


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    """runtime.Unknown after the `k8s\\x00` magic."""
    return b"k8s\x00" + msg(field(1, msg(field(1, api_version), field(2, kind))), field(2, raw), field(3, ""),
                            field(4, ""))


def meta(name: str, labels: dict[str, str] | None = None) -> bytes:
    entries = [field(11, msg(field(1, k), field(2, v))) for k, v in (labels or {}).items()]
    return msg(field(1, name), field(2, ""), field(3, ""), field(4, ""), field(5, ""), field(6, ""), field(7, 0),
               field(8, b""), *entries)


def selector(match: dict[str, str], *expressions: tuple[str, str, list[str]]) -> bytes:
    """metav1.LabelSelector: matchLabels (1, a map), matchExpressions (2: key 1, operator 2, values 3)."""
    return msg(*(field(1, msg(field(1, k), field(2, v))) for k, v in match.items()),
               *(field(2, msg(field(1, key), field(2, op), *(field(3, v) for v in values)))
                 for key, op, values in expressions))


def int_or_string(value: int | str) -> bytes:
    """intstr.IntOrString: type 1 (0 int, 1 string), intVal 2, strVal 3."""
    if isinstance(value, int):
        return msg(field(1, 0), field(2, value), field(3, ""))
    return msg(field(1, 1), field(2, 0), field(3, value))


def ingress_class(name: str) -> tuple[bytes, dict[str, Any]]:
    spec = msg(field(1, "example.com/ingress-controller"),
               field(2, msg(field(1, "k8s.example.com"), field(2, "IngressParameters"), field(3, "external-lb"),
                            field(4, "Namespace"), field(5, "ingress-config"))))
    body = envelope("networking.k8s.io/v1", "IngressClass", msg(field(1, meta(name, {"team": "net"})), field(2, spec)))
    twin = {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
            "metadata": {"name": f"{name}-json", "labels": {"team": "net"}},
            "spec": {"controller": "example.com/ingress-controller", "parameters": {
                "apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "external-lb",
                "scope": "Namespace", "namespace": "ingress-config"}}}
    return body, twin


def network_policy(name: str) -> tuple[bytes, dict[str, Any]]:
    port_tcp = msg(field(1, "TCP"), field(2, int_or_string(6379)), field(3, 6390))
    port_named = msg(field(1, "UDP"), field(2, int_or_string("dns")))
    peer_pods = msg(field(1, selector({"role": "frontend"})),
                    field(2, selector({}, ("project", "In", ["myproject", "other"]))))
    peer_block = msg(field(3, msg(field(1, "172.17.0.0/16"), field(2, "172.17.1.0/24"))))
    ingress = msg(field(1, port_tcp), field(1, port_named), field(2, peer_pods), field(2, peer_block))
    egress = msg(field(1, msg(field(1, "TCP"), field(2, int_or_string(5978)))),
                 field(2, msg(field(3, msg(field(1, "10.0.0.0/24"))))))
    spec = msg(field(1, selector({"role": "db"})), field(2, ingress), field(3, egress), field(4, "Ingress"),
               field(4, "Egress"))
    body = envelope("networking.k8s.io/v1", "NetworkPolicy", msg(field(1, meta(name)), field(2, spec)))
    twin = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": f"{name}-json"},
            "spec": {"podSelector": {"matchLabels": {"role": "db"}},
                     "ingress": [{"ports": [{"protocol": "TCP", "port": 6379, "endPort": 6390},
                                            {"protocol": "UDP", "port": "dns"}],
                                  "from": [{"podSelector": {"matchLabels": {"role": "frontend"}},
                                            "namespaceSelector": {"matchExpressions": [
                                                {"key": "project", "operator": "In",
                                                 "values": ["myproject", "other"]}]}},
                                           {"ipBlock": {"cidr": "172.17.0.0/16", "except": ["172.17.1.0/24"]}}]}],
                     "egress": [{"ports": [{"protocol": "TCP", "port": 5978}],
                                 "to": [{"ipBlock": {"cidr": "10.0.0.0/24"}}]}],
                     "policyTypes": ["Ingress", "Egress"]}}
    return body, twin


def empty_network_policy(name: str) -> tuple[bytes, dict[str, Any]]:
    """The smallest policy: an empty podSelector (gogo writes the struct, zero length), nothing else."""
    body = envelope("networking.k8s.io/v1", "NetworkPolicy", msg(field(1, meta(name)), field(2, field(1, b""))))
    twin = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": f"{name}-json"},
            "spec": {"podSelector": {}}}
    return body, twin


def storage_capacity(name: str) -> tuple[bytes, dict[str, Any]]:
    body = envelope("storage.k8s.io/v1", "CSIStorageCapacity", msg(
        field(1, meta(name)), field(2, selector({"topology.hostpath.csi/node": "node-1"})),
        field(3, "standard"), field(4, field(1, "100Gi")), field(5, field(1, "10Gi"))))
    twin = {"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity", "metadata": {"name": f"{name}-json"},
            "nodeTopology": {"matchLabels": {"topology.hostpath.csi/node": "node-1"}},
            "storageClassName": "standard", "capacity": "100Gi", "maximumVolumeSize": "10Gi"}
    return body, twin


CASES: list[tuple[str, str, Callable[[str], tuple[bytes, dict[str, Any]]]]] = [
    ("ingressclasses", "/apis/networking.k8s.io/v1/ingressclasses", ingress_class),
    ("networkpolicies", "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies", network_policy),
    ("networkpolicies", "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies", empty_network_policy),
    ("csistoragecapacities", "/apis/storage.k8s.io/v1/namespaces/default/csistoragecapacities", storage_capacity),
]


def comparable(obj: dict[str, Any]) -> dict[str, Any]:
    for key in VOLATILE_META:
        obj["metadata"].pop(key, None)
    return obj


@pytest.mark.parametrize(("resource", "path", "build"), CASES, ids=[c[2].__name__ for c in CASES])
def test_a_protobuf_body_creates_what_its_json_twin_creates(
        api: httpx.Client, kubectl: Kubectl, tmp_path: Any, resource: str, path: str,
        build: Callable[[str], tuple[bytes, dict[str, Any]]]) -> None:
    name = unique_name("pb")
    body, twin = build(name)
    made = api.post(path, content=body, headers={"Content-Type": PROTOBUF, "Accept": "application/json"})
    assert made.status_code == 201, made.text
    (tmp_path / "twin.json").write_text(json.dumps(twin))
    kubectl.ok("create", "-f", str(tmp_path / "twin.json"))
    try:
        from_protobuf = json.loads(kubectl.ok("get", resource, name, "-o", "json"))
        from_json = json.loads(kubectl.ok("get", resource, f"{name}-json", "-o", "json"))
        assert comparable(from_protobuf) == comparable(from_json)
    finally:
        kubectl.ok("delete", resource, name, f"{name}-json")
