"""The bootstrap policy's bindings reconciled at an API server's start as kube-apiserver's reconciliation
does it, against a real etcd and two real API server starts: a roleRef is immutable, so a bootstrap binding
stored with another roleRef is deleted and created again as the bootstrap policy has it (its subjects too),
while one annotated `rbac.authorization.kubernetes.io/autoupdate: "false"` is left exactly as it is."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest

from kubelab.etcd import Etcd

RBAC = "/apis/rbac.authorization.k8s.io/v1"
GROUP = "rbac.authorization.k8s.io"
DISCOVERY = f"{RBAC}/clusterrolebindings/system:discovery"
BASIC_USER = f"{RBAC}/clusterrolebindings/system:basic-user"
DNS = f"{RBAC}/namespaces/kube-system/rolebindings/kubelab:dns-registration"


@pytest.fixture
def etcd_url(tmp_path: Path) -> Iterator[str]:
    """A private etcd: the test rewrites cluster-wide bootstrap bindings other tests rely on."""
    etcd = Etcd(tmp_path / "etcd")
    try:
        etcd.start()
        yield etcd.url
    finally:
        etcd.stop()


def replace(api: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """Store `body` under the name at `path` in place of the bootstrap object (the only way to change a
    roleRef through the API)."""
    api.delete(path).raise_for_status()
    collection = path.rsplit("/", 1)[0]
    created = api.post(collection, json=body)
    created.raise_for_status()
    stored: dict[str, Any] = created.json()
    return stored


def test_a_restart_recreates_bindings_whose_role_ref_changed_and_leaves_protected_ones(
        etcd_url: str, start_apiserver: Callable[..., AbstractContextManager[str]]) -> None:
    with start_apiserver(etcd_url) as url, httpx.Client(base_url=url, timeout=30) as api:
        original = api.get(DISCOVERY).json()
        changed = replace(api, DISCOVERY, {
            "metadata": {"name": "system:discovery", "labels": {"team": "a"}},
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "Group", "apiGroup": GROUP, "name": "system:authenticated"},
                         {"kind": "User", "apiGroup": GROUP, "name": "mallory"}]})
        changed_dns = replace(api, DNS, {
            "metadata": {"name": "kubelab:dns-registration", "namespace": "kube-system"},
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"kind": "User", "apiGroup": GROUP, "name": "system:kube-dns"}]})
        protected = replace(api, BASIC_USER, {
            "metadata": {"name": "system:basic-user",
                         "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "false"}},
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "apiGroup": GROUP, "name": "mallory"}]})

    with start_apiserver(etcd_url) as url, httpx.Client(base_url=url, timeout=30) as api:
        repaired = api.get(DISCOVERY).json()
        assert repaired["metadata"]["uid"] not in (original["metadata"]["uid"], changed["metadata"]["uid"])
        assert repaired["roleRef"] == original["roleRef"] == {"apiGroup": GROUP, "kind": "ClusterRole",
                                                              "name": "system:discovery"}
        # Recreated as the bootstrap policy has it: mallory's subject and the team label are gone.
        assert repaired["subjects"] == original["subjects"]
        assert repaired["metadata"]["labels"] == original["metadata"]["labels"]
        assert repaired["metadata"]["annotations"] == {"rbac.authorization.kubernetes.io/autoupdate": "true"}

        dns = api.get(DNS).json()
        assert dns["metadata"]["uid"] != changed_dns["metadata"]["uid"]
        assert dns["roleRef"] == {"apiGroup": GROUP, "kind": "Role", "name": "kubelab:dns-registration"}

        left = api.get(BASIC_USER).json()
        assert left == protected  # the same object, resourceVersion and all: nothing written

    # A third start finds nothing to repair: the recreated binding is kept, not recreated again.
    with start_apiserver(etcd_url) as url, httpx.Client(base_url=url, timeout=30) as api:
        assert api.get(DISCOVERY).json() == repaired
        assert api.get(BASIC_USER).json() == protected
