"""Hostile writes to Ingress, IngressClass, NetworkPolicy, CertificateSigningRequest and CSIStorageCapacity
against a real API server and etcd: a valid object with one value (or a whole subtree) replaced by something of another type,
out of range, huge, empty, or unicode, created or written over a stored one. Every answer is a Kubernetes
Status or the object, never a 5xx; a refused write changes nothing that is stored; an accepted one is stored
as a valid object of its kind. The counts are printed (`-s`) for RELIABILITY.md."""

from __future__ import annotations

import base64
import copy
import json
import os
import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubelab import kinds

EXAMPLES = int(os.environ.get("KUBELAB_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                derandomize=os.environ.get("KUBELAB_FUZZ_RANDOM") != "1", suppress_health_check=list(HealthCheck))
COUNTS: dict[str, int] = {}
_KEY = ec.generate_private_key(ec.SECP256R1())
_REQUEST = base64.b64encode(x509.CertificateSigningRequestBuilder().subject_name(
    x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fuzz")])).sign(_KEY, hashes.SHA256())
    .public_bytes(serialization.Encoding.PEM)).decode()

VALID: dict[str, dict[str, Any]] = {
    "ingresses": {"spec": {"ingressClassName": "nginx", "defaultBackend": {"service": {"name": "web", "port": {
        "number": 80}}}, "tls": [{"hosts": ["a.example.com"], "secretName": "tls"}], "rules": [{
            "host": "a.example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {
                "service": {"name": "web", "port": {"name": "http"}}}}]}}]}},
    "ingressclasses": {"spec": {"controller": "example.com/c", "parameters": {
        "apiGroup": "k8s.example.com", "kind": "P", "name": "p", "scope": "Namespace", "namespace": "default"}}},
    "networkpolicies": {"spec": {"podSelector": {"matchLabels": {"app": "web"}, "matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["a"]}]}, "ingress": [{"from": [
            {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}, {"namespaceSelector": {}}],
            "ports": [{"port": 80, "endPort": 90, "protocol": "TCP"}]}], "egress": [{"to": [{"podSelector": {}}]}],
        "policyTypes": ["Ingress", "Egress"]}},
    "certificatesigningrequests": {"spec": {"request": _REQUEST, "signerName": "example.com/s",
                                            "usages": ["client auth"], "expirationSeconds": 3600}},
    "csistoragecapacities": {"storageClassName": "fast", "capacity": "10Gi", "maximumVolumeSize": "1Gi",
                             "nodeTopology": {"matchLabels": {"zone": "a"}}},
}
RESOURCES = {rt.plural: rt for rt in (kinds.INGRESSES, kinds.INGRESSCLASSES, kinds.NETWORKPOLICIES,
                                      kinds.CERTIFICATESIGNINGREQUESTS, kinds.CSISTORAGECAPACITIES)}

hostile_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=False),
    st.text(max_size=40), st.sampled_from(["", " ", "*", "*.*", "/", "..", "%2F", "0", "-1", "65536", "TCP",
                                           "10.0.0.0/33", "::", "a" * 300, "\u00e9", "\ud800", "\x00", "Ingress"]))
hostile_value = st.recursive(hostile_scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)), max_leaves=6)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from _paths(child, (*prefix, i))


@st.composite
def mutated(draw: st.DrawFn, plural: str) -> dict[str, Any]:
    body = copy.deepcopy(VALID[plural])
    for _ in range(draw(st.integers(min_value=1, max_value=2))):
        path = draw(st.sampled_from([p for p in _paths(body) if p]))
        target = body
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = draw(hostile_value)
    return body


def _base(plural: str) -> str:
    rt = RESOURCES[plural]
    return rt.base_path("default" if rt.namespaced else None)


def _stored(api: httpx.Client, plural: str) -> dict[str, Any]:
    items = api.get(_base(plural)).json()["items"]
    return {i["metadata"]["name"]: i for i in items}


@pytest.fixture(scope="module")
def http(apiserver: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=apiserver, timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def seeds(http: httpx.Client) -> dict[str, str]:
    names = {}
    for plural, body in VALID.items():
        name = f"seed-{secrets.token_hex(3)}"
        resp = http.post(_base(plural), json={"apiVersion": RESOURCES[plural].api_version,
                                             "kind": RESOURCES[plural].kind, "metadata": {"name": name}, **body})
        assert resp.status_code == 201, resp.text
        names[plural] = name
    return names


@FUZZ
@given(data=st.data())
@pytest.mark.parametrize("plural", sorted(VALID))
def test_hostile_writes_never_5xx_and_a_refusal_changes_nothing(http: httpx.Client, seeds: dict[str, str],
                                                               plural: str, data: Any) -> None:
    api = http
    rt = RESOURCES[plural]
    before = _stored(api, plural)
    body = {"apiVersion": rt.api_version, "kind": rt.kind, **data.draw(mutated(plural))}
    update = data.draw(st.booleans())
    name = seeds[plural] if update else f"fuzz-{secrets.token_hex(4)}"
    body["metadata"] = {"name": name}
    content = json.dumps(body)  # lone surrogates go as \ud800 escapes, as a Go client may send them
    headers = {"content-type": "application/json"}
    if update:
        subresource = data.draw(st.sampled_from([None, *rt.subresources]))
        path = rt.path("default" if rt.namespaced else None, name, subresource)
        resp = api.put(path, content=content, headers=headers)
    else:
        resp = api.post(_base(plural), content=content, headers=headers)
    COUNTS["writes"] = COUNTS.get("writes", 0) + 1
    assert resp.status_code < 500, resp.text
    assert resp.json()["kind"] in ("Status", rt.kind), resp.text
    after = _stored(api, plural)
    if resp.status_code >= 400:
        COUNTS["refused"] = COUNTS.get("refused", 0) + 1
        assert after == before, f"a refused write ({resp.status_code}) changed what is stored"
        return
    COUNTS["accepted"] = COUNTS.get("accepted", 0) + 1
    for obj in after.values():
        rt.model.model_validate(obj)  # what is stored is a valid object of its kind
    if not update:
        assert api.delete(rt.path("default" if rt.namespaced else None, name)).status_code == 200


def test_print_counts() -> None:
    print(f"\nhostile writes to Ingress/IngressClass/NetworkPolicy/CSR/CSIStorageCapacity: {COUNTS}")
