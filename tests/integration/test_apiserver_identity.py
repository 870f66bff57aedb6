"""The API server's identity Lease (apiserver/identitylease.py) on a real API server and etcd: the Lease
kube-apiserver keeps (`kube-system/apiserver-<id>`, its labels, holder, 3600 s, renewed), what kubectl
shows of it, and the garbage collector deleting expired identity Leases and nothing else. The renew and
GC periods are shortened through the API server's Config, as kube's integration tests shorten
IdentityLeaseRenewIntervalPeriod and IdentityLeaseGCPeriod."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubectltools import Kubectl, write_kubeconfig
from polling import wait_for

from apiserver import identitylease
from kubelab.etcd import Etcd

LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
SELECTOR = "apiserver.kubernetes.io/identity=kube-apiserver"


@pytest.fixture(scope="module")
def server(etcd: Etcd, start_apiserver: Callable[..., AbstractContextManager[str]]) -> Iterator[tuple[str, str]]:
    hostname = f"host-{secrets.token_hex(3)}"
    with start_apiserver(etcd.url, identity_hostname=hostname, identity_lease_renew_interval=0.2,
                         identity_lease_gc_period=0.2) as url:
        yield url, hostname


def test_the_id_is_kube_apiservers_shape_and_depends_on_the_hostname() -> None:
    first = identitylease.apiserver_id("node-a")
    assert re.fullmatch(r"apiserver-[a-z2-7]{26}", first)  # 16 bytes, base32 without padding, lowercase
    assert first == identitylease.apiserver_id("node-a") != identitylease.apiserver_id("node-b")


def test_each_api_server_keeps_its_identity_lease_renewed(server: tuple[str, str], tmp_path: Path,
                                                           kubectl_for: Callable[[str], Kubectl]) -> None:
    url, hostname = server
    name = identitylease.apiserver_id(hostname)
    with httpx.Client(base_url=url, timeout=10) as api:
        lease = wait_for("the identity lease", lambda: (r := api.get(f"{LEASES}/{name}")).status_code == 200 and r.json())
        assert lease["metadata"]["labels"] == {"apiserver.kubernetes.io/identity": "kube-apiserver",
                                               "kubernetes.io/hostname": hostname}
        spec = lease["spec"]
        assert spec["holderIdentity"].startswith(f"{name}_") and spec["leaseDurationSeconds"] == 3600
        wait_for("a renewal", lambda: api.get(f"{LEASES}/{name}").json()["spec"]["renewTime"] != spec["renewTime"])
        listed = api.get(LEASES, params={"labelSelector": SELECTOR}).json()["items"]
        assert name in [item["metadata"]["name"] for item in listed]
    kubectl = Kubectl(kubectl_for("dispatcher").version, write_kubeconfig(tmp_path, url), tmp_path / "cache")
    out = kubectl("get", "lease", "-n", "kube-system", "-l", SELECTOR)
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line.split()[1] for line in out.stdout.splitlines()[1:]}
    assert rows[name].startswith(f"{name}_")


def lease_body(name: str, *, labelled: bool, renewed: datetime | None, duration: int | None = 3600) -> dict[str, Any]:
    spec: dict[str, Any] = {"holderIdentity": f"{name}_x"}
    if duration is not None:
        spec["leaseDurationSeconds"] = duration
    if renewed is not None:
        spec["renewTime"] = renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    labels = {"apiserver.kubernetes.io/identity": "kube-apiserver"} if labelled else {"app": "other"}
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name, "labels": labels},
            "spec": spec}


def test_expired_identity_leases_are_collected_and_nothing_else(server: tuple[str, str]) -> None:
    url, _ = server
    now = datetime.now(UTC)
    tag = secrets.token_hex(3)
    cases = {  # name -> collected?
        f"gone-{tag}": (lease_body(f"gone-{tag}", labelled=True, renewed=now - timedelta(hours=2)), True),
        f"no-renew-{tag}": (lease_body(f"no-renew-{tag}", labelled=True, renewed=None), True),
        f"no-duration-{tag}": (lease_body(f"no-duration-{tag}", labelled=True, renewed=now, duration=None), True),
        f"alive-{tag}": (lease_body(f"alive-{tag}", labelled=True, renewed=now - timedelta(minutes=59)), False),
        f"unlabelled-{tag}": (lease_body(f"unlabelled-{tag}", labelled=False, renewed=now - timedelta(hours=2)), False),
    }
    with httpx.Client(base_url=url, timeout=10) as api:
        for body, _ in cases.values():
            api.post(LEASES, json=body).raise_for_status()
        wait_for("the expired identity leases to be deleted",
                 lambda: all(api.get(f"{LEASES}/{name}").status_code == 404 for name, (_, gone) in cases.items() if gone))
        # An expired one made now is collected too: a later pass has run, and left the others alone.
        api.post(LEASES, json=lease_body(f"gone-{tag}", labelled=True, renewed=now - timedelta(hours=2)))
        wait_for("the next collection", lambda: api.get(f"{LEASES}/gone-{tag}").status_code == 404)
        for name, (_, gone) in cases.items():
            if not gone:
                assert api.get(f"{LEASES}/{name}").status_code == 200, name
