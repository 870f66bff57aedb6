"""The docker-compose lab, for real: a Docker engine, the images built without a registry, `docker-compose
up -d`, and the cluster used as a user would.

The engine is the machine's, or a dockerd this test starts and stops by its PID, leaving the host's
network as it found it (tests/e2e/dockerlab.py). The images come from compose/offline-build.sh (a
Debian base from debootstrap, wheels from this host's pip), the documented way for a site without a
registry; what it made is kept, so a second run builds in seconds. Then, through the published port
with the real kubectl: every service healthy, three nodes Ready at their addresses, traffic to a
ClusterIP from every node reaching every pod, a NodePort on a node's IP, another node's IP and
127.0.0.1 from every node, a pod finding a Service by name through cluster DNS, kubectl logs and exec
through the kubelets' HTTPS API (compose/pki's kubelet certificate), a pod reading the API with its
projected service account token, a node container killed and started again with its rules back, and
`docker-compose down -v` leaving nothing. The three-etcd variant keeps the API writable with one
member stopped. The highly available variant (three API servers on the three members, two leader-elected
replicas of the scheduler and the controllers) keeps scheduling, running and serving pods with the API
server every component talks to first killed, and with the leading scheduler killed after it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from composelab import REPO
from dockerlab import BASE_IMAGE, DockerError, Engine, engine, missing_tools, offline_build
from kubelab_cluster import wait_for

# The first test also pays for the engine and the offline build (debootstrap: minutes on a fresh machine).
pytestmark = [pytest.mark.root, pytest.mark.timeout(2400)]

PROJECT = "kubelab-e2e"
COMPOSE_FILES = ("docker-compose.yml",)
ETCD3_FILES = ("docker-compose.yml", "docker-compose.etcd3.yml")
HA_FILES = (*ETCD3_FILES, "docker-compose.ha.yml")
KUBECONFIG = REPO / "compose" / "kubeconfig"
PKI = REPO / "compose" / "pki"
NODES = ("node-1", "node-2", "node-3")
PODS = ("api-1", "api-2", "api-3")
SERVICES = ("etcd", "apiserver", "scheduler", "controllers", "dns", *NODES)
APISERVERS = {"apiserver": "10.240.0.4", "apiserver-2": "10.240.0.8", "apiserver-3": "10.240.0.9"}
HA_SERVICES = (*SERVICES, "etcd-2", "etcd-3", "apiserver-2", "apiserver-3", "scheduler-2", "controllers-2")
NODE_IPS = {"node-1": "10.240.0.11", "node-2": "10.240.0.12", "node-3": "10.240.0.13"}
TIMINGS: dict[str, float] = {}

# A pod that reads its own Pod from the API as an in-cluster client does: the kubernetes Service by its
# DNS name, the projected token, CA and namespace of /var/run/secrets/kubernetes.io/serviceaccount.
READER = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "reader"},
    "spec": {"restartPolicy": "Never", "containers": [{
        "name": "reader", "image": "kubelab/host",
        "command": ["sh", "-c", ('sa=/var/run/secrets/kubernetes.io/serviceaccount; '
                    'curl -sS --fail --cacert $sa/ca.crt -H "Authorization: Bearer $(cat $sa/token)" '
                    'https://kubernetes.default.svc/api/v1/namespaces/$(cat $sa/namespace)/pods/reader')]}]},
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def docker() -> Iterator[Engine]:
    missing = missing_tools()
    if missing:
        pytest.skip(f"no Docker here ({', '.join(missing)} missing; `make test` installs them as root)")
    started = time.monotonic()
    with engine() as eng:
        TIMINGS["engine up"] = time.monotonic() - started
        TIMINGS["offline build"] = offline_build(eng)
        yield eng
    print(f"\ncompose lab timings (s): {json.dumps({k: round(v, 1) for k, v in TIMINGS.items()})}")


class Project:
    """One `docker-compose -p kubelab-e2e` project, with the offline images and a free published port."""

    def __init__(self, docker: Engine, files: tuple[str, ...]) -> None:
        self.docker = docker
        self.port = _free_port()
        self.ports = {"apiserver": self.port, "apiserver-2": _free_port(), "apiserver-3": _free_port()}
        self.files = files
        self.containers: dict[str, str] = {}
        self.env = {"BASE_IMAGE": BASE_IMAGE, "ETCD_IMAGE": BASE_IMAGE, "KUBELAB_API_PORT": str(self.port),
                    "KUBELAB_API_PORT_2": str(self.ports["apiserver-2"]),
                    "KUBELAB_API_PORT_3": str(self.ports["apiserver-3"]),
                    # docker-compose's own wait on the engine (60 s by default): `down` of the HA lab's 14
                    # containers on a loaded machine took longer, and the project was left behind.
                    "COMPOSE_HTTP_TIMEOUT": "300"}

    def compose(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        files = [word for f in self.files for word in ("-f", f)]
        return self.docker.run(["docker-compose", "-p", PROJECT, *files, *args], check=check, timeout=timeout,
                               env=self.env)

    def exec(self, service: str, *argv: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        """`docker-compose exec -T`, through docker's own (faster) client."""
        return self.docker.run(["docker", "exec", self.container(service), *argv], check=check, timeout=60)

    def container(self, service: str) -> str:
        if service not in self.containers:  # the same container across stop, kill and start
            self.containers[service] = self.compose("ps", "-q", service).stdout.strip()
        return self.containers[service]

    def health(self, service: str) -> str:
        done = self.docker.run(["docker", "inspect", "--format", "{{.State.Health.Status}}", self.container(service)],
                               check=False)
        return done.stdout.strip()

    def wait_healthy(self, services: tuple[str, ...]) -> None:
        wait_for(f"{services} healthy", lambda: all(self.health(s) == "healthy" for s in services), timeout=240,
                 interval=1)

    def kubectl(self, *args: str, check: bool = True, timeout: float = 60,
                via: str = "apiserver") -> subprocess.CompletedProcess[str]:
        """The real kubectl through `via`'s published port (kubectl talks to one server)."""
        argv = ["kubectl", "--kubeconfig", str(KUBECONFIG), "--server", f"https://127.0.0.1:{self.ports[via]}", *args]
        done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
        return done

    def kubectl_json(self, *args: str, via: str = "apiserver") -> Any:
        return json.loads(self.kubectl(*args, "-o", "json", via=via).stdout)

    def leftovers(self) -> list[str]:
        label = f"label=com.docker.compose.project={PROJECT}"
        found = []
        for kind in ("container", "network", "volume"):
            listed = self.docker.run(["docker", kind, "ls", *(["-a"] if kind == "container" else []), "-q",
                                      "--filter", label], check=False).stdout.split()
            found += [f"{kind} {name}" for name in listed]
        return found


