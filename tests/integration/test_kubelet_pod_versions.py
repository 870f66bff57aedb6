"""The kubelet stub's copy of a pod never goes back to an older version: when its own status write has
answered with a newer pod than its informer has delivered so far, the informer's late events of the
versions before it are not taken (each would have put the next status write on a stale resourceVersion:
a 409 Conflict, a retry, and on a busy `kubelab up` hundreds of them, bench/density.py). Real pods from a
real API server; the events are handed to the kubelet's informer handler as its watch would."""

from __future__ import annotations

import asyncio

import httpx
from apitools import CORE, unique_name

from kubelab import kinds
from kubelab.client import ApiClient
from kubelab.models import Pod
from kubeletstub.dataplane import RenderDataplane
from kubeletstub.kubelet import Kubelet
from kubeletstub.node import NodeConfig
from kubeletstub.pods import pending_status


def test_a_late_informer_event_does_not_replace_the_kubelets_newer_pod(apiserver: str, api: httpx.Client) -> None:
    ns = unique_name("kversions")
    assert api.post(f"{CORE}/namespaces", json={"metadata": {"name": ns}}).status_code == 201
    node = unique_name("vnode")
    body = {"metadata": {"name": "p"}, "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]}}
    assert api.post(f"{CORE}/namespaces/{ns}/pods", json=body).status_code == 201

    async def main() -> None:
        client = ApiClient(apiserver, user_agent="kubelab-test-kubelet")
        try:
            kubelet = Kubelet(client, NodeConfig(name=node, ip="10.240.0.99", pod_cidr="10.244.99.0/24"),
                              RenderDataplane())
            first = await client.get(kinds.PODS, "p", ns)
            assert isinstance(first, Pod)
            kubelet._on_pod("ADDED", None, first)
            # The kubelet's own status write answers with the next version, which it keeps.
            written = await client.update_status(kinds.PODS, first.model_copy(update={"status": pending_status(first, "10.240.0.99")}))
            assert written.metadata.resource_version != first.metadata.resource_version
            kubelet.manager.cache[first.key] = written
            # The informer, behind, now delivers the version before it (e.g. the binding's event).
            kubelet._on_pod("MODIFIED", None, first)
            kept = kubelet.manager.cache[first.key]
            assert kept.metadata.resource_version == written.metadata.resource_version
            # A newer version from the informer is taken, and a deletion forgets the pod.
            labelled = await client.patch(kinds.PODS, "p", {"metadata": {"labels": {"a": "b"}}}, ns)
            kubelet._on_pod("MODIFIED", written, labelled)
            assert kubelet.manager.cache[first.key].metadata.resource_version == labelled.metadata.resource_version
            kubelet._on_pod("DELETED", labelled, None)
            assert first.key not in kubelet.manager.cache
        finally:
            await client.close()

    try:
        asyncio.run(main())
    finally:
        api.delete(f"{CORE}/namespaces/{ns}")
