"""networking.k8s.io/v1 Ingress (with its status subresource), IngressClass and NetworkPolicy, served as
kube-apiserver serves them: in discovery with kube's short names, kube's v1 defaults (policyTypes, TCP
ports, a Cluster-scoped parameters reference, `status: {loadBalancer: {}}`), generation counting spec
changes, pkg/apis/networking/validation's messages for bad objects (which change nothing), printIngress's,
printIngressClass's and printNetworkPolicy's columns in `kubectl get`, OpenAPI for `kubectl explain`, and
the official client's NetworkingV1Api. No ingress controller or policy engine runs (kube-apiserver runs
none either)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from apitools import assert_status, unique_name
from kubectltools import Kubectl, table
from kubernetes import client
from kubernetes.client.rest import ApiException

NET = "/apis/networking.k8s.io/v1"
WILDCARD_MSG = ("a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must "
                "consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character "
                r"(e.g. '*.example.com', regex used for validation is '\*\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]"
                r"([-a-z0-9]*[a-z0-9])?)*')")
SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
                 "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation "
                 r"is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
               "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
               "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
                   "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
                   "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")


@pytest.fixture(scope="module")
def networking(apiserver: str) -> Iterator[client.NetworkingV1Api]:
    with client.ApiClient(client.Configuration(host=apiserver)) as api:
        yield client.NetworkingV1Api(api)


def _backend(name: str = "web", port: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"service": {"name": name, "port": port if port is not None else {"number": 80}}}


def _ingress(name: str, spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": name, **meta}, "spec": spec}


def _rule(host: str | None = None, path: str = "/", path_type: str | None = "Prefix",
          backend: dict[str, Any] | None = None) -> dict[str, Any]:
    http_path: dict[str, Any] = {"path": path, "backend": backend or _backend()}
    if path_type is not None:
        http_path["pathType"] = path_type
    rule: dict[str, Any] = {"http": {"paths": [http_path]}}
    if host is not None:
        rule["host"] = host
    return rule


def test_discovery_lists_the_three_kinds_with_kubes_short_names(api: httpx.Client, kubectl: Kubectl) -> None:
    resources = {r["name"]: r for r in api.get(NET).json()["resources"]}
    assert (resources["ingresses"]["namespaced"], resources["ingresses"]["shortNames"]) == (True, ["ing"])
    assert "ingresses/status" in resources
    assert (resources["networkpolicies"]["namespaced"], resources["networkpolicies"]["shortNames"]) == (True, ["netpol"])
    assert resources["ingressclasses"]["namespaced"] is False and "ingressclasses/status" not in resources
    out = kubectl.ok("api-resources", "--api-group", "networking.k8s.io", "-o", "name")
    assert {"ingresses.networking.k8s.io", "ingressclasses.networking.k8s.io",
            "networkpolicies.networking.k8s.io"} <= set(out.split())


MANIFEST = """\
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: CLASS}
spec:
  controller: example.com/ingress-controller
  parameters: {apiGroup: k8s.example.com, kind: IngressParameters, name: external-lb}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: NAME, namespace: default}
spec:
  ingressClassName: CLASS
  tls: [{hosts: [a.example.com], secretName: tls-a}]
  rules:
  - host: a.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}
  - host: "*.b.example.com"
    http: {paths: [{path: /api, pathType: Exact, backend: {service: {name: api, port: {name: http}}}}]}
  - host: c.example.com
    http: {paths: [{pathType: ImplementationSpecific, backend: {service: {name: web, port: {number: 80}}}}]}
  - host: d.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}
  - http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: NAME, namespace: default}
spec:
  podSelector:
    matchLabels: {app: web}
    matchExpressions: [{key: tier, operator: In, values: [front, edge]}]
  ingress:
  - from:
    - ipBlock: {cidr: 172.17.0.0/16, except: [172.17.1.0/24]}
    - namespaceSelector: {matchLabels: {team: a}}
      podSelector: {}
    ports: [{port: 80}, {port: 8000, endPort: 9000, protocol: UDP}, {port: http}]
  egress:
  - to: [{podSelector: {matchLabels: {app: db}}}]
