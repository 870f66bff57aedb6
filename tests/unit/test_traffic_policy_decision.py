"""serviceports.traffic_policy: the one decision both proxiers' renderers take after CategorizeEndpoints
(which policy chain ClusterIP and external traffic use, whether either has an endpoint, whether the EXT chain
is written), on cases of kube-proxy's TestCategorizeEndpoints and its "no local endpoints" rules."""

from __future__ import annotations

from proxyagent.serviceports import EndpointInfo, ServicePortInfo, traffic_policy


def sp(**kwargs: object) -> ServicePortInfo:
    return ServicePortInfo(namespace="ns", name="svc", port_name="p", protocol="TCP", cluster_ip="10.96.0.5",
                           port=80, **kwargs)  # type: ignore[arg-type]


def ep(ip: str, *, local: bool = False, ready: bool = True, serving: bool = True,
       terminating: bool = False) -> EndpointInfo:
    return EndpointInfo(ip=ip, port=8080, ready=ready, serving=serving, terminating=terminating, is_local=local)


def test_cluster_policy_uses_every_ready_endpoint() -> None:
    policy = traffic_policy([ep("10.1.0.1"), ep("10.1.0.2", local=True)], sp())
    assert (policy.uses_cluster_chain, policy.uses_local_chain) == (True, False)
    assert (policy.internal_local, policy.has_internal, policy.has_external) == (False, True, True)
    assert not policy.uses_external_chain  # a ClusterIP port has no external traffic
    assert [e.ip for e in policy.endpoints.all_reachable] == ["10.1.0.1", "10.1.0.2"]


def test_internal_local_without_a_local_endpoint_drops_cluster_ip_traffic() -> None:
    policy = traffic_policy([ep("10.1.0.1")], sp(internal_policy_local=True))
    assert (policy.uses_cluster_chain, policy.uses_local_chain) == (False, False)
    assert policy.internal_local and not policy.has_internal and policy.no_local_internal
    assert not policy.no_local_external


def test_external_local_without_a_local_endpoint_keeps_the_ext_chain_for_short_circuits() -> None:
    policy = traffic_policy([ep("10.1.0.1")], sp(node_port=30080, external_policy_local=True))
    assert policy.uses_cluster_chain and not policy.uses_local_chain
    assert policy.has_internal and not policy.has_external and policy.no_local_external
    assert policy.uses_external_chain and policy.external_local


def test_no_usable_endpoint_anywhere_is_not_a_missing_local_one() -> None:
    policy = traffic_policy([ep("10.1.0.1", ready=False, serving=False)],
                            sp(node_port=30080, external_policy_local=True, internal_policy_local=True))
    assert not policy.endpoints.has_any and not policy.has_internal and not policy.has_external
    assert not policy.no_local_internal and not policy.no_local_external  # REJECT, not DROP
    assert not policy.uses_external_chain


def test_local_policy_falls_back_to_serving_terminating_local_endpoints() -> None:
    endpoints = [ep("10.1.0.1"), ep("10.1.0.2", local=True, ready=False, terminating=True)]
    policy = traffic_policy(endpoints, sp(node_port=30080, external_policy_local=True))
    assert policy.uses_cluster_chain and policy.uses_local_chain and policy.has_external
    assert [e.ip for e in policy.endpoints.local] == ["10.1.0.2"]
    assert [e.ip for e in policy.endpoints.cluster] == ["10.1.0.1"]  # cluster keeps the ready one
    assert [e.ip for e in policy.endpoints.all_reachable] == ["10.1.0.1", "10.1.0.2"]
