"""Service account token checks read the account and the bound pod from the watch cache, as kube-apiserver's
getters read its informers' listers, not etcd on every request: through the official Python client, N reads
with a pod-bound token cost the API server no etcd read of the account or the pod per request (its own
etcd_requests_total says so); a pod this API server deletes kills its token at once (the cache has seen the
API server's own writes before it is trusted); a pod deleted through another API server on the same etcd
kills the token once the cache has the deletion."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import kubernetes
import pytest
from apitools import assert_status, ns_path
from kubectltools import wait_for

from kubelab.etcd import Etcd
from kubelab.pki import ensure_service_account_key

SUFFIX = secrets.token_hex(3)
NS = f"sacache-{SUFFIX}"
READS = 30


@pytest.fixture(scope="module")
def servers(etcd: Etcd, start_apiserver: Callable[..., AbstractContextManager[str]],
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("sacache")
    key: Path = ensure_service_account_key(tmp / "pki")
    tokens = tmp / "tokens.csv"
    tokens.write_text(f'admin-{SUFFIX},alice,1,"system:masters"\n')
    with start_apiserver(etcd.url, token_auth_file=str(tokens), service_account_key_file=str(key)) as url, \
            start_apiserver(etcd.url, token_auth_file=str(tokens), service_account_key_file=str(key)) as other, \
            httpx.Client(base_url=url, headers={"Authorization": f"Bearer admin-{SUFFIX}"}, timeout=30) as admin:
        admin.post("/api/v1/namespaces", json={"metadata": {"name": NS}}).raise_for_status()
        admin.post(ns_path("serviceaccounts", NS), json={"metadata": {"name": "robot"}}).raise_for_status()
        # A service account may do nothing until bound (RBAC): robot may read its namespace.
        admin.post(ns_path("rolebindings", NS, group="rbac.authorization.k8s.io/v1"), json={
            "metadata": {"name": "robot-view"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "robot"}]}).raise_for_status()
        yield {"url": url, "other": other, "admin": admin}


def pod_token(admin: httpx.Client, name: str) -> str:
    made = admin.post(ns_path("pods", NS), json={"metadata": {"name": name}, "spec": {
        "serviceAccountName": "robot", "containers": [{"name": "c", "image": "x"}]}})
    assert made.status_code == 201, made.text
    resp = admin.post(ns_path("serviceaccounts", NS, "robot") + "/token", json={"spec": {"boundObjectRef": {
        "kind": "Pod", "apiVersion": "v1", "name": name, "uid": made.json()["metadata"]["uid"]}}})
    assert resp.status_code == 201, resp.text
    token: str = resp.json()["status"]["token"]
    return token


def etcd_gets(admin: httpx.Client, resource: str) -> float:
    text = admin.get("/metrics").text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("etcd_requests_total{") and 'operation="get"' in line and \
                re.search(rf'type="[^"]*{resource}[^"]*"', line, re.IGNORECASE):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_reads_with_a_token_do_not_read_etcd_each_time(servers: dict[str, Any]) -> None:
    admin = servers["admin"]
    token = pod_token(admin, "reader")
    config = kubernetes.client.Configuration()
    config.host = servers["url"]
    config.api_key = {"authorization": token}
    config.api_key_prefix = {"authorization": "Bearer"}
    with kubernetes.client.ApiClient(config) as client:
        core = kubernetes.client.CoreV1Api(client)
        core.read_namespaced_pod("reader", NS)  # the first check may start the caches
        before = {r: etcd_gets(admin, r) for r in ("serviceaccount", "pod")}
        for _ in range(READS):
            core.list_namespaced_service_account(NS)
        after = {r: etcd_gets(admin, r) for r in ("serviceaccount", "pod")}
    # Before: one etcd get of the account and one of the pod per request (READS of each).
    assert after["serviceaccount"] - before["serviceaccount"] < READS / 2, (before, after)
    assert after["pod"] - before["pod"] < READS / 2, (before, after)


def test_a_pod_deleted_here_kills_its_token_at_once(servers: dict[str, Any]) -> None:
    admin = servers["admin"]
    for i in range(5):
        token = pod_token(admin, f"short-{i}")
        headers = {"Authorization": f"Bearer {token}"}
        assert httpx.get(servers["url"] + ns_path("pods", NS), headers=headers, timeout=30).status_code == 200
        admin.delete(ns_path("pods", NS, f"short-{i}"), params={"gracePeriodSeconds": "0"}).raise_for_status()
        assert_status(httpx.get(servers["url"] + ns_path("pods", NS), headers=headers, timeout=30), 401,
                      "Unauthorized", "Unauthorized")


def test_a_pod_deleted_elsewhere_kills_its_token_once_seen(servers: dict[str, Any]) -> None:
    admin = servers["admin"]
    token = pod_token(admin, "elsewhere")
    headers = {"Authorization": f"Bearer {token}"}
    assert httpx.get(servers["url"] + ns_path("pods", NS), headers=headers, timeout=30).status_code == 200
    httpx.delete(servers["other"] + ns_path("pods", NS, "elsewhere"), params={"gracePeriodSeconds": "0"},
                 headers={"Authorization": f"Bearer admin-{SUFFIX}"}, timeout=30).raise_for_status()
    wait_for("the token refused", lambda: httpx.get(servers["url"] + ns_path("pods", NS), headers=headers,
                                                    timeout=30).status_code == 401 or None)
