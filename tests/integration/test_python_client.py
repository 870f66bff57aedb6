"""The official `kubernetes` Python client (37.x, strict pydantic models) against the API server:
create, get, list, patch (strategic, JSON, apply), replace and delete through CoreV1Api,
DiscoveryV1Api and CoordinationV1Api; errors as ApiException carrying the Status; strict models of
Node, Pod, Service, Endpoints, Event deserializing; watch.Watch, including its resumption when the
server ends the stream."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from apitools import CORE, create, ns_path, unique_name
from kubectltools import RecordingProxy, wait_for
from kubernetes import client, watch

from kubelab.etcd import Etcd

NODE_INFO = {"architecture": "amd64", "bootID": "b", "containerRuntimeVersion": "containerd://1.7.0",
             "kernelVersion": "6.1.0", "kubeProxyVersion": "v1.32.0", "kubeletVersion": "v1.32.0",
             "machineID": "m", "operatingSystem": "linux", "osImage": "Debian GNU/Linux 12", "systemUUID": "u"}


def api_client(url: str) -> client.ApiClient:
    return client.ApiClient(client.Configuration(host=url))


@pytest.fixture(scope="module")
def core(apiserver: str) -> Iterator[client.CoreV1Api]:
    with api_client(apiserver) as api:
        yield client.CoreV1Api(api)


@pytest.fixture(scope="module")
def ns(core: client.CoreV1Api) -> str:
    name = unique_name("pyc")
    created = core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    assert created.status.phase == "Active"
    return name


def web_service(name: str, selector: str = "web") -> client.V1Service:
    # Built from models: the body has no apiVersion or kind, which the server infers from the URL.
    return client.V1Service(
        metadata=client.V1ObjectMeta(name=name, labels={"app": selector}),
        spec=client.V1ServiceSpec(selector={"app": selector},
                                  ports=[client.V1ServicePort(name="http", port=80, target_port=8080)]))


def status_of(exc: client.ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.body)
    assert body["kind"] == "Status" and body["code"] == exc.status
    return body


def test_service_crud(core: client.CoreV1Api, ns: str) -> None:
    name = unique_name("svc")
    created = core.create_namespaced_service(ns, web_service(name))
    assert isinstance(created, client.V1Service)
    assert created.metadata.uid and created.spec.cluster_ip.startswith("10.")
    assert created.spec.ports[0].protocol == "TCP" and created.spec.ports[0].target_port == 8080
    assert core.read_namespaced_service(name, ns).metadata.uid == created.metadata.uid
    listed = core.list_namespaced_service(ns, label_selector="app=web")
    assert [s.metadata.name for s in listed.items] == [name]
    assert core.list_namespaced_service(ns, label_selector="app=nothing").items == []

    patched = core.patch_namespaced_service(name, ns, {"spec": {"ports": [{"name": "https", "port": 443}]}})
    assert [p.port for p in patched.spec.ports] == [443, 80]  # strategic merge: ports merge by port
    patched = core.patch_namespaced_service(name, ns, [{"op": "replace", "path": "/spec/selector/app",
                                                         "value": "v2"}])
    assert patched.spec.selector == {"app": "v2"}
    applied = core.patch_namespaced_service(
        name, ns, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": {"applied": "yes"}}},
        field_manager="pytest", _content_type="application/apply-patch+yaml")
    assert applied.metadata.labels == {"app": "web", "applied": "yes"}
    assert "pytest" in {e.manager for e in applied.metadata.managed_fields}

    applied.spec.selector = {"app": "v3"}
    replaced = core.replace_namespaced_service(name, ns, applied)
    assert replaced.spec.selector == {"app": "v3"}
    assert int(replaced.metadata.resource_version) > int(applied.metadata.resource_version)

    deleted = core.delete_namespaced_service(name, ns)
    assert isinstance(deleted, client.V1Service) and deleted.metadata.name == name
    with pytest.raises(client.ApiException) as caught:
        core.read_namespaced_service(name, ns)
    assert caught.value.status == 404


def test_errors_are_api_exceptions_with_the_status(core: client.CoreV1Api, ns: str) -> None:
    name = unique_name("err")
    core.create_namespaced_service(ns, web_service(name))
    with pytest.raises(client.ApiException) as caught:
        core.create_namespaced_service(ns, web_service(name))
    assert (caught.value.status, caught.value.reason) == (409, "Conflict")
    assert status_of(caught.value)["reason"] == "AlreadyExists"
    assert status_of(caught.value)["message"] == f'services "{name}" already exists'

    stale = core.read_namespaced_service(name, ns)
    core.patch_namespaced_service(name, ns, {"metadata": {"labels": {"bump": "1"}}})
    with pytest.raises(client.ApiException) as caught:
        core.replace_namespaced_service(name, ns, stale)
    assert status_of(caught.value)["reason"] == "Conflict"
    assert "the object has been modified" in status_of(caught.value)["message"]

    with pytest.raises(client.ApiException) as caught:
        core.read_namespaced_service("missing", ns)
    assert caught.value.status == 404
    assert status_of(caught.value) | {} == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'services "missing" not found', "reason": "NotFound",
        "details": {"name": "missing", "kind": "services"}, "code": 404}

    bad = web_service("bad-ports")
    bad.spec.ports = [client.V1ServicePort(port=0), client.V1ServicePort(port=80, protocol="HTTP")]
    with pytest.raises(client.ApiException) as caught:
        core.create_namespaced_service(ns, bad)
    assert caught.value.status == 422
    details = status_of(caught.value)["details"]
    assert (details["kind"], details["name"]) == ("Service", "bad-ports")
    assert {(c["field"], c["reason"]) for c in details["causes"]} >= {
        ("spec.ports[0].port", "FieldValueInvalid"), ("spec.ports[1].protocol", "FieldValueNotSupported"),
        ("spec.ports[0].name", "FieldValueRequired")}


def test_strict_models_deserialize(core: client.CoreV1Api, ns: str, apiserver: str) -> None:
    node, pod_name = unique_name("pynode"), unique_name("pod")
    with httpx.Client(base_url=apiserver, timeout=10) as http:
        create(http, f"{CORE}/nodes", {"metadata": {"name": node, "labels": {"pytest": node}}, "status": {
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2024-01-01T00:00:00Z"}],
            "addresses": [{"type": "InternalIP", "address": "10.240.0.50"}], "nodeInfo": NODE_INFO,
            "capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"}}})
        pod = create(http, ns_path("pods", ns), {"metadata": {"name": pod_name}, "spec": {
            "nodeName": node, "containers": [{"name": "c", "image": "nginx:1.27"}]}})
        pod["status"].update({"phase": "Running", "podIP": "10.244.9.9", "containerStatuses": [
            {"name": "c", "image": "nginx:1.27", "imageID": "docker.io/library/nginx@sha256:1", "ready": True,
             "restartCount": 0, "state": {"running": {"startedAt": "2024-01-01T00:00:00Z"}}}]})
        assert http.put(ns_path("pods", ns, pod_name) + "/status", json=pod).status_code == 200
        create(http, ns_path("endpoints", ns), {"metadata": {"name": "web"}, "subsets": [
            {"addresses": [{"ip": "10.244.9.9", "targetRef": {"kind": "Pod", "name": pod_name, "namespace": ns}}],
             "ports": [{"port": 80, "protocol": "TCP"}]}]})
        create(http, ns_path("events", ns), {"metadata": {"name": f"{pod_name}.1"}, "involvedObject": {
            "kind": "Pod", "name": pod_name, "namespace": ns}, "reason": "Started", "message": "Started container c",
            "type": "Normal", "source": {"component": "kubelet"}, "count": 1,
            "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T00:00:00Z"})
    nodes = core.list_node(label_selector=f"pytest={node}").items
    assert [(n.metadata.name, n.status.node_info.kubelet_version, n.status.conditions[0].status) for n in nodes] == \
        [(node, "v1.32.0", "True")]
    assert core.list_node().items  # every node the other tests made deserializes too
    pods = core.list_namespaced_pod(ns, field_selector=f"spec.nodeName={node}").items
    assert [(p.metadata.name, p.status.pod_ip, p.status.container_statuses[0].ready) for p in pods] == \
        [(pod_name, "10.244.9.9", True)]
    assert pods[0].spec.tolerations and pods[0].status.qos_class == "BestEffort"
    assert core.list_pod_for_all_namespaces().items
    endpoints = core.read_namespaced_endpoints("web", ns)
    assert endpoints.subsets[0].addresses[0].target_ref.name == pod_name
    assert core.list_endpoints_for_all_namespaces().items
    kubernetes_svc = core.read_namespaced_service("kubernetes", "default")
    assert (kubernetes_svc.spec.cluster_ip, kubernetes_svc.spec.ports[0].port) == ("10.96.0.1", 443)
    events = core.list_namespaced_event(ns, field_selector=f"involvedObject.name={pod_name}").items
    assert [(e.reason, e.involved_object.kind, e.source.component) for e in events] == [("Started", "Pod", "kubelet")]
    assert core.list_namespace().items and core.list_service_for_all_namespaces().items


def test_discovery_and_coordination_apis(apiserver: str, ns: str) -> None:
    with api_client(apiserver) as api:
        discovery = client.DiscoveryV1Api(api)
        created = discovery.create_namespaced_endpoint_slice(ns, client.V1EndpointSlice(
            metadata=client.V1ObjectMeta(name="web-py", labels={"kubernetes.io/service-name": "web"}),
            address_type="IPv4",
            endpoints=[client.V1Endpoint(addresses=["10.244.9.9"], conditions=client.V1EndpointConditions(ready=True))],
            ports=[client.DiscoveryV1EndpointPort(name="http", port=80, protocol="TCP")]))
        assert created.metadata.uid
        slices = discovery.list_namespaced_endpoint_slice(ns, label_selector="kubernetes.io/service-name=web").items
        assert [(s.metadata.name, s.endpoints[0].addresses, s.ports[0].port) for s in slices] == \
            [("web-py", ["10.244.9.9"], 80)]

        coordination = client.CoordinationV1Api(api)
        renew = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
        lease = coordination.create_namespaced_lease(ns, client.V1Lease(
            metadata=client.V1ObjectMeta(name="holder"),
            spec=client.V1LeaseSpec(holder_identity="node-a", lease_duration_seconds=40, renew_time=renew)))
        assert (lease.spec.holder_identity, lease.spec.renew_time) == ("node-a", renew)
        lease.spec.renew_time = renew.replace(minute=1)
        updated = coordination.replace_namespaced_lease("holder", ns, lease)
        assert updated.spec.renew_time == renew.replace(minute=1)
        assert coordination.read_namespaced_lease("holder", ns).spec.lease_duration_seconds == 40


def _first_events(w: watch.Watch, count: int, *args: Any, **kwargs: Any) -> list[Any]:
    """The first `count` events of w.stream(*args, **kwargs); the client then stops the watch. The
    server's timeoutSeconds (given long) only ends it if they never come: it counts from the request,
    and a loaded server may take a while to set the watch up."""
    events = []
    for event in w.stream(*args, timeout_seconds=60, **kwargs):
        events.append(event)
        if len(events) == count:
            w.stop()
    return events


def test_watch_replays_then_streams_and_ends_at_its_timeout(core: client.CoreV1Api, ns: str) -> None:
    # Replayed objects come in key order, each with its own resourceVersion, and the client resumes
    # from the last one it saw: create them in key order so that is the newest.
    prefix = unique_name("cm")
    names = [f"{prefix}-1", f"{prefix}-2"]
    for name in names:
        core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name),
                                                                 data={"k": "v"}))
    w = watch.Watch()
    events = [(e["type"], e["object"].metadata.name) for e in _first_events(w, 2, core.list_namespaced_config_map, ns)]
    # No resourceVersion: the current objects come first as ADDED.
    assert events == [("ADDED", n) for n in names]
    last = w.resource_version
    assert last == core.read_namespaced_config_map(names[1], ns).metadata.resource_version
    core.patch_namespaced_config_map(names[0], ns, {"data": {"k": "v2"}})
    resumed = [(e["type"], e["object"].metadata.name, e["object"].data) for e in
               _first_events(watch.Watch(), 1, core.list_namespaced_config_map, ns, resource_version=last)]
    assert resumed == [("MODIFIED", names[0], {"k": "v2"})]
    # Nothing after that: timeoutSeconds ends the stream empty, and the client does not retry.
    newest = core.read_namespaced_config_map(names[0], ns).metadata.resource_version
    quiet = watch.Watch()
    assert list(quiet.stream(core.list_namespaced_config_map, ns, resource_version=newest, timeout_seconds=1)) == []
    assert quiet.resource_version == newest


def test_watch_resumes_when_the_server_ends_the_stream(etcd: Etcd, start_apiserver: Any) -> None:
    """A server that ends watches by itself (minRequestTimeout, 0.5-1 s here): the client watches
    again from the last resourceVersion it saw, and misses nothing, repeats nothing.

    The watch starts from a LIST's resourceVersion, as an informer's does: a watch with none replays
    the current objects first, and a loaded server may end such a stream before its first event (the
    deadline counts from the request, as kube-apiserver's does), after which this client stops."""
    with start_apiserver(etcd.url, min_request_timeout=0.5) as url, RecordingProxy(url) as proxy, \
            api_client(proxy.url) as api:
        core = client.CoreV1Api(api)
        ns = unique_name("pyw")
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
        listed = core.list_namespaced_config_map(ns).metadata.resource_version
        seen: queue.Queue[tuple[str, str]] = queue.Queue()
        w = watch.Watch()

        def consume() -> None:
            for event in w.stream(core.list_namespaced_config_map, ns, resource_version=listed):
                seen.put((event["type"], event["object"].metadata.name))

        def versions() -> list[str]:
            """The resourceVersion of each watch request the client sent, in order."""
            return [parse_qs(urlparse(path).query)["resourceVersion"][0] for method, path, _, _ in proxy.requests
                    if method == "GET" and "watch=" in path]

        consumer = threading.Thread(target=consume, name="watch-consumer", daemon=True)
        consumer.start()
        try:
            wait_for("the first watch request", lambda: versions())
            core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="first")))
            assert seen.get(timeout=30) == ("ADDED", "first")
            first_rv = core.read_namespaced_config_map("first", ns).metadata.resource_version
            # The stream that carried it ended, and the client came back with its resourceVersion.
            wait_for("a watch from the first object's resourceVersion", lambda: first_rv in versions())
            core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="second")))
            assert seen.get(timeout=30) == ("ADDED", "second")
            second_rv = core.read_namespaced_config_map("second", ns).metadata.resource_version
            wait_for("a watch from the second object's resourceVersion", lambda: second_rv in versions())
            resumed_from_second = versions().count(second_rv)
            wait_for("another resumption", lambda: versions().count(second_rv) > resumed_from_second)
            assert seen.empty(), "an event was delivered twice"
            # Each watch asked from the newest resourceVersion the client had seen, never an older one.
            sent = versions()
            assert sent == sorted(sent, key=int) and set(sent) == {listed, first_rv, second_rv}, sent
        finally:
            w.stop()
            consumer.join(timeout=30)
        assert not consumer.is_alive()
