"""The host dataplane (`kubelab node --dataplane host`): the node is the network namespace the process
runs in, as in a node container. Here the "container" is a namespace on a lab network, and the
dataplane runs in a child process started inside it with `ip netns exec`, as Docker would start it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Protocol

import pytest

from kubeletstub.netns import LabNetwork

pytestmark = pytest.mark.root

NODE_IP, POD_CIDR, POD_IP = "10.240.0.11", "10.244.1.0/24", "10.244.1.5"

# Runs inside the "container": adopt it as node-1, add a pod with a server, route node-2's pod CIDR,
# report what is there, and take it all out again.
INSIDE = r"""
import json, subprocess, sys
from kubeletstub.dataplane import open_host_dataplane
from kubeletstub.netlinkops import DataplaneError

state_dir, node_ip, pod_cidr, pod_ip = sys.argv[1:5]
def ip(*args):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=True).stdout
seen = {}
dataplane = open_host_dataplane(state_dir, "node-1", node_ip, pod_cidr)
lab = dataplane.lab
try:
    try:
        lab.add_node("node-1", "10.240.0.99", pod_cidr)
    except DataplaneError as exc:
        seen["wrong_ip"] = str(exc)
    node = lab.add_node("node-1", node_ip, pod_cidr)
    seen["uplink"] = node.uplink
    seen["network"] = str(lab.node_network)
    lab.add_pod("node-1", "default/web-0", pod_ip, ports=[5000])
    lab.sync_node_routes("node-1", {"10.244.2.0/24": "10.240.0.12", pod_cidr: node_ip})
    seen["routes"] = ip("-4", "route")
    seen["answer"] = subprocess.run(["curl", "-s", "--max-time", "5", f"http://{pod_ip}:5000/"],
                                    check=False, capture_output=True, text=True).stdout
    seen["forwarding"] = open("/proc/sys/net/ipv4/ip_forward").read().strip()
    seen["pod_netns"] = lab.pod("node-1", "default/web-0").netns
finally:
    lab.destroy()
seen["links_after"] = ip("-o", "link")
seen["routes_after"] = ip("-4", "route")
print(json.dumps(seen))
"""


class LabSpace(Protocol):
    prefix: str
    state_dir: Path


def test_node_in_the_current_namespace(lab_space: LabSpace, tmp_path: Path) -> None:
    lab = LabNetwork(lab_space.prefix, lab_space.state_dir)
    lab.create()
    try:
        container = lab.add_client("node-1", NODE_IP)
        before = subprocess.run(["ip", "netns", "exec", container, "ip", "-o", "link"], capture_output=True,
                                text=True, check=True).stdout
        done = subprocess.run(["ip", "netns", "exec", container, sys.executable, "-c", INSIDE,
                               str(tmp_path / "state"), NODE_IP, POD_CIDR, POD_IP],
                              check=False, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout)
    finally:
        lab.destroy()

    assert "10.240.0.99 is not an address of this network namespace" in seen["wrong_ip"]
    assert seen["uplink"] == "eth0" and seen["network"] == "10.240.0.0/24"
    # The pod is reached from the node through its routed veth; other nodes' pods via their node.
    assert seen["answer"].strip() == "web-0"
    assert f"{POD_IP} dev veth" in seen["routes"]
    assert "10.244.2.0/24 via 10.240.0.12 dev eth0" in seen["routes"]
    assert POD_CIDR not in seen["routes"]  # its own CIDR is never routed via itself
    assert seen["forwarding"] == "1"
    # Afterwards the namespace is as it was found: no veth, no pod route, no node route, no pod netns.
    assert [line.split()[1] for line in seen["links_after"].splitlines()] == \
        [line.split()[1] for line in before.splitlines()]
    assert "10.244." not in seen["routes_after"]
    listed = subprocess.run(["ip", "netns", "list"], check=False, capture_output=True, text=True).stdout
    assert seen["pod_netns"] not in listed
    assert not Path("/etc/netns", seen["pod_netns"]).exists()
    assert not list((tmp_path / "state").glob("netns-*.json"))
