"""The `kubelab` argument parser: one sub-command per component (components.py), `up` (upcommand.py) and
the tools (tools.py, proxyrender.py). Defaults come from defaults.py, shared flags and value types from
flags.py."""

from __future__ import annotations

import argparse
from typing import Any

from kubelab import __version__, addressing

from . import defaults
from .components import cmd_apiserver, cmd_controllers, cmd_dns, cmd_node, cmd_scheduler
from .flags import (
    CONTROLLERS_BIND_ADDRESS,
    DELTA_SYNC_HELP,
    PROXY_MODE_HELP,
    SCHEDULER_BIND_ADDRESS,
    SERVER_HELP,
    add_authorization_mode_flag,
    add_event_ttl_flag,
    add_listen_flag,
    add_serving_flags,
    add_token_auth_file_flag,
    descriptor,
    etcd_tls_args,
    flag_bool,
    host_port,
    leader_election_args,
    positive,
    token_args,
)
from .proxyrender import cmd_proxy_render
from .tools import (
    cmd_exec,
    cmd_explain,
    cmd_iptables,
    cmd_nftables,
    cmd_pause_resume,
    cmd_status,
    cmd_trace,
    cmd_ui,
)
from .upcommand import cmd_up

DEFAULT_DATA_DIR = defaults.DATA_DIR


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubelab", description="A Kubernetes control plane in miniature: "
                                     "apply -> etcd -> watch -> iptables -> packets, for real, on one machine.")
    parser.add_argument("--version", action="version", version=f"kubelab {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    _add_up(sub)
    _add_apiserver(sub)
    _add_scheduler_and_controllers(sub)
    _add_node(sub)
    _add_dns(sub)
    _add_cluster_tools(sub)
    _add_proxy_tools(sub)
    return parser


def _add_up(sub: Any) -> None:
    """`kubelab up`: the whole cluster, one command."""
    p = sub.add_parser("up", help="run the whole cluster (one command, one Ctrl-C)",
                       description="Run etcd (private unless --etcd-servers), the API server, scheduler, controllers "
                                   "and N nodes (kubelet stub + proxy agent): the API server and the scheduler each "
                                   "in a child process of its own (restarted if it exits), everything else in this "
                                   "process, so two cores are used (--one-process: all in this one); the nodes' rules "
                                   "are written at nice "
                                   f"{defaults.UP_RULES_NICE} (iptables-restore, iptables-save, nft), the control plane "
                                   "first. Writes <data-dir>/kubeconfig. Ctrl-C stops everything and removes what it "
                                   "created.")
    p.add_argument("--nodes", type=int, default=defaults.NODES, help=f"number of nodes (default {defaults.NODES})")
    add_listen_flag(p, f"API server address (default {defaults.LISTEN})")
    p.add_argument("--etcd-servers", help="use this etcd (URL[,URL]) instead of starting a private one")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="state directory (default .kubelab)")
    p.add_argument("--dataplane", choices=["render", "netns"],
                   help="netns: a network namespace per node and pod, real iptables and traffic, containers in "
                        "the pod's namespaces (root); render: rules are rendered, not applied, and containers' "
                        "commands run as plain processes on this host, without pod network, hostname or volumes "
                        "(default: netns as root, render otherwise)")
    p.add_argument("--min-sync-period", type=float, default=defaults.MIN_SYNC_PERIOD,
                   help="proxy agents sync at most twice per this many seconds (kube-proxy: 1s)")
    p.add_argument("--delta-sync", action="store_true", help=DELTA_SYNC_HELP)
    p.add_argument("--proxy-mode", choices=defaults.PROXY_MODES, default=defaults.PROXY_MODE, help=PROXY_MODE_HELP)
    p.add_argument("--node-cpu", default=defaults.NODE_CPU, help="each node's cpu capacity and allocatable (default 4)")
    p.add_argument("--node-memory", default=defaults.NODE_MEMORY, help="each node's memory capacity and allocatable (default 8Gi)")
    p.add_argument("--node-max-pods", type=int, default=defaults.NODE_MAX_PODS, help="each node's pods capacity (default 110)")
    p.add_argument("--node-monitor-grace-period", type=float, default=defaults.NODE_MONITOR_GRACE_PERIOD,
                   help="seconds without a heartbeat before a node turns Ready=Unknown (kube: 50)")
    p.add_argument("--lb-pool", default=defaults.LB_POOL,
                   help=f"addresses LoadBalancer Services get, FIRST-LAST or a CIDR (default {addressing.LB_POOL}; "
                        "'' turns the LoadBalancer controller off)")
    add_token_auth_file_flag(p, "require bearer tokens from this CSV (token,user,uid[,\"group1,group2\"]); tokens for "
                                "kubelab's own components and an admin are added to it when missing, and the admin's "
                                "goes into the kubeconfig. The API then serves HTTPS (kubectl sends tokens only over "
                                "TLS) with a CA and certificate made in <data-dir>/pki; the kubeconfig carries the CA")
    add_authorization_mode_flag(p)
    add_event_ttl_flag(p, "how long the API server keeps an event after its last write (default 1h)")
    p.add_argument("--apiservers", type=positive, default=1, metavar="N",
                   help="run N API servers on the one etcd (cluster): the first at --listen (up's own), the "
                        "others as `kubelab apiserver` processes on the next ports, started again when they exit "
                        "(at once, then the kubelet's back-off: 10 s doubling to 5 min) on the same port; all are "
                        "endpoints of the kubernetes Service, the kubeconfig names the first, `kubelab status` "
                        "shows them all (default 1)")
    p.add_argument("--one-process", action="store_true",
                   help="run the API server and the scheduler in this process too, the components' requests handed "
                        "to the API server without a socket (one core; for debugging or a py-spy of everything at "
                        "once). Default: the API server and the scheduler in child processes, the components "
                        "reaching the API server on a private unix socket")
    p.add_argument("--etcd-members", type=positive, default=1, metavar="M",
                   help="the private etcd as a cluster of M members (3 keeps working with one down; default 1)")
    add_serving_flags(p)
    etcd_tls_args(p)
    p.set_defaults(func=cmd_up)


