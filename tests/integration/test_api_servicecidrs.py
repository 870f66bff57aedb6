"""networking.k8s.io/v1 ServiceCIDRs: the API server keeps the `kubernetes` one for its service range
(kube-apiserver's default ServiceCIDR controller), `kubectl get servicecidrs` shows kube's columns, the
official client's NetworkingV1Api creates, reads, lists and deletes one with kube's validation, and
`kubelab proxy render --proxy-mode nftables` turns what the API serves into kube-proxy's drop rule for
unallocated ClusterIPs."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from apitools import assert_status, unique_name
from kubectltools import Kubectl, table
from kubernetes import client
from kubernetes.client.rest import ApiException

SERVICECIDRS = "/apis/networking.k8s.io/v1/servicecidrs"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def networking(apiserver: str) -> Iterator[client.NetworkingV1Api]:
    with client.ApiClient(client.Configuration(host=apiserver)) as api:
        yield client.NetworkingV1Api(api)


def test_the_default_service_cidr_is_kept_ready(kubectl: Kubectl) -> None:
    rows = {row["NAME"]: row for row in table(kubectl.ok("get", "servicecidrs"))}
    assert rows["kubernetes"]["CIDRS"] == "10.96.0.0/12"
    ready = kubectl.ok("get", "servicecidr", "kubernetes", "-o",
                       'jsonpath={.status.conditions[?(@.type=="Ready")].status} '
                       '{.status.conditions[?(@.type=="Ready")].message}')
    assert ready == "True Kubernetes default Service CIDR is ready"
    assert "servicecidrs" in kubectl.ok("api-resources", "--api-group", "networking.k8s.io")


def test_the_python_client_creates_reads_and_deletes_one(networking: client.NetworkingV1Api,
                                                         kubectl: Kubectl) -> None:
    name = unique_name("extra")
    made = networking.create_service_cidr(client.V1ServiceCIDR(
        metadata=client.V1ObjectMeta(name=name), spec=client.V1ServiceCIDRSpec(cidrs=["10.250.0.0/24", "fd00:250::/112"]),
        status=client.V1ServiceCIDRStatus(conditions=[client.V1Condition(
            type="Ready", status="True", reason="Mine", message="set by the client",
            last_transition_time="2026-01-01T00:00:00Z")])))
    assert made.status is None or not made.status.conditions  # status is the controllers'
    assert networking.read_service_cidr(name).spec.cidrs == ["10.250.0.0/24", "fd00:250::/112"]
    assert name in {s.metadata.name for s in networking.list_service_cidr().items}
    row = next(r for r in table(kubectl.ok("get", "servicecidrs")) if r["NAME"] == name)
    assert row["CIDRS"] == "10.250.0.0/24,fd00:250::/112"
    networking.delete_service_cidr(name)
    with pytest.raises(ApiException) as caught:
        networking.read_service_cidr(name)
    assert caught.value.status == 404


@pytest.mark.parametrize(("cidrs", "message"), [
    pytest.param([], "spec.cidrs: Required value: at least one CIDR required", id="none"),
    pytest.param(["10.0.0.0/24", "fd00::/64", "10.1.0.0/24"],
                 'spec.cidrs: Invalid value: networking.ServiceCIDRSpec{CIDRs:[]string{"10.0.0.0/24", "fd00::/64", '
                 '"10.1.0.0/24"}}: may only hold up to 2 values', id="three"),
    pytest.param(["10.0.0.0/24", "10.1.0.0/24"],
                 'spec.cidrs: Invalid value: networking.ServiceCIDRSpec{CIDRs:[]string{"10.0.0.0/24", "10.1.0.0/24"}}: '
                 "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64",
                 id="two of one family"),
    pytest.param(["10.0.0.0/33"], 'spec.cidrs[0]: Invalid value: "10.0.0.0/33": must be a valid CIDR value, '
                                  "(e.g. 10.9.8.0/24 or 2001:db8::/64)", id="prefix too long"),
    pytest.param(["10.96.0.1/12"], 'spec.cidrs[0]: Invalid value: "10.96.0.1/12": must not have bits set beyond '
                                   "the prefix length", id="host bits"),
    pytest.param(["010.96.0.0/12"], 'spec.cidrs[0]: Invalid value: "010.96.0.0/12": must not have leading 0s in IP '
                                    "or prefix length", id="leading zero"),
    pytest.param(["::ffff:10.0.0.0/104"], 'spec.cidrs[0]: Invalid value: "::ffff:10.0.0.0/104": must not have an '
                                          "IPv4-mapped IPv6 address", id="ipv4-mapped"),
    pytest.param(["FD00::/64"], 'spec.cidrs[0]: Invalid value: "FD00::/64": must be in canonical form ("fd00::/64")',
                 id="not canonical"),
])
def test_validation_in_kubes_words(api: httpx.Client, cidrs: list[str], message: str) -> None:
    name = unique_name("bad")
    resp = api.post(SERVICECIDRS, json={"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
                                        "metadata": {"name": name}, "spec": {"cidrs": cidrs}})
    assert_status(resp, 422, "Invalid", f'ServiceCIDR.networking.k8s.io "{name}" is invalid: {message}')
    assert_status(api.get(f"{SERVICECIDRS}/{name}"), 404, "NotFound")


def test_cidrs_are_immutable_and_status_is_writable(api: httpx.Client) -> None:
    name = unique_name("fixed")
    created = api.post(SERVICECIDRS, json={"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
                                           "metadata": {"name": name}, "spec": {"cidrs": ["10.251.0.0/24"]}})
    assert created.status_code == 201, created.text
    body = created.json()
    resp = api.put(f"{SERVICECIDRS}/{name}", json={**body, "spec": {"cidrs": ["10.252.0.0/24"]}})
    assert_status(resp, 422, "Invalid", f'ServiceCIDR.networking.k8s.io "{name}" is invalid: spec.cidrs: Invalid '
                                        'value: []string{"10.252.0.0/24"}: field is immutable')
    condition = {"type": "Ready", "status": "False", "reason": "Terminating", "message": "x",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}
    resp = api.put(f"{SERVICECIDRS}/{name}/status", json={**body, "status": {"conditions": [condition]}})
    assert resp.status_code == 200, resp.text
    stored = api.get(f"{SERVICECIDRS}/{name}").json()
    assert (stored["spec"]["cidrs"], stored["status"]["conditions"][0]["reason"]) == (["10.251.0.0/24"], "Terminating")
    assert api.delete(f"{SERVICECIDRS}/{name}").status_code == 200


def test_the_renderer_drops_traffic_to_what_the_served_cidrs_leave_unallocated(kubectl: Kubectl) -> None:
    served = kubectl.ok("get", "servicecidrs", "-o", "yaml")
    done = subprocess.run([sys.executable, "-m", "kubelab", "proxy", "render", "--proxy-mode", "nftables", "-f", "-",
                           "--sort"], input=served, capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
    assert (done.returncode, done.stderr) == (0, "")
    drops = [line for line in done.stdout.splitlines() if "Drop traffic to unallocated ClusterIPs" in line]
    assert len(drops) == 1 and "10.96.0.0/12" in drops[0], drops


def test_kubectl_explain_reads_its_schema(kubectl: Kubectl) -> None:
    out = kubectl.ok("explain", "servicecidr.spec.cidrs")
    assert "GROUP:      networking.k8s.io" in out and "FIELD: cidrs <[]string>" in out, out
