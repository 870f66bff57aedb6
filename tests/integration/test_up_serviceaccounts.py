"""Service accounts in `kubelab up --dataplane render` (no root): every namespace gets `default` and
kube-root-ca.crt (the data dir's lab CA, made even without --token-auth-file), `kubectl get sa` lists
them as kube's table does, a pod is admitted with its token volume, and a token from `kubectl create
token` survives a restart of the whole cluster (the signing key is kept in the data dir)."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import httpx
import pytest
from kubectltools import Kubectl, RenderCluster, table, wait_for

NS = f"up-sa-{secrets.token_hex(3)}"


def test_accounts_ca_and_tokens_across_a_restart(tmp_path_factory: pytest.TempPathFactory) -> None:
    data = tmp_path_factory.mktemp("render-sa") / "data"
    cluster = RenderCluster(data, nodes=1).start()
    try:
        kubectl = Kubectl("dispatcher", cluster.kubeconfig, tmp_path_factory.mktemp("cache"))
        kubectl.ok("create", "namespace", NS)
        wait_for("the default account", lambda: kubectl("get", "sa", "default", "-n", NS).returncode == 0)
        rows = table(kubectl.ok("get", "sa", "-n", NS))
        assert [(r["NAME"], r["SECRETS"]) for r in rows] == [("default", "0")]
        wait_for("kube-root-ca.crt", lambda: kubectl("get", "cm", "kube-root-ca.crt", "-n", NS).returncode == 0)
        cm = json.loads(kubectl.ok("get", "cm", "kube-root-ca.crt", "-n", NS, "-o", "json"))
        assert cm["data"] == {"ca.crt": (data / "pki" / "ca.crt").read_text()}
        assert cm["metadata"]["annotations"]["kubernetes.io/description"].startswith("Contains a CA bundle")
        kubectl.ok("run", "web", "-n", NS, "--image", "busybox:1.36")
        spec = json.loads(kubectl.ok("get", "pod", "web", "-n", NS, "-o", "json"))["spec"]
        assert spec["serviceAccountName"] == "default" and spec["volumes"][0]["name"].startswith("kube-api-access-")
        token = kubectl.ok("create", "token", "default", "-n", NS).strip()
    finally:
        cluster.stop()
    cluster = RenderCluster(data, nodes=1).start()
    try:
        resp = httpx.get(f"{cluster.server}/api/v1/namespaces/{NS}/pods", headers={"Authorization": f"Bearer {token}"})
        assert resp.status_code == 200, resp.text
        assert [p["metadata"]["name"] for p in resp.json()["items"]] == ["web"]
        other = httpx.get(f"{cluster.server}/api/v1/namespaces/{NS}/pods",
                          headers={"Authorization": f"Bearer {token[:-4]}AAAA"})
        assert other.status_code == 401
    finally:
        cluster.stop()
    assert Path(data / "pki" / "sa.key").exists()
