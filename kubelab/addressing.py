"""The lab's address plan, in one place: who gets which addresses; and the one HOST:PORT parser."""

from __future__ import annotations

import ipaddress

from .validation import is_ascii_digits

SERVICE_CIDR = "10.96.0.0/12"
KUBERNETES_SERVICE_IP = "10.96.0.1"   # the first address of the service CIDR, as kube-apiserver picks it
CLUSTER_DNS_IP = "10.96.0.10"         # the 10th address, as kubeadm picks it
POD_CIDR = "10.244.0.0/16"            # cluster CIDR; each node gets a /24
NODE_CIDR = "10.240.0.0/24"           # the lab network the nodes share (netns dataplane)
NODEPORT_RANGE = (30000, 32767)
CLIENT_IP = "10.240.0.2"              # the "outside" client on the lab network (netns dataplane)
LB_POOL = "172.18.255.200-172.18.255.250"  # LoadBalancer ingress IPs the lab's "cloud" hands out
DNS_SERVER_IP = "10.240.0.3"          # where cluster DNS listens (netns dataplane): kube-dns's endpoint
APISERVER_LAB_IP = "10.240.0.4"       # the API server on the lab network (netns dataplane): what pods reach
                                      # through the kubernetes Service, and where it dials kubelets from
APISERVER_SECURE_PORT = 6443          # kube-apiserver's --secure-port: the kubernetes Service's targetPort
KUBELET_PORT = 10250                  # each kubelet's API (logs, exec, attach, port-forward, stats)
CLUSTER_DOMAIN = "cluster.local"


def node_name(index: int) -> str:
    """Nodes are numbered from 1: node-1, node-2, ..."""
    return f"node-{index}"


def node_ip(index: int) -> str:
    """node-1 is 10.240.0.11, node-2 10.240.0.12, ... (.1-.10 stay free for the lab's own use)."""
    return str(ipaddress.ip_network(NODE_CIDR)[10 + index])


def node_pod_cidr(index: int) -> str:
    """node-N holds 10.244.N.0/24, as kind and flannel lay pod CIDRs out."""
    return str(list(ipaddress.ip_network(POD_CIDR).subnets(new_prefix=24))[index])


def covering_cidr(pool: str) -> str:
    """The smallest CIDR holding a pool given as "FIRST-LAST" or as a CIDR: what routes point at."""
    if "/" in pool:
        return str(ipaddress.ip_network(pool, strict=False))
    first, last = (ipaddress.ip_address(p.strip()) for p in pool.split("-", 1))
    net = ipaddress.ip_network(f"{first}/32")
    while last not in net:
        net = net.supernet()
    return str(net)


def split_host_port(text: str, *, default_host: str) -> tuple[str, int]:
    """"HOST:PORT" (or "[v6]:PORT") -> (host, port); ":PORT" gets `default_host`. A port that is not 0-65535
    in ASCII digits raises ValueError."""
    host, sep, port = text.rpartition(":")
    if not sep or not is_ascii_digits(port) or not 0 <= int(port) <= 65535:
        raise ValueError(f"not HOST:PORT: {text!r}")
    return host.strip("[]") or default_host, int(port)
