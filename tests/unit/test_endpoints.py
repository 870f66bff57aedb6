"""The Endpoints controller's pure part (reference/controllers-and-dns.md §1) and podutil.FindPort:
which pods become which addresses, in which subsets, in which order, with which labels."""

from __future__ import annotations

from typing import Any

import pytest

from controllers.endpoints import desired_endpoints, desired_subsets
from controllers.podutil import find_port
from kubelab.models import Pod, Service, ServicePort

HTTP = {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}
NAMED = {"name": "http", "port": 80, "targetPort": "web", "protocol": "TCP"}


def service(ports: list[dict[str, Any]] | None = None, *, name: str = "web", cluster_ip: str = "10.96.0.10",
            labels: dict[str, str] | None = None, **spec: Any) -> Service:
    return Service.from_dict({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "default", "uid": "svc-uid", "labels": labels or {}},
        "spec": {"selector": {"app": "web"}, "clusterIP": cluster_ip,
                 "ports": [HTTP] if ports is None else ports, **spec}})


def pod(name: str, ip: str | None = "10.244.1.5", *, ready: bool = True, phase: str = "Running",
        deleting: bool = False, containers: list[dict[str, Any]] | None = None,
        init: list[dict[str, Any]] | None = None, node: str = "n1", **spec: Any) -> Pod:
    status: dict[str, Any] = {"phase": phase,
                              "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    if ip:
        status["podIP"] = ip
        status["podIPs"] = [{"ip": ip}]
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": {"app": "web"}}
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    body: dict[str, Any] = {"nodeName": node, "containers": containers or [
        {"name": "c", "image": "nginx", "ports": [{"name": "web", "containerPort": 8080, "protocol": "TCP"}]}], **spec}
    if init:
        body["initContainers"] = init
    return Pod.from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body, "status": status})


def address(name: str, ip: str, **extra: Any) -> dict[str, Any]:
    return {"ip": ip, "nodeName": "n1", **extra,
            "targetRef": {"kind": "Pod", "namespace": "default", "name": name, "uid": f"uid-{name}"}}


def subsets_of(svc: Service, pods: list[Pod]) -> list[dict[str, Any]]:
    return [s.to_dict() for s in desired_subsets(svc, pods)]


P80 = [{"name": "http", "port": 8080, "protocol": "TCP"}]


