"""End to end: the netns dataplane carries real packets between real namespaces (root).

The lab: node-1 (10.240.0.11, pods 10.244.1.0/24) runs web-a and web-b, node-2 (10.240.0.12, pods
10.244.2.0/24) runs web-c. Traffic is real /usr/bin/curl run inside the namespaces; a pod's server
answers with its name, and its X-Client-Address header shows whether anything rewrote the source.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

from kubeletstub.netlinkops import DataplaneError, plain_rtnl
from kubeletstub.netnames import exec_argv
from kubeletstub.netns import LabNetwork
from kubeletstub.netnsstate import cleanup, lookup_netns
from kubeletstub.podprocess import PodProcess, ServedPort, is_pod_process_alive
from kubeletstub.rtnetlink import RT_SCOPE_LINK

pytestmark = pytest.mark.root


class LabSpace(Protocol):
    """What the `lab_space` fixture (conftest.py) provides."""

    prefix: str
    state_dir: Path


NODES = {
    "node-1": ("10.240.0.11", "10.244.1.0/24"),
    "node-2": ("10.240.0.12", "10.244.2.0/24"),
}
PODS: list[tuple[str, str, str, list[ServedPort | int]]] = [
    ("node-1", "default/web-a", "10.244.1.5", [5000]),
    ("node-1", "default/web-b", "10.244.1.6", [5000, 8080]),
    ("node-2", "default/web-c", "10.244.2.5", [5000, ServedPort(5353, "UDP")]),
]


def build_lab(space: LabSpace) -> LabNetwork:
    """The two-node, three-pod lab; nodes and pods are set up from concurrent threads, as the
    kubelet stubs of two nodes would."""
    lab = LabNetwork(space.prefix, space.state_dir)
    lab.create()
    with ThreadPoolExecutor(max_workers=3) as pool:
        list(pool.map(lambda name: lab.add_node(name, *NODES[name]), NODES))
        for name in NODES:
            for other, (ip, cidr) in NODES.items():
                if other != name:
                    lab.add_node_route(name, cidr, ip)
        list(pool.map(lambda pod: lab.add_pod(pod[0], pod[1], pod[2], ports=pod[3]), PODS))
    return lab


@pytest.fixture
def lab(lab_space: LabSpace) -> Iterator[LabNetwork]:
    lab = build_lab(lab_space)
    try:
        yield lab
    finally:
        lab.destroy()


@dataclass(frozen=True)
class Reply:
    body: str
    headers: dict[str, str]

    @property
    def client_ip(self) -> str:
        return self.headers["x-client-address"].rsplit(":", 1)[0]


def curl(netns: str, url: str, *, max_time: float = 5) -> subprocess.CompletedProcess[str]:
    argv = exec_argv(netns, ["curl", "-sS", "--max-time", str(max_time), "-D", "-", url])
    return subprocess.run(argv, capture_output=True, text=True, timeout=max_time + 10, check=False)


def http_get(netns: str, url: str) -> Reply:
    done = curl(netns, url)
    assert done.returncode == 0, f"curl {url} from {netns}: {done.stderr.strip()}"
    head, _, body = done.stdout.partition("\n\n")  # text mode turned the CRLFs into \n
    headers = {}
    for line in head.splitlines()[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Reply(body, headers)


def source_netns(lab: LabNetwork, node: str, pod_key: str | None) -> str:
    return lab.node_netns(node) if pod_key is None else lab.pod_netns(node, pod_key)


def listed_netns() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def root_netns_snapshot() -> tuple[list[str], str, str]:
    """Interfaces (index and name), addresses and routes of the namespace the tests run in."""

    def ip(*args: str) -> str:
        return subprocess.run(["ip", *args], capture_output=True, text=True, check=True).stdout

    # Only index and name of links: an interface's state or qdisc may legitimately change meanwhile.
    links = [" ".join(line.split()[:2]) for line in ip("-o", "link").splitlines()]
    return links, ip("-o", "addr"), ip("route", "show", "table", "all")


def servers(lab: LabNetwork) -> list[PodProcess]:
    return [p.server for p in lab.pods() if p.server is not None]


# source node, source pod (None: the node itself), target, the pod that must answer, the client
# address that pod must see (routing only: nothing on these paths may SNAT)
REACHABILITY = [
    pytest.param("node-1", None, "10.244.1.5:5000", "web-a", "10.244.1.1", id="node-1 to local web-a"),
    pytest.param("node-1", None, "10.244.1.6:5000", "web-b", "10.244.1.1", id="node-1 to local web-b"),
    pytest.param("node-1", None, "10.244.1.6:8080", "web-b", "10.244.1.1", id="second containerPort"),
    pytest.param("node-1", None, "10.244.2.5:5000", "web-c", "10.240.0.11", id="node-1 to web-c on node-2"),
    pytest.param("node-2", None, "10.244.1.5:5000", "web-a", "10.240.0.12", id="node-2 to web-a on node-1"),
    pytest.param("node-1", "default/web-a", "10.244.2.5:5000", "web-c", "10.244.1.5", id="pod to remote pod"),
    pytest.param("node-2", "default/web-c", "10.244.1.6:8080", "web-b", "10.244.2.5", id="remote pod, back"),
    pytest.param("node-1", "default/web-a", "10.244.1.6:5000", "web-b", "10.244.1.5", id="pod to local pod"),
    pytest.param("node-1", "default/web-a", "10.244.1.5:5000", "web-a", "10.244.1.5", id="pod to its own IP"),
]


@pytest.mark.parametrize(("node", "pod_key", "target", "pod_name", "client_ip"), REACHABILITY)
def test_http_reaches_the_right_pod_without_nat(
    lab: LabNetwork, node: str, pod_key: str | None, target: str, pod_name: str, client_ip: str
) -> None:
    reply = http_get(source_netns(lab, node, pod_key), f"http://{target}/")

    assert reply.body == f"{pod_name}\n"
    assert reply.headers["x-pod-name"] == pod_name
    assert reply.client_ip == client_ip


def test_udp_port_answers_with_pod_name(lab: LabNetwork) -> None:
    client = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "s.settimeout(5)\n"
        "s.sendto(b'ping', (sys.argv[1], int(sys.argv[2])))\n"
        "sys.stdout.write(s.recv(100).decode())\n"
    )
    web_a = lab.pod_netns("node-1", "default/web-a")
    argv = exec_argv(web_a, [sys.executable, "-c", client, "10.244.2.5", "5353"])

    done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)

    assert (done.returncode, done.stdout) == (0, "web-c\n"), done.stderr


def test_namespaces_are_wired_as_documented(lab: LabNetwork) -> None:
    node_ns = lookup_netns(lab.state_dir, "node-1")
    pod_ns = lookup_netns(lab.state_dir, "node-1", pod_key="default/web-a")

    def run(netns: str, *cmd: str) -> str:
        return subprocess.run(exec_argv(netns, cmd), capture_output=True, text=True, check=True).stdout

    assert node_ns == f"{lab.prefix}-node-1"
    assert pod_ns == f"{lab.prefix}-node-1_default_web-a"
    assert run(node_ns, "cat", "/proc/sys/net/ipv4/ip_forward") == "1\n"
    assert "10.240.0.11/24" in run(node_ns, "ip", "-4", "-o", "addr", "show", "dev", "eth0")
    assert lab.node_routes("node-1") == {"10.244.2.0/24": "10.240.0.12"}
    assert "10.244.1.5/32" in run(pod_ns, "ip", "-4", "-o", "addr", "show", "dev", "eth0")
    assert run(pod_ns, "ip", "route", "show", "default").startswith("default via 10.244.1.1 dev eth0")
    # No default route in a node: nothing can leave the lab through it.
    assert run(node_ns, "ip", "route", "show", "default") == ""


def test_node_routes_follow_sync(lab: LabNetwork) -> None:
    lab.sync_node_routes("node-1", {})

    unrouted = curl(lab.node_netns("node-1"), "http://10.244.2.5:5000/", max_time=3)
    assert unrouted.returncode != 0
    assert lab.node_routes("node-1") == {}

    # Every node's route, node-1's own included, as a kubelet that watches all Nodes would pass them.
    lab.sync_node_routes("node-1", {cidr: ip for ip, cidr in NODES.values()})

    assert lab.node_routes("node-1") == {"10.244.2.0/24": "10.240.0.12"}

    assert http_get(lab.node_netns("node-1"), "http://10.244.2.5:5000/").body == "web-c\n"


def test_removing_a_pod_keeps_its_neighbours_and_it_can_come_back(lab: LabNetwork) -> None:
    web_b = lab.pod("node-1", "default/web-b")
    assert web_b is not None and web_b.server is not None

    lab.remove_pod("node-1", "default/web-b")
    lab.remove_pod("node-1", "default/web-b")  # idempotent

    assert not is_pod_process_alive(web_b.server)
    assert web_b.netns not in listed_netns()
    assert curl(lab.node_netns("node-1"), "http://10.244.1.6:5000/", max_time=2).returncode != 0
    # web-a's veth still carries the shared gateway address, so web-a is still reachable.
    assert http_get(lab.node_netns("node-1"), "http://10.244.1.5:5000/").body == "web-a\n"
    assert http_get(lab.pod_netns("node-1", "default/web-a"), "http://10.244.2.5:5000/").body == "web-c\n"

    lab.add_pod("node-1", "default/web-b", "10.244.1.6", ports=[5000])

    assert http_get(lab.node_netns("node-2"), "http://10.244.1.6:5000/").body == "web-b\n"


def test_the_state_file_follows_each_pod_as_it_goes_and_comes_back(lab: LabNetwork) -> None:
    def recorded() -> dict[str, dict[str, Any]]:
        return {pod["key"]: pod for pod in json.loads(lab.state_path.read_text())["pods"]}

    assert sorted(recorded()) == ["default/web-a", "default/web-b", "default/web-c"]
    lab.remove_pod("node-1", "default/web-b")
    assert sorted(recorded()) == ["default/web-a", "default/web-c"]
    with pytest.raises(DataplaneError, match="no pod default/web-b on node node-1"):
        lookup_netns(lab.state_dir, "node-1", pod_key="default/web-b", prefix=lab.prefix)

    lab.add_pod("node-1", "default/web-b", "10.244.1.6", ports=[5000])

    again = lab.pod("node-1", "default/web-b")
    assert again is not None and again.server is not None
    assert recorded()["default/web-b"]["server"]["pid"] == again.server.pid  # the new process, not the old
    assert lookup_netns(lab.state_dir, "node-1", pod_key="default/web-b", prefix=lab.prefix) == again.netns
    web_a = lab.pod("node-1", "default/web-a")
    assert web_a is not None and recorded()["default/web-a"] == web_a.to_json()


def test_pods_set_up_at_once_are_each_on_disk_when_their_setup_returns(lab: LabNetwork) -> None:
    """Threads that change the lab at once share the state file's writes (one writes the newest state
    for all that wait), yet each pod's setup returns only once the file holds it, and each removal only
    once the file has let it go; a destroy leaves no file behind."""
    def recorded() -> set[str]:
        return {pod["key"] for pod in json.loads(lab.state_path.read_text())["pods"]}

    pods = [(node, f"default/many-{node}-{i}", f"{prefix}.{20 + i}")
            for node, prefix in (("node-1", "10.244.1"), ("node-2", "10.244.2")) for i in range(12)]

    def add(pod: tuple[str, str, str]) -> bool:
        lab.add_pod(*pod)
        return pod[1] in recorded()

    def remove(pod: tuple[str, str, str]) -> bool:
        lab.remove_pod(pod[0], pod[1])
        return pod[1] not in recorded()

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert all(pool.map(add, pods))
        assert recorded() >= {key for _, key, _ in pods}
        namespaces = set(json.loads(lab.state_path.read_text())["namespaces"])
        assert {lab.pod_netns(node, key) for node, key, _ in pods} <= namespaces
        assert all(pool.map(remove, pods[::2]))
    assert recorded() == {"default/web-a", "default/web-b", "default/web-c"} | {key for _, key, _ in pods[1::2]}
    lab.destroy()
    assert not lab.state_path.exists()


def test_a_refused_netlink_request_raises_the_kernels_error(lab: LabNetwork) -> None:
    web_a = lab.pod("node-1", "default/web-a")
    assert web_a is not None
    with plain_rtnl(lab.node_netns("node-1")) as nl:
        with pytest.raises(OSError) as missing:
            nl.link_index("no-such-veth")
        assert missing.value.errno == errno.ENODEV
        host = nl.link_index(web_a.host_ifname)
        with pytest.raises(FileExistsError):  # the pod's route is there already
            nl.add_route(f"{web_a.ip}/32", oif=host, scope=RT_SCOPE_LINK)
    assert http_get(lab.node_netns("node-1"), "http://10.244.1.5:5000/").body == "web-a\n"


def test_removing_a_node_takes_its_pods_and_bridge_port(lab: LabNetwork) -> None:
    node_2 = lab.node_netns("node-2")
    web_c = lab.pod("node-2", "default/web-c")
    assert web_c is not None and web_c.server is not None

    lab.remove_node("node-2")
    lab.remove_node("node-2")  # idempotent

    assert {node_2, web_c.netns} & listed_netns() == set()
    assert not is_pod_process_alive(web_c.server)
    assert sorted(p.key for p in lab.pods()) == ["default/web-a", "default/web-b"]
    bridge_ports = subprocess.run(
        exec_argv(lab.lab_netns, ["ip", "-o", "link", "show", "master", "lab0"]),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "ln-node-1" in bridge_ports and "ln-node-2" not in bridge_ports
    assert http_get(lab.node_netns("node-1"), "http://10.244.1.6:5000/").body == "web-b\n"


def test_adding_again_returns_what_exists(lab: LabNetwork) -> None:
    web_a = lab.pod("node-1", "default/web-a")

    assert lab.add_node("node-1", *NODES["node-1"]) in lab.nodes()
    assert lab.add_pod("node-1", "default/web-a", "10.244.1.5", ports=[5000]) == web_a
    with pytest.raises(DataplaneError, match="exists on node-1 with IP 10.244.1.5"):
        lab.add_pod("node-1", "default/web-a", "10.244.1.7", ports=[5000])
    with pytest.raises(DataplaneError, match="already runs on node node-1"):
        lab.add_pod("node-2", "default/web-a", "10.244.2.7", ports=[5000])


def test_bad_requests_change_nothing(lab: LabNetwork) -> None:
    def ours() -> set[str]:
        return {name for name in listed_netns() if name.startswith(f"{lab.prefix}-")}

    before = ours()

    with pytest.raises(ValueError, match="not usable"):
        lab.add_pod("node-1", "default/web-x", "10.244.1.1", ports=[5000])  # the gateway
    with pytest.raises(ValueError, match="not usable"):
        lab.add_pod("node-1", "default/web-x", "10.244.2.9", ports=[5000])  # node-2's CIDR
    with pytest.raises(DataplaneError, match="already used by pod default/web-a"):
        lab.add_pod("node-1", "default/web-x", "10.244.1.5", ports=[5000])
    with pytest.raises(DataplaneError, match="overlaps"):
        lab.add_node("node-3", "10.240.0.13", "10.244.1.0/24")
    with pytest.raises(DataplaneError, match="not listening after"):
        lab.add_pod("node-1", "default/web-x", "10.244.1.9", ports=[5000], timeout=0.001)

    assert ours() == before
    assert {p.key for p in lab.pods()} == {"default/web-a", "default/web-b", "default/web-c"}


def test_destroy_removes_every_namespace_and_process_and_leaves_root_untouched(lab_space: LabSpace) -> None:
    root_before = root_netns_snapshot()
    lab = build_lab(lab_space)
    created = {lab.lab_netns} | {n.netns for n in lab.nodes()} | {p.netns for p in lab.pods()}
    started = servers(lab)
    assert len(created) == 6 and created <= listed_netns()
    assert len(started) == 3 and all(is_pod_process_alive(s) for s in started)

    lab.destroy()
    lab.destroy()  # idempotent

    assert created & listed_netns() == set()
    assert [s.pid for s in started if is_pod_process_alive(s)] == []
    assert not lab.state_path.exists()
    assert root_netns_snapshot() == root_before


def test_cleanup_removes_a_lab_abandoned_without_destroy(lab_space: LabSpace) -> None:
    lab = build_lab(lab_space)
    created = {lab.lab_netns} | {n.netns for n in lab.nodes()} | {p.netns for p in lab.pods()}
    started = servers(lab)
    del lab  # the owner forgets about it: no destroy()

    report = cleanup(lab_space.state_dir)

    assert set(report.removed_netns) == created
    assert sorted(report.stopped_pids) == sorted(s.pid for s in started)
    assert created & listed_netns() == set()
    assert [s.pid for s in started if is_pod_process_alive(s)] == []
    assert list(lab_space.state_dir.iterdir()) == []


CRASHING_OWNER = """
import json, sys
from kubeletstub.netns import LabNetwork
lab = LabNetwork(sys.argv[1], sys.argv[2])
lab.create()
lab.add_node("node-1", "10.240.0.11", "10.244.1.0/24")
lab.add_node("node-2", "10.240.0.12", "10.244.2.0/24")
lab.add_pod("node-1", "default/web-a", "10.244.1.5", ports=[5000])
lab.add_pod("node-2", "default/web-c", "10.244.2.5", ports=[5000])
print(json.dumps({
    "netns": [lab.lab_netns] + [n.netns for n in lab.nodes()] + [p.netns for p in lab.pods()],
    "servers": [p.server.to_json() for p in lab.pods()],
}), flush=True)
sys.stdin.read()  # wait to be killed
"""


def test_cleanup_after_the_owner_crashed(lab_space: LabSpace) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", CRASHING_OWNER, lab_space.prefix, str(lab_space.state_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as owner:
        try:
            assert owner.stdout is not None
            created = json.loads(owner.stdout.readline())
            started = [PodProcess.from_json(s) for s in created["servers"]]
            # While the owner lives, its lab is not a leftover.
            assert cleanup(lab_space.state_dir).skipped_prefixes == [lab_space.prefix]
            assert set(created["netns"]) <= listed_netns()
        finally:
            os.kill(owner.pid, signal.SIGKILL)

    # The pod servers notice their parent's death and exit by themselves...
    deadline = time.monotonic() + 10
    while any(is_pod_process_alive(s) for s in started) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [s.pid for s in started if is_pod_process_alive(s)] == []
    # ...but the namespaces outlive the crash until cleanup, from a process that has only the file.
    assert set(created["netns"]) <= listed_netns()

    report = cleanup(lab_space.state_dir)

    assert set(report.removed_netns) == set(created["netns"])
    assert set(created["netns"]) & listed_netns() == set()
    assert list(lab_space.state_dir.iterdir()) == []


# A kube-proxy-shaped ruleset (KUBE-SVC -> KUBE-SEP, hairpin MARK, MASQUERADE on the mark) for a
# ClusterIP 10.96.0.10:80 whose one endpoint is web-a (10.244.1.5:5000) on node-1.
SERVICE_RULES = """*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:TEST-SVC - [0:0]
:TEST-SEP - [0:0]
-A PREROUTING -j TEST-SVC
-A OUTPUT -j TEST-SVC
-A TEST-SVC -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j TEST-SEP
{hairpin}-A TEST-SEP -p tcp -m tcp -j DNAT --to-destination 10.244.1.5:5000
-A POSTROUTING -m mark --mark 0x4000/0x4000 -j MASQUERADE
COMMIT
"""
HAIRPIN_MARK = "-A TEST-SEP -s 10.244.1.5/32 -j MARK --set-xmark 0x4000/0x4000\n"


def restore_rules(netns: str, payload: str) -> None:
    argv = exec_argv(netns, ["iptables-restore"])
    done = subprocess.run(argv, input=payload, capture_output=True, text=True, timeout=20, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("node", "pod_key", "body", "client_ip"),
    [
        pytest.param("node-1", "default/web-b", "web-a\n", "10.244.1.6", id="pod on the endpoint's node"),
        pytest.param("node-1", None, "web-a\n", "10.240.0.11", id="the node itself, via nat OUTPUT"),
        pytest.param("node-1", "default/web-a", "web-a\n", "10.244.1.1", id="hairpin, masqueraded"),
    ],
)
def test_cluster_ip_dnat_in_the_node_namespace(
    lab: LabNetwork, node: str, pod_key: str | None, body: str, client_ip: str
) -> None:
    restore_rules(lab.node_netns("node-1"), SERVICE_RULES.format(hairpin=HAIRPIN_MARK))

    reply = http_get(source_netns(lab, node, pod_key), "http://10.96.0.10/")

    assert (reply.body, reply.client_ip) == (body, client_ip)


def test_hairpin_without_masquerade_is_dropped_by_the_pod(lab: LabNetwork) -> None:
    # Why kube-proxy marks hairpin traffic for masquerade: the DNATed packet would reach web-a
    # with web-a's own IP as source, which its kernel drops as a martian.
    restore_rules(lab.node_netns("node-1"), SERVICE_RULES.format(hairpin=""))

    done = curl(lab.pod_netns("node-1", "default/web-a"), "http://10.96.0.10/", max_time=2)

    assert done.returncode == 28, done.stderr  # curl: operation timed out