def _add_apiserver(sub: Any) -> None:
    """`kubelab apiserver`: kube-apiserver's flags that kubelab serves."""
    p = sub.add_parser("apiserver", help="run only the API server")
    p.add_argument("--etcd-servers", required=True, help="etcd URL[,URL]")
    add_listen_flag(p, f"address to serve on (default {defaults.LISTEN})")
    p.add_argument("--listen-fd", type=descriptor, metavar="FD",
                   help="serve on this inherited descriptor, a TCP socket already bound at --listen's address (it "
                        "is listened on once the server is ready), as systemd's socket activation hands one over; "
                        "`kubelab up --apiservers N` starts its further API servers so, on the same port at each "
                        "restart")
    p.add_argument("--advertise-address", help="IP the kubernetes Service's endpoints point at")
    p.add_argument("--tls-cert-file", metavar="FILE",
                   help="serve HTTPS with this certificate (PEM, with its chain); kubectl sends tokens only over TLS")
    p.add_argument("--tls-private-key-file", metavar="FILE", help="the private key of --tls-cert-file (PEM)")
    add_token_auth_file_flag(p, "kube-apiserver's static token file (token,user,uid[,\"group1,group2\"]): requests "
                                "must carry `Authorization: Bearer <token>`; users system:node:<name> in group "
                                "system:nodes may write only what their kubelet needs; anonymous requests reach "
                                "/healthz, /livez, /readyz and /version only. Without it the API is open to whoever "
                                "can reach it")
    add_authorization_mode_flag(p)
    add_event_ttl_flag(p, "how long an event is kept after its last write (kube-apiserver's --event-ttl; default 1h; "
                          "e.g. 30m, 90s)")
    p.add_argument("--service-account-signing-key-file", metavar="FILE",
                   help="a P-256 private key (PEM) that signs service account tokens (TokenRequest, pods' projected "
                        "tokens) and checks them; give every API server of a cluster the same one. Without it "
                        "tokens are signed with a key that dies with the process")
    p.add_argument("--disable-admission-plugins", metavar="LIST", default="",
                   help="admission plugins to turn off: ServiceAccount (pods are then admitted without a service "
                        "account or a token volume, for an API server that runs without `kubelab controllers`)")
    add_serving_flags(p)
    etcd_tls_args(p)
    p.add_argument("--kubelet-client-certificate", metavar="FILE",
                   help="dial kubelets (exec, logs, port-forward) over TLS with this client certificate")
    p.add_argument("--kubelet-client-key", metavar="FILE", help="the private key of --kubelet-client-certificate")
    p.add_argument("--kubelet-certificate-authority", metavar="FILE",
                   help="the CA kubelets' serving certificates must chain to (default: not checked, as kube)")
    p.add_argument("--endpoint-reconciler-type", choices=defaults.ENDPOINT_RECONCILER_TYPES,
                   default=defaults.ENDPOINT_RECONCILER_TYPE,
                   help="lease: this server is an endpoint of the kubernetes Service while its master lease (15 s) "
                        "lives; none: it leaves the Service's endpoints alone (default lease, as kube)")
    p.add_argument("--identity-hostname", metavar="NAME",
                   help="the hostname this server's identity Lease is named after (default: this machine's; "
                        "several API servers on one machine each need their own)")
    p.set_defaults(func=cmd_apiserver)


