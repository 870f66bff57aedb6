"""Pod field defaults as kube-apiserver's SetDefaults_* write them on create: what `kubectl get -o yaml` and
`kubectl describe` then show (probes' timeout=1s period=10s #success=1 #failure=3, the image pull policy,
the termination message path)."""

from __future__ import annotations

import httpx
import pytest
from apitools import create, ns_path, unique_name


def test_probes_and_containers_get_kubes_defaults(api: httpx.Client) -> None:
    name = unique_name("defaults")
    made = create(api, ns_path("pods"), {"metadata": {"name": name}, "spec": {"containers": [{
        "name": "web", "image": "nginx:1.27",
        "readinessProbe": {"httpGet": {"port": 8080}},
        "livenessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 5},
        "startupProbe": {"grpc": {"port": 9000}, "failureThreshold": 30}}]}})
    container = made["spec"]["containers"][0]
    assert container["readinessProbe"] == {"httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"},
                                           "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1,
                                           "failureThreshold": 3}
    assert container["livenessProbe"] == {"tcpSocket": {"port": 8080}, "periodSeconds": 5, "timeoutSeconds": 1,
                                          "successThreshold": 1, "failureThreshold": 3}
    assert container["startupProbe"] == {"grpc": {"port": 9000, "service": ""}, "failureThreshold": 30,
                                         "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1}
    assert (container["imagePullPolicy"], container["terminationMessagePath"],
            container["terminationMessagePolicy"]) == ("IfNotPresent", "/dev/termination-log", "File")
    api.delete(ns_path("pods", name=name), params={"gracePeriodSeconds": "0"})


MINIMAL = {"containers": [{"name": "c", "image": "nginx:1.27"}]}
# What kube-apiserver 1.32 returns for MINIMAL's containers: resources is a struct (`{}`), the rest
# SetDefaults_Container.
CONTAINER = {"name": "c", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent", "resources": {},
             "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}
# SetDefaults_PodSpec: what a Pod and every workload's pod template get.
POD_SPEC = {"containers": [CONTAINER], "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler", "terminationGracePeriodSeconds": 30, "securityContext": {}}


def test_a_pod_gets_kubes_pod_spec_defaults(api: httpx.Client) -> None:
    """SetDefaults_PodSpec, SetDefaults_Pod's enableServiceLinks, the Priority admission plugin's priority
    and preemptionPolicy; kubelab left out enableServiceLinks, securityContext, resources and
    preemptionPolicy (kr8s, lightkube and `kubectl get -o yaml` read them)."""
    name = unique_name("defaults")
    made = create(api, ns_path("pods"), {"metadata": {"name": name}, "spec": MINIMAL})
    spec = {k: v for k, v in made["spec"].items() if k not in ("tolerations", "serviceAccountName",
                                                               "serviceAccount", "volumes")}
    for c in spec["containers"]:
        c.pop("volumeMounts", None)  # the service account token's, when admission mounts one
    assert spec == {**POD_SPEC, "enableServiceLinks": True, "priority": 0, "preemptionPolicy": "PreemptLowerPriority"}
    read = api.get(ns_path("pods", name=name)).json()["spec"]
    assert (read["enableServiceLinks"], read["securityContext"], read["containers"][0]["resources"]) == (True, {}, {})
    # What the client set stays: enableServiceLinks false is not a missing field.
    other = create(api, ns_path("pods"), {"metadata": {"name": f"{name}-x"}, "spec": {
        **MINIMAL, "enableServiceLinks": False, "securityContext": {"runAsUser": 1000},
        "hostNetwork": True, "containers": [{"name": "c", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}]}})
    assert (other["spec"]["enableServiceLinks"], other["spec"]["securityContext"]) == (False, {"runAsUser": 1000})
    # defaultHostNetworkPorts: on the node's network, the container's port is the host's.
    assert other["spec"]["containers"][0]["ports"] == [{"containerPort": 80, "hostPort": 80, "protocol": "TCP"}]
    for pod_name in (name, f"{name}-x"):
        api.delete(ns_path("pods", name=pod_name), params={"gracePeriodSeconds": "0"})


def _template(spec: dict[str, object] | None = None) -> dict[str, object]:
    return {"metadata": {"labels": {"app": "defaults"}}, "spec": {**MINIMAL, **(spec or {})}}


SELECTOR = {"matchLabels": {"app": "defaults"}}
TEMPLATES = [
    pytest.param("apps/v1", "deployments", {"selector": SELECTOR, "template": _template()},
                 ("template",), {}, id="Deployment"),
    pytest.param("apps/v1", "replicasets", {"selector": SELECTOR, "template": _template()},
                 ("template",), {}, id="ReplicaSet"),
    pytest.param("apps/v1", "statefulsets", {"selector": SELECTOR, "template": _template(), "serviceName": "x"},
                 ("template",), {}, id="StatefulSet"),
    pytest.param("apps/v1", "daemonsets", {"selector": SELECTOR, "template": _template()},
                 ("template",), {}, id="DaemonSet"),
    pytest.param("", "replicationcontrollers", {"selector": {"app": "defaults"}, "template": _template()},
                 ("template",), {}, id="ReplicationController"),
    pytest.param("batch/v1", "jobs", {"template": _template({"restartPolicy": "Never"})},
                 ("template",), {"restartPolicy": "Never"}, id="Job"),
    pytest.param("batch/v1", "cronjobs", {"schedule": "* * * * *", "jobTemplate": {"spec": {
                 "template": _template({"restartPolicy": "OnFailure"})}}},
                 ("jobTemplate", "spec", "template"), {"restartPolicy": "OnFailure"}, id="CronJob"),
]


@pytest.mark.parametrize(("group", "plural", "spec", "where", "own"), TEMPLATES)
def test_pod_templates_get_the_pod_spec_defaults_only(api: httpx.Client, group: str, plural: str,
                                                      spec: dict[str, object], where: tuple[str, ...],
                                                      own: dict[str, object]) -> None:
    """A template gets SetDefaults_PodSpec (securityContext {}, resources {}, ...) but not what only a Pod
    gets: no enableServiceLinks, priority, preemptionPolicy (kube's templates have none; kubelab put
    priority 0 in every template)."""
    name = unique_name("tmpl")
    made = create(api, ns_path(plural, group=group), {"metadata": {"name": name}, "spec": spec})
    node = made["spec"]
    for key in where:
        node = node[key]
    assert node["spec"] == {**POD_SPEC, **own}
    api.delete(ns_path(plural, name=name, group=group))
