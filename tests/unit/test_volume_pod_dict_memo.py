"""The volume manager dumps a pod to a dict once per object it is handed, not on every minute's refresh, and a
new object (the informer's next version of the pod) is always dumped again: a downwardAPI file follows a label
change on the next refresh exactly as before. Files only (a downwardAPI volume needs no API call)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kubelab.client import ApiClient
from kubelab.models import Pod
from kubeletstub.volumes import VolumeManager


def labelled_pod(tier: str) -> Pod:
    return Pod.from_dict({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default", "uid": "uid-1", "labels": {"tier": tier}},
        "spec": {"containers": [{"name": "c", "image": "x"}],
                 "volumes": [{"name": "info", "downwardAPI": {"items": [
                     {"path": "tier", "fieldRef": {"fieldPath": "metadata.labels['tier']"}}]}}]}})


def test_a_refresh_reuses_the_dump_of_the_same_object_and_follows_a_new_one(tmp_path: Path) -> None:
    # Never asked anything: a downwardAPI volume is built from the pod alone.
    volumes = VolumeManager(ApiClient("http://127.0.0.1:9"), node_ip="10.0.0.1", allocatable={})
    first = labelled_pod("front")
    asyncio.run(volumes.setup(first, tmp_path, "10.244.0.5"))
    tier = tmp_path / "volumes" / "kubernetes.io~downward-api" / "info" / "tier"  # through ..data, as kubelet's
    assert tier.read_text() == "front"

    dumped = volumes._pod_dict(first)
    assert volumes._pod_dict(first) is dumped  # the same object: the same dump
    assert asyncio.run(volumes.setup(first, tmp_path, "10.244.0.5", refresh=True)) is True
    assert tier.read_text() == "front"

    relabelled = labelled_pod("back")  # what the informer hands over after `kubectl label`
    asyncio.run(volumes.setup(relabelled, tmp_path, "10.244.0.5", refresh=True))
    assert tier.read_text() == "back"
    assert volumes._pod_dict(relabelled) is not dumped

    volumes.forget("uid-1")
    assert volumes._pod_dict(relabelled) is not volumes._pod_dict(labelled_pod("back"))