def _add_scheduler_and_controllers(sub: Any) -> None:
    """`kubelab scheduler` and `kubelab controllers`: API clients with leader election."""
    for name, func, text in (("scheduler", cmd_scheduler, "run only the scheduler"),
                             ("controllers", cmd_controllers, ("run only the controllers (endpoints, endpointslice, node "
                                                              "lifecycle, namespace, replicaset, deployment, garbage "
                                                              "collector, pod garbage collector, loadbalancer, "
                                                              "serviceaccounts, root CA publisher, ...)"))):
        p = sub.add_parser(name, help=text)
        p.add_argument("--server", default=defaults.SERVER, help=SERVER_HELP)
        token_args(p)
        default_bind = SCHEDULER_BIND_ADDRESS if name == "scheduler" else CONTROLLERS_BIND_ADDRESS
        leader_election_args(p, "kube-scheduler" if name == "scheduler" else "kube-controller-manager")
        p.add_argument("--metrics-bind-address", default=default_bind, metavar="HOST:PORT",
                       help=f"serve Prometheus /metrics here, plain HTTP (default {default_bind}, kube-"
                            f"{'scheduler' if name == 'scheduler' else 'controller-manager'}'s port; empty: off)")
        if name == "scheduler":
            p.add_argument("--scoring", choices=defaults.SCORING_STRATEGIES, default=defaults.SCORING,
                           help="NodeResourcesFit scoring strategy (default LeastAllocated)")
        else:
            p.add_argument("--node-monitor-grace-period", type=float, default=defaults.NODE_MONITOR_GRACE_PERIOD,
                           help="seconds without a heartbeat before a node turns Ready=Unknown (kube: 50)")
            p.add_argument("--lb-pool", default=defaults.LB_POOL,
                           help="addresses LoadBalancer Services get ('' turns the controller off)")
            p.add_argument("--root-ca-file", metavar="FILE",
                           help="the CA (PEM) of the API server's serving certificate, published in every "
                                "namespace as ConfigMap kube-root-ca.crt for pods (kube-controller-manager's "
                                "--root-ca-file; without it no such ConfigMap is made)")
            p.add_argument("--service-account-private-key-file", metavar="FILE",
                           help="the API server's service account signing key (P-256, PEM): the token controller "
                                "signs the tokens of kubernetes.io/service-account-token Secrets with it "
                                "(kube-controller-manager's flag; without it such Secrets are not filled)")
            p.add_argument("--terminated-pod-gc-threshold", type=int, default=defaults.TERMINATED_POD_GC_THRESHOLD, metavar="N",
                           help="terminated pods the pod garbage collector keeps before it deletes the oldest "
                                "(kube's default 12500; 0 or less: never). Pods on deleted nodes and unscheduled "
                                "terminating pods are collected whatever it is")
        p.set_defaults(func=func)


