"""authentication.k8s.io/v1 TokenReview against a real API server on a real etcd, through plain HTTP, the
real kubectl (`create -f`) and the official Python client: the token run through the API server's own
authenticators, as kube-apiserver's TokenReview REST runs it (pkg/registry/authentication/tokenreview):
the user, groups and extras of a service account token or of a token-file user, the audiences the token
is valid for, kube's error for one that is not (expired, another audience, its pod gone, not a token at
all); 201 and nothing stored; who may ask (nodes may, service accounts may not)."""

from __future__ import annotations

import base64
import json
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import kubernetes
import pytest
from apitools import assert_status, ns_path
from kubectltools import Kubectl, write_kubeconfig

from apiserver import satokens
from kubelab.etcd import Etcd
from kubelab.pki import ensure_service_account_key

SUFFIX = secrets.token_hex(3)
NS = f"tr-{SUFFIX}"
ISSUER = "https://kubernetes.default.svc.cluster.local"
REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"


@pytest.fixture(scope="module")
def key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_service_account_key(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def server(etcd: Etcd, start_apiserver: Callable[..., AbstractContextManager[str]], key_file: Path,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("tokenreview")
    tokens = tmp / "tokens.csv"
    tokens.write_text(f'admin-{SUFFIX},alice,1,"system:masters,team-a"\nnode-{SUFFIX},system:node:n1,n1,system:nodes\n')
    with start_apiserver(etcd.url, token_auth_file=str(tokens), service_account_key_file=str(key_file)) as url, \
            httpx.Client(base_url=url, headers={"Authorization": f"Bearer admin-{SUFFIX}"}, timeout=30) as admin:
        admin.post("/api/v1/namespaces", json={"metadata": {"name": NS}}).raise_for_status()
        admin.post(ns_path("serviceaccounts", NS), json={"metadata": {"name": "robot"}}).raise_for_status()
        # kubectl sends tokens over TLS only: it and the Python client use an API server on the same etcd
        # and key, without a token file.
        with start_apiserver(etcd.url, service_account_key_file=str(key_file)) as open_url:
            yield {"url": url, "admin": admin, "open_url": open_url, "tmp": tmp, "key_file": key_file}


def token_for(admin: httpx.Client, **spec: Any) -> str:
    resp = admin.post(ns_path("serviceaccounts", NS, "robot") + "/token", json={"spec": spec})
    assert resp.status_code == 201, resp.text
    token: str = resp.json()["status"]["token"]
    return token


def review(client: httpx.Client, token: str, audiences: list[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"token": token}
    if audiences is not None:
        spec["audiences"] = audiences
    resp = client.post(REVIEWS, json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec})
    assert resp.status_code == 201, resp.text
    body: dict[str, Any] = resp.json()
    assert (body["kind"], body["apiVersion"]) == ("TokenReview", "authentication.k8s.io/v1")
    assert body["spec"]["token"] == token
    return body["status"]  # type: ignore[no-any-return]


def robot_uid(admin: httpx.Client) -> str:
    uid: str = admin.get(ns_path("serviceaccounts", NS, "robot")).json()["metadata"]["uid"]
    return uid


def test_a_service_account_token_is_its_account(server: dict[str, Any]) -> None:
    admin = server["admin"]
    pod = admin.post(ns_path("pods", NS), json={"metadata": {"name": "holder"}, "spec": {
        "serviceAccountName": "robot", "containers": [{"name": "c", "image": "x"}]}})
    assert pod.status_code == 201, pod.text
    uid = pod.json()["metadata"]["uid"]
    token = token_for(admin, boundObjectRef={"kind": "Pod", "apiVersion": "v1", "name": "holder", "uid": uid})
    jti = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "==="))["jti"]
    status = review(admin, token)
    assert status == {"authenticated": True, "audiences": [ISSUER], "user": {
        "username": f"system:serviceaccount:{NS}:robot", "uid": robot_uid(admin),
        "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NS}", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/pod-name": ["holder"], "authentication.kubernetes.io/pod-uid": [uid],
                  "authentication.kubernetes.io/credential-id": [f"JTI={jti}"]}}}
    admin.delete(ns_path("pods", NS, "holder"), params={"gracePeriodSeconds": "0"}).raise_for_status()
    assert review(admin, token) == {"user": {},
                                    "error": "[invalid bearer token, service account token has been invalidated]"}


def test_a_token_file_user(server: dict[str, Any]) -> None:
    status = review(server["admin"], f"admin-{SUFFIX}")
    assert status == {"authenticated": True, "audiences": [ISSUER], "user": {
        "username": "alice", "uid": "1", "groups": ["system:masters", "team-a", "system:authenticated"]}}
    # Its tokens are the API's audience's only (audience-agnostic tokens: WrapAudienceAgnosticToken).
    assert review(server["admin"], f"admin-{SUFFIX}", ["vault"]) == {"user": {}, "error": "invalid bearer token"}