"""


def test_kubectl_applies_gets_and_reads_back_with_kubes_defaults_and_columns(kubectl: Kubectl) -> None:
    name, cls = unique_name("web"), unique_name("cls")
    out = kubectl.ok("apply", "-f", "-", input=MANIFEST.replace("CLASS", cls).replace("NAME", name))
    assert f"ingressclass.networking.k8s.io/{cls} created" in out
    assert f"ingress.networking.k8s.io/{name} created" in out and f"networkpolicy.networking.k8s.io/{name} created" in out
    try:
        ing = table(kubectl.ok("get", "ing", name))[0]
        assert (ing["NAME"], ing["CLASS"], ing["HOSTS"], ing["ADDRESS"], ing["PORTS"]) == (
            name, cls, "a.example.com,*.b.example.com,c.example.com + 2 more...", "", "80, 443")
        assert list(ing) == ["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"]
        ic = table(kubectl.ok("get", "ingressclass", cls))[0]
        assert (ic["CONTROLLER"], ic["PARAMETERS"]) == ("example.com/ingress-controller",
                                                        "IngressParameters.k8s.example.com/external-lb")
        np = table(kubectl.ok("get", "netpol", name))[0]
        assert (list(np), np["POD-SELECTOR"]) == (["NAME", "POD-SELECTOR", "AGE"], "app=web,tier in (edge,front)")

        stored = json.loads(kubectl.ok("get", "netpol", name, "-o", "json"))
        assert stored["spec"]["policyTypes"] == ["Ingress", "Egress"]  # SetDefaults_NetworkPolicy
        assert [p["protocol"] for p in stored["spec"]["ingress"][0]["ports"]] == ["TCP", "UDP", "TCP"]
        assert stored["spec"]["ingress"][0]["from"][1]["podSelector"] == {}
        assert stored["metadata"]["generation"] == 1
        stored = json.loads(kubectl.ok("get", "ing", name, "-o", "json"))
        assert (stored["status"], stored["metadata"]["generation"]) == ({"loadBalancer": {}}, 1)
        stored = json.loads(kubectl.ok("get", "ingressclass", cls, "-o", "json"))
        assert stored["spec"]["parameters"]["scope"] == "Cluster"  # SetDefaults_IngressClass
        # A second apply of the same manifest changes nothing; describe reads the objects back.
        out = kubectl.ok("apply", "-f", "-", input=MANIFEST.replace("CLASS", cls).replace("NAME", name))
        assert f"ingress.networking.k8s.io/{name} unchanged" in out
        described = kubectl.ok("describe", "ingress", name)
        assert "a.example.com" in described and "web:80" in described, described
        described = kubectl.ok("describe", "networkpolicy", name)
        assert "172.17.0.0/16" in described, described
    finally:
        kubectl.ok("delete", "ingress,networkpolicy", name)
        kubectl.ok("delete", "ingressclass", cls)


def test_kubectl_create_ingress_sends_protobuf_and_gets_kubes_object(kubectl: Kubectl) -> None:
    name = unique_name("made")
    out = kubectl.ok("create", "ingress", name, "--class=nginx", "--rule=foo.com/bar*=svc1:8080,tls=my-cert",
                     "--default-backend=web:http")
    assert f"ingress.networking.k8s.io/{name} created" in out
    stored = json.loads(kubectl.ok("get", "ingress", name, "-o", "json"))
    assert stored["spec"] == {
        "ingressClassName": "nginx",
        "defaultBackend": {"service": {"name": "web", "port": {"name": "http"}}},
        "rules": [{"host": "foo.com", "http": {"paths": [{"path": "/bar", "pathType": "Prefix", "backend": {
            "service": {"name": "svc1", "port": {"number": 8080}}}}]}}],
        "tls": [{"hosts": ["foo.com"], "secretName": "my-cert"}]}
    assert stored["status"] == {"loadBalancer": {}}
    kubectl.ok("delete", "ingress", name)


def test_an_empty_pod_selector_prints_none_and_a_policy_without_egress_is_ingress_only(api: httpx.Client,
                                                                                       kubectl: Kubectl) -> None:
    name = unique_name("deny")
    resp = api.post(f"{NET}/namespaces/default/networkpolicies",
                    json={"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": name}})
    assert resp.status_code == 201, resp.text
    assert resp.json()["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    assert table(kubectl.ok("get", "netpol", name))[0]["POD-SELECTOR"] == "<none>"
    assert api.delete(f"{NET}/namespaces/default/networkpolicies/{name}").status_code == 200


def test_the_python_client_round_trip_status_and_generation(networking: client.NetworkingV1Api,
                                                            kubectl: Kubectl) -> None:
    name = unique_name("py")
    body = client.V1Ingress(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1IngressSpec(default_backend=client.V1IngressBackend(service=client.V1IngressServiceBackend(
            name="web", port=client.V1ServiceBackendPort(number=8080)))),
        status=client.V1IngressStatus(load_balancer=client.V1IngressLoadBalancerStatus(
            ingress=[client.V1IngressLoadBalancerIngress(ip="192.0.2.9")])))
    made = networking.create_namespaced_ingress("default", body)
    assert made.status.load_balancer.ingress is None  # status is the ingress controller's
    assert made.metadata.generation == 1
    assert name in {i.metadata.name for i in networking.list_namespaced_ingress("default").items}
    made.spec.default_backend.service.port.number = 8081
    replaced = networking.replace_namespaced_ingress(name, "default", made)
    assert (replaced.metadata.generation, replaced.spec.default_backend.service.port.number) == (2, 8081)
    # What an ingress controller writes: the load balancer's addresses, through the status subresource.
    replaced.status = client.V1IngressStatus(load_balancer=client.V1IngressLoadBalancerStatus(ingress=[
        client.V1IngressLoadBalancerIngress(ip="192.0.2.10"),
        client.V1IngressLoadBalancerIngress(hostname="lb.example.com")]))
    replaced.spec.default_backend.service.port.number = 9999  # a status write ignores the spec
    written = networking.replace_namespaced_ingress_status(name, "default", replaced)
    assert written.metadata.generation == 2 and written.spec.default_backend.service.port.number == 8081
    assert [p.ip or p.hostname for p in written.status.load_balancer.ingress] == ["192.0.2.10", "lb.example.com"]
    row = table(kubectl.ok("get", "ingress", name))[0]
    # Not clipped to 16 bytes: kube-apiserver's TableConvertor prints with Wide: true.
    assert (row["CLASS"], row["HOSTS"], row["ADDRESS"], row["PORTS"]) == ("<none>", "*", "192.0.2.10,lb.example.com",
                                                                          "80")
    networking.delete_namespaced_ingress(name, "default")
    with pytest.raises(ApiException) as caught:
        networking.read_namespaced_ingress(name, "default")
    assert caught.value.status == 404

    cls = unique_name("cls")
    made_class = networking.create_ingress_class(client.V1IngressClass(
        metadata=client.V1ObjectMeta(name=cls), spec=client.V1IngressClassSpec(controller="example.com/c")))
    assert made_class.metadata.generation == 1
    made_class.spec.controller = "example.com/other"
    with pytest.raises(ApiException) as caught:
        networking.replace_ingress_class(cls, made_class)
    assert caught.value.status == 422
    assert json.loads(caught.value.body)["message"] == (f'IngressClass.networking.k8s.io "{cls}" is invalid: '
                                                        'spec.controller: Invalid value: "example.com/other": field '
                                                        "is immutable")
    networking.delete_ingress_class(cls)

    policy = networking.create_namespaced_network_policy("default", client.V1NetworkPolicy(
        metadata=client.V1ObjectMeta(name=name), spec=client.V1NetworkPolicySpec(
            pod_selector=client.V1LabelSelector(match_labels={"app": "db"}),
            egress=[client.V1NetworkPolicyEgressRule(ports=[client.V1NetworkPolicyPort(port=5432)])])))
    assert policy.spec.policy_types == ["Ingress", "Egress"]
    assert policy.spec.egress[0].ports[0].protocol == "TCP"
    networking.delete_namespaced_network_policy(name, "default")


def test_a_status_write_is_validated_as_kube_does(api: httpx.Client) -> None:
    name = unique_name("st")
    path = f"{NET}/namespaces/default/ingresses/{name}"
    created = api.post(f"{NET}/namespaces/default/ingresses", json=_ingress(name, {"defaultBackend": _backend()}))
    assert created.status_code == 201, created.text
    body = created.json()
    bad = {**body, "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.300"}, {"hostname": "10.0.0.1"}]}}}
    assert_status(api.put(f"{path}/status", json=bad), 422, "Invalid",
                  f'Ingress.networking.k8s.io "{name}" is invalid: [status.loadBalancer.ingress[0].ip: Invalid '
                  'value: "192.0.2.300": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff), '
                  'status.loadBalancer.ingress[1].hostname: Invalid value: "10.0.0.1": must be a DNS name, not an IP '
                  "address]")
    assert api.get(path).json()["status"] == {"loadBalancer": {}}
    # A main-resource write keeps the stored status.
    resp = api.put(path, json={**body, "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}})
    assert resp.status_code == 200 and resp.json()["status"] == {"loadBalancer": {}}, resp.text
    assert api.delete(path).status_code == 200


INGRESS_CASES = [
    pytest.param({}, "spec: Invalid value: []networking.IngressRule(nil): either `defaultBackend` or `rules` must be "
                     "specified", id="empty spec"),
    pytest.param({"rules": []}, "spec: Invalid value: []networking.IngressRule{}: either `defaultBackend` or `rules` "
                                "must be specified", id="empty rules"),
    pytest.param({"rules": [_rule(host="10.0.0.1")]},
                 'spec.rules[0].host: Invalid value: "10.0.0.1": must be a DNS name, not an IP address', id="ip host"),
    pytest.param({"rules": [_rule(host="*.*.example.com")]},
                 f'spec.rules[0].host: Invalid value: "*.*.example.com": {WILDCARD_MSG}', id="double wildcard"),
    pytest.param({"rules": [_rule(host="Example.com")]},
                 f'spec.rules[0].host: Invalid value: "Example.com": {SUBDOMAIN_MSG}', id="upper-case host"),
    pytest.param({"rules": [{"host": "a.com", "http": {"paths": []}}]},
                 "spec.rules[0].http.paths: Required value", id="no paths"),
    pytest.param({"rules": [_rule(path_type=None)]},
                 "spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified", id="no pathType"),
    pytest.param({"rules": [_rule(path_type="Regex")]},
                 'spec.rules[0].http.paths[0].pathType: Unsupported value: "Regex": supported values: "Exact", '
                 '"ImplementationSpecific", "Prefix"', id="unknown pathType"),
    pytest.param({"rules": [_rule(path="api")]},
                 'spec.rules[0].http.paths[0].path: Invalid value: "api": must be an absolute path', id="relative"),
    pytest.param({"rules": [_rule(path="/a//b/..")]},
                 "[spec.rules[0].http.paths[0].path: Invalid value: \"/a//b/..\": must not contain '//', "
                 "spec.rules[0].http.paths[0].path: Invalid value: \"/a//b/..\": cannot end with '/..']",
                 id="unclean path"),
    pytest.param({"rules": [_rule(path="/a%2Fb", path_type="Exact")]},
                 "spec.rules[0].http.paths[0].path: Invalid value: \"/a%2Fb\": must not contain '%2F'", id="escaped /"),
    pytest.param({"rules": [_rule(path="x", path_type="ImplementationSpecific")]},
                 'spec.rules[0].http.paths[0].path: Invalid value: "x": must be an absolute path',
                 id="relative implementation-specific"),
    pytest.param({"defaultBackend": {}},
                 'spec.defaultBackend: Invalid value: "": resource or service backend is required', id="no backend"),
    pytest.param({"defaultBackend": {**_backend(), "resource": {"kind": "Bucket", "name": "b"}}},
                 'spec.defaultBackend: Invalid value: "": cannot set both resource and service backends',
                 id="two backends"),
    pytest.param({"defaultBackend": {"resource": {"apiGroup": "Bad_Group", "kind": "a/b"}}},
                 f'[spec.defaultBackend.resource.apiGroup: Invalid value: "Bad_Group": {SUBDOMAIN_MSG}, '
                 "spec.defaultBackend.resource.kind: Invalid value: \"a/b\": may not contain '/', "
                 "spec.defaultBackend.resource.name: Required value]", id="bad resource"),
    pytest.param({"defaultBackend": _backend(name="1web")},
                 f'spec.defaultBackend.service.name: Invalid value: "1web": {DNS1035_MSG}', id="service name"),
    pytest.param({"defaultBackend": _backend(name="")},
                 "spec.defaultBackend.service.name: Required value", id="no service name"),
    pytest.param({"defaultBackend": _backend(port={"name": "http", "number": 80})},
                 'spec.defaultBackend: Invalid value: "": cannot set both port name & port number', id="two ports"),
    pytest.param({"defaultBackend": _backend(port={})},
                 "spec.defaultBackend: Required value: port name or number is required", id="no port"),
    pytest.param({"defaultBackend": _backend(port={"number": 70000})},
                 "spec.defaultBackend.service.port.number: Invalid value: 70000: must be between 1 and 65535, "
                 "inclusive", id="port number"),
    pytest.param({"defaultBackend": _backend(port={"name": "HTTP--x"})},
                 "[spec.defaultBackend.service.port.name: Invalid value: \"HTTP--x\": must contain only "
                 "alpha-numeric characters (a-z, 0-9), and hyphens (-), spec.defaultBackend.service.port.name: "
                 "Invalid value: \"HTTP--x\": must not contain consecutive hyphens]", id="port name"),
    pytest.param({"defaultBackend": _backend(), "tls": [{"hosts": ["*"], "secretName": "Bad"}]},
                 f'[spec.tls[0].hosts[0]: Invalid value: "*": {WILDCARD_MSG}, spec.tls[0].secretName: Invalid '
                 f'value: "Bad": {SUBDOMAIN_MSG}]', id="tls"),
    pytest.param({"defaultBackend": _backend(), "ingressClassName": "Nginx"},
                 f'spec.ingressClassName: Invalid value: "Nginx": {SUBDOMAIN_MSG}', id="class name"),
]


@pytest.mark.parametrize(("spec", "message"), INGRESS_CASES)
def test_bad_ingresses_are_refused_in_kubes_words(api: httpx.Client, spec: dict[str, Any], message: str) -> None:
    name = unique_name("bad")
    resp = api.post(f"{NET}/namespaces/default/ingresses", json=_ingress(name, spec))
    assert_status(resp, 422, "Invalid", f'Ingress.networking.k8s.io "{name}" is invalid: {message}')
    assert_status(api.get(f"{NET}/namespaces/default/ingresses/{name}"), 404, "NotFound")


def test_the_class_annotation_must_match_the_class_name(api: httpx.Client) -> None:
    name = unique_name("ann")
    resp = api.post(f"{NET}/namespaces/default/ingresses", json=_ingress(
        name, {"defaultBackend": _backend(), "ingressClassName": "nginx"},
        annotations={"kubernetes.io/ingress.class": "traefik"}))
    assert_status(resp, 422, "Invalid", f'Ingress.networking.k8s.io "{name}" is invalid: '
                  'annotations.kubernetes.io/ingress.class: Invalid value: "traefik": must match `ingressClassName` '
                  "when both are specified")


INGRESS_CLASS_CASES = [
    pytest.param({}, "spec.controller: Required value", id="no controller"),
    pytest.param({"controller": "nginx"},
                 'spec.controller: Invalid value: "nginx": must be a domain-prefixed path (such as "acme.io/foo")',
                 id="not prefixed"),
    pytest.param({"controller": "Example.com/x y"},
                 f'[spec.controller: Invalid value: "Example.com": {SUBDOMAIN_MSG}, spec.controller: Invalid value: '
                 "\"x y\": Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')]",
                 id="bad host and path"),
    pytest.param({"controller": "example.com/" + "x" * 250},
                 "spec.controller: Too long: must have at most 250 bytes", id="too long"),
    pytest.param({"controller": "example.com/c", "parameters": {"kind": "", "name": "..", "scope": "Namespace"}},
                 "[spec.parameters.kind: Required value, spec.parameters.name: Invalid value: \"..\": may not be "
                 "'..', spec.parameters.namespace: Required value: `parameters.scope` is set to 'Namespace']",
                 id="namespace scope without namespace"),
    pytest.param({"controller": "example.com/c", "parameters": {"kind": "K", "name": "n", "scope": "Global"}},
                 'spec.parameters.scope: Unsupported value: "Global": supported values: "Cluster", "Namespace"',
                 id="unknown scope"),
    pytest.param({"controller": "example.com/c",
                  "parameters": {"kind": "K", "name": "n", "scope": "Cluster", "namespace": "default"}},
                 "spec.parameters.namespace: Forbidden: `parameters.scope` is set to 'Cluster'",
                 id="cluster scope with namespace"),
]


@pytest.mark.parametrize(("spec", "message"), INGRESS_CLASS_CASES)
def test_bad_ingress_classes_are_refused_in_kubes_words(api: httpx.Client, spec: dict[str, Any], message: str) -> None:
    name = unique_name("bad")
    resp = api.post(f"{NET}/ingressclasses", json={"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
                                                   "metadata": {"name": name}, "spec": spec})
    assert_status(resp, 422, "Invalid", f'IngressClass.networking.k8s.io "{name}" is invalid: {message}')
    assert_status(api.get(f"{NET}/ingressclasses/{name}"), 404, "NotFound")


NETWORK_POLICY_CASES = [
    pytest.param({"podSelector": {"matchLabels": {"app": "a b"}}},
                 f'spec.podSelector.matchLabels: Invalid value: "a b": {LABEL_VALUE_MSG}', id="label value"),
    pytest.param({"podSelector": {"matchExpressions": [{"key": "app", "operator": "In"}]}},
                 "spec.podSelector.matchExpressions[0].values: Required value: must be specified when `operator` is "
                 "'In' or 'NotIn'", id="In without values"),
    pytest.param({"podSelector": {"matchExpressions": [{"key": "app", "operator": "Exists", "values": ["x"]}]}},
                 "spec.podSelector.matchExpressions[0].values: Forbidden: may not be specified when `operator` is "
                 "'Exists' or 'DoesNotExist'", id="Exists with values"),
    pytest.param({"podSelector": {"matchExpressions": [{"key": "app", "operator": "Near", "values": ["x"]}]}},
                 'spec.podSelector.matchExpressions[0].operator: Invalid value: "Near": not a valid selector operator',
                 id="operator"),
    pytest.param({"ingress": [{"from": [{}]}]}, "spec.ingress[0].from[0]: Required value: must specify a peer",
                 id="empty peer"),
    pytest.param({"ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}]}]},
                 "spec.ingress[0].from[0]: Forbidden: may not specify both ipBlock and another peer",
                 id="ipBlock and selector"),
    pytest.param({"egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/33"}}]}]},
                 'spec.egress[0].to[0].ipBlock.cidr: Invalid value: "10.0.0.0/33": not a valid CIDR', id="cidr"),
    pytest.param({"egress": [{"to": [{"ipBlock": {"cidr": ""}}]}]},
                 "spec.egress[0].to[0].ipBlock.cidr: Required value", id="no cidr"),
    pytest.param({"egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.1.0.0/24", "10.0.0.0/16",
                                                                                      "bad", "10.0.1.0/24"]}}]}]},
                 "[spec.egress[0].to[0].ipBlock.except[0]: Invalid value: \"10.1.0.0/24\": must be a strict subset of "
                 "`cidr`, spec.egress[0].to[0].ipBlock.except[1]: Invalid value: \"10.0.0.0/16\": must be a strict "
                 "subset of `cidr`, spec.egress[0].to[0].ipBlock.except[2]: Invalid value: \"bad\": not a valid CIDR]",
                 id="except"),
    pytest.param({"ingress": [{"ports": [{"protocol": "ICMP"}]}]},
                 'spec.ingress[0].ports[0].protocol: Unsupported value: "ICMP": supported values: "TCP", "UDP", '
                 '"SCTP"', id="protocol"),
    pytest.param({"ingress": [{"ports": [{"port": 0}]}]},
                 "spec.ingress[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
                 id="port 0"),
    pytest.param({"ingress": [{"ports": [{"port": 9000, "endPort": 8000}]}]},
                 "spec.ingress[0].ports[0].endPort: Invalid value: 8000: must be greater than or equal to `port`",
                 id="endPort below port"),
    pytest.param({"ingress": [{"ports": [{"port": "http", "endPort": 8000}]}]},
                 "spec.ingress[0].ports[0].endPort: Invalid value: 8000: may not be specified when `port` is "
                 "non-numeric", id="endPort with a named port"),
    pytest.param({"ingress": [{"ports": [{"endPort": 8000}]}]},
                 "spec.ingress[0].ports[0].endPort: Invalid value: 8000: may not be specified when `port` is not "
                 "specified", id="endPort alone"),
    pytest.param({"policyTypes": ["Ingress", "Egress", "Ingress"]},
                 'spec.policyTypes: Invalid value: []networking.PolicyType{"Ingress", "Egress", "Ingress"}: may not '
                 "specify more than two policyTypes", id="three types"),
    pytest.param({"policyTypes": ["ingress"]},
                 'spec.policyTypes[0]: Unsupported value: "ingress": supported values: "Ingress", "Egress"',
                 id="type spelling"),
]


@pytest.mark.parametrize(("spec", "message"), NETWORK_POLICY_CASES)
def test_bad_network_policies_are_refused_in_kubes_words(api: httpx.Client, spec: dict[str, Any],
                                                         message: str) -> None:
    name = unique_name("bad")
    resp = api.post(f"{NET}/namespaces/default/networkpolicies", json={
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": name}, "spec": spec})
    assert_status(resp, 422, "Invalid", f'NetworkPolicy.networking.k8s.io "{name}" is invalid: {message}')
    assert_status(api.get(f"{NET}/namespaces/default/networkpolicies/{name}"), 404, "NotFound")


def test_an_update_is_validated_too_and_changes_nothing(api: httpx.Client) -> None:
    name = unique_name("upd")
    path = f"{NET}/namespaces/default/networkpolicies/{name}"
    created = api.post(f"{NET}/namespaces/default/networkpolicies", json={
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": name},
        "spec": {"podSelector": {"matchLabels": {"app": "a"}}}})
    assert created.status_code == 201, created.text
    resp = api.patch(path, json={"spec": {"ingress": [{"ports": [{"port": 70000}]}]}},
                     headers={"content-type": "application/merge-patch+json"})
    assert_status(resp, 422, "Invalid", f'NetworkPolicy.networking.k8s.io "{name}" is invalid: '
                  "spec.ingress[0].ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive")
    stored = api.get(path).json()
    assert (stored["spec"], stored["metadata"]["resourceVersion"]) == (created.json()["spec"],
                                                                      created.json()["metadata"]["resourceVersion"])
    resp = api.patch(path, json={"spec": {"podSelector": {"matchLabels": {"app": "b"}}}},
                     headers={"content-type": "application/merge-patch+json"})
    assert resp.status_code == 200 and resp.json()["metadata"]["generation"] == 2, resp.text
    assert api.delete(path).status_code == 200


def test_kubectl_explain_reads_their_schemas(kubectl: Kubectl) -> None:
    out = kubectl.ok("explain", "ingress.spec.rules.http.paths.pathType")
    assert "GROUP:      networking.k8s.io" in out and "FIELD: pathType <string>" in out, out
    out = kubectl.ok("explain", "networkpolicy.spec.ingress.from.ipBlock")
    assert "FIELD: ipBlock <IPBlock>" in out, out
    assert "FIELD: controller <string>" in kubectl.ok("explain", "ingressclass.spec.controller")
