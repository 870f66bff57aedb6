"""Decoding Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) into the JSON
dict the same object has as JSON. The bodies are built here with a minimal encoder that follows the
wire format (the real kubectl's bodies are covered by tests/integration/test_kubectl_protobuf.py)."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.protobuf import ProtobufError, decode_object
from apiserver.protobuf.messages import KINDS, MESSAGES


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number: int, value: int | bytes | str) -> bytes:
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    data = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(data)) + data


def message(*parts: bytes) -> bytes:
    return b"".join(parts)


def entry(key: str, value: bytes | str) -> bytes:
    return message(field(1, key), field(2, value))


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    """runtime.Unknown after the `k8s\\x00` magic, as gogo writes it (empty fields included)."""
    type_meta = message(field(1, api_version), field(2, kind))
    return b"k8s\x00" + message(field(1, type_meta), field(2, raw), field(3, ""), field(4, ""))


def object_meta(name: str, **extra: bytes) -> bytes:
    # gogo writes every non-pointer field, zero or not: the decoder must drop them as omitempty does.
    return message(field(1, name), field(2, ""), field(3, ""), field(4, ""), field(5, ""), field(6, ""),
                   field(7, 0), field(8, b""), *extra.values())


def test_namespace_as_kubectl_create_namespace_sends_it() -> None:
    raw = message(field(1, object_meta("team-a")), field(2, b""), field(3, field(1, "")))
    assert decode_object(envelope("v1", "Namespace", raw)) == {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}, "spec": {}, "status": {}}


def test_service_ports_int_or_string_and_maps() -> None:
    port_80 = message(field(1, "http"), field(2, "TCP"), field(3, 80),
                      field(4, message(field(1, 0), field(2, 8080), field(3, ""))), field(5, 0))
    named = message(field(1, "metrics"), field(2, "UDP"), field(3, 9090),
                    field(4, message(field(1, 1), field(2, 0), field(3, "prom"))), field(5, 31000))
    spec = message(field(1, port_80), field(1, named), field(2, entry("app", "web")), field(4, "NodePort"),
                   field(13, 0))
    raw = message(field(1, object_meta("web", labels=field(11, entry("tier", "fe")))), field(2, spec),
                  field(3, field(1, b"")))
    assert decode_object(envelope("v1", "Service", raw)) == {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "labels": {"tier": "fe"}},
        "spec": {"ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080},
                           {"name": "metrics", "protocol": "UDP", "port": 9090, "targetPort": "prom",
                            "nodePort": 31000}],
                 "selector": {"app": "web"}, "type": "NodePort"},
        "status": {"loadBalancer": {}}}


def test_pointer_fields_keep_their_zero_and_inline_structs_merge_into_the_parent() -> None:
    probe = message(field(1, field(3, message(field(1, message(field(1, 0), field(2, 80))), field(2, "")))),
                    field(2, 0), field(3, 1), field(7, 0))
    container = message(field(1, "c"), field(2, "nginx"), field(8, b""), field(11, probe), field(16, 0))
    volume = message(field(1, "data"), field(2, field(2, message(field(1, "")))))
    pod_spec = message(field(2, container), field(4, 0), field(21, 0), field(1, volume))
    template = message(field(1, object_meta("")), field(2, pod_spec))
    spec = message(field(1, 0), field(3, template), field(4, b""), field(5, 0))
    raw = message(field(1, object_meta("web")), field(2, spec), field(3, b""))
    body = decode_object(envelope("apps/v1", "Deployment", raw))
    assert body["spec"] == {
        "replicas": 0,  # *int32: an explicit zero is kept
        "template": {"metadata": {}, "spec": {
            "volumes": [{"name": "data", "emptyDir": {}}],  # Volume.VolumeSource is inline
            "containers": [{"name": "c", "image": "nginx", "resources": {},
                            "readinessProbe": {"tcpSocket": {"port": 80}, "timeoutSeconds": 1,
                                               "terminationGracePeriodSeconds": 0}}],
            "terminationGracePeriodSeconds": 0, "automountServiceAccountToken": False}},
        "strategy": {}}


def test_negative_ints_times_quantities_and_bytes() -> None:
    # int32 -1 travels as the 10-byte varint of its 64-bit two's complement.
    toleration = message(field(1, "k"), field(2, "Exists"), field(5, -1))
    resources = message(field(1, entry("cpu", field(1, "500m"))), field(2, entry("memory", field(1, "64Mi"))))
    container = message(field(1, "c"), field(2, "i"), field(8, resources))
    spec = message(field(2, container), field(22, toleration))
    meta = object_meta("p", ts=field(9, message(field(1, 1_700_000_000), field(2, 5))))
    pod = decode_object(envelope("v1", "Pod", message(field(1, meta), field(2, spec))))
    assert pod["metadata"]["deletionTimestamp"] == "2023-11-14T22:13:20Z"
    assert pod["spec"]["tolerations"] == [{"key": "k", "operator": "Exists", "tolerationSeconds": -1}]
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "500m"}, "requests": {"memory": "64Mi"}}
    secret = decode_object(envelope("v1", "Secret", message(field(1, object_meta("s")), field(2, entry("k", b"\x00\xff")),
                                                           field(3, "Opaque"))))
    assert secret == {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "AP8="},
                      "type": "Opaque"}


def test_packed_and_unpacked_repeated_scalars() -> None:
    unpacked = message(field(4, 1000), field(4, 2000))
    packed = field(4, varint(1000) + varint(2000))
    for security in (unpacked, packed):
        spec = message(field(2, message(field(1, "c"), field(2, "i"))), field(14, security))
        pod = decode_object(envelope("v1", "Pod", message(field(1, object_meta("p")), field(2, spec))))
        assert pod["spec"]["securityContext"] == {"supplementalGroups": [1000, 2000]}


@pytest.mark.parametrize(("body", "words"), [
    pytest.param(b'{"kind":"Namespace"}', "does not appear to be a protobuf message", id="json, not protobuf"),
    pytest.param(envelope("v1", "Widget", b""), 'no kind "Widget" is registered for version "v1"', id="unknown kind"),
    pytest.param(envelope("v1", "Namespace", field(9, "x")), "field number 9 of Namespace is unknown",
                 id="unknown top-level field"),
    pytest.param(envelope("v1", "Service", field(2, field(99, 1))), "field number 99 of ServiceSpec at spec",
                 id="unknown nested field names its path"),
    pytest.param(b"k8s\x00" + field(1, b"\x0a\xff"), "malformed protobuf envelope", id="truncated length"),
    pytest.param(envelope("v1", "Namespace", field(1, field(1, b"\xff\xfe"))), "not valid UTF-8", id="bad utf-8"),
    pytest.param(envelope("v1", "Namespace", field(1, varint(1 << 3 | 3))), "unsupported wire type 3",
                 id="group wire type"),
    pytest.param(envelope("v1", "Namespace", field(1, field(1, 5))), "expected a length-delimited value",
                 id="varint where a string belongs"),
])
def test_bad_bodies_are_refused_with_a_reason(body: bytes, words: str) -> None:
    with pytest.raises(ProtobufError, match=words):
        decode_object(body)


def test_every_message_type_in_the_table_resolves() -> None:
    """The table's own consistency: each kind maps to a message, each field type is known."""
    assert all(name in MESSAGES for name in KINDS.values())
    numbers: dict[str, Any] = {name: sorted(fields) for name, fields in MESSAGES.items()}
    assert numbers["ObjectMeta"] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 17]
    assert MESSAGES["ServicePort"][3].json_name == "port" and MESSAGES["ServicePort"][3].keep_zero