def test_audiences(server: dict[str, Any]) -> None:
    admin = server["admin"]
    vault = token_for(admin, audiences=["vault", "other"])
    assert review(admin, vault, ["vault"])["audiences"] == ["vault"]
    assert review(admin, vault, ["vault"])["authenticated"] is True
    assert review(admin, vault) == {"user": {}, "error": f'[invalid bearer token, token audiences ["vault" "other"] is '
                                                         f'invalid for the target audiences ["{ISSUER}"]]'}


def test_tokens_that_are_not_valid(server: dict[str, Any]) -> None:
    admin = server["admin"]
    signer = satokens.Signer.from_file(server["key_file"])
    ref = satokens.Ref("robot", robot_uid(admin))
    now = int(time.time())
    expired = signer.sign(satokens.claims(ref, NS, audiences=[ISSUER], now=now - 7200, expiration=3600))
    assert review(admin, expired)["error"] == "[invalid bearer token, service account token has expired]"
    forged = satokens.Signer.ephemeral().sign(satokens.claims(ref, NS, audiences=[ISSUER], now=now, expiration=3600))
    assert review(admin, forged)["error"] == "[invalid bearer token, go-jose/go-jose: error in cryptographic primitive]"
    stale = signer.sign(satokens.claims(satokens.Ref("robot", "not-its-uid"), NS, audiences=[ISSUER], now=now,
                                        expiration=3600))
    assert review(admin, stale)["error"] == (f"[invalid bearer token, service account UID ({ref.uid}) does not match "
                                             "claim (not-its-uid)]")
    assert review(admin, "not-a-token") == {"user": {}, "error": "invalid bearer token"}


@pytest.mark.parametrize(("body", "message"), [
    ({"spec": {}}, "token is required for TokenReview in authentication"),
    ({"spec": {"token": ""}}, "token is required for TokenReview in authentication"),
    ({"spec": {"token": 5}}, ('TokenReview in version "v1" cannot be handled as a TokenReview: json: cannot unmarshal '
                             "into Go struct field TokenReviewSpec.spec.token of type string")),
    ({"spec": {"token": "x", "audiences": "vault"}}, ('TokenReview in version "v1" cannot be handled as a TokenReview: '
                                                     "json: cannot unmarshal into Go struct field "
                                                     "TokenReviewSpec.spec.audiences of type []string")),
])
def test_bad_reviews_are_400(server: dict[str, Any], body: dict[str, Any], message: str) -> None:
    assert_status(server["admin"].post(REVIEWS, json=body), 400, "BadRequest", message)


def test_nothing_is_stored_and_only_create_is_served(server: dict[str, Any]) -> None:
    admin = server["admin"]
    assert_status(admin.get(REVIEWS), 405, "MethodNotAllowed")
    assert_status(admin.post(f"/apis/authentication.k8s.io/v1/namespaces/{NS}/tokenreviews",
                             json={"spec": {"token": "x"}}), 404, "NotFound")
    found = {r["name"]: r for r in admin.get("/apis/authentication.k8s.io/v1").json()["resources"]}
    assert found["tokenreviews"]["verbs"] == ["create"]
    assert found["tokenreviews"]["namespaced"] is False


def test_who_may_review(server: dict[str, Any]) -> None:
    token = token_for(server["admin"])
    node = httpx.post(server["url"] + REVIEWS, json={"spec": {"token": token}},
                      headers={"Authorization": f"Bearer node-{SUFFIX}"}, timeout=30)
    assert node.status_code == 201, node.text  # system:node's rule: a kubelet authenticates its callers
    assert node.json()["status"]["authenticated"] is True
    sa = httpx.post(server["url"] + REVIEWS, json={"spec": {"token": token}},
                    headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert_status(sa, 403, "Forbidden", f'tokenreviews.authentication.k8s.io is forbidden: User "system:serviceaccount:'
                                        f'{NS}:robot" cannot create resource "tokenreviews" in API group '
                                        '"authentication.k8s.io" at the cluster scope')


def test_kubectl_create_and_the_python_client(server: dict[str, Any]) -> None:
    token = token_for(server["admin"])
    kubeconfig = write_kubeconfig(server["tmp"], server["open_url"])
    kubectl = Kubectl("1.33", kubeconfig, server["tmp"] / "cache")
    manifest = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
    out = json.loads(kubectl.ok("create", "-f", "-", "-o", "json", input=manifest))
    assert out["status"]["authenticated"] is True
    assert out["status"]["user"]["username"] == f"system:serviceaccount:{NS}:robot"

    config = kubernetes.client.Configuration()
    config.host = server["open_url"]
    with kubernetes.client.ApiClient(config) as client:
        api = kubernetes.client.AuthenticationV1Api(client)
        answer = api.create_token_review(kubernetes.client.V1TokenReview(
            spec=kubernetes.client.V1TokenReviewSpec(token=token)))
        assert answer.status.authenticated is True
        assert answer.status.user.username == f"system:serviceaccount:{NS}:robot"
        assert answer.status.audiences == [ISSUER]
        bad = api.create_token_review(kubernetes.client.V1TokenReview(
            spec=kubernetes.client.V1TokenReviewSpec(token="nope")))
        assert not bad.status.authenticated
        assert bad.status.error == "invalid bearer token"