@contextlib.contextmanager
def up(docker: Engine, files: tuple[str, ...], services: tuple[str, ...] = ()) -> Iterator[Project]:
    """`docker-compose up -d`, every service healthy; at the end, whatever happened, `docker-compose
    down -v`, checked to leave no container, network or volume of the project."""
    project = Project(docker, files)
    project.compose("down", "-v", "--remove-orphans", check=False)  # what a killed run may have left
    try:
        started = time.monotonic()
        project.compose("up", "-d", *services)
        project.wait_healthy(services or (HA_SERVICES if files == HA_FILES else SERVICES))
        TIMINGS[f"up {len(files)} file(s), healthy"] = time.monotonic() - started
        yield project
    except BaseException:
        print(project.compose("logs", "--no-color", "--tail=40", check=False).stdout[-40000:])
        raise
    finally:
        started = time.monotonic()
        project.compose("down", "-v", "--timeout", "20", check=False)
        TIMINGS[f"down {len(files)} file(s)"] = time.monotonic() - started
        left = project.leftovers()
        if left:
            raise DockerError(f"docker-compose down -v left {left}")


def _until_all_seen(what: str, fetch: Callable[[], str], wanted: set[str]) -> set[str]:
    seen: set[str] = set()

    def check() -> bool:
        seen.add(fetch())
        return wanted <= seen

    wait_for(what, check, timeout=90, interval=0)
    return seen - {""}


