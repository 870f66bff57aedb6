"""`kubectl describe` of services, pods, nodes and endpoints, with their Events, against the API
server: what each kubectl version fetches differs (1.29/1.30 read the Service's Endpoints, 1.31+ its
EndpointSlices, and the events by a field selector whose terms come in random order), what the user
reads must not."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest
from apitools import CORE, create, ns_path, release_node_port, unique_name
from kubectltools import VERSIONS, Kubectl, normalize

IP = r"\b10\.\d+\.\d+\.\d+\b"
AGO = r"(?<=\s)\d+(s|m\d*s?|h\d*m?|d\d*h?|y\d*d?)(?=[\s)])"


def fields(out: str, *, indent: int = 0) -> dict[str, str]:
    """The `Key:  value` lines of describe output at one indentation (the first occurrence wins)."""
    found: dict[str, str] = {}
    for match in re.finditer(rf"^{' ' * indent}([A-Z][A-Za-z -]*):[ \t]*(.*)$", out, re.MULTILINE):
        found.setdefault(match.group(1), match.group(2).strip())
    return found


def events_of(out: str) -> str:
    """The Events table with ages as <AGO> and column gaps squeezed to two spaces (the widths follow
    the length of the ages)."""
    section = normalize(out[out.index("Events:"):], AGO=AGO)
    return "\n".join(re.sub(r"(\S) {2,}", r"\1  ", line) for line in section.split("\n"))


@dataclass
class Objects:
    ns: str
    node: str


def event(ns: str, name: str, kind: str, obj: str, reason: str, message: str, *, uid: str = "",
          component: str = "default-scheduler", type_: str = "Normal", count: int = 1, host: str = "",
          namespace: str | None = None) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": ns},
            "involvedObject": {"kind": kind, "namespace": ns if namespace is None else namespace, "name": obj,
                               "uid": uid, "apiVersion": "v1"},
            "reason": reason, "message": message, "type": type_, "count": count,
            "source": {"component": component, **({"host": host} if host else {})},
            "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T00:00:00Z"}


@pytest.fixture(scope="module")
def objects(apiserver: str) -> Objects:
    ns, node = unique_name("kdesc"), unique_name("dnode")
    with httpx.Client(base_url=apiserver, timeout=10) as api:
        create(api, f"{CORE}/namespaces", {"metadata": {"name": ns}})
        release_node_port(api, 31777)
        svc = create(api, ns_path("services", ns), {
            "metadata": {"name": "web", "labels": {"app": "web"}, "annotations": {"owner": "team-a"}},
            "spec": {"type": "NodePort", "selector": {"app": "web"},
                     "ports": [{"name": "http", "port": 80, "targetPort": 8080, "nodePort": 31777}]}})
        create(api, ns_path("endpoints", ns), {"metadata": {"name": "web"}, "subsets": [{
            "addresses": [{"ip": "10.244.1.7"}, {"ip": "10.244.2.9"}],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]})
        create(api, ns_path("endpointslices", ns, group="discovery.k8s.io/v1"), {
            "metadata": {"name": "web-x1", "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.244.1.7"], "conditions": {"ready": True}},
                          {"addresses": ["10.244.2.9"], "conditions": {"ready": True}}],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]})
        create(api, ns_path("events", ns), event(ns, "web.1", "Service", "web", "Type",
                                                 "ClusterIP -> NodePort", uid=svc["metadata"]["uid"],
                                                 component="service-controller"))
        create(api, f"{CORE}/nodes", {"metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}},
                                      "status": {"conditions": [{"type": "Ready", "status": "True",
                                                                 "reason": "KubeletReady",
                                                                 "message": "kubelet is posting ready status"}],
                                                 "addresses": [{"type": "InternalIP", "address": "10.240.0.21"}],
                                                 "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                                                 "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})
        pod = create(api, ns_path("pods", ns), {
            "metadata": {"name": "web-0", "labels": {"app": "web"}},
            "spec": {"nodeName": node, "containers": [{"name": "app", "image": "nginx:1.27",
                                                        "ports": [{"containerPort": 8080}],
                                                        "resources": {"requests": {"cpu": "250m"}}}]}})
        uid = pod["metadata"]["uid"]
        for i, (reason, message, component) in enumerate([
                ("Scheduled", f"Successfully assigned {ns}/web-0 to {node}", "default-scheduler"),
                ("Pulled", 'Container image "nginx:1.27" already present on machine', "kubelet"),
                ("Started", "Started container app", "kubelet")]):
            create(api, ns_path("events", ns), event(ns, f"web-0.{i}", "Pod", "web-0", reason, message, uid=uid,
                                                     component=component))
        create(api, ns_path("events", ns), event(ns, "web-0.w", "Pod", "web-0", "BackOff", "Back-off pulling",
                                                 uid=uid, component="kubelet", type_="Warning", count=3))
        create(api, "/api/v1/namespaces/default/events", event("default", f"{node}.1", "Node", node, "Starting",
                                                                "Starting kubelet.", uid=node, component="kubelet",
                                                                namespace=""))
    return Objects(ns, node)


@pytest.mark.parametrize("version", VERSIONS)
def test_describe_service(kubectl_for: Callable[[str], Kubectl], objects: Objects, version: str) -> None:
    out = kubectl_for(version).ok("describe", "svc", "web", "-n", objects.ns)
    internal = "Internal Traffic Policy:  Cluster\n" if version != "1.29" else ""
    assert normalize(out[:out.index("Events:")], IP=IP) == (
        "Name:                     web\n"
        f"Namespace:                {objects.ns}\n"
        "Labels:                   app=web\n"
        "Annotations:              owner: team-a\n"
        "Selector:                 app=web\n"
        "Type:                     NodePort\n"
        "IP Family Policy:         SingleStack\n"
        "IP Families:              IPv4\n"
        "IP:                       <IP>\n"
        "IPs:                      <IP>\n"
        "Port:                     http  80/TCP\n"
        "TargetPort:               8080/TCP\n"
        "NodePort:                 http  31777/TCP\n"
        "Endpoints:                <IP>:8080,<IP>:8080\n"
        "Session Affinity:         None\n"
        "External Traffic Policy:  Cluster\n"
        f"{internal}")
    assert events_of(out) == (
        "Events:\n"
        "  Type  Reason  Age  From  Message\n"
        "  ----  ------  ----  ----  -------\n"
        "  Normal  Type  <AGO>  service-controller  ClusterIP -> NodePort\n")


@pytest.mark.parametrize("version", VERSIONS)
def test_describe_pod_with_events(kubectl_for: Callable[[str], Kubectl], objects: Objects, version: str) -> None:
    out = kubectl_for(version).ok("describe", "pod", "web-0", "-n", objects.ns)
    top = fields(out)
    assert (top["Name"], top["Namespace"], top["Priority"], top["Status"], top["Labels"]) == \
        ("web-0", objects.ns, "0", "Pending", "app=web")
    assert top["Node"] == f"{objects.node}/"
    assert top["QoS Class"] == "Burstable"
    container = fields(out, indent=4)
    assert (container["Image"], container["Port"], container["Host Port"]) == ("nginx:1.27", "8080/TCP", "0/TCP")
    assert re.search(r"^    Requests:\n      cpu:\s+250m$", out, re.MULTILINE), out
    assert re.search(r"^Tolerations:\s+node.kubernetes.io/not-ready:NoExecute op=Exists for 300s$", out, re.MULTILINE), out
    assert events_of(out) == (
        "Events:\n"
        "  Type  Reason  Age  From  Message\n"
        "  ----  ------  ----  ----  -------\n"
        f"  Normal  Scheduled  <AGO>  default-scheduler  Successfully assigned {objects.ns}/web-0 to {objects.node}\n"
        '  Normal  Pulled  <AGO>  kubelet  Container image "nginx:1.27" already present on machine\n'
        "  Normal  Started  <AGO>  kubelet  Started container app\n"
        "  Warning  BackOff  <AGO> (x3 over <AGO>)  kubelet  Back-off pulling\n")


@pytest.mark.parametrize("version", VERSIONS)
def test_describe_endpoints(kubectl_for: Callable[[str], Kubectl], objects: Objects, version: str) -> None:
    out = kubectl_for(version).ok("describe", "endpoints", "web", "-n", objects.ns)
    assert out == (
        "Name:         web\n"
        f"Namespace:    {objects.ns}\n"
        "Labels:       <none>\n"
        "Annotations:  <none>\n"
        "Subsets:\n"
        "  Addresses:          10.244.1.7,10.244.2.9\n"
        "  NotReadyAddresses:  <none>\n"
        "  Ports:\n"
        "    Name  Port  Protocol\n"
        "    ----  ----  --------\n"
        "    http  8080  TCP\n"
        "\n"
        "Events:  <none>\n")


@pytest.mark.parametrize("version", VERSIONS)
def test_describe_node(kubectl_for: Callable[[str], Kubectl], objects: Objects, version: str) -> None:
    out = kubectl_for(version).ok("describe", "node", objects.node)
    top = fields(out)
    assert (top["Name"], top["Roles"], top["Unschedulable"]) == (objects.node, "<none>", "false")
    assert fields(out, indent=2)["InternalIP"] == "10.240.0.21"
    assert re.search(r"^  Ready\s+True\s+.*KubeletReady\s+kubelet is posting ready status$", out, re.MULTILINE), out
    assert re.search(rf"^  {objects.ns}\s+web-0\s+250m \(6%\)\s+0 \(0%\)\s+0 \(0%\)\s+0 \(0%\)\s+\S+$", out,
                     re.MULTILINE), out
    assert re.search(r"^  cpu\s+250m \(6%\)\s+0 \(0%\)$", out, re.MULTILINE), out
    assert events_of(out) == ("Events:\n"
                              "  Type  Reason  Age  From  Message\n"
                              "  ----  ------  ----  ----  -------\n"
                              "  Normal  Starting  <AGO>  kubelet  Starting kubelet.\n")


def test_describe_missing_object(kubectl: Kubectl, objects: Objects) -> None:
    missing = kubectl("describe", "svc", "nope", "-n", objects.ns).failed()
    assert missing.stderr == 'Error from server (NotFound): services "nope" not found\n'
