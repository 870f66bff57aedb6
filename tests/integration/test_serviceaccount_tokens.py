"""Service account tokens against a real API server on a real etcd: TokenRequest through the Python
client, the real kubectl (`kubectl create token`) and plain HTTP, kube's defaults, validation and
bound-object checks; the JWT's claims; the token authenticating as the service account, with the
read-only policy service accounts have until RBAC exists; 401 for an expired token, another audience,
a token whose pod or account is gone; the ServiceAccount admission plugin on pod create."""

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
import jwt
import pytest
from apitools import assert_status, ns_path
from kubectltools import Kubectl, write_kubeconfig

from apiserver import satokens
from kubelab.etcd import Etcd
from kubelab.pki import ensure_service_account_key

SUFFIX = secrets.token_hex(3)
NS = f"sa-{SUFFIX}"
ISSUER = "https://kubernetes.default.svc.cluster.local"
NODE = f"sa-node-{SUFFIX}"


def claims_of(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return decoded


@pytest.fixture(scope="module")
def key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_service_account_key(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def server(etcd: Etcd, start_apiserver: Callable[..., AbstractContextManager[str]], key_file: Path,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An API server that asks for tokens, with ServiceAccount admission on and a signing key file."""
    tokens = tmp_path_factory.mktemp("auth") / "tokens.csv"
    tokens.write_text(f'admin-{SUFFIX},alice,1,"system:masters"\n'
                      f"node-{SUFFIX},system:node:{NODE},n1,system:nodes\n")
    with start_apiserver(etcd.url, token_auth_file=str(tokens), service_account_key_file=str(key_file),
                         disable_admission_plugins=()) as url:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer admin-{SUFFIX}"}) as admin:
            admin.post("/api/v1/namespaces", json={"metadata": {"name": NS}}).raise_for_status()
            for name in ("default", "robot"):
                admin.post(ns_path("serviceaccounts", NS), json={"metadata": {"name": name}}).raise_for_status()
            # A service account may do nothing until bound (RBAC): the namespace's accounts may read it.
            admin.post(ns_path("rolebindings", NS, group="rbac.authorization.k8s.io/v1"), json={
                "metadata": {"name": "accounts-view"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                "subjects": [{"kind": "Group", "name": f"system:serviceaccounts:{NS}"}]}).raise_for_status()
        yield url


@pytest.fixture
def admin(server: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server, headers={"Authorization": f"Bearer admin-{SUFFIX}"}, timeout=10) as api:
        yield api


def as_token(server: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=server, headers={"Authorization": f"Bearer {token}"}, timeout=10)


def request_token(admin: httpx.Client, name: str = "robot", **spec: Any) -> dict[str, Any]:
    resp = admin.post(ns_path("serviceaccounts", NS, name) + "/token",
                      json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
    assert resp.status_code == 201, resp.text
    body: dict[str, Any] = resp.json()
    return body


def make_pod(admin: httpx.Client, name: str, **spec: Any) -> dict[str, Any]:
    resp = admin.post(ns_path("pods", NS), json={"metadata": {"name": name},
                                                 "spec": {"containers": [{"name": "c", "image": "x"}], **spec}})
    assert resp.status_code == 201, resp.text
    body: dict[str, Any] = resp.json()
    return body


def test_token_request_defaults_and_claims(admin: httpx.Client) -> None:
    account = admin.get(ns_path("serviceaccounts", NS, "robot")).json()
    before = int(time.time())
    out = request_token(admin)
    assert out["kind"] == "TokenRequest" and out["apiVersion"] == "authentication.k8s.io/v1"
    assert out["metadata"]["name"] == "robot" and out["metadata"]["namespace"] == NS
    assert out["spec"] == {"audiences": [ISSUER], "expirationSeconds": 3600}
    claims = claims_of(out["status"]["token"])
    assert claims["iss"] == ISSUER
    assert claims["sub"] == f"system:serviceaccount:{NS}:robot"
    assert claims["aud"] == [ISSUER]
    assert claims["exp"] - claims["iat"] == 3600 and claims["nbf"] == claims["iat"] >= before
    assert len(claims["jti"]) == 36
    assert claims["kubernetes.io"] == {"namespace": NS,
                                       "serviceaccount": {"name": "robot", "uid": account["metadata"]["uid"]}}
    header = jwt.get_unverified_header(out["status"]["token"])
    assert header["alg"] == "ES256" and header["kid"]


def test_the_token_authenticates_as_the_service_account(server: str, admin: httpx.Client) -> None:
    token = request_token(admin)["status"]["token"]
    with as_token(server, token) as sa:
        assert sa.get(ns_path("pods", NS)).status_code == 200
        review = sa.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json={
            "spec": {"resourceAttributes": {"verb": "list", "resource": "secrets", "namespace": NS}}})
        assert review.status_code == 201 and review.json()["status"]["allowed"] is False
        user = f"system:serviceaccount:{NS}:robot"
        assert_status(sa.get(ns_path("secrets", NS)), 403, "Forbidden",
                      f'secrets is forbidden: User "{user}" cannot list resource "secrets" in API group "" in the '
                      f'namespace "{NS}"')
        assert_status(sa.post(ns_path("configmaps", NS), json={"metadata": {"name": "x"}}), 403, "Forbidden",
                      f'configmaps is forbidden: User "{user}" cannot create resource "configmaps" in API group "" '
                      f'in the namespace "{NS}"')
        assert_status(sa.get(ns_path("pods", NS), headers={"Impersonate-User": "alice"}), 403, "Forbidden")


def test_kubectl_and_the_python_client_create_tokens(etcd: Etcd, key_file: Path,
                                                     start_apiserver: Callable[..., AbstractContextManager[str]],
                                                     tmp_path: Path) -> None:
    """Through an open API server (kubectl sends tokens only over TLS, and this one speaks plain HTTP)."""
    from kubernetes import client as k8s

    with start_apiserver(etcd.url, service_account_key_file=str(key_file)) as url:
        ns = f"sa-kubectl-{SUFFIX}"
        httpx.post(f"{url}/api/v1/namespaces", json={"metadata": {"name": ns}}).raise_for_status()
        httpx.post(f"{url}{ns_path('serviceaccounts', ns)}", json={"metadata": {"name": "ci"}}).raise_for_status()
        kubectl = Kubectl("dispatcher", write_kubeconfig(tmp_path, url), tmp_path / "cache")
        token = kubectl("create", "token", "ci", "-n", ns, "--audience", "vault", "--duration", "20m").ok().stdout.strip()
        claims = claims_of(token)
        assert claims["aud"] == ["vault"] and claims["exp"] - claims["iat"] == 1200
        assert claims["sub"] == f"system:serviceaccount:{ns}:ci"
        # An open API server takes a request without a token for system:anonymous (kubectl auth whoami).
        assert "system:anonymous" in kubectl("auth", "whoami").ok().stdout
        refused = kubectl("create", "token", "ci", "-n", ns, "--duration", "1m")
        assert refused.returncode != 0
        assert "may not specify a duration less than 10 minutes" in refused.stderr
        missing = kubectl("create", "token", "nobody", "-n", ns)
        assert 'serviceaccounts "nobody" not found' in missing.stderr

        configuration = k8s.Configuration(host=url)
        with k8s.ApiClient(configuration) as api_client:
            core = k8s.CoreV1Api(api_client)
            answer = core.create_namespaced_service_account_token(
                "ci", ns, k8s.AuthenticationV1TokenRequest(spec=k8s.V1TokenRequestSpec(audiences=[ISSUER],
                                                                                       expiration_seconds=900)))
            assert answer.spec.expiration_seconds == 900 and answer.status.token.count(".") == 2
            assert claims_of(answer.status.token)["aud"] == [ISSUER]
            # An open API server still refuses a token that is not valid any more (kube: authentication
            # runs before AlwaysAllow): another audience.
            resp = httpx.get(f"{url}/api/v1/namespaces",
                             headers={"Authorization": f"Bearer {token}"})
            assert_status(resp, 401, "Unauthorized", "Unauthorized")
            good = httpx.get(f"{url}/api/v1/namespaces", headers={"Authorization": f"Bearer {answer.status.token}"})
            assert good.status_code == 200


@pytest.mark.parametrize(("spec", "message"), [
    pytest.param({"expirationSeconds": 599}, 'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: '
                 "Invalid value: 599: may not specify a duration less than 10 minutes", id="too short"),
    pytest.param({"expirationSeconds": 2**32 + 1}, 'TokenRequest.authentication.k8s.io "" is invalid: '
                 "spec.expirationSeconds: Invalid value: 4294967297: may not specify a duration larger than 2^32 "
                 "seconds", id="too long"),
])
def test_token_request_validation(admin: httpx.Client, spec: dict[str, Any], message: str) -> None:
    resp = admin.post(ns_path("serviceaccounts", NS, "robot") + "/token", json={"spec": spec})
    assert_status(resp, 422, "Invalid", message)


def test_bound_object_checks(admin: httpx.Client) -> None:
    make_pod(admin, "bound-web")
    path = ns_path("serviceaccounts", NS, "robot") + "/token"
    assert_status(admin.post(path, json={"spec": {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1",
                                                                      "name": "bound-web"}}}),
                  400, "BadRequest", 'cannot bind token for serviceaccount "robot" to pod running with different '
                                     "serviceaccount name.")
    assert_status(admin.post(path, json={"spec": {"boundObjectRef": {"kind": "Deployment", "apiVersion": "apps/v1",
                                                                      "name": "x"}}}),
                  400, "BadRequest", "cannot bind token to object of type apps/v1, Kind=Deployment")
    assert_status(admin.post(ns_path("serviceaccounts", NS, "default") + "/token", json={"spec": {
        "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "bound-web", "uid": "not-it"}}}),
                  409, "Conflict", 'Operation cannot be fulfilled on Pod "bound-web": the UID in the bound object '
                                   "reference (not-it) does not match the UID in record. The object might have been "
                                   "deleted and then recreated")
    assert_status(admin.post(path, json={"spec": {"boundObjectRef": {"kind": "Secret", "apiVersion": "v1",
                                                                      "name": "nope"}}}),
                  404, "NotFound", 'secrets "nope" not found')


def test_a_pod_bound_token_dies_with_its_pod(server: str, admin: httpx.Client) -> None:
    pod = make_pod(admin, "bound-db")
    out = request_token(admin, "default", boundObjectRef={"kind": "Pod", "apiVersion": "v1", "name": "bound-db",
                                                          "uid": pod["metadata"]["uid"]}, expirationSeconds=3607)
    token = out["status"]["token"]
    claims = claims_of(token)
    # kubelet's 3607 s pod token is issued for a year and warns after 3607 s (--service-account-extend-
    # token-expiration); the status still says 3607 s.
    assert claims["exp"] - claims["iat"] == 365 * 24 * 3600
    assert claims["kubernetes.io"]["warnafter"] == claims["iat"] + 3607
    assert claims["kubernetes.io"]["pod"] == {"name": "bound-db", "uid": pod["metadata"]["uid"]}
    with as_token(server, token) as sa:
        assert sa.get(ns_path("pods", NS, "bound-db")).status_code == 200
        whoami = sa.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", json={})
        assert whoami.status_code == 201, whoami.text
        account = admin.get(ns_path("serviceaccounts", NS, "default")).json()
        assert whoami.json()["status"]["userInfo"] == {
            "username": f"system:serviceaccount:{NS}:default", "uid": account["metadata"]["uid"],
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NS}", "system:authenticated"],
            "extra": {"authentication.kubernetes.io/pod-name": ["bound-db"],
                      "authentication.kubernetes.io/pod-uid": [pod["metadata"]["uid"]],
                      "authentication.kubernetes.io/credential-id": [f"JTI={claims['jti']}"]}}
        admin.delete(ns_path("pods", NS, "bound-db"), params={"gracePeriodSeconds": "0"}).raise_for_status()
        assert_status(sa.get(ns_path("pods", NS)), 401, "Unauthorized", "Unauthorized")


def test_expired_foreign_and_orphaned_tokens_are_unauthorized(server: str, admin: httpx.Client,
                                                             key_file: Path) -> None:
    account = admin.get(ns_path("serviceaccounts", NS, "robot")).json()
    signer = satokens.Signer.from_file(key_file)
    ref = satokens.Ref("robot", account["metadata"]["uid"])
    now = int(time.time())
    expired = signer.sign(satokens.claims(ref, NS, audiences=[ISSUER], now=now - 7200, expiration=3600))
    foreign = satokens.Signer.ephemeral().sign(satokens.claims(ref, NS, audiences=[ISSUER], now=now,
                                                               expiration=3600))
    other_audience = request_token(admin, audiences=["vault"])["status"]["token"]
    good = signer.sign(satokens.claims(ref, NS, audiences=[ISSUER], now=now, expiration=3600))
    with as_token(server, good) as sa:
        assert sa.get(ns_path("pods", NS)).status_code == 200
    for token in (expired, foreign, other_audience):
        with as_token(server, token) as sa:
            assert_status(sa.get(ns_path("pods", NS)), 401, "Unauthorized", "Unauthorized")
    # The account deleted and made again: same name, new uid, the old token is dead.
    admin.delete(ns_path("serviceaccounts", NS, "robot")).raise_for_status()
    admin.post(ns_path("serviceaccounts", NS), json={"metadata": {"name": "robot"}}).raise_for_status()
    with as_token(server, good) as sa:
        assert_status(sa.get(ns_path("pods", NS)), 401, "Unauthorized", "Unauthorized")


def test_issuer_discovery(server: str, admin: httpx.Client, key_file: Path) -> None:
    config = admin.get("/.well-known/openid-configuration").json()
    assert config["issuer"] == ISSUER and config["jwks_uri"] == f"{ISSUER}/openid/v1/jwks"
    keys = admin.get("/openid/v1/jwks").json()["keys"]
    token = request_token(admin)["status"]["token"]
    public = jwt.PyJWK(keys[0]).key
    assert jwt.decode(token, public, algorithms=["ES256"], audience=ISSUER)["sub"].endswith(":robot")


# What kube-apiserver stores for the ServiceAccount plugin's volume and mount, as `kubectl get pod -o json`
# prints them (TokenVolumeSource and the VolumeMount in plugin/pkg/admission/serviceaccount, in the Go
# types' field order), with the volume's five random characters cut out.
KUBE_VOLUME = ('{"name":"kube-api-access-","projected":{"sources":[{"serviceAccountToken":{"expirationSeconds":3607,'
               '"path":"token"}},{"configMap":{"name":"kube-root-ca.crt","items":[{"key":"ca.crt","path":"ca.crt"}]}},'
               '{"downwardAPI":{"items":[{"path":"namespace","fieldRef":{"apiVersion":"v1","fieldPath":'
               '"metadata.namespace"}}]}}],"defaultMode":420}}')
KUBE_MOUNT = '{"name":"kube-api-access-","readOnly":true,"mountPath":"/var/run/secrets/kubernetes.io/serviceaccount"}'


def compact(obj: Any, volume_name: str) -> str:
    return json.dumps(obj, separators=(",", ":")).replace(volume_name, "kube-api-access-")


def test_admission_adds_kubes_volume_and_mounts(admin: httpx.Client) -> None:
    resp = admin.post(ns_path("pods", NS), json={"metadata": {"name": "adm-web"}, "spec": {
        "initContainers": [{"name": "init", "image": "x"}],
        "containers": [{"name": "a", "image": "x"},
                       {"name": "b", "image": "x", "volumeMounts": [
                           {"name": "own", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]}],
        "volumes": [{"name": "own", "emptyDir": {}}]}})
    assert resp.status_code == 201, resp.text
    stored = admin.get(ns_path("pods", NS, "adm-web")).json()["spec"]
    assert stored["serviceAccountName"] == "default" and stored["serviceAccount"] == "default"
    volume = stored["volumes"][1]
    name = volume["name"]
    assert len(name) == len("kube-api-access-") + 5 and stored["volumes"][0] == {"name": "own", "emptyDir": {}}
    assert compact(volume, name) == KUBE_VOLUME
    assert compact(stored["initContainers"][0]["volumeMounts"], name) == f"[{KUBE_MOUNT}]"
    assert compact(stored["containers"][0]["volumeMounts"], name) == f"[{KUBE_MOUNT}]"
    # A container that mounts something of its own at the path keeps it alone.
    assert stored["containers"][1]["volumeMounts"] == [
        {"name": "own", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]


def test_automount_false_on_the_pod_or_the_account(admin: httpx.Client) -> None:
    spec = make_pod(admin, "adm-off", automountServiceAccountToken=False)["spec"]
    assert "volumes" not in spec and "volumeMounts" not in spec["containers"][0]
    admin.post(ns_path("serviceaccounts", NS), json={"metadata": {"name": "quiet"},
                                                     "automountServiceAccountToken": False}).raise_for_status()
    spec = make_pod(admin, "adm-quiet", serviceAccountName="quiet")["spec"]
    assert "volumes" not in spec and spec["serviceAccountName"] == "quiet"
    # The pod's own preference wins over its account's.
    spec = make_pod(admin, "adm-loud", serviceAccountName="quiet", automountServiceAccountToken=True)["spec"]
    assert spec["volumes"][0]["name"].startswith("kube-api-access-")


def test_a_missing_account_is_forbidden(admin: httpx.Client) -> None:
    resp = admin.post(ns_path("pods", NS), json={"metadata": {"name": "adm-ghost"}, "spec": {
        "serviceAccountName": "ghost", "containers": [{"name": "c", "image": "x"}]}})
    assert_status(resp, 403, "Forbidden", f'pods "adm-ghost" is forbidden: error looking up service account '
                                          f'{NS}/ghost: serviceaccount "ghost" not found')
    assert admin.get(ns_path("pods", NS, "adm-ghost")).status_code == 404


def test_a_node_gets_tokens_only_for_its_own_pods(server: str, admin: httpx.Client) -> None:
    """NodeRestriction's admitServiceAccount: kubelet asks for its pods' projected tokens, and nothing else."""
    mine = make_pod(admin, "node-mine", nodeName=NODE)
    theirs = make_pod(admin, "node-theirs", nodeName="elsewhere")
    path = ns_path("serviceaccounts", NS, "default") + "/token"

    def ask(ref: dict[str, Any] | None) -> httpx.Response:
        with as_token(server, f"node-{SUFFIX}") as node:
            return node.post(path, json={"spec": {"expirationSeconds": 3607, **({"boundObjectRef": ref} if ref else {})}})

    ref = {"apiVersion": "v1", "kind": "Pod", "name": "node-mine", "uid": mine["metadata"]["uid"]}
    ok = ask(ref)
    assert ok.status_code == 201, ok.text
    assert claims_of(ok.json()["status"]["token"])["kubernetes.io"]["node"] == {"name": NODE}
    for bad, message in (
            (None, "node requested token not bound to a pod"),
            ({**ref, "kind": "Secret"}, "node requested token not bound to a pod"),
            ({**ref, "uid": ""}, "node requested token with a pod binding without a uid"),
            ({**ref, "uid": "stale"}, ("the UID in the bound object reference (stale) does not match the UID in "
                                      "record. The object might have been deleted and then recreated")),
            ({**ref, "name": "node-theirs", "uid": theirs["metadata"]["uid"]},
             "node requested token bound to a pod scheduled on a different node")):
        assert_status(ask(bad), 403, "Forbidden", f'serviceaccounts "default" is forbidden: {message}')
    assert_status(ask({**ref, "name": "node-gone"}), 404, "NotFound", 'pods "node-gone" not found')


@pytest.mark.parametrize("body", [
    pytest.param([], id="not an object"),
    pytest.param({"spec": {"expirationSeconds": "3600"}}, id="duration as a string"),
    pytest.param({"spec": {"expirationSeconds": True}}, id="duration as a bool"),
    pytest.param({"spec": {"expirationSeconds": -5}}, id="negative duration"),
    pytest.param({"spec": {"expirationSeconds": 1e300}}, id="enormous duration"),
    pytest.param({"spec": {"expirationSeconds": 3600.0}}, id="duration as a float"),
    pytest.param({"spec": {"expirationSeconds": 2**64}}, id="duration beyond int64"),
    pytest.param({"spec": {"audiences": "vault"}}, id="audiences not a list"),
    pytest.param({"spec": {"audiences": [1]}}, id="audience not a string"),
    pytest.param({"spec": "x"}, id="spec not an object"),
    pytest.param({"spec": {"boundObjectRef": "pod"}}, id="reference not an object"),
    pytest.param({"spec": {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1"}}}, id="reference without a name"),
    pytest.param({"spec": {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": ["x"]}}},
                 id="reference name not a string"),
    pytest.param({"kind": "Pod", "apiVersion": "v1"}, id="another kind"),
    pytest.param({"metadata": {"name": "someone-else"}}, id="another name"),
    pytest.param({"metadata": {"namespace": "kube-system"}}, id="another namespace"),
])
def test_bad_token_requests_get_a_status_and_no_token(admin: httpx.Client, body: Any) -> None:
    resp = admin.post(ns_path("serviceaccounts", NS, "default") + "/token", json=body)
    assert 400 <= resp.status_code < 500, resp.text
    assert resp.json()["kind"] == "Status" and "token" not in resp.text.lower().replace("tokenrequest", "")


def test_the_account_is_looked_up_before_the_duration_is_checked(admin: httpx.Client) -> None:
    resp = admin.post(ns_path("serviceaccounts", NS, "nobody") + "/token", json={"spec": {"expirationSeconds": 1}})
    assert_status(resp, 404, "NotFound", 'serviceaccounts "nobody" not found')
