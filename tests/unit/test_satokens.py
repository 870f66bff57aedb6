"""Service account tokens and what a service account may do, as pure functions: the claims kube's
TokenRequest writes, the checks on a presented JWT (signature, algorithm, times, audience, issuer,
claims), the ServiceAccount admission plugin's pod mutation, and what RBAC's bootstrap policy lets an unbound
service account do."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import jwt
import pytest

from apiserver import bootstrappolicy, rbac, saadmission, satokens
from apiserver.authz import verdict
from apiserver.requestinfo import RequestInfo
from kubelab.tokenfile import UserInfo

SA = satokens.Ref("robot", "11111111-2222-3333-4444-555555555555")
SIGNER = satokens.Signer.ephemeral()
NOW = int(time.time())


def sign(**changes: Any) -> str:
    payload = satokens.claims(SA, "team", audiences=[satokens.ISSUER], now=NOW, expiration=3600)
    payload.update(changes)
    return SIGNER.sign(payload)


def test_claims_are_kubes() -> None:
    pod = satokens.Ref("web", "pod-uid")
    got = satokens.claims(SA, "team", audiences=["a", "b"], now=1000, expiration=600, jti="j", pod=pod,
                          node=satokens.Ref("node-1", "node-uid"), warn_after=3607)
    assert got == {"aud": ["a", "b"], "exp": 1600, "iat": 1000, "iss": satokens.ISSUER, "jti": "j", "nbf": 1000,
                   "sub": "system:serviceaccount:team:robot",
                   "kubernetes.io": {"namespace": "team", "serviceaccount": {"name": "robot", "uid": SA.uid},
                                     "pod": {"name": "web", "uid": "pod-uid"},
                                     "node": {"name": "node-1", "uid": "node-uid"}, "warnafter": 4607}}


def test_a_good_token_names_its_holder() -> None:
    info = SIGNER.verify(SIGNER.sign(satokens.claims(
        SA, "team", audiences=[satokens.ISSUER], now=int(time.time()), expiration=600, jti="abc",
        pod=satokens.Ref("web", "pu"))))
    assert (info.namespace, info.name, info.uid, info.pod) == ("team", "robot", SA.uid, satokens.Ref("web", "pu"))
    assert dict(info.extra()) == {"authentication.kubernetes.io/pod-name": ("web",),
                                  "authentication.kubernetes.io/pod-uid": ("pu",),
                                  "authentication.kubernetes.io/credential-id": ("JTI=abc",)}


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


@pytest.mark.parametrize("token", [
    pytest.param(sign(exp=NOW - 120), id="expired beyond the minute of leeway"),
    pytest.param(sign(nbf=NOW + 3600), id="not yet valid"),
    pytest.param(sign(aud=["vault"]), id="another audience"),
    pytest.param(sign(iss="https://elsewhere"), id="another issuer"),
    pytest.param(sign(sub="system:serviceaccount:team:admin"), id="subject not the claimed account"),
    pytest.param(sign(**{"kubernetes.io": {"namespace": "team"}}), id="no service account claim"),
    pytest.param(satokens.Signer.ephemeral().sign(satokens.claims(SA, "team", audiences=[satokens.ISSUER], now=NOW,
                                                                  expiration=600)), id="another key"),
    pytest.param(_b64({"alg": "none"}) + "." + sign().split(".")[1] + ".", id="alg none"),
    pytest.param(sign().rsplit(".", 1)[0] + ".AAAA", id="bad signature"),
    pytest.param("not.a.jwt", id="garbage"),
])
def test_bad_tokens_are_refused(token: str) -> None:
    with pytest.raises(satokens.InvalidToken):
        SIGNER.verify(token)


def test_hs256_with_the_public_key_is_refused() -> None:
    """The classic algorithm confusion: a MAC keyed with the public key must not pass as a signature."""
    from cryptography.hazmat.primitives import serialization

    public = SIGNER.key.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo)
    payload = satokens.claims(SA, "team", audiences=[satokens.ISSUER], now=NOW, expiration=600)
    header = _b64({"alg": "HS256", "typ": "JWT"})
    body = _b64(payload)
    import hashlib
    import hmac

    mac = hmac.new(public, f"{header}.{body}".encode(), hashlib.sha256).digest()
    forged = f"{header}.{body}." + base64.urlsafe_b64encode(mac).decode().rstrip("=")
    with pytest.raises(satokens.InvalidToken):
        SIGNER.verify(forged)
    assert jwt.get_unverified_header(sign())["alg"] == "ES256"


# --- the admission plugin -----------------------------------------------------------------------

def pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}], **spec}}


def test_admission_reuses_a_token_volume_the_pod_has() -> None:
    own = saadmission.token_volume("kube-api-access-mine")
    out = saadmission.admit_pod(pod(volumes=[own]), {}, suffix="zzzzz")
    assert out["spec"]["volumes"] == [own]
    assert out["spec"]["containers"][0]["volumeMounts"][0]["name"] == "kube-api-access-mine"


def test_admission_leaves_the_input_alone_and_copies_pull_secrets() -> None:
    original = pod()
    out = saadmission.admit_pod(original, {"imagePullSecrets": [{"name": "registry"}]}, suffix="abcde")
    assert original == pod()
    assert out["spec"]["imagePullSecrets"] == [{"name": "registry"}]
    assert out["spec"]["volumes"][0]["name"] == "kube-api-access-abcde"


@pytest.mark.parametrize(("spec", "message"), [
    ({"serviceAccountName": "x"}, "a mirror pod may not reference service accounts"),
    ({"volumes": [{"name": "s", "secret": {"secretName": "x"}}]}, "a mirror pod may not reference secrets"),
    ({"volumes": [saadmission.token_volume("kube-api-access-x")]},
     "a mirror pod may not use ServiceAccountToken volume projections"),
])
def test_mirror_pods(spec: dict[str, Any], message: str) -> None:
    mirror = pod(**spec)
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "x"}
    with pytest.raises(Exception, match=message):
        saadmission.check_mirror(mirror)


# --- what a service account may do -------------------------------------------------------------

ROBOT = UserInfo("system:serviceaccount:team:robot", "u", ("system:serviceaccounts", "system:serviceaccounts:team",
                                                            "system:authenticated"))
# The bootstrap policy and nothing else: what kube gives a service account nobody has bound.
BOOTSTRAP = rbac.Policy.of(cluster_roles=bootstrappolicy.policy()[0], roles=[],
                           cluster_role_bindings=bootstrappolicy.policy()[1], role_bindings=[])


@pytest.mark.parametrize(("info", "allowed"), [
    (RequestInfo(path="", verb="list", is_resource=True, resource="pods", namespace="team"), False),
    (RequestInfo(path="", verb="watch", is_resource=True, group="apps", resource="deployments"), False),
    (RequestInfo(path="", verb="get", is_resource=True, resource="pods", subresource="log", name="p"), False),
    (RequestInfo(path="", verb="get", is_resource=True, resource="secrets", name="s"), False),
    (RequestInfo(path="", verb="create", is_resource=True, resource="pods", subresource="exec", name="p"), False),
    (RequestInfo(path="", verb="create", is_resource=True, resource="configmaps"), False),
    (RequestInfo(path="", verb="create", is_resource=True, resource="serviceaccounts", subresource="token",
                 name="robot"), False),
    (RequestInfo(path="", verb="create", is_resource=True, group="authorization.k8s.io",
                 resource="selfsubjectaccessreviews"), True),  # system:basic-user
    (RequestInfo(path="/apis", verb="get"), True),  # system:discovery
    (RequestInfo(path="/openid/v1/jwks", verb="get"), True),  # system:service-account-issuer-discovery
    (RequestInfo(path="/apis", verb="post"), False),
    (RequestInfo(path="/metrics", verb="get"), False),
])
def test_service_account_policy(info: RequestInfo, allowed: bool) -> None:
    assert verdict(ROBOT, info, policy=BOOTSTRAP)[0] is allowed