def _add_node(sub: Any) -> None:
    """`kubelab node`: a kubelet stub and a proxy agent."""
    p = sub.add_parser("node", help="run one node: kubelet stub + proxy agent")
    p.add_argument("--name", required=True, help="node name")
    p.add_argument("--server", default=defaults.SERVER, help=SERVER_HELP)
    token_args(p)
    p.add_argument("--index", type=int, default=1, help="node number N: IP 10.240.0.(10+N), pods 10.244.N.0/24")
    p.add_argument("--node-ip", help="InternalIP (default from --index)")
    p.add_argument("--pod-cidr", help="pod CIDR (default from --index)")
    p.add_argument("--cpu", default=defaults.NODE_CPU)
    p.add_argument("--memory", default=defaults.NODE_MEMORY)
    p.add_argument("--max-pods", type=int, default=defaults.NODE_MAX_PODS)
    p.add_argument("--cluster-cidr", default=addressing.POD_CIDR)
    p.add_argument("--iptables", action="store_true", help="apply rules with iptables-restore in this network "
                                                           "namespace (default: render only)")
    p.add_argument("--dataplane", choices=["render", "host"], default="render",
                   help="render: no pod network; containers' commands run as plain processes here (default); host: this network namespace is the node "
                        "(a node container): each pod gets a namespace and a routed veth here, other nodes' pod "
                        "CIDRs are routed via their InternalIPs, and pods are removed on exit (root; pair it with "
                        "--iptables)")
    p.add_argument("--iptables-backend", choices=["iptables", "iptables-nft", "iptables-legacy"], default="iptables",
                   help="iptables binaries to use with --iptables (default: the system's iptables alternative)")
    p.add_argument("--min-sync-period", type=float, default=defaults.MIN_SYNC_PERIOD,
                   help="proxy syncs at most twice per this many seconds (kube-proxy: 1s)")
    p.add_argument("--delta-sync", action="store_true", help=DELTA_SYNC_HELP)
    p.add_argument("--proxy-mode", choices=defaults.PROXY_MODES, default=defaults.PROXY_MODE,
                   help=PROXY_MODE_HELP + "; with --iptables, nftables mode applies its transactions with nft")
    p.add_argument("--sync-period", type=float, default=defaults.SYNC_PERIOD,
                   help="proxy retry and iptables-monitor interval in seconds (kube-proxy: 30s)")
    p.add_argument("--metrics-bind-address", default=defaults.PROXY_METRICS_BIND_ADDRESS, metavar="HOST:PORT",
                   help="serve the proxy's /metrics and /healthz here (kube-proxy's default 127.0.0.1:10249; "
                        "empty: off)")
    p.add_argument("--kubelet-port", type=int, metavar="PORT",
                   help="the kubelet API's port, advertised in the Node's daemonEndpoints (default 10250 with "
                        "--dataplane host; none in render mode unless given; 0: a free port)")
    p.add_argument("--kubelet-address", metavar="IP",
                   help="where the kubelet API listens (default: the node's InternalIP)")
    p.add_argument("--tls-cert-file", metavar="FILE", help="serve the kubelet API over HTTPS with this certificate")
    p.add_argument("--tls-private-key-file", metavar="FILE", help="the private key of --tls-cert-file")
    p.add_argument("--client-ca-file", metavar="FILE",
                   help="with --tls-cert-file: require a client certificate of this CA (the API server's)")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    p.set_defaults(func=cmd_node)


