"""The kubelet's projected service account tokens are renewed as kubelet's token manager renews them, against
a real API server on a real etcd: the volume's files are written by the kubelet's volume manager, a token
is asked for again through TokenRequest once it is older than 80 % of its lifetime (or 24 h), and the new
one replaces the old in one rename of ``..data`` (kubelet's atomic writer). The kubelet's clock is the one
thing given: TokenRequest refuses lifetimes under 10 minutes, so waiting for a real renewal would take 8."""

from __future__ import annotations

import base64
import datetime
import json
import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest
from apitools import ns_path

from kubelab.client import ApiClient
from kubelab.etcd import Etcd
from kubelab.models import Pod
from kubelab.pki import ensure_service_account_key
from kubeletstub.volumes import VolumeManager

SUFFIX = secrets.token_hex(3)
NS = f"renew-{SUFFIX}"
ADMIN = f"admin-{SUFFIX}"


@pytest.fixture(scope="module")
def server(etcd: Etcd, start_apiserver: Callable[..., AbstractContextManager[str]],
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    key_file = ensure_service_account_key(tmp_path_factory.mktemp("pki"))
    tokens = tmp_path_factory.mktemp("auth") / "tokens.csv"
    tokens.write_text(f'{ADMIN},alice,1,"system:masters"\n')
    with start_apiserver(etcd.url, token_auth_file=str(tokens), service_account_key_file=str(key_file)) as url:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}) as admin:
            admin.post("/api/v1/namespaces", json={"metadata": {"name": NS}}).raise_for_status()
            admin.post(ns_path("serviceaccounts", NS), json={"metadata": {"name": "default"}}).raise_for_status()
        yield url


def make_pod(server: str, name: str, expiration: int) -> Pod:
    volume = {"name": "token", "projected": {"sources": [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": expiration}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}]}}
    with httpx.Client(base_url=server, headers={"Authorization": f"Bearer {ADMIN}"}) as admin:
        resp = admin.post(ns_path("pods", NS), json={"metadata": {"name": name}, "spec": {
            "serviceAccountName": "default", "containers": [{"name": "c", "image": "x"}], "volumes": [volume]}})
        assert resp.status_code == 201, resp.text
        return Pod.from_dict(resp.json())


def claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return decoded


class Clock:
    def __init__(self) -> None:
        self.now = datetime.datetime.now(datetime.UTC)

    def __call__(self) -> datetime.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += datetime.timedelta(seconds=seconds)


def files(volume: Path) -> tuple[str, str]:
    """(the token as a container reads it, the payload directory ..data points at)."""
    return (volume / "token").read_text(), os.readlink(volume / "..data")


@pytest.mark.parametrize(("expiration", "fresh_until"), [
    pytest.param(600, 480, id="at 80 % of a 10 min lifetime"),
    pytest.param(7 * 24 * 3600, 24 * 3600, id="at 24 h of a week-long one"),
])
async def test_a_projected_token_is_renewed_and_rewritten_atomically(server: str, tmp_path: Path, expiration: int,
                                                                      fresh_until: int) -> None:
    pod = make_pod(server, f"p{expiration}", expiration)
    clock = Clock()
    pod_dir = tmp_path / "pod"
    volume = pod_dir / "volumes" / "kubernetes.io~projected" / "token"
    async with ApiClient(server, token=ADMIN) as api:
        manager = VolumeManager(api, node_ip="10.0.0.1", allocatable={}, clock=clock, jitter=lambda: 0.0)
        assert await manager.setup(pod, pod_dir, "10.244.0.9") is True  # kept current by the periodic sync
        first, payload = files(volume)
        assert claims(first)["exp"] - claims(first)["iat"] == expiration
        assert claims(first)["kubernetes.io"]["pod"]["uid"] == pod.metadata.uid
        assert (volume / "namespace").read_text() == NS

        clock.advance(fresh_until - 1)
        await manager.setup(pod, pod_dir, "10.244.0.9", refresh=True)
        assert files(volume) == (first, payload)  # still fresh: not asked for, nothing rewritten

        clock.advance(2)
        await manager.setup(pod, pod_dir, "10.244.0.9", refresh=True)
        second, new_payload = files(volume)
        assert second != first and claims(second)["jti"] != claims(first)["jti"]
        assert claims(second)["kubernetes.io"]["pod"]["uid"] == pod.metadata.uid
        assert new_payload != payload and not (volume / payload).exists()  # swapped in one rename, old one gone
        assert os.readlink(volume / "token") == "..data/token"  # the name a container opens never changed
        assert (volume / "namespace").read_text() == NS
        assert (volume / "token").stat().st_mode & 0o777 == 0o600

        # The new token's expiry is the API server's (real time): by that clock it is fresh, and stays.
        clock.now = datetime.datetime.now(datetime.UTC)
        await manager.setup(pod, pod_dir, "10.244.0.9", refresh=True)
        assert files(volume) == (second, new_payload)
