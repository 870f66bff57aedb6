"""The docker-compose lab cluster, checked without Docker: docker-compose.yml must not drift from kubelab.

The real `docker-compose config` validates the file (and docker-compose.etcd3.yml on top of it); then
every service it declares runs as a local process with the file's command, environment, addresses,
capabilities, mounts, published port, healthchecks and start order, each in a network namespace of
its own on an emulated compose network (tests/e2e/composelab.py says how, and what is not emulated).
Against that cluster the first seed's Service scenario runs with the real kubectl through the
published port: three pods Running on the node containers, the Endpoints, kube-proxy's chains in a
node's own iptables, curl to the ClusterIP from a node reaching every pod, and a pod finding the
Service by name through cluster DNS. It needs no Docker; the same file brought up by a
real Docker engine is tests/e2e/test_compose_docker.py.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest
import yaml
from composelab import REPO, ComposeLab, compose_config, parse_port, running
from cryptography import x509
from kubelab_cluster import wait_for

from kubelab.tokenfile import load as load_tokens
from kubeletstub.dataplane import HOST_NETNS_PREFIX
from kubeletstub.netnames import pod_netns_name

pytestmark = pytest.mark.root

COMPOSE_FILE = REPO / "docker-compose.yml"
ETCD3_FILE = REPO / "docker-compose.etcd3.yml"
HA_FILE = REPO / "docker-compose.ha.yml"
KUBECONFIG = REPO / "compose" / "kubeconfig"
MANIFEST = REPO / "examples" / "clusterip-svc.yaml"
NODES = ("node-1", "node-2", "node-3")
PODS = ("api-1", "api-2", "api-3")
# Who each component must authenticate as (compose/tokens.csv).
USERS = {"scheduler": "system:kube-scheduler", "controllers": "system:kube-controller-manager",
         "dns": "system:kube-dns", **{node: f"system:node:{node}" for node in NODES}}


class LabSpace(Protocol):
    prefix: str
    state_dir: Path


def _flag(argv: list[str], name: str) -> str | None:
    for i, word in enumerate(argv):
        if word == name and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith(name + "="):
            return word.partition("=")[2]
    return None


# --- the file, as docker-compose reads it --------------------------------------------------------

@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    return compose_config([COMPOSE_FILE])


def test_compose_file_keeps_the_lab_plan(config: dict[str, Any]) -> None:
    services = config["services"]
    assert {"etcd", "apiserver", "scheduler", "controllers", "dns", *NODES} <= set(services)
    # The API is published on the docker host's loopback only.
    published = [parse_port(p) for p in services["apiserver"].get("ports", [])]
    assert [(ip, host, container) for ip, host, container, _ in published] == [("127.0.0.1", 8080, 8080)]
    assert not [name for name, spec in services.items() if name != "apiserver" and spec.get("ports")]
    # The address plan: node-N at 10.240.0.1N, cluster DNS at 10.240.0.3, on the 10.240.0.0/24 network.
    (network,) = config["networks"].values()
    assert network["ipam"]["config"][0]["subnet"] == "10.240.0.0/24"
    for index, node in enumerate(NODES, start=1):
        assert services[node]["networks"]["lab"]["ipv4_address"] == f"10.240.0.1{index}"
    assert services["dns"]["networks"]["lab"]["ipv4_address"] == "10.240.0.3"
    # Every component presents a token of its own user from the token file the API server reads.
    tokens = load_tokens(REPO / "compose" / "tokens.csv")
    for name, user in USERS.items():
        token = _flag([str(w) for w in services[name]["command"]], "--token")
        assert token in tokens and tokens[token].name == user, f"{name} does not authenticate as {user}"
    # Start order: everything waits for a healthy API server, which waits for a healthy etcd.
    assert services["apiserver"]["depends_on"] == {"etcd": {"condition": "service_healthy"}}
    for name in ("scheduler", "controllers", "dns", *NODES):
        assert services[name]["depends_on"] == {"apiserver": {"condition": "service_healthy"}}, name


def test_one_image_built_once_and_nodes_least_privileged(config: dict[str, Any]) -> None:
    services = config["services"]
    # kubelab:dev is built by one service and run by the others (not built seven times); the base and
    # etcd images are variables whose defaults are the official images (an offline site sets them).
    assert [name for name, spec in services.items() if spec.get("build")] == ["apiserver"]
    assert services["apiserver"]["build"]["args"] == {"BASE_IMAGE": "python:3.11-slim-bookworm"}
    assert {spec["image"] for name, spec in services.items() if name != "etcd"} == {"kubelab:dev"}
    assert services["etcd"]["image"] == "gcr.io/etcd-development/etcd:v3.5.17"
    for node in NODES:
        spec = services[node]
        # Not privileged (a host whose bounding set lacks a capability cannot start it): the
        # capabilities named, and every sysctl the node checks set by Docker, as /proc/sys is read-only.
        assert not spec.get("privileged"), node
        assert set(spec["cap_add"]) == {"NET_ADMIN", "SYS_ADMIN", "NET_RAW"}, node
        sysctls = spec["sysctls"]
        assert sysctls["net.ipv4.conf.all.route_localnet"] == "1", node  # NodePorts on 127.0.0.1
        assert sysctls["net.ipv4.conf.eth0.send_redirects"] == "0", node
        # The kubelet API serves HTTPS with compose/pki's kubelet certificate.
        argv = [str(w) for w in spec["command"]]
        assert _flag(argv, "--tls-cert-file") == "/etc/kubelab/pki/kubelet.crt", node
        assert _flag(argv, "--client-ca-file") == "/etc/kubelab/pki/ca.crt", node
    apiserver = [str(w) for w in services["apiserver"]["command"]]
    assert _flag(apiserver, "--service-account-signing-key-file") == "/etc/kubelab/pki/sa.key"
    assert _flag(apiserver, "--kubelet-client-certificate") == "/etc/kubelab/pki/apiserver-kubelet-client.crt"


def test_three_member_etcd_file_is_valid_on_top() -> None:
    merged = compose_config([COMPOSE_FILE, ETCD3_FILE])
    services = merged["services"]
    assert {"etcd", "etcd-2", "etcd-3"} <= set(services)
    servers = _flag([str(w) for w in services["apiserver"]["command"]], "--etcd-servers")
    assert servers == "http://etcd:2379,http://etcd-2:2379,http://etcd-3:2379"
    assert set(services["apiserver"]["depends_on"]) == {"etcd", "etcd-2", "etcd-3"}


def test_ha_file_gives_three_apiservers_on_three_etcd_members_and_every_component_all_three() -> None:
    merged = compose_config([COMPOSE_FILE, ETCD3_FILE, HA_FILE])
    services = merged["services"]
    apiservers = {"apiserver": "10.240.0.4", "apiserver-2": "10.240.0.8", "apiserver-3": "10.240.0.9"}
    assert {*apiservers, "etcd", "etcd-2", "etcd-3", "scheduler-2", "controllers-2"} <= set(services)
    # Still one image, built once; the API published on loopback only, one port per API server.
    assert [name for name, spec in services.items() if spec.get("build")] == ["apiserver"]
    published = {name: [parse_port(p)[:3] for p in spec.get("ports", [])] for name, spec in services.items()
                 if spec.get("ports")}
    assert published == {"apiserver": [("127.0.0.1", 8080, 8080)], "apiserver-2": [("127.0.0.1", 8081, 8080)],
                         "apiserver-3": [("127.0.0.1", 8082, 8080)]}
    urls = ",".join(f"https://{name}:8080" for name in apiservers)
    for name, address in apiservers.items():
        argv = [str(w) for w in services[name]["command"]]
        assert services[name]["networks"]["lab"]["ipv4_address"] == address
        assert _flag(argv, "--advertise-address") == address  # each is its own endpoint of default/kubernetes
        assert set(_flag(argv, "--etcd-servers").split(",")) == {f"http://{m}:2379" for m in ("etcd", "etcd-2", "etcd-3")}
        assert _flag(argv, "--service-account-signing-key-file") == "/etc/kubelab/pki/sa.key"  # one key for all
        assert set(services[name]["depends_on"]) == {"etcd", "etcd-2", "etcd-3"}
    for name in ("scheduler", "scheduler-2", "controllers", "controllers-2", "dns", *NODES):
        argv = [str(w) for w in services[name]["command"]]
        assert _flag(argv, "--server") == urls, name
        assert {"apiserver", "apiserver-2", "apiserver-3"} <= set(services[name]["depends_on"]), name
        if "scheduler" in name or "controllers" in name:
            assert _flag(argv, "--leader-elect") == "true", name
    # Every name and address a client reaches an API server by is in the one serving certificate.
    cert = x509.load_pem_x509_certificate((REPO / "compose" / "pki" / "apiserver.crt").read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    names = set(sans.get_values_for_type(x509.DNSName)) | {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    assert {*apiservers, *apiservers.values(), "127.0.0.1", "kubernetes.default.svc", "10.96.0.1"} <= names
    # kubectl talks to one server: compose/kubeconfig has a context for each published port.
    config = yaml.safe_load(KUBECONFIG.read_text())
    servers = {c["name"]: c["cluster"]["server"] for c in config["clusters"]}
    assert servers == {"kubelab-compose": "https://127.0.0.1:8080", "kubelab-compose-2": "https://127.0.0.1:8081",
                       "kubelab-compose-3": "https://127.0.0.1:8082"}
    assert {c["context"]["cluster"] for c in config["contexts"]} == set(servers)


def test_invalid_file_is_refused(tmp_path: Path) -> None:
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(COMPOSE_FILE.read_text().replace("condition: service_healthy", "condition: when_ready", 1))
    with pytest.raises(AssertionError, match="refused"):
        compose_config([broken], project_dir=tmp_path)


# --- the cluster, as docker-compose would run it --------------------------------------------------

@pytest.fixture
def cluster(config: dict[str, Any], lab_space: LabSpace, tmp_path: Path) -> Iterator[ComposeLab]:
    def show_logs(lab: ComposeLab) -> None:
        print(lab.logs())

    try:
        with running(config, lab_space.prefix, lab_space.state_dir, tmp_path, on_failure=show_logs) as lab:
            yield lab
            nodes = {node: lab.services[node].proc for node in NODES}
    finally:
        leftovers = _host_mode_leftovers()
        _remove(leftovers)
    # After `down`: each node removed its pods' namespaces itself on SIGTERM, and exited cleanly.
    assert not leftovers, f"left behind by the node containers: {leftovers}"
    for node, proc in nodes.items():
        assert proc is not None and proc.returncode == 0, f"{node} exited with {proc and proc.returncode}"


def _host_mode_leftovers() -> list[str]:
    """Pod namespaces (their mount points under /var/run/netns are visible here, though only mounted in
    the node's own mount namespace), /etc/netns files and pod servers of the nodes' host dataplanes."""
    patterns = [f"{HOST_NETNS_PREFIX}-{node}_*" for node in NODES]
    found = [str(p) for pattern in patterns for base in (Path("/var/run/netns"), Path("/etc/netns"))
             for p in base.glob(pattern)]
    ps = subprocess.run(["ps", "-eo", "pid=,args="], check=False, capture_output=True, text=True).stdout
    found += [f"pid {line.split()[0]}" for line in ps.splitlines()
              if "kubeletstub.podserver" in line and any(f" {HOST_NETNS_PREFIX}-{n}_" in line for n in NODES)]
    return found


def _remove(leftovers: list[str]) -> None:
    for item in leftovers:
        if item.startswith("pid "):
            os.kill(int(item.split()[1]), signal.SIGKILL)
        elif item.startswith("/etc/netns/"):
            shutil.rmtree(item, ignore_errors=True)
        else:
            subprocess.run(["umount", "-l", item], check=False, capture_output=True)
            Path(item).unlink(missing_ok=True)


def kubectl(lab: ComposeLab, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real kubectl with compose/kubeconfig, through the published port (https, token)."""
    server = f"https://127.0.0.1:{lab.published_port('apiserver', 8080)}"
    argv = ["kubectl", "--kubeconfig", str(KUBECONFIG), "--server", server, "--cache-dir", str(tmp_path / "kc"),
            *args]
    done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return done


def kubectl_json(lab: ComposeLab, tmp_path: Path, *args: str) -> Any:
    return json.loads(kubectl(lab, tmp_path, *args, "-o", "json").stdout)


def test_seed_clusterip_service_on_the_compose_cluster(cluster: ComposeLab, tmp_path: Path) -> None:
    nodes = kubectl_json(cluster, tmp_path, "get", "nodes")["items"]
    assert sorted(n["metadata"]["name"] for n in nodes) == list(NODES)
    for node in nodes:  # each registered with its container's address (the lab plan)
        ip = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
        assert ip == cluster.services[node["metadata"]["name"]].ip

    applied = kubectl(cluster, tmp_path, "apply", "-f", str(MANIFEST)).stdout
    assert "service/clusterip-svc created" in applied

    def running_pods() -> dict[str, dict[str, str]]:
        items = kubectl_json(cluster, tmp_path, "get", "pods", "-l", "app=api-container")["items"]
        found = {p["metadata"]["name"]: {"node": p["spec"].get("nodeName", ""), "ip": p["status"].get("podIP", "")}
                 for p in items if p["status"].get("phase") == "Running"}
        return found if set(found) == set(PODS) else {}

    pods = wait_for("three api pods Running", running_pods, timeout=90)
    for name, pod in pods.items():
        assert pod["node"] in NODES, f"{name} is on {pod['node']!r}"
        index = NODES.index(pod["node"]) + 1
        assert ipaddress.ip_address(pod["ip"]) in ipaddress.ip_network(f"10.244.{index}.0/24"), (name, pod)

    pod_ips = {pod["ip"] for pod in pods.values()}

    def endpoints() -> set[str] | None:
        ep = kubectl_json(cluster, tmp_path, "get", "endpoints", "clusterip-svc")
        ips = {a["ip"] for s in ep.get("subsets") or [] for a in s.get("addresses") or []}
        return ips if ips == pod_ips else None

    assert wait_for("Endpoints with the three pod IPs", endpoints) == pod_ips
    cluster_ip = kubectl(cluster, tmp_path, "get", "svc", "clusterip-svc", "-o", "jsonpath={.spec.clusterIP}").stdout

    # kube-proxy's chains, in the node container's own iptables (not rendered: applied there).
    expected = sorted(f"{ip}:5000" for ip in pod_ips)
    for node in NODES:
        def programmed(node: str = node) -> str | None:
            nat = cluster.run_in(node, ["iptables-save", "-t", "nat"], check=True).stdout
            return nat if all(f"default/clusterip-svc -> {ep}" in nat for ep in expected) else None

        nat = wait_for(f"rules for three endpoints in {node}", programmed)
        jump = re.search(r'^-A KUBE-SERVICES .*--comment "default/clusterip-svc cluster IP".* -j (KUBE-SVC-\w+)$',
                         nat, re.MULTILINE)
        assert jump, nat
        dispatch = [line for line in nat.splitlines() if line.startswith(f"-A {jump.group(1)} ") and "-> " in line]
        assert len(dispatch) == 3, dispatch
        assert "--probability 0.33333333349" in dispatch[0] and "--probability 0.50000000000" in dispatch[1]
        assert "statistic" not in dispatch[2]
        seps = [rule.rsplit(" -j ", 1)[1] for rule in dispatch]
        assert len(set(seps)) == 3 and all(sep.startswith("KUBE-SEP-") for sep in seps), dispatch
        for sep, endpoint in zip(seps, expected, strict=True):
            assert re.search(rf"^-A {sep} .*-j DNAT --to-destination {re.escape(endpoint)}$", nat, re.MULTILINE)

    # curl to the ClusterIP from inside node-1's network namespace reaches every pod.
    url = f"http://{cluster_ip}:5555/"
    seen: set[str] = set()

    def all_reached() -> bool:
        done = cluster.run_in("node-1", ["curl", "-s", "--max-time", "3", url])
        seen.add(done.stdout.strip() if done.returncode == 0 else "")
        return set(PODS) <= seen

    wait_for(f"curl {url} from node-1 to reach {PODS}", all_reached, timeout=60, interval=0)
    assert seen - {""} == set(PODS)

    # A pod finds the Service by name: its resolv.conf points at kube-dns (10.96.0.10), which its node
    # DNATs to the dns container (10.240.0.3), whose answer is routed back through the pod's node.
    pod_node = pods["api-1"]["node"]
    pod_netns = pod_netns_name(HOST_NETNS_PREFIX, pod_node, "default/api-1")

    def by_name() -> str | None:
        done = cluster.enter(pod_node, ["ip", "netns", "exec", pod_netns, "curl", "-s", "--max-time", "3",
                                        "http://clusterip-svc:5555/"])
        return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() in PODS else None

    assert wait_for("a pod to reach clusterip-svc by name", by_name) in PODS

    # kubectl exec: the API server container dials the pod's node container's kubelet API (InternalIP:10250)
    # on the compose network, and the command runs in the pod's network namespace there.
    shown = kubectl(cluster, tmp_path, "exec", "api-1", "--", "ip", "-4", "-o", "addr", "show", "dev", "eth0").stdout
    assert f"inet {pods['api-1']['ip']}/" in shown


def test_three_member_etcd_keeps_the_api_serving_with_one_member_down(lab_space: LabSpace, tmp_path: Path) -> None:
    merged = compose_config([COMPOSE_FILE, ETCD3_FILE])
    with running(merged, lab_space.prefix, lab_space.state_dir, tmp_path, services=["apiserver"],
                 on_failure=lambda lab: print(lab.logs())) as lab:
        assert sorted(lab.started) == ["apiserver", "etcd", "etcd-2", "etcd-3"]
        members = lab.run_in("etcd-2", ["/usr/local/bin/etcdctl", "--endpoints=http://127.0.0.1:2379",
                                        "member", "list"], check=True).stdout
        assert sorted(line.split(", ")[2] for line in members.splitlines()) == ["etcd", "etcd-2", "etcd-3"]
        kubectl(lab, tmp_path, "create", "configmap", "before", "--from-literal=k=v")

        # The API server's first etcd goes away: two of three members are a quorum, and the API server
        # moves on to the next server of --etcd-servers.
        lab.stop("etcd")
        wait_for("a write with etcd stopped", lambda: kubectl(
            lab, tmp_path, "create", "configmap", "after", "--from-literal=k=v").returncode == 0, timeout=60)
        names = {i["metadata"]["name"] for i in kubectl_json(lab, tmp_path, "get", "configmaps")["items"]}
        assert {"before", "after"} <= names
