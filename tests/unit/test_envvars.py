"""A container's environment as kubelet builds it: $(VAR) expansion, the Service variables, precedence
and the errors for missing ConfigMaps and keys (kubeletstub/envvars.py)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from kubeletstub import envvars


@pytest.mark.parametrize(("text", "want"), [
    pytest.param("$(A)", "1", id="defined"),
    pytest.param("$(MISSING)", "$(MISSING)", id="undefined stays"),
    pytest.param("$$(A)", "$(A)", id="escaped"),
    pytest.param("a$$b", "a$b", id="double dollar"),
    pytest.param("$(A", "$(A", id="unterminated"),
    pytest.param("$A", "$A", id="shell syntax is not expanded"),
    pytest.param("x$", "x$", id="trailing dollar"),
    pytest.param("$(A)$(B)-$(A)", "12-1", id="several"),
])
def test_expand(text: str, want: str) -> None:
    assert envvars.expand(text, {"A": "1"}, {"B": "2"}) == want


def svc(name: str, namespace: str, ip: str, ports: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"clusterIP": ip, "ports": ports}}


def test_service_variables_are_kubelets() -> None:
    services = [svc("my-db", "app", "10.96.0.20", [{"port": 5432, "protocol": "TCP"},
                                                   {"name": "metrics", "port": 9187, "protocol": "TCP"}]),
                svc("kubernetes", "default", "10.96.0.1", [{"name": "https", "port": 443, "protocol": "TCP"}]),
                svc("headless", "app", "None", [{"port": 80}]),
                svc("elsewhere", "other", "10.96.0.30", [{"port": 80}])]
    env = envvars.service_env(services, "app")
    assert env == {
        "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443",
        "KUBERNETES_SERVICE_PORT_HTTPS": "443", "KUBERNETES_PORT": "tcp://10.96.0.1:443",
        "KUBERNETES_PORT_443_TCP": "tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
        "KUBERNETES_PORT_443_TCP_PORT": "443", "KUBERNETES_PORT_443_TCP_ADDR": "10.96.0.1",
        "MY_DB_SERVICE_HOST": "10.96.0.20", "MY_DB_SERVICE_PORT": "5432", "MY_DB_SERVICE_PORT_METRICS": "9187",
        "MY_DB_PORT": "tcp://10.96.0.20:5432", "MY_DB_PORT_5432_TCP": "tcp://10.96.0.20:5432",
        "MY_DB_PORT_5432_TCP_PROTO": "tcp", "MY_DB_PORT_5432_TCP_PORT": "5432", "MY_DB_PORT_5432_TCP_ADDR": "10.96.0.20",
        "MY_DB_PORT_9187_TCP": "tcp://10.96.0.20:9187", "MY_DB_PORT_9187_TCP_PROTO": "tcp",
        "MY_DB_PORT_9187_TCP_PORT": "9187", "MY_DB_PORT_9187_TCP_ADDR": "10.96.0.20",
    }
    assert set(envvars.service_env(services, "app", enable_links=False)) == {
        k for k in env if k.startswith("KUBERNETES_")}


POD: dict[str, Any] = {"metadata": {"name": "web", "namespace": "app", "uid": "u-1", "labels": {"tier": "front"}},
                       "spec": {"nodeName": "node-1", "serviceAccountName": "sa"}}


def env_of(container: dict[str, Any], **objects: Any) -> dict[str, str]:
    return envvars.container_env(POD, container, config_maps=objects.get("config_maps", {}),
                                 secrets=objects.get("secrets", {}), services=[], pod_ip="10.244.1.5",
                                 host_ip="10.240.0.11", hostname="web", allocatable={"cpu": "4", "memory": "8Gi"})


def test_precedence_and_sources() -> None:
    cm = {"data": {"A": "from-cm", "B": "b"}}
    secret = {"data": {"S": base64.b64encode(b"pw").decode()}}
    env = env_of({"envFrom": [{"configMapRef": {"name": "cm"}}, {"secretRef": {"name": "sec"}, "prefix": "X_"}],
                  "env": [{"name": "A", "value": "explicit-$(B)"},
                          {"name": "TIER", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['tier']"}}},
                          {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                          {"name": "SA", "valueFrom": {"fieldRef": {"fieldPath": "spec.serviceAccountName"}}},
                          {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                          {"name": "REQ", "valueFrom": {"resourceFieldRef": {"resource": "requests.memory"}}}],
                  "resources": {}},
                 config_maps={"cm": cm}, secrets={"sec": secret})
    assert {k: env[k] for k in ("A", "B", "X_S", "TIER", "IP", "SA", "CPU", "REQ", "HOSTNAME")} == {
        "A": "explicit-b", "B": "b", "X_S": "pw", "TIER": "front", "IP": "10.244.1.5", "SA": "sa", "CPU": "4",
        "REQ": "0", "HOSTNAME": "web"}
    assert env["PATH"] == envvars.DEFAULT_PATH


@pytest.mark.parametrize(("container", "objects", "message"), [
    pytest.param({"env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "gone", "key": "k"}}}]}, {},
                 'configmap "gone" not found', id="missing configmap"),
    pytest.param({"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]},
                 {"secrets": {"s": {"data": {}}}}, "couldn't find key k in Secret app/s", id="missing key"),
    pytest.param({"envFrom": [{"secretRef": {"name": "gone"}}]}, {}, 'secret "gone" not found', id="envFrom"),
])
def test_missing_sources_are_kubelets_errors(container: dict[str, Any], objects: dict[str, Any], message: str) -> None:
    with pytest.raises(envvars.EnvError) as err:
        env_of(container, **objects)
    assert str(err.value) == message


def test_optional_sources_are_skipped() -> None:
    env = env_of({"env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "gone", "key": "k",
                                                                          "optional": True}}}],
                  "envFrom": [{"configMapRef": {"name": "gone", "optional": True}}]}, config_maps={"gone": None})
    assert "X" not in env


def test_command_and_args_are_expanded() -> None:
    assert envvars.command_line({"command": ["echo", "$(A)"], "args": ["$$(A)", "$(B)"]}, {"A": "1"}) == [
        "echo", "1", "$(A)", "$(B)"]
    assert envvars.command_line({}, {}) is None


@pytest.mark.parametrize(("pod", "want"), [
    pytest.param({"metadata": {"name": "web-0"}, "spec": {}}, "web-0", id="the pod's name"),
    pytest.param({"metadata": {"name": "web-0"}, "spec": {"hostname": "db"}}, "db", id="spec.hostname"),
    pytest.param({"metadata": {"name": "a" * 62 + "-b"}, "spec": {}}, "a" * 62, id="cut to 63, no trailing dash"),
])
def test_pod_hostname(pod: dict[str, Any], want: str) -> None:
    assert envvars.pod_hostname(pod) == want
