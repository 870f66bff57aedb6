"""An invalid Service or EndpointSlice (one stored without validation) is left out of the proxier's rules,
counted and logged once; every other object is programmed as if it were not there. No root, no API
server: the proxier's own handlers and a RecordingApplier. Real iptables: tests/faults/test_poisoned_objects.py.
"""

from __future__ import annotations

import logging

import pytest
from proxyobjects import endpoint_slice, ep, listed, port, service

from kubelab.models import EndpointSlice, Service
from proxyagent import Proxier, ProxyConfig, render
from proxyagent.apply import RecordingApplier
from proxyagent.screening import service_problems, slice_problems

CONFIG = ProxyConfig(node_name="node-1", node_ips=("10.240.0.11",), cluster_cidr="10.244.0.0/16")


def svc(name: str, ip: str, *ports: dict[str, object], ns: str = "default", **spec: object) -> Service:
    return service(ns, name, cluster_ip=ip, ports=list(ports) or [port("http", 80)], **spec)


def eps(name: str, ip: str, number: int = 8080, *, slice_name: str | None = None) -> EndpointSlice:
    return endpoint_slice("default", name, [ep(ip, "node-1")], [port("http", number)], name=slice_name)


GOOD = [svc("alpha", "10.96.0.10"), svc("beta", "10.96.0.11"), eps("alpha", "10.244.1.2"), eps("beta", "10.244.1.3")]


@pytest.mark.parametrize(("obj", "problem"), [
    pytest.param(svc("evil\n", "10.96.0.20"), "name 'evil\\n'", id="name ending in a newline"),
    pytest.param(svc("web", "10.96.0.20", ns="x\n"), "namespace 'x\\n'", id="namespace ending in a newline"),
    pytest.param(svc("web", "10.96.0.20", port("p\n", 80)), "spec.ports[0].name 'p\\n'", id="port name"),
    pytest.param(svc("web", "10.96.0.20", port("http", 80, "TCP\n-A X")), "spec.ports[0].protocol", id="protocol"),
    pytest.param(svc("web", "10.96.0.20", port("http", 70000)), "spec.ports[0].port 70000", id="port number"),
    pytest.param(svc("web", "10.96.0.20", port("http", 80, nodePort=-1), svc_type="NodePort"),
                 "spec.ports[0].nodePort -1", id="node port"),
    pytest.param(svc("web", "10.96.0.20", sessionAffinity="ClientIP",
                     sessionAffinityConfig={"clientIP": {"timeoutSeconds": -5}}),
                 "timeoutSeconds -5", id="affinity timeout"),
    pytest.param(eps("web", "10.244.1.9", 0), "ports[0].port 0", id="slice port zero"),
    pytest.param(endpoint_slice("default", "web", [ep("10.244.1.9")], [port("h\r", 80)]), "ports[0].name 'h\\r'",
                 id="slice port name"),
])
def test_each_field_that_reaches_a_rule_is_checked(obj: Service | EndpointSlice, problem: str) -> None:
    problems = service_problems(obj) if isinstance(obj, Service) else slice_problems(obj)
    assert any(problem in p for p in problems), problems


def test_valid_objects_have_no_problems() -> None:
    assert [p for o in GOOD for p in (service_problems(o) if isinstance(o, Service) else slice_problems(o))] == []


async def test_a_bad_object_is_left_out_and_the_rest_is_programmed(caplog: pytest.LogCaptureFixture) -> None:
    evil, named, big = svc("evil\n", "10.96.0.20"), svc("named", "10.96.0.21", port("p\n", 80)), \
        eps("beta", "10.244.1.4", 70000, slice_name="beta-big")
    proxier: Proxier = listed(Proxier(CONFIG, RecordingApplier()), [*GOOD, evil, named, big])
    with caplog.at_level(logging.INFO, logger="proxyagent.screening"):
        ruleset = await proxier.sync_proxy_rules()
        assert ruleset is not None
        # Exactly what the valid objects render to, applied in one restore that did not fail.
        assert ruleset.text == render([o for o in GOOD if isinstance(o, Service)],
                                      [o for o in GOOD if isinstance(o, EndpointSlice)], CONFIG).text
        assert "evil" not in ruleset.text and "named" not in ruleset.text and "70000" not in ruleset.text
        assert proxier.failures == 0
        # More events and syncs: nothing is logged or counted again.
        proxier.on_service("MODIFIED", evil, evil.model_copy())
        proxier.on_service("ADDED", None, svc("gamma", "10.96.0.12"))
        assert await proxier.sync_proxy_rules() is not None
    m = proxier.metrics
    assert m.skipped_objects.labels("Service")._value.get() == 2
    assert m.skipped_objects.labels("EndpointSlice")._value.get() == 1
    assert m.invalid_objects.labels("Service")._value.get() == 2
    assert m.invalid_objects.labels("EndpointSlice")._value.get() == 1
    left_out = [r.getMessage() for r in caplog.records if "leaving" in r.getMessage()]
    assert len(left_out) == 3, left_out
    assert any("'default/evil\\n'" in line and "\n" not in line for line in left_out), left_out


async def test_a_service_that_turns_invalid_loses_its_rules_and_gets_them_back() -> None:
    good = svc("alpha", "10.96.0.10")
    proxier: Proxier = listed(Proxier(CONFIG, RecordingApplier()), GOOD)
    await proxier.sync_proxy_rules()
    bad = svc("alpha", "10.96.0.10", port("http", 0))
    proxier.on_service("MODIFIED", good, bad)
    ruleset = await proxier.sync_proxy_rules()
    assert ruleset is not None and "default/alpha:http" not in await proxier.applier.saved()  # type: ignore[attr-defined]
    proxier.on_service("MODIFIED", bad, good)
    await proxier.sync_proxy_rules()
    assert '"default/alpha:http cluster IP"' in await proxier.applier.saved()  # type: ignore[attr-defined]
    assert proxier.metrics.skipped_objects.labels("Service")._value.get() == 0
    proxier.on_service("MODIFIED", good, bad)
    proxier.on_service("DELETED", bad, None)
    assert proxier.metrics.skipped_objects.labels("Service")._value.get() == 0
    assert proxier.metrics.invalid_objects.labels("Service")._value.get() == 2
