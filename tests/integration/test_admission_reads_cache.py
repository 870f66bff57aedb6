"""ServiceAccount admission reads the pod's namespace and account as kube's plugin reads them: from the
watch cache (its informers' listers) when the cache has them, live on a miss (saadmission.py through
tokengetters.py). Through a real API server and etcd: once the caches have the namespace and the account,
pod creates cost the API server no etcd read of either (its own etcd_requests_total says so), and every pod
is admitted as before; an account created just before its pod, and a missing one, are answered as kube
answers them (the live read on a miss)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import httpx
import pytest
from apitools import assert_status, ns_path, unique_name

from kubelab.etcd import Etcd


@pytest.fixture(scope="module")
def admin(etcd: Etcd, start_apiserver: Callable[..., AbstractContextManager[str]]) -> Iterator[httpx.Client]:
    with start_apiserver(etcd.url, disable_admission_plugins=()) as url, \
            httpx.Client(base_url=url, timeout=30) as client:
        yield client


def etcd_gets(admin: httpx.Client, resource: str) -> float:
    """How many times the API server has read one `resource` object from etcd."""
    text = admin.get("/metrics").text
    match = re.search(rf'^etcd_requests_total\{{operation="get",type="{resource}"\}} (\S+)$', text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def create_pod(admin: httpx.Client, ns: str, name: str, **spec: Any) -> httpx.Response:
    return admin.post(ns_path("pods", ns), json={"metadata": {"name": name},
                                                 "spec": {"containers": [{"name": "c", "image": "x"}], **spec}})


def test_pod_creates_read_the_namespace_and_account_from_the_cache(admin: httpx.Client) -> None:
    ns = unique_name("sa-cache")
    admin.post("/api/v1/namespaces", json={"metadata": {"name": ns}}).raise_for_status()
    admin.post(ns_path("serviceaccounts", ns), json={"metadata": {"name": "default"}}).raise_for_status()
    first = create_pod(admin, ns, "first")  # may read live: the caches start on first use
    assert first.status_code == 201, first.text
    before = etcd_gets(admin, "namespaces"), etcd_gets(admin, "serviceaccounts")
    for i in range(5):
        resp = create_pod(admin, ns, f"pod-{i}")
        assert resp.status_code == 201, resp.text
        spec = resp.json()["spec"]
        assert spec["serviceAccountName"] == "default" and spec["serviceAccount"] == "default"
        assert spec["volumes"][0]["name"].startswith("kube-api-access-")
    assert (etcd_gets(admin, "namespaces"), etcd_gets(admin, "serviceaccounts")) == before


def test_a_new_account_is_found_and_a_missing_one_refused(admin: httpx.Client) -> None:
    ns = unique_name("sa-cache")
    admin.post("/api/v1/namespaces", json={"metadata": {"name": ns}}).raise_for_status()
    admin.post(ns_path("serviceaccounts", ns), json={"metadata": {"name": "default"}}).raise_for_status()
    assert create_pod(admin, ns, "warm").status_code == 201
    # Written by this API server just now: read from the cache once it has the write, else live.
    admin.post(ns_path("serviceaccounts", ns), json={"metadata": {"name": "fresh"},
                                                      "automountServiceAccountToken": False}).raise_for_status()
    resp = create_pod(admin, ns, "uses-fresh", serviceAccountName="fresh")
    assert resp.status_code == 201, resp.text
    assert resp.json()["spec"]["serviceAccountName"] == "fresh" and "volumes" not in resp.json()["spec"]
    resp = create_pod(admin, ns, "ghostly", serviceAccountName="ghost")
    assert_status(resp, 403, "Forbidden", f'pods "ghostly" is forbidden: error looking up service account '
                                          f'{ns}/ghost: serviceaccount "ghost" not found')
    assert admin.get(ns_path("pods", ns, "ghostly")).status_code == 404
