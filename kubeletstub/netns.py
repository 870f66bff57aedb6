"""The netns dataplane: a network namespace per simulated node and per pod, wired like a real cluster.

Owns namespaces, veths, the lab bridge, addresses, routes, the sysctls they need, and the JSON state
file from which a later process removes whatever a crashed owner left behind. Pod *processes* are
started and stopped through `kubeletstub.podprocess`; iptables rules belong to the proxy agent.

Topology, for a lab with prefix ``kl-3fa2`` (the address plan of kubelab/addressing.py)::

    kl-3fa2-lab                     bridge lab0 = the node network 10.240.0.0/24 (no address)
      ln-node-1 ---------------.    one bridge port per node (veth peer of the node's eth0)
    kl-3fa2-node-1              |   eth0 10.240.0.11/24; ip_forward=1; rp_filter=2 (loose)
      10.244.2.0/24 via 10.240.0.12 dev eth0      other nodes' pod CIDRs (flannel host-gw)
      10.96.0.0/12 dev eth0 scope link            service CIDR, see _build_node
      veth<hash> 10.244.1.1/32                    one routed veth per pod (ptp CNI style)
      10.244.1.5 dev veth<hash> scope link        /32 route per local pod
    kl-3fa2-node-1_default_web-0    eth0 10.244.1.5/32, 10.244.1.1 dev eth0 scope link,
                                    default via 10.244.1.1 dev eth0; lo up

A lab may instead have the *current* network namespace as its one node (``current_netns=True``,
``kubelab node --dataplane host``): a node container on a shared network, as in the docker-compose lab.
There is no lab namespace and no bridge; the node's uplink is whichever interface holds its IP (eth0 in
a container), its network is that interface's subnet, and everything else is the same: pods are
namespaces wired to the current one with the same routed veths, other nodes' pod CIDRs are routed via
their IPs on the uplink, and the sysctls below are set here. Only pods' namespaces and veths, and the
node routes, are the lab's; the current namespace and its interfaces are left as they were found.

Nothing is created in the caller's own (root) network namespace: veths are created inside a node
namespace with their peer placed directly in the lab or pod namespace, so no interface ever exists
in the root namespace, not even for a moment. Only the namespace mounts under /var/run/netns live
outside our namespaces, and that is what creating a named namespace means.

Why routed, and why no proxy_arp: each pod has a /32 address and reaches everything through the
gateway 10.244.<i>.1, which is a real address (a /32 on every host-side veth of the node, as the
ptp CNI plugin does). The pod therefore only ever ARPs for an address the node really owns, and the
node only ARPs a pod for the pod's own address; no proxy_arp is needed. Pod-to-pod traffic on one
node is routed (in on one veth, out another), so ip_forward=1 is enough and iptables in the node
namespace sees every packet, exactly what kube-proxy's rules need.

The names of namespaces and interfaces are `netnames.py`'s; the netlink and sysctl primitives
`netlinkops.py`'s (a pod's veth, addresses and routes `rtnetlink.py`'s, on a plain netlink socket);
the records of what a lab made, its state file and the crash cleanup `netnsstate.py`'s.

Threads: every method blocks (netlink, process start-up) and must run off the event loop, e.g. via
``asyncio.to_thread``; never on the event loop's own thread, because pyroute2's synchronous API runs
a private event loop. Calls about different nodes run in parallel; calls about the same node (its
pods and routes) are serialized by a per-node lock. ``create`` and ``destroy`` must not overlap
other calls.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Self

from kubelab import addressing
from kubeletstub.podprocess import (
    PodProcess,
    PodProcessError,
    ServedPort,
    process_start_time,
    start_pod_process,
    stop_pod_process,
    stop_pod_processes,
    stop_zygote,
)

from .netlinkops import (
    NETNS_ETC_FILES,
    DataplaneError,
    NetnsExists,
    create_netns_in_thread,
    delete_link,
    delete_route,
    gateway_routes,
    interface_holding,
    link_index,
    netns_fd,
    plain_rtnl,
    remove_netns,
    remove_netns_etc,
    rtnl,
    set_up,
    translated,
    write_netns_etc,
    write_sysctls,
)
from .netnames import (
    LAB_BRIDGE,
    NODE_IFNAME,
    POD_IFNAME,
    exec_argv,
    lab_netns_name,
    lab_port_name,
    node_netns_name,
    pod_host_ifname,
    pod_netns_name,
    split_pod_key,
    validate_node_name,
    validate_prefix,
)
from .netnsstate import (
    STATE_VERSION,
    NodeNet,
    PodNet,
    lab_log_dir,
    remove_state_file,
    state_file_path,
    teardown_state,
)
from .rtnetlink import LOOPBACK_INDEX, RT_SCOPE_LINK

log = logging.getLogger(__name__)


class _StateLock:
    """The lock of a lab's state. A change made under it (changed()) reaches the state file once the lock
    is released, before the thread that made it goes on: the write-ahead the namespaces rely on. The file
    is written outside the lock every pod's setup takes, and writes coalesce: a thread that finds a state
    at least as new as its change already written writes nothing, so threads that change the state at once
    do not queue on the file one write each (BENCHMARKS.md, "The lab's state file")."""

    def __init__(self, write: Callable[[int], None]) -> None:
        self._lock = threading.Lock()
        self._write = write  # write(generation): the file holds that generation or a newer one after it
        self._owed = threading.local()  # .generation: this thread's newest change, not yet written
        self.generation = 0  # counts changes; read and bumped under the lock

    def __enter__(self) -> None:
        self._lock.acquire()

    def __exit__(self, *_exc: object) -> None:
        owed: int | None = getattr(self._owed, "generation", None)
        self._owed.generation = None
        self._lock.release()
        if owed is not None:
            self._write(owed)

    def changed(self) -> None:
        """The state changed (the caller holds the lock): write the file when the lock is released."""
        self.generation += 1
        self._owed.generation = self.generation


# Sysctls of a node namespace, written before its interfaces exist so that conf/default applies to
# all of them.
#  - ip_forward: the node routes between its pods' veths and eth0.
#  - rp_filter: a new namespace copies net.ipv4.conf.{all,default} from the root namespace
#    (net.core.devconf_inherit_init_net=0), so without this the lab would behave differently on a
#    host with strict rp_filter. Our routes are symmetric, so strict (1) would pass too; we pick
#    loose (2), the systemd default most Kubernetes nodes run with. 0 would also work but would let
#    a node accept packets from sources it has no route back to, hiding a missing node route.
_NODE_SYSCTLS: Mapping[str, str] = {
    "net/ipv4/ip_forward": "1",
    "net/ipv4/conf/all/rp_filter": "2",
    "net/ipv4/conf/default/rp_filter": "2",
    # A client that routes service traffic through a node would otherwise get ICMP redirects, and
    # Linux then rate-limits the port-unreachable a REJECT rule sends back (kube-proxy's "has no
    # endpoints" rules would look like timeouts instead of refusals).
    "net/ipv4/conf/all/send_redirects": "0",
    "net/ipv4/conf/default/send_redirects": "0",
}


class LabNetwork:
    """One cluster's namespaces. ``create()`` first, ``destroy()`` last (or use ``with``).

    With ``current_netns=True`` the lab has no namespace of its own: its single node is the network
    namespace this process runs in (see the module docstring), and `node_network` is taken from the
    interface that holds the node's IP.
    """

    def __init__(
        self,
        prefix: str,
        state_dir: str | os.PathLike[str],
        *,
        node_network: str = addressing.NODE_CIDR,
        service_cidr: str = addressing.SERVICE_CIDR,
        local_routes: Sequence[str] = (),
        current_netns: bool = False,
    ) -> None:
        validate_prefix(prefix)
        self.current_netns = current_netns
        self.prefix = prefix
        self.state_dir = Path(state_dir)
        self.node_network = ipaddress.IPv4Network(node_network)
        self.service_cidr = ipaddress.IPv4Network(service_cidr)
        # More virtual ranges a node must route out of eth0 for nat OUTPUT to see them (LoadBalancer IPs).
        self.local_routes = tuple(ipaddress.IPv4Network(r) for r in local_routes)
        self.lab_netns = lab_netns_name(prefix)  # not created when current_netns
        self.state_path = state_file_path(self.state_dir, prefix)
        self.log_dir = lab_log_dir(self.state_dir, prefix)
        self._state_lock = _StateLock(self._write_state)
        self._write_lock = threading.Lock()  # one state file writer at a time; taken before _state_lock
        self._written = 0  # the _state_lock.generation the state file holds
        self._node_locks: dict[str, threading.Lock] = {}
        self._created = False
        self._closing = False  # destroy() has begun
        # Recorded *before* creation, in creation order (a dict: ordered, and O(1) to look up or drop).
        self._namespaces: dict[str, None] = {}
        self._nodes: dict[str, NodeNet] = {}
        self._pending_nodes: dict[str, NodeNet] = {}
        self._pods: dict[tuple[str, str], PodNet] = {}  # changed through _put_pod and _drop_pod only
        # Indexes of _pods, so that a new pod's checks do not walk every pod: key -> node, and the pod IP ->
        # key of each pod with a network of its own (hostNetwork pods share their node's IP).
        self._pod_nodes: dict[str, str] = {}
        self._pod_ips: dict[str, str] = {}
        # The owner recorded in the state file, (pid, start time): read from /proc once per process, not
        # on each of the two saves per pod (reading it was half the cost of a save in the density profile).
        self._owner: tuple[int, int | None] | None = None
        # Each pod's line of the state file, made once per PodNet (frozen: a change is a new object).
        self._pod_lines: dict[tuple[str, str], tuple[PodNet, str]] = {}

    def __enter__(self) -> Self:
        self.create()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.destroy()

    # names

    def node_netns(self, node: str) -> str:
        return node_netns_name(self.prefix, node)

    def pod_netns(self, node: str, pod_key: str) -> str:
        return pod_netns_name(self.prefix, node, pod_key)

    exec_argv = staticmethod(exec_argv)

    # lifecycle

    def create(self) -> None:
        """Create the lab namespace and its bridge (not with current_netns), and start the state file."""
        with self._state_lock:
            if self._created:
                return
            if self.state_path.exists():
                raise DataplaneError(
                    f"{self.state_path} exists: a lab with prefix {self.prefix!r} is running or was left"
                    f" behind by a crash; run cleanup({str(self.state_dir)!r}) first"
                )
            self.state_dir.mkdir(parents=True, exist_ok=True)
            self.log_dir.mkdir(parents=True, exist_ok=True)
            self._created = True
            if self.current_netns:
                self._state_lock.changed()
                return
            self._record_namespace(self.lab_netns)
        try:
            with self._undo_namespace_on_error(self.lab_netns), translated(f"create lab {self.prefix}"):
                self._create_netns(self.lab_netns)
                with rtnl(self.lab_netns) as ipr:
                    set_up(ipr, "lo")
                    ipr.link("add", ifname=LAB_BRIDGE, kind="bridge")
                    set_up(ipr, LAB_BRIDGE)
        except BaseException:
            with self._write_lock:  # no write of a change made before this one recreates the file
                with self._state_lock:
                    self._created = False
                remove_state_file(self.state_path, self.log_dir)
            raise

    def destroy(self) -> None:
        """Stop every pod process, delete every namespace, remove the state file. Idempotent."""
        with self._state_lock:
            if not self._created:
                return
            # From here on nothing new is added; what is being added now (a pod server starting, on a
            # thread the cancelled kubelet no longer waits for) finishes first, so that it is in the
            # state torn down below instead of being left behind.
            self._closing = True
            in_flight = list(self._node_locks.values())
        for lock in in_flight:
            with lock:
                pass
        with self._state_lock:
            nodes = list(self._nodes)
        if self.current_netns:
            # The namespace stays, so take out what we put into it: pods (their host veths at once,
            # not whenever the kernel frees the pod namespace) and node routes. Their servers first,
            # all together (what remove_node would do one pod at a time); a failure is reported below.
            with self._state_lock:
                servers = [p.server for p in self._pods.values() if p.server is not None]
            with contextlib.suppress(OSError, PodProcessError):
                stop_pod_processes(servers)
            for node in nodes:
                try:
                    self.remove_node(node)
                except DataplaneError:
                    log.exception("could not take node %s out of this network namespace", node)
        with self._state_lock:
            state = self._state_json()
        teardown_state(state)
        with self._write_lock:  # as in create(): no later write brings the file back
            remove_state_file(self.state_path, self.log_dir)
            with self._state_lock:
                self._created = False
                self._closing = False
                self._namespaces.clear()
                self._nodes.clear()
                self._pods.clear()
                self._pod_nodes.clear()
                self._pod_ips.clear()
        stop_zygote()  # the parent its pod servers were forked from (they are stopped by now)

    # nodes

    def add_node(self, name: str, ip: str, pod_cidr: str) -> NodeNet:
        """Create node `name` with address `ip` on the lab network and pods from `pod_cidr`.

        Idempotent for identical arguments; raises DataplaneError if the node exists with other ones
        or if the IP, CIDR or names collide with another node's. With current_netns, the node is the
        current namespace: `ip` must already be an address of one of its interfaces.
        """
        validate_node_name(name)
        if self.current_netns:
            return self._adopt_current_netns(name, ip, pod_cidr)
        node_ip = ipaddress.IPv4Address(ip)
        if node_ip not in self.node_network or node_ip in (
            self.node_network.network_address,
            self.node_network.broadcast_address,
        ):
            raise ValueError(f"node IP {ip} is not a host address of the node network {self.node_network}")
        cidr = ipaddress.IPv4Network(pod_cidr)
        if cidr.prefixlen > 30:
            raise ValueError(f"pod CIDR {pod_cidr} is too small")
        netns = self.node_netns(name)
        node = NodeNet(
            name=name,
            netns=netns,
            ip=str(node_ip),
            prefixlen=self.node_network.prefixlen,
            pod_cidr=str(cidr),
            gateway=str(cidr.network_address + 1),
            lab_port=lab_port_name(name),
        )
        with self._node_lock(name):
            with self._state_lock:
                self._require_created()
                existing = self._nodes.get(name)
                if existing is not None:
                    if existing == node:
                        return existing
                    raise DataplaneError(f"node {name} exists with different addresses: {existing}")
                self._check_node_conflicts(node)
                self._pending_nodes[name] = node
                self._record_namespace(netns)
            try:
                with self._undo_namespace_on_error(netns):
                    self._create_netns(netns)
                    try:
                        self._build_node(node)
                    except BaseException:
                        # Takes the bridge port with it now, not whenever the kernel gets round to
                        # cleaning up the namespace, so a retry does not trip over it.
                        with contextlib.suppress(Exception):
                            delete_link(node.netns, NODE_IFNAME)
                        raise
                with self._state_lock:
                    self._nodes[name] = node
                    self._state_lock.changed()
            finally:
                with self._state_lock:
                    self._pending_nodes.pop(name, None)
        return node

    def _adopt_current_netns(self, name: str, ip: str, pod_cidr: str) -> NodeNet:
        cidr = ipaddress.IPv4Network(pod_cidr)
        if cidr.prefixlen > 30:
            raise ValueError(f"pod CIDR {pod_cidr} is too small")
        with self._node_lock(name):
            with self._state_lock:
                self._require_created()
                others = [n for n in self._nodes.values() if n.name != name]
            if others:
                raise DataplaneError(f"this network namespace is already node {others[0].name}")
            with translated(f"adopt this network namespace as node {name}"), rtnl(None) as ipr:
                uplink, prefixlen = interface_holding(ipr, ip)
            node = NodeNet(name=name, netns=None, ip=str(ipaddress.IPv4Address(ip)), prefixlen=prefixlen,
                           pod_cidr=str(cidr), gateway=str(cidr.network_address + 1), lab_port="", uplink=uplink)
            with self._state_lock:
                existing = self._nodes.get(name)
                if existing is not None:
                    if existing == node:
                        return existing
                    raise DataplaneError(f"node {name} exists with different addresses: {existing}")
            with translated(f"set up node {name}"):
                # conf/<uplink>: the interface existed before conf/default changed; send_redirects is
                # or-ed with conf/all, so the uplink's own value must go too.
                write_sysctls(None, {**_NODE_SYSCTLS, f"net/ipv4/conf/{uplink}/send_redirects": "0"})
            with self._state_lock:
                self.node_network = ipaddress.IPv4Network(f"{node.ip}/{prefixlen}", strict=False)
                self._nodes[name] = node
                self._state_lock.changed()
        return node

    def add_client(
        self, name: str, ip: str, *, routes: Mapping[str, str] | None = None, etc: Mapping[str, str] | None = None
    ) -> str:
        """An "outside" host on the lab network (no kubelet, no kube-proxy): what a client of a
        NodePort or LoadBalancer Service looks like. `routes` maps CIDRs to a gateway on the lab
        network (e.g. a LoadBalancer pool via a node, as a cloud load balancer would forward);
        `etc` maps ``hosts`` and ``resolv.conf`` to their text for /etc/netns/<namespace>/, which
        `ip netns exec` bind-mounts over /etc. Returns the namespace name. Idempotent."""
        validate_node_name(name)
        unknown = set(etc or {}) - set(NETNS_ETC_FILES)
        if unknown:
            raise ValueError(f"only {', '.join(NETNS_ETC_FILES)} can be given for /etc/netns, not {sorted(unknown)}")
        if self.current_netns:
            raise DataplaneError("a lab in the current network namespace has no lab network for clients")
        netns = f"{self.prefix}-{name}"
        client_ip = ipaddress.IPv4Address(ip)
        if client_ip not in self.node_network:
            raise ValueError(f"client IP {ip} is not on the node network {self.node_network}")
        with self._state_lock:
            self._require_created()
            if netns in self._namespaces:
                return netns
            if any(n.ip == ip for n in self._nodes.values()):
                raise DataplaneError(f"client IP {ip} is a node's address")
            self._record_namespace(netns)
        port = lab_port_name(name)
        with self._undo_namespace_on_error(netns), translated(f"set up client {name}"):
            self._create_netns(netns)
            with netns_fd(self.lab_netns) as lab_fd, rtnl(netns) as ipr:
                set_up(ipr, "lo")
                ipr.link("add", ifname=NODE_IFNAME, kind="veth", peer={"ifname": port, "net_ns_fd": lab_fd})
                eth0 = link_index(ipr, NODE_IFNAME)
                ipr.addr("add", index=eth0, address=ip, prefixlen=self.node_network.prefixlen)
                ipr.link("set", index=eth0, state="up")
                for cidr, via in (routes or {}).items():
                    ipr.route("add", dst=cidr, gateway=via, oif=eth0)
            with rtnl(self.lab_netns) as ipr:
                ipr.link("set", index=link_index(ipr, port), master=link_index(ipr, LAB_BRIDGE), state="up")
            for filename, text in (etc or {}).items():
                write_netns_etc(netns, filename, text)
        return netns

    def remove_node(self, name: str) -> None:
        """Remove node `name`, its pods and its bridge port. Idempotent.

        Other nodes keep their route to its pod CIDR until `remove_node_route` is called for them.
        """
        with self._node_lock(name):
            with self._state_lock:
                node = self._nodes.get(name)
                pods = [p for (n, _), p in self._pods.items() if n == name]
            if node is None:
                return
            for pod in pods:
                self._remove_pod_locked(pod)
            if node.netns is None:
                # The current namespace and its uplink are not ours; the node routes are.
                with translated(f"remove node {name}"), rtnl(None) as ipr:
                    uplink = link_index(ipr, node.uplink)
                    for dst in gateway_routes(ipr, uplink):
                        delete_route(ipr, ipaddress.IPv4Network(dst), uplink)
                with self._state_lock:
                    del self._nodes[name]
                    self._state_lock.changed()
                return
            with translated(f"remove node {name}"):
                # Deleting eth0 deletes its peer, the bridge port, at once; deleting the namespace
                # alone would leave that to the kernel's asynchronous namespace cleanup.
                delete_link(node.netns, NODE_IFNAME)
                remove_netns(node.netns)
            with self._state_lock:
                del self._nodes[name]
                self._forget_namespace(node.netns)

    def nodes(self) -> list[NodeNet]:
        with self._state_lock:
            return list(self._nodes.values())

    # node routes (flannel host-gw: a peer node's pod CIDR via that node's IP)

    def add_node_route(self, node: str, pod_cidr: str, via_ip: str) -> None:
        """Route `pod_cidr` via `via_ip` (another node) in `node`'s namespace. Idempotent (replace)."""
        with self._node_lock(node):
            me = self._node(node)
            dst, via = self._check_node_route(me, pod_cidr, via_ip)
            with translated(f"add route {dst} via {via} on {node}"), rtnl(me.netns) as ipr:
                ipr.route("replace", dst=str(dst), gateway=str(via), oif=link_index(ipr, me.uplink))

    def remove_node_route(self, node: str, pod_cidr: str) -> None:
        """Remove the route to `pod_cidr` from `node`'s namespace. Idempotent."""
        with self._node_lock(node):
            me = self._node(node)
            dst = ipaddress.IPv4Network(pod_cidr)
            with translated(f"remove route {dst} on {node}"), rtnl(me.netns) as ipr:
                delete_route(ipr, dst, link_index(ipr, me.uplink))

    def node_routes(self, node: str) -> dict[str, str]:
        """The node routes installed in `node`'s namespace: pod CIDR -> via IP."""
        with self._node_lock(node):
            me = self._node(node)
            with translated(f"list routes on {node}"), rtnl(me.netns) as ipr:
                return gateway_routes(ipr, link_index(ipr, me.uplink))

    def sync_node_routes(self, node: str, routes: Mapping[str, str]) -> None:
        """Make `node`'s node routes exactly `routes` (pod CIDR -> via IP), changing only differences.

        The node's own entry (its pod CIDR via its own IP) is ignored, so a caller may pass the
        routes of every Node it knows, itself included.
        """
        with self._node_lock(node):
            me = self._node(node)
            own = (ipaddress.IPv4Network(me.pod_cidr), ipaddress.IPv4Address(me.ip))
            others = {
                cidr: via
                for cidr, via in routes.items()
                if (ipaddress.IPv4Network(cidr), ipaddress.IPv4Address(via)) != own
            }
            checked = (self._check_node_route(me, cidr, via) for cidr, via in others.items())
            desired = {str(dst): str(via) for dst, via in checked}
            with translated(f"sync routes on {node}"), rtnl(me.netns) as ipr:
                eth0 = link_index(ipr, me.uplink)
                current = gateway_routes(ipr, eth0)
                for dst in current.keys() - desired.keys():
                    delete_route(ipr, ipaddress.IPv4Network(dst), eth0)
                for dst, via in desired.items():
                    if current.get(dst) != via:
                        ipr.route("replace", dst=dst, gateway=via, oif=eth0)

    # pods

    def add_pod(
        self,
        node: str,
        pod_key: str,
        pod_ip: str,
        *,
        ports: Sequence[ServedPort | int] = (),
        timeout: float = 10.0,
        resolv_conf: str | None = None,
        request_log: str | None = None,
    ) -> PodNet:
        """Create pod `pod_key` ("namespace/name") on `node` with `pod_ip` from the node's pod CIDR.

        With `ports`, also start the pod's server on them and return once they all listen (no ports:
        network only). With `resolv_conf`, write it to /etc/netns/<pod netns>/resolv.conf, which `ip netns
        exec` bind-mounts over /etc/resolv.conf for everything run in the pod. Idempotent for an existing
        pod with the same IP; on failure nothing is left.
        """
        _, pod_name = split_pod_key(pod_key)
        served = tuple(p if isinstance(p, ServedPort) else ServedPort(p) for p in ports)
        with self._node_lock(node):
            with self._state_lock:
                self._require_created()
                me = self._nodes.get(node)
                if me is None:
                    raise DataplaneError(f"unknown node {node}")
                ip = self._check_pod_ip(me, pod_key, pod_ip)
                existing = self._pods.get((node, pod_key))
                if existing is not None:
                    if existing.ip == ip:
                        return existing
                    raise DataplaneError(f"pod {pod_key} exists on {node} with IP {existing.ip}, not {ip}")
                pod = PodNet(
                    node=node,
                    key=pod_key,
                    netns=self.pod_netns(node, pod_key),
                    ip=ip,
                    gateway=me.gateway,
                    host_ifname=pod_host_ifname(node, pod_key),
                )
                self._record_namespace(pod.netns)
            with self._undo_namespace_on_error(pod.netns):
                self._create_netns(pod.netns)
                server: PodProcess | None = None
                try:
                    self._wire_pod(me, pod)
                    if resolv_conf is not None:
                        write_netns_etc(pod.netns, "resolv.conf", resolv_conf)
                    if served:
                        log_path = self.log_dir / f"{pod.netns}.log"
                        with translated(f"start pod {pod_key}"):
                            server = start_pod_process(
                                pod.netns, pod_name, served, pod_ip=ip, log_path=log_path, timeout=timeout,
                                request_log=request_log,
                            )
                        pod = replace(pod, server=server)
                    with self._state_lock:
                        self._put_pod(pod)
                        self._state_lock.changed()
                except BaseException:
                    with self._state_lock:
                        self._drop_pod(node, pod_key)
                    with contextlib.suppress(Exception):
                        if server is not None:
                            stop_pod_process(server)
                    with contextlib.suppress(Exception):
                        delete_link(me.netns, pod.host_ifname)
                    remove_netns_etc(pod.netns)
                    raise
        return pod

    def add_host_network_pod(
        self,
        node: str,
        pod_key: str,
        *,
        ports: Sequence[ServedPort | int] = (),
        timeout: float = 10.0,
        request_log: str | None = None,
    ) -> PodNet:
        """A hostNetwork pod on `node`: no namespace, veth or route of its own (kubelet gives it no
        sandbox network); its server, with `ports`, listens in the node's namespace, on the node's
        addresses. Idempotent; on failure nothing is left."""
        _, pod_name = split_pod_key(pod_key)
        served = tuple(p if isinstance(p, ServedPort) else ServedPort(p) for p in ports)
        with self._node_lock(node):
            with self._state_lock:
                self._require_created()
                me = self._nodes.get(node)
                if me is None:
                    raise DataplaneError(f"unknown node {node}")
                existing = self._pods.get((node, pod_key))
                if existing is not None:
                    if existing.host_network:
                        return existing
                    raise DataplaneError(f"pod {pod_key} exists on {node} with a network of its own")
            pod = PodNet(node=node, key=pod_key, netns=me.netns or "", ip=me.ip, gateway="", host_ifname="",
                         host_network=True)
            if served:
                log_path = self.log_dir / f"{self.pod_netns(node, pod_key)}.log"
                with translated(f"start pod {pod_key}"):
                    server = start_pod_process(pod.netns or None, pod_name, served, pod_ip=me.ip, log_path=log_path,
                                               timeout=timeout, request_log=request_log)
                pod = replace(pod, server=server)
            try:
                with self._state_lock:
                    self._put_pod(pod)
                    self._state_lock.changed()
            except BaseException:
                with self._state_lock:
                    self._drop_pod(node, pod_key)
                if pod.server is not None:
                    with contextlib.suppress(Exception):
                        stop_pod_process(pod.server)
                raise
        return pod

    def remove_pod(self, node: str, pod_key: str) -> None:
        """Stop the pod's server and remove its namespace, veth and route. Idempotent."""
        with self._node_lock(node):
            with self._state_lock:
                pod = self._pods.get((node, pod_key))
            if pod is not None:
                self._remove_pod_locked(pod)

    def pod(self, node: str, pod_key: str) -> PodNet | None:
        with self._state_lock:
            return self._pods.get((node, pod_key))

    def pods(self, node: str | None = None) -> list[PodNet]:
        with self._state_lock:
            return [p for (n, _), p in self._pods.items() if node is None or n == node]

    # internals: building

    def _build_node(self, node: NodeNet) -> None:
        with translated(f"set up node {node.name}"):
            write_sysctls(node.netns, _NODE_SYSCTLS)
            with netns_fd(self.lab_netns) as lab_fd, rtnl(node.netns) as ipr:
                set_up(ipr, "lo")
                # Created here with the peer born in the lab namespace: no interface ever appears in
                # the root namespace.
                peer = {"ifname": node.lab_port, "net_ns_fd": lab_fd}
                ipr.link("add", ifname=NODE_IFNAME, kind="veth", peer=peer)
                eth0 = link_index(ipr, NODE_IFNAME)
                ipr.addr("add", index=eth0, address=node.ip, prefixlen=node.prefixlen)
                ipr.link("set", index=eth0, state="up")
                # Locally generated packets are routed *before* the nat OUTPUT chain DNATs them, so
                # without a route to the service CIDR `curl <ClusterIP>` from a node fails with
                # ENETUNREACH before kube-proxy's rules are even consulted (real nodes have a default
                # route). Undeliverable service traffic ARPs on the lab network and dies there.
                ipr.route("add", dst=str(self.service_cidr), oif=eth0, scope=RT_SCOPE_LINK)
                for extra in self.local_routes:
                    ipr.route("add", dst=str(extra), oif=eth0, scope=RT_SCOPE_LINK)
            with rtnl(self.lab_netns) as ipr:
                ipr.link("set", index=link_index(ipr, node.lab_port), master=link_index(ipr, LAB_BRIDGE), state="up")

    def _wire_pod(self, node: NodeNet, pod: PodNet) -> None:
        with translated(f"set up pod {pod.key} on {node.name}"):
            # Plain netlink (rtnetlink.py), not pyroute2: this runs for every pod.
            with netns_fd(pod.netns) as pod_fd, plain_rtnl(node.netns) as nl:
                nl.add_veth(pod.host_ifname, POD_IFNAME, pod_fd)
                host = nl.link_index(pod.host_ifname)
                # The same gateway /32 on every pod veth of the node (ptp CNI): each pod ARPs for an
                # address that really exists on its link.
                nl.add_address(host, pod.gateway, 32)
                nl.set_up(host)
                nl.add_route(f"{pod.ip}/32", oif=host, scope=RT_SCOPE_LINK)
            with plain_rtnl(pod.netns) as nl:
                nl.set_up(LOOPBACK_INDEX)
                eth0 = nl.link_index(POD_IFNAME)
                nl.add_address(eth0, pod.ip, 32)
                nl.set_up(eth0)
                nl.add_route(f"{pod.gateway}/32", oif=eth0, scope=RT_SCOPE_LINK)
                nl.add_route("0.0.0.0/0", oif=eth0, gateway=pod.gateway)

    def _remove_pod_locked(self, pod: PodNet) -> None:
        node = self._node(pod.node)
        with translated(f"remove pod {pod.key} from {pod.node}"):
            if pod.server is not None:
                stop_pod_process(pod.server)
        if pod.host_network:  # the node's namespace is not the pod's to remove
            with self._state_lock:
                self._drop_pod(pod.node, pod.key)
                self._state_lock.changed()
            if pod.server is not None and pod.server.log_path is not None:
                Path(pod.server.log_path).unlink(missing_ok=True)
            return
        with translated(f"remove pod {pod.key} from {pod.node}"):
            # Deleting the host end deletes the pod's eth0, the /32 route and that veth's copy of the
            # gateway address synchronously, so the same pod can be re-added at once.
            delete_link(node.netns, pod.host_ifname)
            remove_netns(pod.netns)
            remove_netns_etc(pod.netns)
        with self._state_lock:
            self._drop_pod(pod.node, pod.key)
            self._forget_namespace(pod.netns)
        if pod.server is not None and pod.server.log_path is not None:
            Path(pod.server.log_path).unlink(missing_ok=True)

    def _create_netns(self, name: str) -> None:
        try:
            create_netns_in_thread(name)
        except FileExistsError:
            raise NetnsExists(
                f"network namespace {name} already exists and is not ours (is another lab using prefix"
                f" {self.prefix!r}?)"
            ) from None
        except OSError as exc:
            raise DataplaneError(f"create network namespace {name}: {exc}") from exc

    @contextlib.contextmanager
    def _undo_namespace_on_error(self, name: str) -> Iterator[None]:
        try:
            yield
        except NetnsExists:
            with self._state_lock:
                self._forget_namespace(name)
            raise
        except BaseException:
            try:
                remove_netns(name)
            except OSError:
                log.exception("could not remove network namespace %s after a failed setup", name)
            else:
                with self._state_lock:
                    self._forget_namespace(name)
            raise

    # internals: validation

    def _check_node_conflicts(self, node: NodeNet) -> None:
        cidr = ipaddress.IPv4Network(node.pod_cidr)
        for other in (*self._nodes.values(), *self._pending_nodes.values()):
            if other.ip == node.ip:
                raise DataplaneError(f"node IP {node.ip} is already used by node {other.name}")
            if cidr.overlaps(ipaddress.IPv4Network(other.pod_cidr)):
                raise DataplaneError(f"pod CIDR {cidr} overlaps {other.pod_cidr} of node {other.name}")
            if other.netns == node.netns or other.lab_port == node.lab_port:
                raise DataplaneError(f"node {node.name} would reuse the names of node {other.name}")

    def _check_node_route(
        self, me: NodeNet, pod_cidr: str, via_ip: str
    ) -> tuple[ipaddress.IPv4Network, ipaddress.IPv4Address]:
        dst = ipaddress.IPv4Network(pod_cidr)
        via = ipaddress.IPv4Address(via_ip)
        if dst.overlaps(ipaddress.IPv4Network(me.pod_cidr)):
            raise ValueError(f"{dst} overlaps node {me.name}'s own pod CIDR {me.pod_cidr}")
        if via not in self.node_network or str(via) == me.ip:
            raise ValueError(f"next hop {via} is not another node on {self.node_network}")
        return dst, via

    def _check_pod_ip(self, node: NodeNet, pod_key: str, pod_ip: str) -> str:
        ip = ipaddress.IPv4Address(pod_ip)
        cidr = ipaddress.IPv4Network(node.pod_cidr)
        if ip not in cidr or ip in (cidr.network_address, cidr.broadcast_address) or str(ip) == node.gateway:
            raise ValueError(
                f"pod IP {ip} is not usable in {node.name}'s pod CIDR {cidr} (the gateway is {node.gateway})"
            )
        elsewhere = self._pod_nodes.get(pod_key)
        if elsewhere is not None and elsewhere != node.name:
            raise DataplaneError(f"pod {pod_key} already runs on node {elsewhere}")
        holder = self._pod_ips.get(str(ip))
        if holder is not None and holder != pod_key:
            raise DataplaneError(f"pod IP {ip} is already used by pod {holder}")
        return str(ip)

    def _put_pod(self, pod: PodNet) -> None:
        self._pods[(pod.node, pod.key)] = pod
        self._pod_nodes[pod.key] = pod.node
        if not pod.host_network:
            self._pod_ips[pod.ip] = pod.key

    def _drop_pod(self, node: str, pod_key: str) -> None:
        pod = self._pods.pop((node, pod_key), None)
        if pod is None:
            return
        if self._pod_nodes.get(pod_key) == node:
            del self._pod_nodes[pod_key]
        if not pod.host_network and self._pod_ips.get(pod.ip) == pod_key:
            del self._pod_ips[pod.ip]

    def _require_created(self) -> None:
        if self._closing:
            raise DataplaneError(f"lab {self.prefix} is being removed")
        if not self._created:
            raise DataplaneError(f"lab {self.prefix} is not created (call create() first)")

    def _node(self, name: str) -> NodeNet:
        with self._state_lock:
            node = self._nodes.get(name)
        if node is None:
            raise DataplaneError(f"unknown node {name}")
        return node

    def _node_lock(self, name: str) -> threading.Lock:
        with self._state_lock:
            return self._node_locks.setdefault(name, threading.Lock())

    # internals: state file (callers hold _state_lock; _state_lock writes the file when they release it)

    def _record_namespace(self, name: str) -> None:
        # Write-ahead: the name is on disk before the namespace exists, so a crash at any point
        # leaves nothing that cleanup() cannot find.
        self._namespaces[name] = None
        self._state_lock.changed()

    def _forget_namespace(self, name: str) -> None:
        self._namespaces.pop(name, None)
        if self._created:
            self._state_lock.changed()

    def _state_json(self, *, pods: bool = True) -> dict[str, Any]:
        pid = os.getpid()
        if self._owner is None or self._owner[0] != pid:
            self._owner = (pid, process_start_time(pid))
        return {
            "version": STATE_VERSION,
            "prefix": self.prefix,
            "owner": {"pid": pid, "startTime": self._owner[1]},
            "labNetns": None if self.current_netns else self.lab_netns,
            "logDir": str(self.log_dir),
            "namespaces": list(self._namespaces),
            "nodes": [n.to_json() for n in self._nodes.values()],
            **({"pods": [p.to_json() for p in self._pods.values()]} if pods else {}),
        }

    def _state_text(self) -> str:
        """_state_json as the state file holds it: a pod a line, each line made once. The file is written
        twice per pod, and encoding the whole state each time (indented, so by json's Python encoder) made
        a 1,000-pod rollout quadratic: 58 % of the pods' setup threads' time, holding the GIL the event
        loop needs (BENCHMARKS.md, "The lab's state file")."""
        lines = self._pod_lines
        for key in lines.keys() - self._pods.keys():
            del lines[key]
        for key, pod in self._pods.items():
            if key not in lines or lines[key][0] is not pod:
                lines[key] = (pod, json.dumps(pod.to_json(), sort_keys=True))
        head = self._state_json(pods=False)
        head_text = json.dumps(head, sort_keys=True)  # without indent: json's C encoder
        pods = ",\n".join(lines[key][1] for key in self._pods)
        return f'{head_text[:-1]}, "pods": [\n{pods}\n]}}\n'

    def _write_state(self, generation: int) -> None:
        """The state file as of `generation` or newer (called by _state_lock on release, not holding it)."""
        with self._write_lock:
            if self._written >= generation:
                return  # another thread wrote a newer state since
            with self._state_lock:
                if not self._created:
                    return  # destroyed, or its create failed: the file is gone and stays gone
                newest = self._state_lock.generation
                text = self._state_text()
            tmp = self.state_path.with_name(f".{self.state_path.name}.tmp")
            tmp.write_text(text)
            os.replace(tmp, self.state_path)  # atomic: a reader never sees half a file
            self._written = newest
