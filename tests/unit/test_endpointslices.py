"""The EndpointSlice controller's pure part (reference/controllers-and-dns.md §2): endpoint conditions,
port groups (including the portless group for unresolved named ports), 100 endpoints per slice, the
placeholder slice, labels and ownerReferences, and the wire shape kube-proxy reads."""

from __future__ import annotations

from typing import Any

import pytest

from controllers.endpointslices import desired_groups, desired_slices, slice_labels
from kubelab.models import Node, Pod, Service

HTTP = {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}
NAMED = {"name": "http", "port": 80, "targetPort": "web", "protocol": "TCP"}
NODES = {"n1": Node.from_dict({"metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "zone-a"}}}),
         "n2": Node.from_dict({"metadata": {"name": "n2"}})}


def service(ports: list[dict[str, Any]] | None = None, *, cluster_ip: str = "10.96.0.10",
            labels: dict[str, str] | None = None, **spec: Any) -> Service:
    return Service.from_dict({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default", "uid": "svc-uid", "labels": labels or {}},
        "spec": {"selector": {"app": "web"}, "clusterIP": cluster_ip, "ports": [HTTP] if ports is None else ports,
                 **spec}})


def pod(name: str, ip: str | None = "10.244.1.5", *, ready: bool = True, phase: str = "Running",
        deleting: bool = False, node: str = "n1", containers: list[dict[str, Any]] | None = None,
        **spec: Any) -> Pod:
    status: dict[str, Any] = {"phase": phase,
                              "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    if ip:
        status["podIP"] = ip
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": {"app": "web"}}
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    body = {"nodeName": node, "containers": containers or [
        {"name": "c", "image": "nginx", "ports": [{"name": "web", "containerPort": 8080, "protocol": "TCP"}]}], **spec}
    return Pod.from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body, "status": status})


def endpoint(name: str, ip: str, *, ready: bool = True, serving: bool = True, terminating: bool = False,
             node: str = "n1", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"addresses": [ip],
                           "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
                           **extra,
                           "targetRef": {"kind": "Pod", "namespace": "default", "name": name, "uid": f"uid-{name}"},
                           "nodeName": node}
    if node == "n1":
        out["zone"] = "zone-a"
    return out


@pytest.mark.parametrize(("svc", "p", "expected"), [
    pytest.param(service(), pod("a"), endpoint("a", "10.244.1.5"), id="ready"),
    pytest.param(service(), pod("a", ready=False), endpoint("a", "10.244.1.5", ready=False, serving=False),
                 id="not ready"),
    pytest.param(service(), pod("a", deleting=True),
                 endpoint("a", "10.244.1.5", ready=False, serving=True, terminating=True),
                 id="terminating ready pod: serving, terminating, not ready"),
    pytest.param(service(), pod("a", ready=False, deleting=True),
                 endpoint("a", "10.244.1.5", ready=False, serving=False, terminating=True),
                 id="terminating not-ready pod"),
    pytest.param(service(publishNotReadyAddresses=True), pod("a", ready=False, deleting=True),
                 endpoint("a", "10.244.1.5", ready=True, serving=False, terminating=True),
                 id="publishNotReadyAddresses: always ready"),
    pytest.param(service(), pod("a", node="n2"), endpoint("a", "10.244.1.5", node="n2"),
                 id="no zone label on the node, no zone"),
    pytest.param(service(), pod("a", hostname="a-0", subdomain="web"), endpoint("a", "10.244.1.5", hostname="a-0"),
                 id="hostname when the subdomain is the service"),
    pytest.param(service(), pod("a", hostname="a-0"), endpoint("a", "10.244.1.5"), id="no subdomain, no hostname"),
])
def test_endpoint_fields(svc: Service, p: Pod, expected: dict[str, Any]) -> None:
    [only] = desired_slices(svc, [p], NODES)
    assert [e.to_dict() for e in only.endpoints or []] == [expected]


@pytest.mark.parametrize(("p",), [
    pytest.param(pod("a", None), id="no IP"),
    pytest.param(pod("a", phase="Succeeded"), id="succeeded"),
    pytest.param(pod("a", phase="Failed", ready=False), id="failed"),
])
def test_pods_left_out(p: Pod) -> None:
    [placeholder] = desired_slices(service(), [p], NODES)
    assert placeholder.endpoints is None


def test_named_port_that_does_not_resolve_goes_to_a_portless_group() -> None:
    no_port = pod("b", "10.244.1.6", containers=[{"name": "c", "image": "nginx"}])
    groups = desired_groups(service([NAMED]), [pod("a"), no_port], NODES)
    assert {ports: [e.target_ref.name for e in eps if e.target_ref] for ports, eps in groups.items()} == {
        (("http", 8080, "TCP", ""),): ["a"], (): ["b"]}
    slices = desired_slices(service([NAMED]), [pod("a"), no_port], NODES)
    assert [(s.to_dict().get("ports"), len(s.endpoints or [])) for s in slices] == [
        (None, 1), ([{"name": "http", "protocol": "TCP", "port": 8080}], 1)]


def test_pods_group_by_resolved_port() -> None:
    other = pod("b", "10.244.1.6", containers=[
        {"name": "c", "image": "nginx", "ports": [{"name": "web", "containerPort": 9090}]}])
    slices = desired_slices(service([NAMED]), [pod("a"), other], NODES)
    assert [([p.port for p in s.ports or []], [e.addresses for e in s.endpoints or []]) for s in slices] == [
        ([8080], [["10.244.1.5"]]), ([9090], [["10.244.1.6"]])]


def test_at_most_100_endpoints_per_slice() -> None:
    pods = [pod(f"p{i:03}", f"10.244.{i >> 8}.{i & 255}") for i in range(250)]
    slices = desired_slices(service(), pods, NODES)
    assert [len(s.endpoints or []) for s in slices] == [100, 100, 50]
    names = [e.target_ref.name or "" for s in slices for e in s.endpoints or [] if e.target_ref]
    assert sorted(names) == [f"p{i:03}" for i in range(250)]  # each pod exactly once


def test_placeholder_slice_when_nothing_backs_the_service() -> None:
    [placeholder] = desired_slices(service(), [], NODES)
    assert placeholder.to_dict() == {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"generateName": "web-", "namespace": "default",
                     "labels": {"kubernetes.io/service-name": "web",
                                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "web", "uid": "svc-uid",
                                          "controller": True, "blockOwnerDeletion": True}]},
        "addressType": "IPv4"}


