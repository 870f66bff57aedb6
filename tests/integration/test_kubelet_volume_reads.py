"""The kubelet's volume manager reads a configMap once for all the pods that need it at the same moment
(the pods a node starts together all mount kube-root-ca.crt), and again for a pod that comes after that
read answered: what it writes is never older than the object was when the pod's setup began, save for the
read that pod joined. Against a real API server on a real etcd, through a proxy that counts the GETs."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import pytest
from apitools import ns_path
from kubectltools import RecordingProxy

from kubelab.client import ApiClient
from kubelab.etcd import Etcd
from kubelab.models import Pod
from kubeletstub.volumes import MountError, VolumeManager

NS = f"volreads-{secrets.token_hex(3)}"


def pod(name: str, config_map: str) -> Pod:
    return Pod.from_dict({"metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"}, "spec": {
        "containers": [{"name": "c", "image": "x"}],
        "volumes": [{"name": "conf", "configMap": {"name": config_map}}]}})


def conf_file(pod_dir: Path) -> str:
    return (pod_dir / "volumes" / "kubernetes.io~configmap" / "conf" / "color").read_text()


async def test_pods_that_mount_a_config_map_at_once_share_one_read(
        etcd: Etcd, start_apiserver: Callable[..., AbstractContextManager[str]], tmp_path: Path) -> None:
    with start_apiserver(etcd.url) as url, RecordingProxy(url) as proxy:
        with httpx.Client(base_url=url) as admin:
            admin.post("/api/v1/namespaces", json={"metadata": {"name": NS}}).raise_for_status()
            admin.post(ns_path("configmaps", NS), json={"metadata": {"name": "shared"},
                                                        "data": {"color": "red"}}).raise_for_status()

        def reads(name: str) -> int:
            return sum(1 for method, path, _, _ in proxy.requests
                       if method == "GET" and path.startswith(ns_path("configmaps", NS) + f"/{name}"))

        async with ApiClient(proxy.url) as api:
            manager = VolumeManager(api, node_ip="10.0.0.1", allocatable={})
            pods = [pod(f"p{i}", "shared") for i in range(8)]
            await asyncio.gather(*(manager.setup(p, tmp_path / p.metadata.name, "10.244.0.9") for p in pods))
            assert [conf_file(tmp_path / p.metadata.name) for p in pods] == ["red"] * 8
            assert reads("shared") == 1

            # A pod after that read has answered reads again, and sees the change.
            with httpx.Client(base_url=url) as admin:
                admin.patch(ns_path("configmaps", NS) + "/shared", json={"data": {"color": "blue"}},
                            headers={"Content-Type": "application/merge-patch+json"}).raise_for_status()
            late = pod("late", "shared")
            await manager.setup(late, tmp_path / "late", "10.244.0.10")
            assert conf_file(tmp_path / "late") == "blue"
            assert reads("shared") == 2

            # Not found is shared too, and each pod's setup fails with it.
            missing = [pod(f"m{i}", "nope") for i in range(3)]
            results = await asyncio.gather(*(manager.setup(p, tmp_path / p.metadata.name, "10.244.0.11")
                                             for p in missing), return_exceptions=True)
            refused = 'MountVolume.SetUp failed for volume "conf" : configmap "nope" not found'
            assert [str(r) for r in results] == [refused] * 3
            assert all(isinstance(r, MountError) for r in results)
            assert reads("nope") == 1
            with pytest.raises(MountError, match='configmap "nope" not found'):
                await manager.setup(missing[0], tmp_path / "m0", "10.244.0.11")
            assert reads("nope") == 2
