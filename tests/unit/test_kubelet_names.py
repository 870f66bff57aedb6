"""The kubelet stub leaves alone a pod whose namespace or name could not name a network namespace (only a
pod written straight into etcd has one): nothing is started, no request is made, it is logged once.
The API client points at a port nothing listens on, so any request the pod manager made would fail."""

from __future__ import annotations

import logging

import pytest

from kubelab.client import ApiClient
from kubelab.events import EventRecorder
from kubelab.models import Pod
from kubeletstub.dataplane import RenderDataplane
from kubeletstub.pods import PodManager


def pod(namespace: str, name: str) -> Pod:
    return Pod.from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": namespace, "name": name,
                                                                          "uid": "u"},
                          "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "nginx"}]}})


@pytest.mark.parametrize(("namespace", "name"), [("default", "web\n"), ("x\n", "web"), ("default", "../../etc"),
                                                 ("default", "a/b")])
async def test_a_pod_with_an_impossible_name_is_left_alone(namespace: str, name: str,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    api = ApiClient("http://127.0.0.1:1", timeout=1)
    dataplane = RenderDataplane()
    manager = PodManager(api, "node-1", "10.240.0.11", "10.244.1.0/24", dataplane, EventRecorder(api, "kubelet"))
    bad = pod(namespace, name)
    manager.cache[bad.key] = bad
    try:
        with caplog.at_level(logging.WARNING, logger="kubeletstub.pods"):
            await manager.sync(bad.key)
            await manager.sync(bad.key)
    finally:
        await api.close()
    assert not dataplane.pod_running(bad.key)
    assert len([r for r in caplog.records if "not running pod" in r.getMessage()]) == 1
