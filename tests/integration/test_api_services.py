"""Services: kube-apiserver's defaults, ClusterIP and NodePort allocation, and their 422s.

Explicit ClusterIPs and NodePorts come from the ranges' static bands (where dynamic allocation does
not look first), and each is one that no Service holds and no earlier test was given, so tests never
collide with each other or with dynamically allocated values.
"""

from __future__ import annotations

import ipaddress
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from apitools import CORE, assert_status, create, ns_path, release_node_port, service, unique_name

SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/12")
_handed_out: set[object] = set()


def _held(api: httpx.Client) -> set[object]:
    held: set[object] = set()
    for svc in api.get(f"{CORE}/services").json()["items"]:
        held.update(svc["spec"].get("clusterIPs") or [])
        held.update(p["nodePort"] for p in svc["spec"].get("ports") or [] if p.get("nodePort"))
    return held


def free_ip(api: httpx.Client) -> str:
    """An unused address in the static band (the first 256 addresses), past 10.96.0.1."""
    taken = _held(api) | _handed_out
    ip = next(str(SERVICE_CIDR[i]) for i in range(2, 256) if str(SERVICE_CIDR[i]) not in taken)
    _handed_out.add(ip)
    return ip


def free_node_port(api: httpx.Client) -> int:
    """An unused port in the NodePort range's static band (30000-30085)."""
    taken = _held(api) | _handed_out
    port = next(p for p in range(30000, 30086) if p not in taken)
    _handed_out.add(port)
    return port


def svc_path(name: str | None = None) -> str:
    return ns_path("services", name=name)


# --- defaults -----------------------------------------------------------------------------------------

