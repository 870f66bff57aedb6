"""Legacy service account token Secrets in `kubelab up --dataplane render` (no root), through the real
kubectl and plain HTTP: a Secret of type kubernetes.io/service-account-token annotated with an account's
name is filled by the token controller (token, ca.crt, namespace, the account's uid), as
kube-controller-manager's tokens-controller fills it; the API server accepts the token (SelfSubjectReview
names the account, TokenReview authenticates it) while the Secret holds it and the account is the same
one; a Secret naming no account, and an account's Secrets once it is deleted, are deleted."""

from __future__ import annotations

import base64
import json
import secrets
from pathlib import Path

import httpx
import pytest
from kubectltools import Kubectl, RenderCluster, wait_for

NS = f"legacy-{secrets.token_hex(3)}"


def token_secret(name: str, account: str) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
                       "metadata": {"name": name, "namespace": NS,
                                    "annotations": {"kubernetes.io/service-account.name": account}}})


def whoami(server: str, token: str) -> httpx.Response:
    return httpx.post(f"{server}/apis/authentication.k8s.io/v1/selfsubjectreviews", json={},
                      headers={"Authorization": f"Bearer {token}"}, timeout=30)


def test_legacy_token_secrets(tmp_path_factory: pytest.TempPathFactory) -> None:
    data = tmp_path_factory.mktemp("render-legacy") / "data"
    cluster = RenderCluster(data, nodes=1).start()
    try:
        kubectl = Kubectl("dispatcher", cluster.kubeconfig, tmp_path_factory.mktemp("cache"))
        kubectl.ok("create", "namespace", NS)
        kubectl.ok("create", "serviceaccount", "bot", "-n", NS)
        account_uid = json.loads(kubectl.ok("get", "sa", "bot", "-n", NS, "-o", "json"))["metadata"]["uid"]
        kubectl.ok("apply", "-f", "-", input=token_secret("bot-token", "bot"))

        def filled() -> dict[str, str] | None:
            secret = json.loads(kubectl.ok("get", "secret", "bot-token", "-n", NS, "-o", "json"))
            return secret if (secret.get("data") or {}).get("token") else None

        secret = wait_for("the token controller to fill bot-token", filled)
        decoded = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
        assert decoded["namespace"] == NS
        assert decoded["ca.crt"] == Path(data / "pki" / "ca.crt").read_text()
        assert secret["metadata"]["annotations"]["kubernetes.io/service-account.uid"] == account_uid
        token = decoded["token"]
        claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "==="))
        assert claims == {"iss": "kubernetes/serviceaccount", "kubernetes.io/serviceaccount/namespace": NS,
                          "kubernetes.io/serviceaccount/secret.name": "bot-token",
                          "kubernetes.io/serviceaccount/service-account.name": "bot",
                          "kubernetes.io/serviceaccount/service-account.uid": account_uid,
                          "sub": f"system:serviceaccount:{NS}:bot"}
        # `kubectl describe secret` shows it as kube's does; the API server takes it as the account.
        assert "kubernetes.io/service-account-token" in kubectl.ok("describe", "secret", "bot-token", "-n", NS)
        me = whoami(cluster.server, token)
        assert me.status_code == 201, me.text
        assert me.json()["status"]["userInfo"]["username"] == f"system:serviceaccount:{NS}:bot"
        reviewed = json.loads(kubectl.ok("create", "-f", "-", "-o", "json", input=json.dumps(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})))
        assert reviewed["status"]["authenticated"] is True
        assert reviewed["status"]["user"]["uid"] == account_uid

        # A token the Secret no longer holds is refused (kube: "Token does not match server's copy").
        forged_secret = dict(secret, data={**secret["data"], "token": base64.b64encode(b"x").decode()})
        kubectl.ok("replace", "-f", "-", input=json.dumps(forged_secret))
        assert whoami(cluster.server, token).status_code == 401
        review = json.loads(kubectl.ok("create", "-f", "-", "-o", "json", input=json.dumps(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})))
        assert review["status"]["error"] == "[invalid bearer token, Token does not match server's copy]"

        # A Secret naming an account that does not exist is deleted.
        kubectl.ok("apply", "-f", "-", input=token_secret("ghost-token", "ghost"))
        wait_for("ghost-token deleted", lambda: kubectl("get", "secret", "ghost-token", "-n", NS).returncode != 0 or None)

        # The account deleted: its token Secrets go, and a token of theirs is dead.
        kubectl.ok("apply", "-f", "-", input=token_secret("bot-token-2", "bot"))
        second = wait_for("bot-token-2 filled", lambda: (json.loads(kubectl.ok(
            "get", "secret", "bot-token-2", "-n", NS, "-o", "json")).get("data") or {}).get("token"))
        assert whoami(cluster.server, base64.b64decode(second).decode()).status_code == 201
        kubectl.ok("delete", "sa", "bot", "-n", NS)
        wait_for("bot's token Secrets deleted", lambda: kubectl(
            "get", "secret", "bot-token-2", "-n", NS).returncode != 0 or None)
        assert whoami(cluster.server, base64.b64decode(second).decode()).status_code == 401
    finally:
        cluster.stop()