def test_slice_wire_shape() -> None:
    svc = service([{"port": 80, "targetPort": 8080, "protocol": "TCP"},
                   {"name": "grpc", "port": 9000, "targetPort": 9000, "protocol": "TCP", "appProtocol": "grpc"}])
    [only] = desired_slices(svc, [pod("a")], NODES)
    data = only.to_dict()
    assert data["ports"] == [{"name": "", "protocol": "TCP", "port": 8080},
                             {"name": "grpc", "protocol": "TCP", "port": 9000, "appProtocol": "grpc"}]
    assert data["addressType"] == "IPv4"
    assert data["metadata"]["generateName"] == "web-"
    assert data["endpoints"] == [endpoint("a", "10.244.1.5")]


@pytest.mark.parametrize(("svc", "labels"), [
    pytest.param(service(labels={"team": "a"}),
                 {"team": "a", "kubernetes.io/service-name": "web",
                  "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"},
                 id="service labels plus the controller's"),
    pytest.param(service(cluster_ip="None"),
                 {"kubernetes.io/service-name": "web",
                  "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
                  "service.kubernetes.io/headless": ""}, id="headless"),
    pytest.param(service(labels={"kubernetes.io/service-name": "evil", "service.kubernetes.io/headless": "",
                                 "endpointslice.kubernetes.io/managed-by": "me"}),
                 {"kubernetes.io/service-name": "web",
                  "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"},
                 id="reserved keys on the service are ignored"),
])
def test_slice_labels(svc: Service, labels: dict[str, str]) -> None:
    assert slice_labels(svc) == labels
    assert all(s.metadata.labels == labels for s in desired_slices(svc, [pod("a")], NODES))


def test_headless_service_without_ports() -> None:
    [only] = desired_slices(service([], cluster_ip="None"), [pod("a")], NODES)
    assert only.ports is None
    assert [e.addresses for e in only.endpoints or []] == [["10.244.1.5"]]


def test_a_pod_stored_without_validation_spoils_no_other_endpoint() -> None:
    """Objects the API would refuse (written straight into etcd): a pod whose IP Go cannot parse is left
    out, and a hostname or node name that is not a DNS name is dropped, so the slice the controller
    writes still passes validation and carries every other pod."""
    pods = [pod("a", "10.244.1.5"), pod("zoned", "fe80::1%eth0\n"), pod("b", "10.244.1.6", hostname="h\n",
                                                                        subdomain="web"),
            pod("c", "10.244.1.7", node="n1\n")]
    (slice_,) = desired_slices(service(), pods, NODES)
    by_name = {e.target_ref.name: e for e in slice_.endpoints or [] if e.target_ref}
    assert sorted(by_name) == ["a", "b", "c"]
    assert by_name["b"].hostname is None and by_name["c"].node_name is None