def _curl(project: Project, node: str, url: str) -> str:
    done = project.exec(node, "curl", "-s", "--max-time", "3", url)
    return done.stdout.strip() if done.returncode == 0 else ""


def test_compose_lab_up_for_real(docker: Engine) -> None:
    with up(docker, COMPOSE_FILES) as lab:
        nodes = wait_for("three nodes Ready", lambda: _ready_nodes(lab), timeout=90)
        assert nodes == NODE_IPS

        lab.kubectl("apply", "-f", str(REPO / "examples" / "clusterip-svc.yaml"))
        lab.kubectl("expose", "pod", "api-1", "--name", "clusterip-np", "--type", "NodePort", "--port", "5555",
                    "--target-port", "5000")
        pods = wait_for("three api pods Running", lambda: _running_pods(lab), timeout=120)
        assert {pod["node"] for pod in pods.values()} <= set(NODES)
        cluster_ip = lab.kubectl("get", "svc", "clusterip-svc", "-o", "jsonpath={.spec.clusterIP}").stdout
        node_port = int(lab.kubectl("get", "svc", "clusterip-np", "-o", "jsonpath={.spec.ports[0].nodePort}").stdout)

        # From every node: the ClusterIP reaches every pod (across nodes); the NodePort answers on the
        # node's own IP, another node's IP and 127.0.0.1 (route_localnet, set by the compose file).
        for node in NODES:
            seen = _until_all_seen(f"{cluster_ip}:5555 from {node}",
                                   functools.partial(_curl, lab, node, f"http://{cluster_ip}:5555/"), set(PODS))
            assert seen == set(PODS), (node, seen)
            other = NODE_IPS[NODES[(NODES.index(node) + 1) % 3]]
            for address in (NODE_IPS[node], other, "127.0.0.1"):
                answer = wait_for(f"NodePort {address}:{node_port} from {node}",
                                  functools.partial(_curl, lab, node, f"http://{address}:{node_port}/"))
                assert answer in PODS, (node, address, answer)

        # kubectl exec and logs: the API server dials the pod's kubelet over HTTPS with its client
        # certificate. A pod finds the Service by name through cluster DNS (exec runs in the pod).
        shown = lab.kubectl("exec", "api-1", "--", "ip", "-4", "-o", "addr", "show", "dev", "eth0").stdout
        assert f"inet {pods['api-1']['ip']}/" in shown
        by_name = wait_for("api-1 reaching clusterip-svc by name", lambda: lab.kubectl(
            "exec", "api-1", "--", "curl", "-s", "--max-time", "3", "http://clusterip-svc:5555/",
            check=False).stdout.strip() or None)
        assert by_name in PODS
        exited = lab.kubectl("exec", "api-1", "--", "sh", "-c", "exit 3", check=False)
        assert exited.returncode == 3 and "command terminated with exit code 3" in exited.stderr
        logs = lab.kubectl("logs", "api-1").stdout
        assert f'-> {pods["api-1"]["ip"]}:5000 "GET / HTTP/1.1" 200' in logs, logs[-2000:]

        # The kubelet API is HTTPS with compose/pki's kubelet certificate, and answers only the API
        # server's client certificate (from the docker host, on the compose network).
        kubelet = f"https://{NODE_IPS['node-1']}:10250/pods"
        anonymous = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10",
                                    "--cacert", str(PKI / "ca.crt"), kubelet], check=False, capture_output=True, text=True)
        assert anonymous.stdout != "200", anonymous
        as_apiserver = subprocess.run(["curl", "-sS", "--fail", "--max-time", "10", "--cacert", str(PKI / "ca.crt"),
                                       "--cert", str(PKI / "apiserver-kubelet-client.crt"),
                                       "--key", str(PKI / "apiserver-kubelet-client.key"), kubelet],
                                      check=False, capture_output=True, text=True)
        assert as_apiserver.returncode == 0, as_apiserver.stderr

        # A pod reads the API through the kubernetes Service with its projected token (signed with
        # compose/pki/sa.key), as client-go's in-cluster config does, once RBAC lets its service account read.
        lab.kubectl("create", "rolebinding", "default-view", "--clusterrole=view", "--serviceaccount=default:default")
        _apply(lab, READER)
        phase = wait_for("reader finished", lambda: _finished(lab, "reader"), timeout=120)
        read = lab.kubectl("logs", "reader").stdout
        assert phase == "Succeeded", read
        assert json.loads(read)["metadata"]["name"] == "reader"

        # A node container killed (SIGKILL: no cleanup of its own) and started again: a new network
        # namespace, and its proxy agent programs every Service's rules there again.
        victim = "node-2"
        lab.compose("kill", victim)
        lab.compose("start", victim)
        lab.wait_healthy((victim,))
        wait_for(f"{victim} Ready", lambda: _ready_nodes(lab), timeout=120)
        endpoints = wait_for("clusterip-svc endpoints", lambda: _endpoints(lab, "clusterip-svc"), timeout=120)
        wait_for(f"rules for {len(endpoints)} endpoints in {victim}", lambda: all(
            f"default/clusterip-svc -> {ep}:5000" in lab.exec(victim, "iptables-save", "-t", "nat").stdout
            for ep in endpoints), timeout=90)
        seen = _until_all_seen(f"{cluster_ip}:5555 from {victim} after its restart", lambda: _curl(
            lab, victim, f"http://{cluster_ip}:5555/"), set(PODS))
        assert seen == set(PODS)
        assert _curl(lab, victim, f"http://127.0.0.1:{node_port}/") in PODS


