"""`kubectl get`, as a user sees it: server-side Tables with kube-apiserver's columns and cells, -o
wide/yaml/json/jsonpath/name, -l, -A, --show-labels, --sort-by, -w, `get all`, and discovery
(`api-resources`, `version`). The objects are written through the API the way the scheduler and the
kubelet would write them, so the cells come from real status."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest
import yaml
from apitools import CORE, create, ns_path, release_node_port, unique_name
from kubectltools import AGE, VERSIONS, Kubectl, cells, headers, table

NODE_INFO = {"architecture": "amd64", "bootID": "b", "containerRuntimeVersion": "containerd://1.7.0",
             "kernelVersion": "6.1.0-18-amd64", "kubeProxyVersion": "v1.32.0", "kubeletVersion": "v1.32.0",
             "machineID": "m", "operatingSystem": "linux", "osImage": "Debian GNU/Linux 12 (bookworm)",
             "systemUUID": "u"}


@dataclass
class World:
    ns: str
    label: str  # every node and pod of this module carries test=<label>
    node_ready: str
    node_cordoned: str
    web_ip: str


def node(name: str, label: str, *, ready: bool, ip: str, **spec: object) -> dict[str, object]:
    return {"metadata": {"name": name, "labels": {"test": label, "kubernetes.io/hostname": name,
                                                  "node-role.kubernetes.io/control-plane": ""} if ready
                         else {"test": label, "kubernetes.io/hostname": name}},
            "spec": spec,
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                       "reason": "KubeletReady" if ready else "KubeletNotReady"}],
                       "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
                       "nodeInfo": NODE_INFO, "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def running(api: httpx.Client, ns: str, name: str, node_name: str, ip: str) -> None:
    path = ns_path("pods", ns, name)
    current = api.get(path).json()
    assert api.post(f"{path}/binding", json={"metadata": {"name": name},
                                              "target": {"kind": "Node", "name": node_name}}).status_code == 201
    current = api.get(path).json()
    current["status"].update({
        "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "hostIP": "10.240.0.11",
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
        "containerStatuses": [{"name": "c", "image": "nginx:1.27", "imageID": "docker.io/library/nginx@sha256:1",
                               "ready": True, "restartCount": 2, "started": True,
                               "state": {"running": {"startedAt": "2024-01-01T00:00:00Z"}}}]})
    assert api.put(f"{path}/status", json=current).status_code == 200


@pytest.fixture(scope="module")
def world(apiserver: str) -> World:
    ns, label = unique_name("kget"), unique_name("get")
    with httpx.Client(base_url=apiserver, timeout=10) as api:
        create(api, f"{CORE}/namespaces", {"metadata": {"name": ns}})
        ready, cordoned = f"{label}-a", f"{label}-b"
        create(api, f"{CORE}/nodes", node(ready, label, ready=True, ip="10.240.0.11"))
        create(api, f"{CORE}/nodes", node(cordoned, label, ready=False, ip="10.240.0.12", unschedulable=True))
        release_node_port(api, 31999)
        create(api, ns_path("services", ns), {"metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {
            "type": "NodePort", "selector": {"app": "web"}, "ports": [{"port": 3017, "targetPort": 5003,
                                                                       "nodePort": 31999}]}})
        create(api, ns_path("services", ns), {"metadata": {"name": "db"}, "spec": {
            "selector": {"app": "db", "tier": "data"}, "ports": [{"name": "pg", "port": 5432},
                                                                 {"name": "dns", "port": 53, "protocol": "UDP"}]}})
        create(api, ns_path("services", ns), {"metadata": {"name": "ext"}, "spec": {
            "type": "ExternalName", "externalName": "example.com"}})
        for name, labels in (("web-1", {"app": "web", "tier": "fe"}), ("web-2", {"app": "web"}),
                             ("db-0", {"app": "db"})):
            create(api, ns_path("pods", ns), {"metadata": {"name": name, "labels": {**labels, "test": label}},
                                              "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}})
        running(api, ns, "web-1", ready, "10.244.1.7")
        create(api, ns_path("endpoints", ns), {"metadata": {"name": "web"}, "subsets": [
            {"addresses": [{"ip": "10.244.1.7"}], "ports": [{"port": 5003, "protocol": "TCP"}]}]})
        create(api, ns_path("endpointslices", ns, group="discovery.k8s.io/v1"), {
            "metadata": {"name": "web-abcde", "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4", "endpoints": [{"addresses": ["10.244.1.7"], "conditions": {"ready": True}}],
            "ports": [{"port": 5003, "protocol": "TCP", "name": ""}]})
        create(api, ns_path("events", ns), {
            "metadata": {"name": "web-1.1"}, "involvedObject": {"kind": "Pod", "namespace": ns, "name": "web-1"},
            "reason": "Scheduled", "message": f"Successfully assigned {ns}/web-1 to {ready}", "type": "Normal",
            "source": {"component": "default-scheduler"}, "count": 1,
            "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T00:00:00Z"})
    return World(ns, label, ready, cordoned, "10.244.1.7")


@pytest.mark.parametrize("version", VERSIONS)
def test_get_services(kubectl_for: Callable[[str], Kubectl], world: World, version: str) -> None:
    out = kubectl_for(version).ok("get", "services", "-n", world.ns)
    assert headers(out) == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    rows = table(out)
    assert [r["NAME"] for r in rows] == ["db", "ext", "web"]
    web, db, ext = cells(rows, "NAME", "web"), cells(rows, "NAME", "db"), cells(rows, "NAME", "ext")
    assert (web["TYPE"], web["EXTERNAL-IP"], web["PORT(S)"]) == ("NodePort", "<none>", "3017:31999/TCP")
    assert web["CLUSTER-IP"].startswith("10.")
    assert db["PORT(S)"] == "5432/TCP,53/UDP"
    assert (ext["TYPE"], ext["CLUSTER-IP"], ext["EXTERNAL-IP"], ext["PORT(S)"]) == \
        ("ExternalName", "<none>", "example.com", "<none>")
    assert all(AGE.match(r["AGE"]) for r in rows), rows


def test_get_services_wide_and_single(kubectl: Kubectl, world: World) -> None:
    rows = table(kubectl.ok("get", "svc", "-n", world.ns, "-o", "wide"))
    assert cells(rows, "NAME", "db")["SELECTOR"] == "app=db,tier=data"
    assert cells(rows, "NAME", "ext")["SELECTOR"] == "<none>"
    one = table(kubectl.ok("get", "svc", "web", "-n", world.ns))
    assert [r["NAME"] for r in one] == ["web"]


@pytest.mark.parametrize("version", VERSIONS)
def test_get_pods(kubectl_for: Callable[[str], Kubectl], world: World, version: str) -> None:
    kubectl = kubectl_for(version)
    out = kubectl.ok("get", "pods", "-n", world.ns)
    assert headers(out) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    rows = table(out)
    web1 = cells(rows, "NAME", "web-1")
    assert (web1["READY"], web1["STATUS"], web1["RESTARTS"]) == ("1/1", "Running", "2")
    pending = cells(rows, "NAME", "web-2")
    assert (pending["READY"], pending["STATUS"], pending["RESTARTS"]) == ("0/1", "Pending", "0")
    wide = table(kubectl.ok("get", "pods", "-n", world.ns, "-o", "wide"))
    assert headers(kubectl.ok("get", "pods", "-n", world.ns, "-o", "wide")) == [
        "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE", "READINESS GATES"]
    web1 = cells(wide, "NAME", "web-1")
    assert (web1["IP"], web1["NODE"], web1["NOMINATED NODE"], web1["READINESS GATES"]) == \
        (world.web_ip, world.node_ready, "<none>", "<none>")
    assert (cells(wide, "NAME", "web-2")["IP"], cells(wide, "NAME", "web-2")["NODE"]) == ("<none>", "<none>")


def test_label_selectors_show_labels_and_all_namespaces(kubectl: Kubectl, world: World) -> None:
    ns = world.ns
    assert [r["NAME"] for r in table(kubectl.ok("get", "pods", "-n", ns, "-l", "app=web"))] == ["web-1", "web-2"]
    assert [r["NAME"] for r in table(kubectl.ok("get", "pods", "-n", ns, "-l", "app in (web,db),tier!=fe"))] == \
        ["db-0", "web-2"]
    assert [r["NAME"] for r in table(kubectl.ok("get", "pods", "-n", ns, "-l", "!tier"))] == ["db-0", "web-2"]
    labelled = table(kubectl.ok("get", "pods", "-n", ns, "--show-labels", "-l", "tier"))
    assert labelled == [{"NAME": "web-1", "READY": "1/1", "STATUS": "Running", "RESTARTS": "2",
                         "AGE": labelled[0]["AGE"], "LABELS": f"app=web,test={world.label},tier=fe"}]
    everywhere = table(kubectl.ok("get", "pods", "-A", "-l", f"test={world.label}"))
    assert {(r["NAMESPACE"], r["NAME"]) for r in everywhere} == {(ns, "web-1"), (ns, "web-2"), (ns, "db-0")}
    bad = kubectl("get", "pods", "-n", ns, "-l", "app in web").failed()
    assert bad.stderr == ('Error from server (BadRequest): Unable to find "/v1, Resource=pods" that match label '
                          "selector \"app in web\", field selector \"\": unable to parse requirement: found 'web' "
                          "expected: '('\n")
    bad = kubectl("get", "pods", "-n", ns, "--field-selector", "spec.bogus=x").failed()
    assert bad.stderr.endswith("field label not supported: spec.bogus\n"), bad.stderr


def test_sort_by_and_output_formats(kubectl: Kubectl, world: World) -> None:
    ns = world.ns
    by_name = table(kubectl.ok("get", "pods", "-n", ns, "--sort-by=.metadata.name"))
    assert [r["NAME"] for r in by_name] == ["db-0", "web-1", "web-2"]
    by_port = table(kubectl.ok("get", "svc", "-n", ns, "--sort-by=.spec.ports[0].port"))
    assert [r["NAME"] for r in by_port] == ["ext", "web", "db"]
    assert kubectl.ok("get", "pods", "-n", ns, "-l", "app=web", "-o", "name").split() == ["pod/web-1", "pod/web-2"]
    assert kubectl.ok("get", "pods", "-n", ns, "-o", "jsonpath={.items[*].metadata.name}") == "db-0 web-1 web-2"
    assert kubectl.ok("get", "svc", "web", "-n", ns, "-o", "jsonpath={.spec.ports[0].nodePort}") == "31999"
    listed = json.loads(kubectl.ok("get", "svc", "-n", ns, "-o", "json"))
    assert listed["kind"] == "List" and [i["metadata"]["name"] for i in listed["items"]] == ["db", "ext", "web"]
    assert all(i["kind"] == "Service" and i["apiVersion"] == "v1" for i in listed["items"])
    one = yaml.safe_load(kubectl.ok("get", "svc", "db", "-n", ns, "-o", "yaml"))
    assert one["spec"]["ports"] == [{"name": "pg", "port": 5432, "protocol": "TCP", "targetPort": 5432},
                                    {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53}]
    assert one["metadata"]["uid"] and one["metadata"]["creationTimestamp"].endswith("Z")
    custom = table(kubectl.ok("get", "svc", "-n", ns, "-o", "custom-columns=N:.metadata.name,T:.spec.type"))
    assert custom == [{"N": "db", "T": "ClusterIP"}, {"N": "ext", "T": "ExternalName"}, {"N": "web", "T": "NodePort"}]


@pytest.mark.parametrize("version", VERSIONS)
def test_get_nodes(kubectl_for: Callable[[str], Kubectl], world: World, version: str) -> None:
    kubectl = kubectl_for(version)
    out = kubectl.ok("get", "nodes", "-l", f"test={world.label}")
    assert headers(out) == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    rows = table(out)
    ready, cordoned = cells(rows, "NAME", world.node_ready), cells(rows, "NAME", world.node_cordoned)
    assert (ready["STATUS"], ready["ROLES"], ready["VERSION"]) == ("Ready", "control-plane", "v1.32.0")
    assert (cordoned["STATUS"], cordoned["ROLES"]) == ("NotReady,SchedulingDisabled", "<none>")
    wide = cells(table(kubectl.ok("get", "no", "-o", "wide", "-l", f"test={world.label}")), "NAME", world.node_ready)
    assert (wide["INTERNAL-IP"], wide["EXTERNAL-IP"], wide["OS-IMAGE"], wide["KERNEL-VERSION"],
            wide["CONTAINER-RUNTIME"]) == ("10.240.0.11", "<none>", "Debian GNU/Linux 12 (bookworm)",
                                           "6.1.0-18-amd64", "containerd://1.7.0")


def test_get_endpoints_slices_namespaces_and_events(kubectl: Kubectl, world: World) -> None:
    ns = world.ns
    ep = kubectl.ok("get", "endpoints", "-n", ns)
    assert headers(ep) == ["NAME", "ENDPOINTS", "AGE"]
    assert cells(table(ep), "NAME", "web")["ENDPOINTS"] == "10.244.1.7:5003"
    slices = kubectl.ok("get", "endpointslices", "-n", ns)
    assert headers(slices) == ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]
    assert {k: v for k, v in table(slices)[0].items() if k != "AGE"} == \
        {"NAME": "web-abcde", "ADDRESSTYPE": "IPv4", "PORTS": "5003", "ENDPOINTS": "10.244.1.7"}
    namespaces = table(kubectl.ok("get", "ns"))
    assert cells(namespaces, "NAME", ns)["STATUS"] == "Active"
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= {r["NAME"] for r in namespaces}
    events = kubectl.ok("get", "events", "-n", ns)
    assert headers(events) == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    row = table(events)[0]
    assert {k: v for k, v in row.items() if k != "LAST SEEN"} == {
        "TYPE": "Normal", "REASON": "Scheduled", "OBJECT": "pod/web-1",
        "MESSAGE": f"Successfully assigned {ns}/web-1 to {world.node_ready}"}


def test_get_all(kubectl: Kubectl, world: World) -> None:
    out = kubectl.ok("get", "all", "-n", world.ns)
    blocks = [b for b in out.split("\n\n") if b.strip()]
    pods, services = table(blocks[0]), table(blocks[1])
    assert [r["NAME"] for r in pods] == ["pod/db-0", "pod/web-1", "pod/web-2"]
    assert [r["NAME"] for r in services] == ["service/db", "service/ext", "service/web"]
    assert headers(blocks[1]) == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]


@pytest.mark.parametrize("version", VERSIONS)
def test_watch_prints_changes_as_rows(kubectl_for: Callable[[str], Kubectl], world: World, apiserver: str,
                                      version: str) -> None:
    kubectl = kubectl_for(version)
    name = unique_name("w")
    watcher = kubectl.popen("get", "pods", "-n", world.ns, "-l", f"watch={name}", "-w", "--request-timeout=8s")
    try:
        assert watcher.stdout is not None
        with httpx.Client(base_url=apiserver, timeout=10) as api:
            create(api, ns_path("pods", world.ns), {"metadata": {"name": name, "labels": {"watch": name}},
                                                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
            first = watcher.stdout.readline()
            assert first.split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
            assert watcher.stdout.readline().split()[:4] == [name, "0/1", "Pending", "0"]
            assert api.delete(ns_path("pods", world.ns, name)).status_code == 200
        # Deleting an unscheduled pod removes it at once: one last row, then the stream ends (rc 0).
        rest, errors = watcher.communicate(timeout=30)
        assert watcher.returncode == 0, errors
        assert [line.split()[:3] for line in rest.splitlines()] == [[name, "0/1", "Pending"]]
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()


def test_discovery_version_and_api_resources(kubectl: Kubectl) -> None:
    version = kubectl.ok("version")
    assert "Server Version: v1.32.0+kubelab" in version
    rows = table(kubectl.ok("api-resources"))
    # metrics.k8s.io has pods and nodes too (as with metrics-server in kube): listed apart.
    metrics = {r["NAME"]: r["KIND"] for r in rows if r["APIVERSION"] == "metrics.k8s.io/v1beta1"}
    assert metrics == {"nodes": "NodeMetrics", "pods": "PodMetrics"}
    short = {r["NAME"]: (r["SHORTNAMES"], r["APIVERSION"], r["NAMESPACED"], r["KIND"]) for r in rows
             if r["APIVERSION"] != "metrics.k8s.io/v1beta1"}
    assert short["services"] == ("svc", "v1", "true", "Service")
    assert short["pods"] == ("po", "v1", "true", "Pod")
    assert short["nodes"] == ("no", "v1", "false", "Node")
    assert short["namespaces"] == ("ns", "v1", "false", "Namespace")
    assert short["endpoints"] == ("ep", "v1", "true", "Endpoints")
    # events are served in two groups (events.k8s.io/v1 from the core events' storage): both listed.
    assert sorted((r["SHORTNAMES"], r["APIVERSION"], r["NAMESPACED"], r["KIND"]) for r in rows
                  if r["NAME"] == "events") == [("ev", "events.k8s.io/v1", "true", "Event"), ("ev", "v1", "true", "Event")]
    assert short["endpointslices"] == ("", "discovery.k8s.io/v1", "true", "EndpointSlice")
    wide = [r for r in table(kubectl.ok("api-resources", "-o", "wide")) if r["APIVERSION"] == "v1"]
    assert cells(wide, "NAME", "pods")["CATEGORIES"] == "all"
    assert cells(wide, "NAME", "services")["VERBS"] == "create,delete,deletecollection,get,list,patch,update,watch"
    unknown = kubectl("get", "widgets").failed()
    assert unknown.stderr.strip() == 'error: the server doesn\'t have a resource type "widgets"'