def test_cluster_ip_service_defaults(api: httpx.Client) -> None:
    name = unique_name("defaults")
    created = create(api, svc_path(), {"metadata": {"name": name},
                                       "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})
    spec = created["spec"]
    assert spec["type"] == "ClusterIP"
    assert spec["sessionAffinity"] == "None"
    assert spec["ports"] == [{"protocol": "TCP", "port": 80, "targetPort": 80}]
    assert ipaddress.ip_address(spec["clusterIP"]) in SERVICE_CIDR
    assert spec["clusterIP"] not in ("10.96.0.0", "10.96.0.1")
    assert spec["clusterIPs"] == [spec["clusterIP"]]
    assert spec["ipFamilies"] == ["IPv4"]
    assert spec["ipFamilyPolicy"] == "SingleStack"
    assert spec["internalTrafficPolicy"] == "Cluster"
    assert "externalTrafficPolicy" not in spec
    assert created["status"] == {"loadBalancer": {}}
    assert api.get(svc_path(name)).json()["spec"] == spec


def test_named_target_port_is_kept(api: httpx.Client) -> None:
    name = unique_name("named")
    created = create(api, svc_path(), service(name, ports=[{"name": "http", "port": 80, "targetPort": "web"},
                                                           {"name": "dns", "port": 53, "protocol": "UDP"}]))
    assert [(p["name"], p["port"], p["protocol"], p["targetPort"]) for p in created["spec"]["ports"]] == \
        [("http", 80, "TCP", "web"), ("dns", 53, "UDP", 53)]


def test_client_ip_affinity_gets_the_default_timeout(api: httpx.Client) -> None:
    created = create(api, svc_path(), service(unique_name("sticky"), sessionAffinity="ClientIP"))
    assert created["spec"]["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 10800}}


def test_node_port_service_defaults(api: httpx.Client) -> None:
    name = unique_name("np")
    created = create(api, svc_path(), service(name, type="NodePort", ports=[{"port": 3017}]))
    spec = created["spec"]
    node_port = spec["ports"][0]["nodePort"]
    assert 30000 <= node_port <= 32767
    assert spec["externalTrafficPolicy"] == "Cluster"
    assert spec["internalTrafficPolicy"] == "Cluster"
    assert ipaddress.ip_address(spec["clusterIP"]) in SERVICE_CIDR
    assert api.get(svc_path(name)).json()["spec"]["ports"][0]["nodePort"] == node_port


def test_headless_service_gets_no_cluster_ip(api: httpx.Client) -> None:
    created = create(api, svc_path(), service(unique_name("headless"), clusterIP="None"))
    assert created["spec"]["clusterIP"] == "None"
    assert created["spec"]["clusterIPs"] == ["None"]


# --- NodePorts -----------------------------------------------------------------------------------------

def test_explicit_node_port_is_honoured_and_a_taken_one_is_invalid(api: httpx.Client) -> None:
    port = free_node_port(api)
    first = unique_name("np-first")
    created = create(api, svc_path(), service(first, type="NodePort", ports=[{"port": 80, "nodePort": port}]))
    assert created["spec"]["ports"][0]["nodePort"] == port

    second = unique_name("np-second")
    resp = api.post(svc_path(), json=service(second, type="NodePort", ports=[{"port": 80, "nodePort": port}]))
    cause = f"spec.ports[0].nodePort: Invalid value: {port}: provided port is already allocated"
    status = assert_status(resp, 422, "Invalid", f'Service "{second}" is invalid: {cause}')
    assert status["details"] == {"name": second, "kind": "Service", "causes": [
        {"reason": "FieldValueInvalid", "message": f"Invalid value: {port}: provided port is already allocated",
         "field": "spec.ports[0].nodePort"}]}
    assert_status(api.get(svc_path(second)), 404, "NotFound")


def test_node_port_31122_taken(api: httpx.Client) -> None:
    # 31122 lies where dynamic allocation draws from, so an earlier test's Service may hold it.
    release_node_port(api, 31122)
    first = unique_name("np-31122")
    create(api, svc_path(), service(first, type="NodePort", ports=[{"port": 3017, "nodePort": 31122}]))
    second = unique_name("np-31122")
    resp = api.post(svc_path(), json=service(second, type="NodePort", ports=[{"port": 3017, "nodePort": 31122}]))
    status = assert_status(resp, 422, "Invalid", f'Service "{second}" is invalid: spec.ports[0].nodePort: '
                                                 "Invalid value: 31122: provided port is already allocated")
    assert status["details"]["kind"] == "Service"
    assert status["details"]["causes"][0]["field"] == "spec.ports[0].nodePort"
    assert api.delete(svc_path(first)).status_code == 200


def test_node_port_out_of_range_is_invalid(api: httpx.Client) -> None:
    name = unique_name("np-range")
    resp = api.post(svc_path(), json=service(name, type="NodePort", ports=[{"port": 80, "nodePort": 40000}]))
    message = ("Invalid value: 40000: provided port is not in the valid range. The range of valid ports is "
               "30000-32767")
    status = assert_status(resp, 422, "Invalid", f'Service "{name}" is invalid: spec.ports[0].nodePort: {message}')
    assert status["details"]["causes"] == [{"reason": "FieldValueInvalid", "message": message,
                                            "field": "spec.ports[0].nodePort"}]
    assert_status(api.get(svc_path(name)), 404, "NotFound")


def test_node_port_on_a_cluster_ip_service_is_forbidden(api: httpx.Client) -> None:
    name = unique_name("np-cip")
    resp = api.post(svc_path(), json=service(name, ports=[{"port": 80, "nodePort": free_node_port(api)}]))
    assert_status(resp, 422, "Invalid", f'Service "{name}" is invalid: spec.ports[0].nodePort: Forbidden: '
                                        "may not be used when `type` is 'ClusterIP'")


def test_deleting_a_service_frees_its_cluster_ip_and_node_port(api: httpx.Client) -> None:
    ip, port = free_ip(api), free_node_port(api)
    first = unique_name("free")
    create(api, svc_path(), service(first, type="NodePort", clusterIP=ip, ports=[{"port": 80, "nodePort": port}]))
    assert api.delete(svc_path(first)).status_code == 200

    second = unique_name("free")
    created = create(api, svc_path(), service(second, type="NodePort", clusterIP=ip,
                                              ports=[{"port": 80, "nodePort": port}]))
    assert created["spec"]["clusterIP"] == ip
    assert created["spec"]["ports"][0]["nodePort"] == port


def test_changing_type_to_cluster_ip_releases_the_node_port(api: httpx.Client) -> None:
    port = free_node_port(api)
    name = unique_name("demote")
    created = create(api, svc_path(), service(name, type="NodePort", ports=[{"port": 80, "nodePort": port}]))
    spec = created["spec"]
    for p in spec["ports"]:
        p.pop("nodePort")
    spec.pop("externalTrafficPolicy")
    spec["type"] = "ClusterIP"
    resp = api.put(svc_path(name), json=created)
    assert resp.status_code == 200, resp.text
    assert "nodePort" not in resp.json()["spec"]["ports"][0]
    other = create(api, svc_path(), service(unique_name("taker"), type="NodePort",
                                            ports=[{"port": 80, "nodePort": port}]))
    assert other["spec"]["ports"][0]["nodePort"] == port


def test_patching_type_to_cluster_ip_drops_node_ports(api: httpx.Client) -> None:
    # kubectl patch svc NAME -p '{"spec":{"type":"ClusterIP"}}': the nodePorts and externalTrafficPolicy
    # the NodePort type had were not changed by the patch, so kube-apiserver wipes them.
    port = free_node_port(api)
    name = unique_name("patch-demote")
    create(api, svc_path(), service(name, type="NodePort", ports=[{"port": 80, "nodePort": port}]))
    resp = api.patch(svc_path(name), json={"spec": {"type": "ClusterIP"}},
                     headers={"Content-Type": "application/merge-patch+json"})
    assert resp.status_code == 200, resp.text
    spec = resp.json()["spec"]
    assert spec["type"] == "ClusterIP"
    assert spec["ports"] == [{"protocol": "TCP", "port": 80, "targetPort": 80}]
    assert "externalTrafficPolicy" not in spec
    other = create(api, svc_path(), service(unique_name("taker"), type="NodePort",
                                            ports=[{"port": 80, "nodePort": port}]))
    assert other["spec"]["ports"][0]["nodePort"] == port


def test_update_keeps_allocated_node_ports_when_left_out(api: httpx.Client) -> None:
    name = unique_name("keep-np")
    created = create(api, svc_path(), service(name, type="NodePort", ports=[{"port": 80}]))
    node_port = created["spec"]["ports"][0]["nodePort"]
    body = service(name, type="NodePort", ports=[{"port": 80}])
    body["metadata"]["labels"] = {"edited": "yes"}
    resp = api.put(svc_path(name), json=body)
    assert resp.status_code == 200, resp.text
    assert resp.json()["spec"]["ports"][0]["nodePort"] == node_port
    assert resp.json()["spec"]["clusterIP"] == created["spec"]["clusterIP"]


# --- ClusterIPs --------------------------------------------------------------------------------------

def test_explicit_cluster_ip_is_honoured_and_a_taken_one_is_invalid(api: httpx.Client) -> None:
    ip = free_ip(api)
    created = create(api, svc_path(), service(unique_name("ip-first"), clusterIP=ip))
    assert created["spec"]["clusterIP"] == ip
    assert created["spec"]["clusterIPs"] == [ip]

    second = unique_name("ip-second")
    resp = api.post(svc_path(), json=service(second, clusterIP=ip))
    message = f'Invalid value: []string{{"{ip}"}}: failed to allocate IP {ip}: provided IP is already allocated'
    status = assert_status(resp, 422, "Invalid", f'Service "{second}" is invalid: spec.clusterIPs: {message}')
    assert status["details"] == {"name": second, "kind": "Service", "causes": [
        {"reason": "FieldValueInvalid", "message": message, "field": "spec.clusterIPs"}]}
    assert_status(api.get(svc_path(second)), 404, "NotFound")


def test_kubernetes_service_ip_is_taken(api: httpx.Client) -> None:
    name = unique_name("ip-kube")
    resp = api.post(svc_path(), json=service(name, clusterIP="10.96.0.1"))
    assert_status(resp, 422, "Invalid", f'Service "{name}" is invalid: spec.clusterIPs: Invalid value: '
                                        '[]string{"10.96.0.1"}: failed to allocate IP 10.96.0.1: provided IP is '
                                        "already allocated")


def test_cluster_ip_out_of_range_is_invalid(api: httpx.Client) -> None:
    name = unique_name("ip-range")
    resp = api.post(svc_path(), json=service(name, clusterIP="10.0.0.5"))
    message = ('Invalid value: []string{"10.0.0.5"}: failed to allocate IP 10.0.0.5: the provided IP (10.0.0.5) '
               "is not in the valid range. The range of valid IPs is 10.96.0.0/12")
    status = assert_status(resp, 422, "Invalid", f'Service "{name}" is invalid: spec.clusterIPs: {message}')
    assert status["details"]["causes"] == [{"reason": "FieldValueInvalid", "message": message,
                                            "field": "spec.clusterIPs"}]
    assert_status(api.get(svc_path(name)), 404, "NotFound")


def test_cluster_ip_that_is_not_an_ip_is_invalid(api: httpx.Client) -> None:
    name = unique_name("ip-bad")
    resp = api.post(svc_path(), json=service(name, clusterIP="10.96.0.300"))
    body = assert_status(resp, 422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "spec.clusterIPs[0]"
    assert body["details"]["causes"][0]["message"] == \
        'Invalid value: "10.96.0.300": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)'
    assert_status(api.get(svc_path(name)), 404, "NotFound")


def test_update_without_cluster_ip_keeps_it(api: httpx.Client) -> None:
    name = unique_name("keep-ip")
    created = create(api, svc_path(), service(name))
    ip = created["spec"]["clusterIP"]
    body = service(name, ports=[{"port": 81}])  # no clusterIP, no clusterIPs, no resourceVersion
    resp = api.put(svc_path(name), json=body)
    assert resp.status_code == 200, resp.text
    assert resp.json()["spec"]["clusterIP"] == ip
    assert resp.json()["spec"]["clusterIPs"] == [ip]
    assert resp.json()["spec"]["ports"][0]["port"] == 81
    assert api.get(svc_path(name)).json()["spec"]["clusterIP"] == ip


def test_changing_cluster_ip_is_invalid(api: httpx.Client) -> None:
    name = unique_name("move-ip")
    created = create(api, svc_path(), service(name))
    ip = created["spec"]["clusterIP"]
    new_ip = free_ip(api)
    created["spec"]["clusterIP"] = new_ip
    resp = api.put(svc_path(name), json=created)
    message = f'Invalid value: []string{{"{new_ip}"}}: may not change once set'
    status = assert_status(resp, 422, "Invalid", f'Service "{name}" is invalid: spec.clusterIPs[0]: {message}')
    assert status["details"]["causes"] == [{"reason": "FieldValueInvalid", "message": message,
                                            "field": "spec.clusterIPs[0]"}]
    assert api.get(svc_path(name)).json()["spec"]["clusterIP"] == ip


def test_changing_both_cluster_ip_fields_is_invalid(api: httpx.Client) -> None:
    name = unique_name("move-ips")
    created = create(api, svc_path(), service(name))
    ip = created["spec"]["clusterIP"]
    new_ip = free_ip(api)
    created["spec"]["clusterIP"] = new_ip
    created["spec"]["clusterIPs"] = [new_ip]
    resp = api.put(svc_path(name), json=created)
    assert_status(resp, 422, "Invalid", f'Service "{name}" is invalid: spec.clusterIPs[0]: Invalid value: '
                                        f'[]string{{"{new_ip}"}}: may not change once set')
    assert api.get(svc_path(name)).json()["spec"]["clusterIPs"] == [ip]
    # The address asked for was not reserved by the refused update.
    assert create(api, svc_path(), service(unique_name("after"), clusterIP=new_ip))["spec"]["clusterIP"] == new_ip


def test_deleting_the_service_after_a_refused_update_frees_the_original_ip(api: httpx.Client) -> None:
    ip = free_ip(api)
    name = unique_name("orig")
    created = create(api, svc_path(), service(name, clusterIP=ip))
    created["spec"]["clusterIP"] = free_ip(api)
    assert api.put(svc_path(name), json=created).status_code == 422
    assert api.delete(svc_path(name)).status_code == 200
    assert create(api, svc_path(), service(unique_name("reuse"), clusterIP=ip))["spec"]["clusterIP"] == ip


# --- other validation ----------------------------------------------------------------------------------

PORT_RANGE = "must be between 1 and 65535, inclusive"


@pytest.mark.parametrize(("ports", "causes"), [
    # targetPort defaults to port, so a bad port is reported twice, as kube-apiserver does.
    pytest.param([{"port": 0}], [("spec.ports[0].port", f"Invalid value: 0: {PORT_RANGE}"),
                                 ("spec.ports[0].targetPort", f"Invalid value: 0: {PORT_RANGE}")], id="port zero"),
    pytest.param([{"port": 70000, "targetPort": 8080}], [("spec.ports[0].port", f"Invalid value: 70000: {PORT_RANGE}")],
                 id="port too big"),
    pytest.param([{"port": 80, "targetPort": 70000}],
                 [("spec.ports[0].targetPort", f"Invalid value: 70000: {PORT_RANGE}")], id="target port too big"),
    pytest.param([{"port": 80, "protocol": "ICMP"}],
                 [("spec.ports[0].protocol", 'Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"')],
                 id="protocol"),
    pytest.param([{"port": 80, "name": "a"}, {"port": 81}], [("spec.ports[1].name", "Required value")],
                 id="unnamed second port"),
])
def test_invalid_ports(api: httpx.Client, ports: list[dict[str, object]], causes: list[tuple[str, str]]) -> None:
    name = unique_name("badport")
    resp = api.post(svc_path(), json=service(name, ports=ports))
    lines = [f"{field}: {message}" for field, message in causes]
    text = lines[0] if len(lines) == 1 else "[" + ", ".join(lines) + "]"
    status = assert_status(resp, 422, "Invalid", f'Service "{name}" is invalid: {text}')
    assert [(c["field"], c["message"]) for c in status["details"]["causes"]] == causes
    assert_status(api.get(svc_path(name)), 404, "NotFound")


def test_unknown_type_is_not_supported(api: httpx.Client) -> None:
    name = unique_name("badtype")
    resp = api.post(svc_path(), json=service(name, type="Magic"))
    status = assert_status(resp, 422, "Invalid")
    assert {"reason": "FieldValueNotSupported", "field": "spec.type",
            "message": 'Unsupported value: "Magic": supported values: "ClusterIP", "ExternalName", '
                       '"LoadBalancer", "NodePort"'} in status["details"]["causes"]


# --- allocation under concurrency and dry run -----------------------------------------------------------

def test_concurrent_requests_for_one_node_port_allocate_it_once(api: httpx.Client) -> None:
    # The reservation key is created in the Service's own etcd transaction, so exactly one wins.
    port = free_node_port(api)
    requested = [unique_name("race") for _ in range(8)]

    def attempt(name: str) -> int:
        body = service(name, type="NodePort", ports=[{"port": 80, "nodePort": port}])
        return api.post(svc_path(), json=body).status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        codes = list(pool.map(attempt, requested))
    assert sorted(codes) == [201] + [422] * 7
    holders = [s["metadata"]["name"] for s in api.get(svc_path()).json()["items"]
               if any(p.get("nodePort") == port for p in s["spec"]["ports"])]
    assert len(holders) == 1
    assert holders[0] in requested


def test_dry_run_create_allocates_nothing(api: httpx.Client) -> None:
    ip, port = free_ip(api), free_node_port(api)
    name = unique_name("dry")
    body = service(name, type="NodePort", clusterIP=ip, ports=[{"port": 80, "nodePort": port}])
    resp = api.post(svc_path(), json=body, params={"dryRun": "All"})
    assert resp.status_code == 201, resp.text
    assert resp.json()["spec"]["clusterIP"] == ip
    assert resp.json()["spec"]["ports"][0]["nodePort"] == port
    assert_status(api.get(svc_path(name)), 404, "NotFound")
    real = create(api, svc_path(), service(unique_name("real"), type="NodePort", clusterIP=ip,
                                           ports=[{"port": 80, "nodePort": port}]))
    assert (real["spec"]["clusterIP"], real["spec"]["ports"][0]["nodePort"]) == (ip, port)
