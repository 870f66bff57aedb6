"""Pod field defaults as kube-apiserver's SetDefaults_* write them on create: what `kubectl get -o yaml` and
`kubectl describe` then show (probes' timeout=1s period=10s #success=1 #failure=3, the image pull policy,
the termination message path)."""

from __future__ import annotations

import httpx
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
