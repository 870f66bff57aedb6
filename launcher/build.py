"""One way to build each component from typed options, used by `kubelab up` (runner.py) and by the
per-component commands (components.py) alike: a node (kubelet stub + proxy agent), the scheduler and the
controllers are assembled here and nowhere else, so the two ways of running kubelab cannot assemble them
differently. What differs between the two is only what is passed in: the API clients (`kubelab up` gives
each component its own in-process client; a component process has one), the node's dataplane and the
network namespace its rules go into."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import controllers
from kubelab import addressing
from kubelab.client import ApiClient
from kubelab.client.queuemetrics import WorkQueueMetricsProvider
from kubeletstub.dataplane import Dataplane
from kubeletstub.kubelet import Kubelet
from kubeletstub.node import NodeConfig
from proxyagent import ProxyAgent, ProxyConfig, SharedProxyInformers
from proxyagent.apply import Applier, IptablesApplier, RecordingApplier
from proxyagent.nftables.libnft import nft_applier
from scheduler import Scheduler

from . import defaults


@dataclass(frozen=True)
class NodeOptions:
    """One node: its addresses and capacity, its kubelet API, its proxy agent's settings."""

    name: str
    ip: str
    pod_cidr: str
    data_dir: Path  # the node's files go under <data_dir>/nodes/<name>
    cpu: str = defaults.NODE_CPU
    memory: str = defaults.NODE_MEMORY
    max_pods: int = defaults.NODE_MAX_PODS
    # The kubelet API: its port (None: none; 0: a free one) and address (None: the node's InternalIP), with
    # kubelet's --tls-cert-file, --tls-private-key-file and --client-ca-file.
    kubelet_port: int | None = None
    kubelet_address: str | None = None
    tls_cert_file: str | None = None
    tls_private_key_file: str | None = None
    client_ca_file: str | None = None
    cluster_cidr: str = addressing.POD_CIDR
    # apply_rules: the proxy agent writes its rules into the kernel (iptables-restore, nft); otherwise it
    # records them only (the render dataplane).
    apply_rules: bool = False
    iptables_backend: str = "iptables"
    proxy_mode: str = defaults.PROXY_MODE
    min_sync_period: float = defaults.MIN_SYNC_PERIOD
    sync_period: float = defaults.SYNC_PERIOD
    delta_sync: bool = False

    @property
    def root(self) -> Path:
        return self.data_dir / "nodes" / self.name

    @property
    def rules_file(self) -> Path:
        """What the proxy agent last applied (`kubelab iptables NODE`, `kubelab nftables NODE` read it)."""
        return self.root / ("nftables.rules" if self.proxy_mode == "nftables" else "iptables.rules")


def build_node(kubelet_api: ApiClient, proxy_api: ApiClient, options: NodeOptions, dataplane: Dataplane, *,
               netns: str | None = None, informers: SharedProxyInformers | None = None) -> tuple[Kubelet, ProxyAgent]:
    """The node's kubelet stub and proxy agent (not started). `netns`: the namespace the agent's rules go
    into (None: this one); `informers`: Service and EndpointSlice informers shared by several nodes'
    agents (`kubelab up`), else the agent watches for itself."""
    config = NodeConfig(name=options.name, ip=options.ip, pod_cidr=options.pod_cidr, cpu=options.cpu,
                        memory=options.memory, max_pods=options.max_pods, kubelet_port=options.kubelet_port,
                        kubelet_address=options.kubelet_address, log_root=str(options.root / "log" / "pods"),
                        tls_cert_file=options.tls_cert_file, tls_private_key_file=options.tls_private_key_file,
                        client_ca_file=options.client_ca_file)
    kubelet = Kubelet(kubelet_api, config, dataplane)
    applier: Applier = (IptablesApplier(netns, backend=options.iptables_backend) if options.apply_rules
                        else RecordingApplier())
    agent = ProxyAgent(proxy_api, ProxyConfig(node_name=options.name, node_ips=(options.ip,),
                                              cluster_cidr=options.cluster_cidr),
                       applier, min_sync_period=options.min_sync_period, sync_period=options.sync_period,
                       delta_sync=options.delta_sync, state_file=options.rules_file, proxy_mode=options.proxy_mode,
                       # In iptables mode too: it removes what nftables mode left (kube-proxy's platformCleanup).
                       nft=nft_applier(netns, library=options.proxy_mode == "nftables") if options.apply_rules
                       else None,
                       informers=informers,
                       # Health-check NodePorts where the node has a network (its namespace, or this host's);
                       # a render-only node has none.
                       health_checks=options.apply_rules, health_netns=netns)
    return kubelet, agent


@dataclass(frozen=True)
class SchedulerOptions:
    scoring: str = defaults.SCORING  # NodeResourcesFit's scoring strategy


def build_scheduler(api: ApiClient, options: SchedulerOptions) -> Scheduler:
    """A scheduler (its own informers, queue and cache), not started."""
    return Scheduler(api, strategy=options.scoring)


@dataclass(frozen=True)
class ControllersOptions:
    """kube-controller-manager's flags that kubelab's controllers take."""

    node_monitor_grace_period: float = defaults.NODE_MONITOR_GRACE_PERIOD
    lb_pool: str | None = defaults.LB_POOL  # None: no LoadBalancer controller
    root_ca: str | None = None  # --root-ca-file's content: None runs no root CA publisher
    service_account_private_key_file: str | None = None  # None runs no token controller
    terminated_pod_gc_threshold: int = defaults.TERMINATED_POD_GC_THRESHOLD


def build_controllers(api: ApiClient, options: ControllersOptions, *, metrics: WorkQueueMetricsProvider,
                      ready: Callable[[], None] | None = None) -> Coroutine[Any, Any, None]:
    """Every controller, as one coroutine that runs them until cancelled; `ready()` once their caches
    are in."""
    return controllers.run(api, node_monitor_grace_period=options.node_monitor_grace_period,
                           lb_pool=options.lb_pool, metrics=metrics, ready=ready, root_ca=options.root_ca,
                           service_account_private_key_file=options.service_account_private_key_file,
                           terminated_pod_gc_threshold=options.terminated_pod_gc_threshold)