def _add_dns(sub: Any) -> None:
    """`kubelab dns`: cluster DNS."""
    p = sub.add_parser("dns", help="run only cluster DNS (<svc>.<ns>.svc.cluster.local, the kube-dns Service)",
                       description="Serve the cluster domain from the API (Services, EndpointSlices, Namespaces) "
                                   "on UDP and TCP, and create the kube-dns Service (10.96.0.10) in kube-system. "
                                   "With --advertise-address its Endpoints point there, so pods reach this "
                                   "server through the ClusterIP. Names outside the domain are refused.")
    p.add_argument("--server", default=defaults.SERVER, help=SERVER_HELP)
    token_args(p)
    p.add_argument("--listen", type=host_port, default="0.0.0.0:53",
                   help="address to serve DNS on (default 0.0.0.0:53)")
    p.add_argument("--netns", help="open the sockets inside this named network namespace")
    p.add_argument("--metrics-port", type=int, default=9153,
                   help="serve Prometheus /metrics on this port of the listen address (CoreDNS: 9153; -1: off)")
    p.add_argument("--advertise-address", help="IP the kube-dns Endpoints and EndpointSlice point at")
    p.add_argument("--service-ip", default=addressing.CLUSTER_DNS_IP, help="kube-dns ClusterIP (default 10.96.0.10)")
    p.add_argument("--cluster-domain", default=addressing.CLUSTER_DOMAIN, help="default cluster.local")
    p.set_defaults(func=cmd_dns)


def _add_cluster_tools(sub: Any) -> None:
    """The tools that read a running cluster."""
    p = sub.add_parser("exec", help="run a command inside a node's (or pod's) network namespace",
                       description="kubelab exec [--data-dir DIR] NODE -- CMD...  (NODE may also be a pod name or "
                                   "namespace/pod, or 'client': a host on the lab network outside the cluster, "
                                   "10.240.0.2)")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    p.add_argument("target", metavar="NODE")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD")
    p.set_defaults(func=cmd_exec)

    for verb, text in (("pause", ("stop NODE's kubelet stub and proxy agent (its pods keep running): a node "
                                  "that lost the control plane")),
                       ("resume", "start NODE's kubelet stub and proxy agent again, as after a restart")):
        p = sub.add_parser(verb, help=text, description=f"{text}. Works on a cluster started with `kubelab up`.")
        p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
        p.add_argument("node", metavar="NODE")
        p.set_defaults(func=cmd_pause_resume)

    p = sub.add_parser("status", help="what a running `kubelab up` is made of, and whether it is healthy")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("iptables", help="the ruleset a node's proxy agent last applied, in iptables-save form")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    p.add_argument("-t", "--table", choices=["filter", "nat"], help="only this table")
    p.add_argument("node", metavar="NODE")
    p.set_defaults(func=cmd_iptables)

    p = sub.add_parser("nftables", help="a node's nftables table (nft list table ip kube-proxy), in nftables "
                                        "proxy mode")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    p.add_argument("node", metavar="NODE")
    p.set_defaults(func=cmd_nftables)

    p = sub.add_parser("trace", help="the path of an object's latest change: accepted, delivered to each watcher, "
                                     "endpoints written, each node's iptables-restore",
                       description="kubelab trace KIND/NAME [-n NS]: e.g. service/web or pod/api-1. Reads the API "
                                   "server's in-memory trace records (written as things happen; the last 50,000 "
                                   "writes).")
    p.add_argument("object", metavar="KIND/NAME")
    p.add_argument("-n", "--namespace", default="default")
    p.add_argument("-o", "--output", choices=["table", "json"], default="table")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="the `kubelab up` cluster to ask (default .kubelab)")
    p.add_argument("--server", help="ask this API server instead (URL)")
    p.set_defaults(func=cmd_trace)

    p = sub.add_parser("ui", help="a web page drawing each Service's path on every node, live",
                       description="Serve the page (kubelab/ui): nodes and their pods; a Service's entries -> "
                                   "KUBE-SVC -> each KUBE-SEP with its probability -> its pod (iptables mode), or "
                                   "the service-ips element -> numgen vmap -> each endpoint chain (nftables mode), "
                                   "read from every node's real rules and re-read when a node's rules change; the "
                                   "last change's trace; `kubelab explain pod` for a clicked pod. Read-only; an API "
                                   "client of the `kubelab up` cluster in --data-dir.")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="the `kubelab up` cluster to show (default .kubelab)")
    p.add_argument("--listen", default="127.0.0.1:8001",
                   help="HOST:PORT to serve the page on (default 127.0.0.1:8001; port 0 picks a free one)")
    p.set_defaults(func=cmd_ui)

    p = sub.add_parser("explain", help="why a pod is (or is not) on a node: every node's filters and scores",
                       description="kubelab explain pod NAME [-n NS]: run kube-scheduler's filters on every node "
                                   "for one pod and score the nodes that pass, plugin by plugin, marking the node "
                                   "the scheduler would pick (or did pick).")
    p.add_argument("kind", choices=["pod", "pods", "po"], metavar="pod")
    p.add_argument("name", metavar="NAME")
    p.add_argument("-n", "--namespace", default="default")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--server", help="API server URL (default: the cluster `kubelab up` runs in --data-dir)")
    where.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    p.add_argument("--scoring", choices=defaults.SCORING_STRATEGIES, default=defaults.SCORING,
                   help="NodeResourcesFit scoring strategy the scheduler runs with (default LeastAllocated)")
    p.set_defaults(func=cmd_explain)