@pytest.mark.parametrize(("svc", "pods", "subsets"), [
    pytest.param(service(), [pod("a", "10.244.1.5")],
                 [{"addresses": [address("a", "10.244.1.5")], "ports": P80}], id="one ready pod"),
    pytest.param(service(), [pod("a", "10.244.1.5", ready=False)],
                 [{"notReadyAddresses": [address("a", "10.244.1.5")], "ports": P80}], id="not ready pod"),
    pytest.param(service(), [pod("a", "10.244.1.5"), pod("b", "10.244.1.6", ready=False)],
                 [{"addresses": [address("a", "10.244.1.5")], "notReadyAddresses": [address("b", "10.244.1.6")],
                   "ports": P80}], id="ready and not ready share the subset"),
    pytest.param(service(publishNotReadyAddresses=True), [pod("b", "10.244.1.6", ready=False)],
                 [{"addresses": [address("b", "10.244.1.6")], "ports": P80}],
                 id="publishNotReadyAddresses makes every address ready"),
    pytest.param(service(), [pod("a", "10.244.1.5", deleting=True)], [], id="terminating pod is left out"),
    pytest.param(service(publishNotReadyAddresses=True), [pod("a", "10.244.1.5", deleting=True)],
                 [{"addresses": [address("a", "10.244.1.5")], "ports": P80}],
                 id="terminating pod kept with publishNotReadyAddresses"),
    pytest.param(service(), [pod("a", None)], [], id="pod without IP"),
    pytest.param(service(), [pod("a", phase="Succeeded")], [], id="succeeded pod"),
    pytest.param(service(), [pod("a", phase="Failed", ready=False)], [], id="failed pod"),
    pytest.param(service(), [pod("a", hostname="a-0", subdomain="web")],
                 [{"addresses": [address("a", "10.244.1.5", hostname="a-0")], "ports": P80}],
                 id="hostname when the subdomain is the service"),
    pytest.param(service(), [pod("a", hostname="a-0", subdomain="other")],
                 [{"addresses": [address("a", "10.244.1.5")], "ports": P80}], id="no hostname for another subdomain"),
    pytest.param(service(), [pod("a", "10.244.1.2"), pod("b", "10.244.1.10"), pod("c", "10.244.1.100")],
                 [{"addresses": [address("b", "10.244.1.10"), address("c", "10.244.1.100"),
                                 address("a", "10.244.1.2")], "ports": P80}],
                 id="addresses sorted as IP strings: .10 and .100 before .2"),
    pytest.param(service(), [pod("z", "10.244.1.5", hostNetwork=True), pod("a", "10.244.1.5", hostNetwork=True)],
                 [{"addresses": [address("a", "10.244.1.5"), address("z", "10.244.1.5")], "ports": P80}],
                 id="same IP: sorted by pod UID"),
    pytest.param(service([{"port": 80, "targetPort": 8080, "protocol": "TCP"}]), [pod("a")],
                 [{"addresses": [address("a", "10.244.1.5")], "ports": [{"port": 8080, "protocol": "TCP"}]}],
                 id="unnamed port has no name"),
    pytest.param(service([{**HTTP, "appProtocol": "kubernetes.io/h2c"}]), [pod("a")],
                 [{"addresses": [address("a", "10.244.1.5")],
                   "ports": [{"name": "http", "port": 8080, "protocol": "TCP", "appProtocol": "kubernetes.io/h2c"}]}],
                 id="appProtocol copied from the service port"),
    pytest.param(service([HTTP, {"name": "dns", "port": 53, "targetPort": 53, "protocol": "UDP"}]), [pod("a")],
                 [{"addresses": [address("a", "10.244.1.5")],
                   "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}, *P80]}],
                 id="ports offered by the same addresses share a subset"),
    pytest.param(service([NAMED]), [pod("a", "10.244.1.5"), pod("b", "10.244.1.6", containers=[
        {"name": "c", "image": "nginx", "ports": [{"name": "web", "containerPort": 9090, "protocol": "TCP"}]}])],
                 [{"addresses": [address("a", "10.244.1.5")], "ports": P80},
                  {"addresses": [address("b", "10.244.1.6")], "ports": [{"name": "http", "port": 9090,
                                                                        "protocol": "TCP"}]}],
                 id="a named port resolving differently splits the subsets"),
    pytest.param(service([NAMED]), [pod("a", "10.244.1.5"), pod("b", "10.244.1.6", containers=[
        {"name": "c", "image": "nginx"}])],
                 [{"addresses": [address("a", "10.244.1.5")], "ports": P80}],
                 id="a pod whose named port does not resolve is dropped"),
    pytest.param(service([NAMED, {"name": "metrics", "port": 9100, "targetPort": 9100, "protocol": "TCP"}]),
                 [pod("a", "10.244.1.5"), pod("b", "10.244.1.6", containers=[{"name": "c", "image": "nginx"}])],
                 [{"addresses": [address("a", "10.244.1.5")], "ports": P80},
                  {"addresses": [address("a", "10.244.1.5"), address("b", "10.244.1.6")],
                   "ports": [{"name": "metrics", "port": 9100, "protocol": "TCP"}]}],
                 id="only the unresolved port is dropped for that pod"),
    pytest.param(service([], cluster_ip="None"), [pod("a")], [{"addresses": [address("a", "10.244.1.5")]}],
                 id="headless without ports: addresses, no ports"),
    pytest.param(service(), [], [], id="no pods, no subsets"),
])
def test_desired_subsets(svc: Service, pods: list[Pod], subsets: list[dict[str, Any]]) -> None:
    assert subsets_of(svc, pods) == subsets


@pytest.mark.parametrize(("svc", "labels"), [
    pytest.param(service(labels={"app": "web", "team": "a"}), {"app": "web", "team": "a"}, id="service labels"),
    pytest.param(service(cluster_ip="None", labels={"app": "web"}),
                 {"app": "web", "service.kubernetes.io/headless": ""}, id="headless label"),
    pytest.param(service(labels={"service.kubernetes.io/headless": ""}), None,
                 id="headless label removed from a service with a cluster IP"),
    pytest.param(service(), None, id="no labels"),
])
def test_endpoints_labels(svc: Service, labels: dict[str, str] | None) -> None:
    assert desired_endpoints(svc, [pod("a")]).metadata.labels == labels


def test_desired_endpoints_object() -> None:
    ep = desired_endpoints(service(), [pod("a")]).to_dict()
    assert ep == {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "web", "namespace": "default"},
                  "subsets": [{"addresses": [address("a", "10.244.1.5")], "ports": P80}]}
    assert "ownerReferences" not in ep["metadata"]  # Endpoints have no owner: same name as the Service


def test_no_pods_leaves_an_endpoints_object_without_subsets() -> None:
    assert desired_endpoints(service(), []).to_dict() == {
        "apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "web", "namespace": "default"}}


def many(count: int, *, ready: bool, offset: int = 0) -> list[Pod]:
    return [pod(f"p{i}", f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}", ready=ready)
            for i in range(offset, offset + count)]


@pytest.mark.parametrize(("pods", "ready", "not_ready", "truncated"), [
    pytest.param(many(1000, ready=True), 1000, 0, False, id="exactly 1000 is not over capacity"),
    pytest.param(many(600, ready=True) + many(600, ready=False, offset=600), 600, 400, True,
                 id="over capacity: not-ready addresses are cut first"),
    pytest.param(many(1001, ready=True) + many(5, ready=False, offset=1001), 1000, 0, True,
                 id="more than 1000 ready: only ready ones kept"),
])
def test_over_capacity_truncation(pods: list[Pod], ready: int, not_ready: int, truncated: bool) -> None:
    ep = desired_endpoints(service(), pods)
    subsets = ep.subsets or []
    assert sum(len(s.addresses or []) for s in subsets) == ready
    assert sum(len(s.not_ready_addresses or []) for s in subsets) == not_ready
    annotations = ep.metadata.annotations or {}
    assert annotations.get("endpoints.kubernetes.io/over-capacity") == ("truncated" if truncated else None)


def test_truncation_is_proportional_per_subset() -> None:
    # Two subsets (two port resolutions) of 600 ready pods each: ceil(600/1200 * 1000) = 500 from each.
    svc = service([NAMED])
    pods = [pod(f"a{i}", f"10.1.{i >> 8}.{i & 255}") for i in range(600)]
    pods += [pod(f"b{i}", f"10.2.{i >> 8}.{i & 255}", containers=[
        {"name": "c", "image": "nginx", "ports": [{"name": "web", "containerPort": 9090}]}]) for i in range(600)]
    subsets = desired_endpoints(svc, pods).subsets or []
    assert [len(s.addresses or []) for s in subsets] == [500, 500]


def sp(**fields: Any) -> ServicePort:
    return ServicePort.from_dict({"port": 80, "protocol": "TCP", **fields})


WEB_8080 = {"name": "c", "image": "nginx", "ports": [{"name": "web", "containerPort": 8080, "protocol": "TCP"}]}


@pytest.mark.parametrize(("p", "port", "number"), [
    pytest.param(pod("a"), sp(targetPort=9376), 9376, id="number used as is, unchecked"),
    pytest.param(pod("a"), sp(), 80, id="no targetPort means the port"),
    pytest.param(pod("a"), sp(targetPort="web"), 8080, id="name in a container"),
    pytest.param(pod("a"), sp(targetPort="web", protocol="UDP"), None, id="name needs the same protocol"),
    pytest.param(pod("a", containers=[{"name": "c", "image": "x", "ports": [{"name": "dns", "containerPort": 53,
                                                                          "protocol": "UDP"}]}]),
                 sp(targetPort="dns", protocol="UDP"), 53, id="UDP name"),
    pytest.param(pod("a", containers=[{"name": "c", "image": "x", "ports": [{"name": "web", "containerPort": 8080}]}]),
                 sp(targetPort="web"), 8080, id="container port protocol defaults to TCP"),
    pytest.param(pod("a"), sp(targetPort="missing"), None, id="unknown name"),
    pytest.param(pod("a"), sp(targetPort="8080"), None, id="a string is always a name"),
    pytest.param(pod("a", containers=[{"name": "c", "image": "x"}],
                     init=[{**WEB_8080, "name": "proxy", "restartPolicy": "Always"}]),
                 sp(targetPort="web"), 8080, id="sidecar port"),
    pytest.param(pod("a", containers=[{"name": "c", "image": "x"}], init=[{**WEB_8080, "name": "setup"}]),
                 sp(targetPort="web"), None, id="plain init container port is not served"),
    pytest.param(pod("a", containers=[WEB_8080], init=[{"name": "proxy", "image": "x", "restartPolicy": "Always",
                                                        "ports": [{"name": "web", "containerPort": 9999}]}]),
                 sp(targetPort="web"), 8080, id="containers are searched before sidecars"),
    pytest.param(pod("a", containers=[{"name": "c", "image": "x", "ports": [{"name": "web", "containerPort": 1},
                                                                          {"name": "web", "containerPort": 2}]}]),
                 sp(targetPort="web"), 1, id="first match wins"),
])
def test_find_port(p: Pod, port: ServicePort, number: int | None) -> None:
    assert find_port(p, port) == number
