"""certificates.k8s.io/v1 CertificateSigningRequests against a real API server with authentication on
(HTTPS, --token-auth-file) and etcd, driven by the real kubectl and the official client: the requestor
is the authenticated user whatever the body says, `kubectl certificate approve|deny` go through the
approval subresource, a certificate only through status, kube's columns in `kubectl get csr`, and kube's
validation words for bad requests (PEM, signature, usages, signerName, expirationSeconds, conditions),
each of which changes nothing. No signer runs (none runs in kube-apiserver either)."""

from __future__ import annotations

import base64
import datetime
import json
import secrets
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import httpx
import pytest
from apitools import assert_status
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubectltools import Kubectl, table
from kubernetes import client as k8s
from tokenapi import token_client, token_kubectl

from kubelab.pki import LabPKI

SUFFIX = secrets.token_hex(3)
CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
KEY = ec.generate_private_key(ec.SECP256R1())


def pem_request(common_name: str = "alice") -> bytes:
    builder = x509.CertificateSigningRequestBuilder().subject_name(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
    return builder.sign(KEY, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def pem_certificate() -> bytes:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "alice")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(KEY.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(KEY, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def csr_body(name: str, **spec: Any) -> dict[str, Any]:
    full = {"request": b64(pem_request()), "signerName": "example.com/lab", "usages": ["client auth"], **spec}
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": name},
            "spec": {k: v for k, v in full.items() if v is not None}}


@pytest.fixture(scope="module")
def server(token_apiserver: Callable[[str], AbstractContextManager[str]]) -> Iterator[str]:
    with token_apiserver(f'admin-{SUFFIX},alice,1,"system:masters"\n') as url:
        yield url


@pytest.fixture(scope="module")
def api(server: str, lab_pki: LabPKI) -> Iterator[httpx.Client]:
    with token_client(server, lab_pki, f"admin-{SUFFIX}") as http:
        yield http


@pytest.fixture(scope="module")
def admin(server: str, lab_pki: LabPKI, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return token_kubectl(server, lab_pki, tmp_path_factory.mktemp("admin"), f"admin-{SUFFIX}")


def test_the_requestor_is_who_asked_and_kubectl_approves_and_denies(api: httpx.Client, admin: Kubectl) -> None:
    name, other = f"csr-{SUFFIX}-a", f"csr-{SUFFIX}-d"
    body = csr_body(name, expirationSeconds=3600, username="mallory", groups=["system:masters"])
    out = admin.ok("apply", "-f", "-", input=json.dumps(body))
    assert f"certificatesigningrequest.certificates.k8s.io/{name} created" in out
    admin.ok("create", "-f", "-", input=json.dumps(csr_body(other)))
    stored = api.get(f"{CSRS}/{name}").json()
    assert (stored["spec"]["username"], stored["spec"]["groups"]) == ("alice", ["system:masters",
                                                                               "system:authenticated"])
    assert stored["status"] == {}
    rows = {r["NAME"]: r for r in table(admin.ok("get", "csr"))}
    assert list(rows[name]) == ["NAME", "AGE", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION", "CONDITION"]
    assert (rows[name]["SIGNERNAME"], rows[name]["REQUESTOR"], rows[name]["REQUESTEDDURATION"],
            rows[name]["CONDITION"]) == ("example.com/lab", "alice", "60m", "Pending")
    assert rows[other]["REQUESTEDDURATION"] == "<none>"

    assert "approved" in admin.ok("certificate", "approve", name)
    assert "denied" in admin.ok("certificate", "deny", other)
    rows = {r["NAME"]: r for r in table(admin.ok("get", "csr"))}
    assert (rows[name]["CONDITION"], rows[other]["CONDITION"]) == ("Approved", "Denied")
    approved = api.get(f"{CSRS}/{name}").json()
    condition = approved["status"]["conditions"][0]
    assert (condition["type"], condition["status"], condition["reason"]) == ("Approved", "True",
                                                                            "KubectlApprove")
    assert condition["lastUpdateTime"] and condition["lastTransitionTime"]

    # What a signer writes: the certificate, through status (the approval condition is kept).
    issued = {**approved, "status": {**approved["status"], "certificate": b64(CERTIFICATE)}}
    resp = api.put(f"{CSRS}/{name}/status", json=issued)
    assert resp.status_code == 200, resp.text
    assert [c["type"] for c in resp.json()["status"]["conditions"]] == ["Approved"]
    assert table(admin.ok("get", "csr", name))[0]["CONDITION"] == "Approved,Issued"
    written = admin.ok("get", "csr", name, "-o", "jsonpath={.status.certificate}")
    assert base64.b64decode(written) == CERTIFICATE
    again = {**resp.json(), "status": {**resp.json()["status"], "certificate": b64(pem_certificate())}}
    assert_status(api.put(f"{CSRS}/{name}/status", json=again), 422, "Invalid",
                  f'CertificateSigningRequest.certificates.k8s.io "{name}" is invalid: status.certificate: '
                  "Forbidden: updates may not modify existing certificate content")
    # A main update changes neither spec nor status.
    resp = api.put(f"{CSRS}/{name}", json={**resp.json(), "spec": {**body["spec"], "usages": ["server auth"]},
                                            "status": {}})
    assert resp.status_code == 200, resp.text
    assert resp.json()["spec"]["usages"] == ["client auth"] and resp.json()["status"]["certificate"]
    admin.ok("delete", "csr", name, other)


def test_approval_only_through_its_subresource(api: httpx.Client) -> None:
    name = f"csr-{SUFFIX}-m"
    created = api.post(CSRS, json=csr_body(name))
    assert created.status_code == 201, created.text
    approve = {**created.json(), "status": {"conditions": [{"type": "Approved", "reason": "Mine"}]}}
    assert_status(api.put(f"{CSRS}/{name}/status", json=approve), 422, "Invalid",
                  f'CertificateSigningRequest.certificates.k8s.io "{name}" is invalid: status.conditions: Forbidden: '
                  'updates may not add a condition of type "Approved"')
    both = {**created.json(), "status": {"conditions": [{"type": "Approved", "status": "True"},
                                                        {"type": "Denied", "status": "True"}]}}
    assert_status(api.put(f"{CSRS}/{name}/approval", json=both), 422, "Invalid",
                  f'CertificateSigningRequest.certificates.k8s.io "{name}" is invalid: status.conditions[1].type: '
                  'Invalid value: "Denied": Approved and Denied conditions are mutually exclusive')
    false = {**created.json(), "status": {"conditions": [{"type": "Approved", "status": "False"}]}}
    assert_status(api.put(f"{CSRS}/{name}/approval", json=false), 422, "Invalid",
                  f'CertificateSigningRequest.certificates.k8s.io "{name}" is invalid: status.conditions[0].status: '
                  'Unsupported value: "False": supported values: "True"')
    assert api.get(f"{CSRS}/{name}").json()["status"] == {}
    approved = api.put(f"{CSRS}/{name}/approval", json={**created.json(), "status": {"conditions": [
        {"type": "Approved", "reason": "Mine"}]}})  # v1 defaults the condition's status to True
    assert approved.status_code == 200, approved.text
    assert approved.json()["status"]["conditions"][0]["status"] == "True"
    removed = {**approved.json(), "status": {"conditions": []}}
    assert_status(api.put(f"{CSRS}/{name}/approval", json=removed), 422, "Invalid",
                  f'CertificateSigningRequest.certificates.k8s.io "{name}" is invalid: status.conditions: Forbidden: '
                  'updates may not remove a condition of type "Approved"')
    assert api.delete(f"{CSRS}/{name}").status_code == 200


def _tampered() -> bytes:
    der = x509.load_pem_x509_csr(pem_request()).public_bytes(serialization.Encoding.DER)
    broken = der[:-1] + bytes([der[-1] ^ 0x01])
    return b"-----BEGIN CERTIFICATE REQUEST-----\n" + base64.encodebytes(broken) + b"-----END CERTIFICATE REQUEST-----\n"


CERTIFICATE = pem_certificate()
TAMPERED = _tampered()


def _go_bytes(data: bytes) -> str:
    return "[]byte{" + ", ".join(f"0x{b:x}" for b in data) + "}"


SUBDOMAIN_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
                 "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
                 "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")

BAD = [
    pytest.param({"request": b64(b"hello")}, "spec.request: Invalid value: " + _go_bytes(b"hello")
                 + ": PEM block type must be CERTIFICATE REQUEST", id="not PEM"),
    pytest.param({"request": b64(CERTIFICATE)}, "spec.request: Invalid value: " + _go_bytes(CERTIFICATE)
                 + ": PEM block type must be CERTIFICATE REQUEST", id="a certificate"),
    pytest.param({"request": b64(TAMPERED)}, "spec.request: Invalid value: " + _go_bytes(TAMPERED)
                 + ": x509: ECDSA verification failure", id="bad signature"),
    pytest.param({"usages": None}, "spec.usages: Required value", id="no usages"),
    pytest.param({"usages": ["client auth", "root"]},
                 'spec.usages[1]: Unsupported value: "root": supported values: "any", "cert sign", "client auth", '
                 '"code signing", "content commitment", "crl sign", "data encipherment", "decipher only", '
                 '"digital signature", "email protection", "encipher only", "ipsec end system", "ipsec tunnel", '
                 '"ipsec user", "key agreement", "key encipherment", "microsoft sgc", "netscape sgc", "ocsp signing", '
                 '"s/mime", "server auth", "signing", "timestamping"', id="unknown usage"),
    pytest.param({"usages": ["client auth", "client auth"]}, 'spec.usages[1]: Duplicate value: "client auth"',
                 id="duplicate usage"),
    pytest.param({"signerName": None}, "spec.signerName: Required value", id="no signer"),
    pytest.param({"signerName": "kubernetes.io/legacy-unknown"},
                 'spec.signerName: Invalid value: "kubernetes.io/legacy-unknown": the legacy signerName is not allowed '
                 "via this API version", id="legacy signer"),
    pytest.param({"signerName": "lab"}, "spec.signerName: Invalid value: \"lab\": must be a fully qualified domain "
                 "and path of the form 'example.com/signer-name'", id="no path"),
    pytest.param({"signerName": "lab/x"}, 'spec.signerName: Invalid value: "lab": should be a domain with at least '
                 "two segments separated by dots", id="one-label domain"),
    pytest.param({"signerName": "Example.com/x"}, 'spec.signerName: Invalid value: "Example.com": validating label '
                 f'"Example": {SUBDOMAIN_MSG}', id="upper-case domain"),
    pytest.param({"expirationSeconds": 599}, "spec.expirationSeconds: Invalid value: 599: may not specify a duration "
                 "less than 600 seconds (10 minutes)", id="short expiry"),
]


@pytest.mark.parametrize(("spec", "message"), BAD)
def test_bad_requests_are_refused_in_kubes_words(api: httpx.Client, spec: dict[str, Any], message: str) -> None:
    name = f"bad-{secrets.token_hex(4)}"
    resp = api.post(CSRS, json=csr_body(name, **spec))
    assert_status(resp, 422, "Invalid", f'CertificateSigningRequest.certificates.k8s.io "{name}" is invalid: '
                                        f"{message}")
    assert_status(api.get(f"{CSRS}/{name}"), 404, "NotFound")


def test_a_request_that_is_not_base64_is_kubes_decode_error(api: httpx.Client) -> None:
    name = f"bad-{secrets.token_hex(4)}"
    resp = api.post(CSRS, json=csr_body(name, request="!!!"))
    assert_status(resp, 400, "BadRequest", 'CertificateSigningRequest in version "v1" cannot be handled as a '
                                           "CertificateSigningRequest: illegal base64 data at input byte 0")


def test_the_python_client_and_discovery(server: str, lab_pki: LabPKI, admin: Kubectl) -> None:
    config = k8s.Configuration(host=server, api_key={"authorization": f"Bearer admin-{SUFFIX}"})
    config.ssl_ca_cert = str(lab_pki.ca_file)
    with k8s.ApiClient(config) as http:
        certs = k8s.CertificatesV1Api(http)
        name = f"csr-{SUFFIX}-py"
        made = certs.create_certificate_signing_request(k8s.V1CertificateSigningRequest(
            metadata=k8s.V1ObjectMeta(name=name), spec=k8s.V1CertificateSigningRequestSpec(
                request=b64(pem_request()), signer_name="example.com/lab", usages=["digital signature"])))
        assert made.spec.username == "alice"
        assert name in {c.metadata.name for c in certs.list_certificate_signing_request().items}
        made.status = k8s.V1CertificateSigningRequestStatus(conditions=[k8s.V1CertificateSigningRequestCondition(
            type="Denied", status="True", reason="NotToday")])
        denied = certs.replace_certificate_signing_request_approval(name, made)
        assert [c.type for c in denied.status.conditions] == ["Denied"]
        certs.delete_certificate_signing_request(name)
    resources = admin.ok("api-resources", "--api-group", "certificates.k8s.io", "-o", "wide")
    row = table(resources)[0]
    assert (row["NAME"], row["SHORTNAMES"], row["NAMESPACED"], row["KIND"]) == (
        "certificatesigningrequests", "csr", "false", "CertificateSigningRequest")
    assert "FIELD: signerName <string>" in admin.ok("explain", "csr.spec.signerName")