def _add_proxy_tools(sub: Any) -> None:
    """`kubelab proxy render`."""
    p = sub.add_parser("proxy", help="kube-proxy tools")
    proxy_sub = p.add_subparsers(dest="proxy_command", required=True, metavar="SUBCOMMAND")
    r = proxy_sub.add_parser("render", help="print the iptables-restore payload kube-proxy would write",
                             description="Read Services and EndpointSlices (YAML or JSON; several documents or a List) "
                                         "and print the iptables-restore payload kube-proxy's iptables mode writes "
                                         "for them. Pure: no root, no cluster.")

    r.add_argument("-f", "--file", required=True, help="manifest file, or - for stdin")
    r.add_argument("--node-name", default="", help="this node's name (decides which endpoints are local)")
    r.add_argument("--node-ip", action="append", help="this node's IP (repeatable; the first of the family is "
                                                       "the primary one)")
    r.add_argument("--cluster-cidr", default="", help="pod CIDR(s) for local-traffic detection, comma-separated "
                                                      "(e.g. 10.244.0.0/16); none: no local detector")
    r.add_argument("--masquerade-all", action="store_true", help="SNAT all traffic to service IPs")
    r.add_argument("--masquerade-bit", type=int, default=14, help="fwmark bit marking packets to SNAT (default 14)")
    r.add_argument("--nodeport-addresses", default="",
                   help="comma-separated CIDRs (or 'primary') NodePorts answer on (default: all local addresses)")
    r.add_argument("--iptables-localhost-nodeports", type=flag_bool, default=True, metavar="BOOL",
                   help="NodePorts on 127.0.0.1 too (default true)")
    r.add_argument("--random-fully", type=flag_bool, default=True, metavar="BOOL",
                   help="the iptables binary supports MASQUERADE --random-fully (default true)")
    r.add_argument("--nfacct", action="store_true", help="the nfacct counters kube-proxy creates exist")
    r.add_argument("--conntrack-tcp-be-liberal", action="store_true",
                   help="net.netfilter.nf_conntrack_tcp_be_liberal is set (no INVALID drop rule)")
    r.add_argument("--ipv6", action="store_true", help="render the IPv6 proxier's payload")
    r.add_argument("--changed", action="append", metavar="NAMESPACE/NAME",
                   help="render a partial sync rewriting only these Services' chains (repeatable)")
    r.add_argument("--existing-rules", metavar="FILE",
                   help="iptables-save output of the node: service chains in it that are no longer needed "
                        "are flushed and deleted (-X)")
    r.add_argument("--sort", action="store_true",
                   help="print in the canonical order kube-proxy's tests compare in, not in write order")
    r.add_argument("--proxy-mode", choices=defaults.PROXY_MODES, default=defaults.PROXY_MODE,
                   help="which kube-proxy mode's rules to print (default iptables, as kube-proxy's): nftables "
                        "prints `nft -f` input for table ip/ip6 kube-proxy, honouring ServiceCIDR objects in the file")
    r.set_defaults(func=cmd_proxy_render)
