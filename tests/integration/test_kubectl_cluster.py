"""kubectl against a whole kubelab (`kubelab up --dataplane render`: API server, scheduler,
controllers, kubelet stubs; no root): the second seed's transcript, the events the scheduler and the
kubelet write and `describe` shows, and namespace deletion with everything in it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubectltools import Kubectl, RenderCluster, cells, normalize, render_cluster, table, wait_for

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "examples" / "seed2-services.yaml"
IP = r"\b10\.\d+\.\d+\.\d+\b"
AGE = r"(?<=\s)\d+(s|m\d*s?|h\d*m?)(?=\s|$)"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RenderCluster]:
    yield from render_cluster(tmp_path_factory.mktemp("render") / "data", nodes=2)


@pytest.fixture(scope="module")
def kubectl(cluster: RenderCluster, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl("dispatcher", cluster.kubeconfig, tmp_path_factory.mktemp("kubectl-cache"))


def squeeze(text: str) -> str:
    """Column gaps as two spaces: widths follow the IPs and ages, which differ between runs."""
    return "\n".join(re.sub(r"(\S) {2,}", r"\1  ", line) for line in text.split("\n"))


def test_seed_two_transcript(kubectl: Kubectl) -> None:
    """Seed 2 (Japanese article on Services): the manifests of the article, then the commands it
    shows and what they print, modulo IPs, ages and the lines newer kubectl adds."""
    assert kubectl.ok("apply", "-f", str(SEED)) == ("namespace/abcdocker created\nservice/mallh5-service created\n"
                                                    "service/myserver created\n")
    # The article's `kubectl get service --namespace=abcdocker`.
    out = kubectl.ok("get", "service", "--namespace=abcdocker")
    assert squeeze(normalize(out, IP=IP, AGE=AGE)) == (
        "NAME  TYPE  CLUSTER-IP  EXTERNAL-IP  PORT(S)  AGE\n"
        "mallh5-service  NodePort  <IP>  <none>  3017:31122/TCP  <AGE>\n")
    # Its `kubectl get svc` in default: the kubernetes Service, then myserver.
    out = kubectl.ok("get", "svc")
    assert squeeze(normalize(out, AGE=AGE)) == squeeze(normalize(
        "NAME         TYPE        CLUSTER-IP       EXTERNAL-IP   PORT(S)        AGE\n"
        "kubernetes   ClusterIP   10.96.0.1        <none>        443/TCP        1s\n"
        f"myserver     NodePort    {cells(table(out), 'NAME', 'myserver')['CLUSTER-IP']}   <none>        "
        "80:30001/TCP   1s\n", AGE=AGE))
    # A pod with app=nginx behind myserver, so Endpoints has an address as in the article.
    kubectl.ok("run", "nginx", "--image=nginx:1.27", "--labels=app=nginx", "--port=80")
    wait_for("the nginx pod to be ready", lambda: kubectl.ok(
        "get", "pod", "nginx", "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}") == "True")
    pod_ip = kubectl.ok("get", "pod", "nginx", "-o", "jsonpath={.status.podIP}")
    cluster_ip = kubectl.ok("get", "svc", "myserver", "-o", "jsonpath={.spec.clusterIP}")
    wait_for("myserver's endpoints", lambda: f"{pod_ip}:80" in kubectl.ok("describe", "svc", "myserver"))
    described = kubectl.ok("describe", "svc", "myserver")
    # The article's output (the last-applied annotation is no longer shown by kubectl describe), plus
    # the lines kubectl has added since: IP Family Policy, IP Families, IPs, Internal Traffic Policy.
    article = [
        "Name:                     myserver",
        "Namespace:                default",
        "Labels:                   <none>",
        "Annotations:              <none>",
        "Selector:                 app=nginx",
        "Type:                     NodePort",
        f"IP:                       {cluster_ip}",
        "Port:                     mynginx-http  80/TCP",
        "TargetPort:               80/TCP",
        "NodePort:                 mynginx-http  30001/TCP",
        f"Endpoints:                {pod_ip}:80",
        "Session Affinity:         None",
        "External Traffic Policy:  Cluster",
        "Events:                   <none>",
    ]
    newer = {"IP Family Policy:         SingleStack", "IP Families:              IPv4",
             f"IPs:                      {cluster_ip}", "Internal Traffic Policy:  Cluster"}
    assert [line for line in described.splitlines() if line not in newer] == article
    annotation = json.loads(kubectl.ok("get", "svc", "myserver", "-o", "jsonpath={.metadata.annotations."
                                                                   "kubectl\\.kubernetes\\.io/last-applied-configuration}"))
    assert annotation["spec"]["ports"] == [{"name": "mynginx-http", "nodePort": 30001, "port": 80, "protocol": "TCP",
                                            "targetPort": 80}]
    # Applying the same file again changes nothing.
    assert kubectl.ok("apply", "-f", str(SEED)) == ("namespace/abcdocker unchanged\nservice/mallh5-service unchanged\n"
                                                    "service/myserver unchanged\n")


def test_scheduler_and_kubelet_events_in_describe(kubectl: Kubectl) -> None:
    kubectl.ok("run", "evt", "--image=nginx:1.27")
    wait_for("evt's Started event", lambda: "Started" in kubectl.ok("get", "events", "--field-selector",
                                                                     "involvedObject.name=evt"))
    out = kubectl.ok("describe", "pod", "evt")
    node = kubectl.ok("get", "pod", "evt", "-o", "jsonpath={.spec.nodeName}")
    events = [re.split(r"\s{2,}", line.strip()) for line in out[out.index("Events:"):].splitlines()[3:]]
    assert [(e[0], e[1], e[3], e[4]) for e in events] == [
        ("Normal", "Scheduled", "default-scheduler", f"Successfully assigned default/evt to {node}"),
        ("Normal", "Pulled", "kubelet", ('Container image "nginx:1.27" already present on machine (kubelab pulls no '
                                        "image: this container has no command, so kubelab's built-in HTTP server "
                                        "runs in its place)")),
        ("Normal", "Created", "kubelet", "Created container: evt"),
        ("Normal", "Started", "kubelet", "Started container evt"),
    ]
    kubectl.ok("run", "stuck", "--image=nginx:1.27", '--overrides={"spec":{"nodeSelector":{"disk":"ssd"}}}')
    wait_for("a FailedScheduling event", lambda: "FailedScheduling" in kubectl.ok("describe", "pod", "stuck"))
    out = kubectl.ok("describe", "pod", "stuck")
    line = next(line for line in out.splitlines() if "FailedScheduling" in line)
    kind, reason, _age, source, message = re.split(r"\s{2,}", line.strip(), maxsplit=4)
    assert (kind, reason, source) == ("Warning", "FailedScheduling", "default-scheduler")
    assert message.startswith("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.")
    pods = table(kubectl.ok("get", "pods", "-o", "wide"))
    assert (cells(pods, "NAME", "stuck")["STATUS"], cells(pods, "NAME", "stuck")["NODE"]) == ("Pending", "<none>")
    node_out = kubectl.ok("describe", "node", node)
    assert re.search(r"^  Normal\s+Starting\s+\S+\s+kubelet\s+Starting kubelet\.$", node_out, re.MULTILINE), node_out
    # Deleting a running pod is graceful: kubectl waits until the kubelet has stopped it and it is gone.
    assert kubectl.ok("delete", "pod", "evt") == 'pod "evt" deleted\n'
    assert kubectl("get", "pod", "evt").failed().stderr == 'Error from server (NotFound): pods "evt" not found\n'
    killing = kubectl.ok("get", "events", "--field-selector", "involvedObject.name=evt,reason=Killing", "-o",
                         "jsonpath={.items[*].message}")
    assert killing == "Stopping container evt"


def test_deleting_a_namespace_deletes_what_it_holds(kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl.ok("create", "namespace", "doomed")
    kubectl.ok("create", "service", "clusterip", "web", "--tcp=80:8080", "-n", "doomed")
    kubectl.ok("run", "web", "--image=nginx:1.27", "-n", "doomed")
    # A ConfigMap with a finalizer holds the namespace in Terminating while we look.
    held = tmp_path / "held.yaml"
    held.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  namespace: doomed\n"
                    "  finalizers: [example.com/hold]\n")
    kubectl.ok("apply", "-f", str(held))
    assert kubectl.ok("delete", "namespace", "doomed", "--wait=false") == 'namespace "doomed" deleted\n'
    assert cells(table(kubectl.ok("get", "ns", "doomed")), "NAME", "doomed")["STATUS"] == "Terminating"
    late = tmp_path / "late.yaml"
    late.write_text("apiVersion: v1\nkind: Service\nmetadata:\n  name: late\n  namespace: doomed\n"
                    "spec:\n  ports: [{port: 80}]\n")
    refused = kubectl("create", "-f", str(late)).failed()
    assert refused.stderr == (f'Error from server (Forbidden): error when creating "{late}": services "late" is '
                              "forbidden: unable to create new content in namespace doomed because it is being "
                              "terminated\n")
    wait_for("the namespace controller to delete the service and the pod",
             lambda: kubectl("get", "svc,pods", "-n", "doomed").ok().stderr ==
             "No resources found in doomed namespace.\n")
    kubectl.ok("patch", "configmap", "held", "-n", "doomed", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    wait_for("the namespace to go", lambda: kubectl("get", "ns", "doomed").returncode != 0)
    assert kubectl("get", "ns", "doomed").failed().stderr == \
        'Error from server (NotFound): namespaces "doomed" not found\n'
