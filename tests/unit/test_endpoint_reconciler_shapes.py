"""The shapes the lease endpoint reconciler writes for `default/kubernetes` (apiserver/endpointreconciler.py):
one Endpoints subset and one EndpointSlice per port, and what kube-proxy's view makes of the slices (every
API server an endpoint of the Service's `https` port, whatever its port number)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from apiserver import endpointreconciler as er
from kubelab.models import EndpointSlice
from proxyagent.serviceports import merge_endpoints, slice_endpoints


def test_one_port_for_all_is_kubes_single_subset() -> None:
    members = [("10.0.0.2", 6443), ("10.0.0.10", 6443), ("10.0.0.1", 6443)]
    assert er.expected_subsets(members) == [{
        "addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}, {"ip": "10.0.0.10"}],
        "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}]
    assert list(er.expected_slices(members)) == ["kubernetes"]


def test_several_ports_on_one_address_are_one_subset_and_one_slice_each() -> None:
    members = [("127.0.0.1", 8082), ("127.0.0.1", 8080), ("127.0.0.1", 8081)]
    assert [s["ports"][0]["port"] for s in er.expected_subsets(members)] == [8080, 8081, 8082]
    assert list(er.expected_slices(members)) == ["kubernetes", "kubernetes-8081", "kubernetes-8082"]


def test_kube_proxy_sees_every_apiserver_behind_the_https_port() -> None:
    members = [("127.0.0.1", 8080), ("127.0.0.1", 8081), ("127.0.0.1", 8082)]
    slices = [EndpointSlice.model_validate({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": "default", "labels": {"kubernetes.io/service-name": "kubernetes"}},
        **body}) for name, body in er.expected_slices(members).items()]
    merged = merge_endpoints(slice_endpoints(s, node_name="node-1") for s in slices)
    assert [info.endpoint for info in merged[("default", "kubernetes", "https", "TCP")]] == [
        "127.0.0.1:8080", "127.0.0.1:8081", "127.0.0.1:8082"]


def test_a_lease_names_its_server() -> None:
    assert er.parse_lease(er.lease_value(("127.0.0.1", 8081))) == ("127.0.0.1", 8081)
    assert er.lease_key(("127.0.0.1", 8081)) == "/registry/masterleases/127.0.0.1:8081"


def test_owned_slices() -> None:
    assert er._owned_slice("kubernetes") and er._owned_slice("kubernetes-8081")
    assert not any(er._owned_slice(n) for n in ("kubernetes-", "kubernetes-x", "kubernetesx", "web", "kubernetes-8a"))


@given(st.binary(max_size=200))
def test_any_bytes_parse_to_a_server_or_none(value: bytes) -> None:
    parsed = er.parse_lease(value)
    assert parsed is None or (isinstance(parsed[1], int) and 0 < parsed[1] < 65536)