def test_three_member_etcd_keeps_the_api_writable_with_one_member_down(docker: Engine) -> None:
    with up(docker, ETCD3_FILES, ("etcd", "etcd-2", "etcd-3", "apiserver")) as lab:
        members = lab.exec("etcd-2", "etcdctl", "--endpoints=http://127.0.0.1:2379", "member", "list",
                           check=True).stdout
        assert sorted(line.split(", ")[2] for line in members.splitlines()) == ["etcd", "etcd-2", "etcd-3"]
        lab.kubectl("create", "configmap", "before", "--from-literal=k=v")
        lab.compose("stop", "etcd")  # the API server's first --etcd-servers
        wait_for("a write with etcd stopped", lambda: lab.kubectl(
            "create", "configmap", "after", "--from-literal=k=v", check=False).returncode == 0, timeout=90)
        names = {i["metadata"]["name"] for i in lab.kubectl_json("get", "configmaps")["items"]}
        assert {"before", "after"} <= names


def test_ha_lab_keeps_working_with_an_apiserver_and_the_leading_scheduler_killed(docker: Engine) -> None:
    with up(docker, HA_FILES) as lab:
        # Three identity Leases, and the kubernetes Service's endpoints are the three API servers (kube's
        # lease endpoint reconciler): pods' API traffic spreads over them.
        wait_for("three nodes Ready", lambda: _ready_nodes(lab), timeout=240)
        identities = lab.kubectl_json("get", "leases", "-n", "kube-system", "-l", "apiserver.kubernetes.io/identity")
        assert len(identities["items"]) == 3, identities
        # (Until: on a machine loaded enough that a server misses its 10 s master-lease refresh, etcd drops
        # its key after 15 s and the Service lists two for a while, as kube's does.)
        every = sorted(APISERVERS.values())
        wait_for("default/kubernetes lists the three API servers",
                 lambda: _api_endpoints(lab, "apiserver") == every, timeout=180)
        lab.kubectl("apply", "-f", str(REPO / "examples" / "clusterip-svc.yaml"))
        wait_for("three api pods Running", lambda: _running_pods(lab), timeout=120)

        # The API server every component has first in its --server list: SIGKILLed, no goodbye.
        lab.compose("kill", "apiserver")
        # Its master lease expires (15 s) and the survivors drop it from the kubernetes Service.
        wait_for("the killed API server dropped from default/kubernetes",
                 lambda: _api_endpoints(lab, "apiserver-2") == ["10.240.0.8", "10.240.0.9"], timeout=180)
        # A pod created through another API server is scheduled, started and given its endpoint: the
        # scheduler, the controllers and the nodes moved to the next server and their watches resumed.
        _apply(lab, _api_pod("api-4"), via="apiserver-3")
        ready = wait_for("api-4 Running and an endpoint", lambda: _endpoints(lab, "clusterip-svc", 4, via="apiserver-2"),
                         timeout=120)
        assert len(ready) == 4
        # A pod reads the API through the kubernetes Service, which now leads only to live servers.
        lab.kubectl("create", "rolebinding", "default-view", "--clusterrole=view", "--serviceaccount=default:default",
                    via="apiserver-2")
        _apply(lab, READER, via="apiserver-2")
        assert wait_for("reader finished", lambda: _finished(lab, "reader", via="apiserver-3"), timeout=120) == "Succeeded"

        # The leading scheduler killed: the other replica takes the Lease over (15 s + 2 s) and binds.
        lease = lab.kubectl_json("get", "lease", "-n", "kube-system", "kube-scheduler", via="apiserver-2")
        leader_host = lease["spec"]["holderIdentity"].split("_", 1)[0]
        replicas = {s: lab.docker.run(["docker", "inspect", "--format", "{{.Config.Hostname}}", lab.container(s)]
                                      ).stdout.strip() for s in ("scheduler", "scheduler-2")}
        (leader,) = [s for s, host in replicas.items() if host == leader_host]
        lab.compose("kill", leader)
        _apply(lab, _api_pod("api-5"), via="apiserver-2")
        assert len(wait_for("api-5 bound by the other scheduler", lambda: _endpoints(
            lab, "clusterip-svc", 5, via="apiserver-3"), timeout=150)) == 5
        taken = lab.kubectl_json("get", "lease", "-n", "kube-system", "kube-scheduler", via="apiserver-3")
        assert taken["spec"]["holderIdentity"].split("_", 1)[0] == replicas[next(s for s in replicas if s != leader)]

        # The first API server started again: back in the kubernetes Service.
        lab.compose("start", "apiserver")
        lab.wait_healthy(("apiserver",))
        wait_for("default/kubernetes lists the three API servers again",
                 lambda: _api_endpoints(lab, "apiserver") == every, timeout=180)


def _api_pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "api-container"}},
            "spec": {"containers": [{"name": "api", "image": "example/api:1.0", "ports": [{"containerPort": 5000}]}]}}


def _api_endpoints(lab: Project, via: str) -> list[str] | None:
    ep = lab.kubectl_json("get", "endpoints", "kubernetes", via=via)
    ips = sorted(a["ip"] for s in ep.get("subsets") or [] for a in s.get("addresses") or [])
    ports = {p["port"] for s in ep.get("subsets") or [] for p in s.get("ports") or []}
    return ips if ports == {8080} else None


def _apply(lab: Project, manifest: dict[str, Any], *, via: str = "apiserver") -> None:
    argv = ["kubectl", "--kubeconfig", str(KUBECONFIG), "--server", f"https://127.0.0.1:{lab.ports[via]}", "apply",
            "-f", "-"]
    done = subprocess.run(argv, check=False, input=json.dumps(manifest), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def _finished(lab: Project, pod: str, *, via: str = "apiserver") -> str | None:
    phase = lab.kubectl_json("get", "pod", pod, via=via)["status"].get("phase")
    return phase if phase in ("Succeeded", "Failed") else None


def _ready_nodes(lab: Project) -> dict[str, str] | None:
    found = {}
    for node in lab.kubectl_json("get", "nodes")["items"]:
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions", []))
        ip = next((a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"), "")
        if ready:
            found[node["metadata"]["name"]] = ip
    return found if set(found) == set(NODES) else None


def _running_pods(lab: Project) -> dict[str, dict[str, str]] | None:
    items = lab.kubectl_json("get", "pods", "-l", "app=api-container")["items"]
    found = {p["metadata"]["name"]: {"node": p["spec"].get("nodeName", ""), "ip": p["status"].get("podIP", "")}
             for p in items if p["status"].get("phase") == "Running"}
    return found if set(found) == set(PODS) else None


def _endpoints(lab: Project, name: str, count: int = len(PODS), *, via: str = "apiserver") -> list[str] | None:
    ep = lab.kubectl_json("get", "endpoints", name, via=via)
    ips = sorted(a["ip"] for s in ep.get("subsets") or [] for a in s.get("addresses") or [])
    return ips if len(ips) == count else None
