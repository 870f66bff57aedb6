"""One way to build each component from typed options, used by `kubelab up` (runner.py) and by the
per-component commands (components.py) alike: the API server's Config, a node (kubelet stub + proxy agent),
the scheduler and the controllers are assembled here and nowhere else, so the two ways of running kubelab cannot assemble them
differently. What differs between the two is only what is passed in: the API clients (`kubelab up` gives
each component its own in-process client; a component process has one), the node's dataplane and the
network namespace its rules go into.

Each builder imports its component when called: a process that builds one component (the scheduler's, in
`kubelab up` or `kubelab scheduler`) does not load the others (the API server, the controllers, the
kubelet and the proxy agent took the scheduler's process from 67 to 135 MiB)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubelab import addressing

from . import defaults

if TYPE_CHECKING:
    from apiserver.app import Config
    from apiserver.serving import ServingOptions
    from kubelab.client import ApiClient
    from kubelab.client.queuemetrics import WorkQueueMetricsProvider
    from kubeletstub.dataplane import Dataplane
    from kubeletstub.kubelet import Kubelet
    from proxyagent import ProxyAgent, SharedProxyInformers
    from scheduler import Scheduler


def _serving_options() -> ServingOptions:
    from apiserver.serving import ServingOptions

    return ServingOptions()


@dataclass(frozen=True)
class ApiServerOptions:
    """kube-apiserver's settings that kubelab serves, described once: what `kubelab apiserver`'s flags say
    (components.apiserver_options), what `kubelab up` gives the API server in its process, and, written back
    as those flags, what it starts its further API servers with (apiservers.argv). Each field is the flag
    of the same name unless said otherwise."""

    etcd_servers: tuple[str, ...]
    listen: str = defaults.LISTEN  # HOST:PORT
    advertise_address: str | None = None  # None: the --listen host (loopback for 0.0.0.0)
    tls_cert_file: str | None = None
    tls_private_key_file: str | None = None
    token_auth_file: str | None = None
    authorization_modes: tuple[str, ...] = defaults.AUTHORIZATION_MODES
    event_ttl: int = defaults.EVENT_TTL_SECONDS  # seconds
    service_account_signing_key_file: str | None = None
    disable_admission_plugins: tuple[str, ...] = ()
    serving: ServingOptions = field(default_factory=_serving_options)  # --request-timeout, --max-*-inflight
    etcd_cafile: str | None = None
    etcd_certfile: str | None = None
    etcd_keyfile: str | None = None
    kubelet_client_certificate: str | None = None
    kubelet_client_key: str | None = None
    kubelet_certificate_authority: str | None = None
    endpoint_reconciler_type: str = defaults.ENDPOINT_RECONCILER_TYPE
    identity_hostname: str | None = None  # None: this machine's
    # No flag (`kubelab up`'s own API server only): the port the kubernetes Service's endpoints name (None:
    # --listen's; the netns lab advertises the lab address's 443), the namespace kubelets are dialed from
    # and the address they are all dialed at (apiserver.app.Config says more).
    advertise_port: int | None = None
    kubelet_netns: str | None = None
    kubelet_address: str | None = None

    @property
    def host_port(self) -> tuple[str, int]:
        """--listen as (host, port), an empty host meaning loopback."""
        return addressing.split_host_port(self.listen, default_host="127.0.0.1")


def build_apiserver_config(options: ApiServerOptions) -> Config:
    """The API server's Config (apiserver/app.py) for these options. Pure."""
    from apiserver.app import Config

    host, port = options.host_port
    return Config(list(options.etcd_servers),
                  advertise_ip=options.advertise_address or (host if host not in ("0.0.0.0", "") else "127.0.0.1"),
                  port=options.advertise_port if options.advertise_port is not None else port,
                  token_auth_file=options.token_auth_file, authorization_modes=options.authorization_modes,
                  event_ttl=options.event_ttl, serving=options.serving, etcd_cafile=options.etcd_cafile,
                  etcd_certfile=options.etcd_certfile, etcd_keyfile=options.etcd_keyfile,
                  service_account_key_file=options.service_account_signing_key_file,
                  disable_admission_plugins=options.disable_admission_plugins,
                  kubelet_netns=options.kubelet_netns, kubelet_address=options.kubelet_address,
                  kubelet_client_certificate=options.kubelet_client_certificate,
                  kubelet_client_key=options.kubelet_client_key,
                  kubelet_certificate_authority=options.kubelet_certificate_authority,
                  identity_hostname=options.identity_hostname,
                  endpoint_reconciler_type=options.endpoint_reconciler_type)


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
    # The niceness of the proxy agent's rule writing (its command threads and the iptables-restore,
    # iptables-save and nft they start): `kubelab up`'s nodes share the machine with the control plane.
    rules_nice: int = 0

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
    from kubeletstub.kubelet import Kubelet
    from kubeletstub.node import NodeConfig
    from proxyagent import ProxyAgent, ProxyConfig
    from proxyagent.apply import Applier, IptablesApplier, RecordingApplier
    from proxyagent.nftables.libnft import nft_applier

    config = NodeConfig(name=options.name, ip=options.ip, pod_cidr=options.pod_cidr, cpu=options.cpu,
                        memory=options.memory, max_pods=options.max_pods, kubelet_port=options.kubelet_port,
                        kubelet_address=options.kubelet_address, log_root=str(options.root / "log" / "pods"),
                        tls_cert_file=options.tls_cert_file, tls_private_key_file=options.tls_private_key_file,
                        client_ca_file=options.client_ca_file)
    kubelet = Kubelet(kubelet_api, config, dataplane)
    applier: Applier = (IptablesApplier(netns, backend=options.iptables_backend, nice=options.rules_nice)
                        if options.apply_rules else RecordingApplier())
    agent = ProxyAgent(proxy_api, ProxyConfig(node_name=options.name, node_ips=(options.ip,),
                                              cluster_cidr=options.cluster_cidr),
                       applier, min_sync_period=options.min_sync_period, sync_period=options.sync_period,
                       delta_sync=options.delta_sync, state_file=options.rules_file, proxy_mode=options.proxy_mode,
                       # In iptables mode too: it removes what nftables mode left (kube-proxy's platformCleanup).
                       nft=nft_applier(netns, library=options.proxy_mode == "nftables", nice=options.rules_nice)
                       if options.apply_rules else None,
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
    from scheduler import Scheduler

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
    import controllers

    return controllers.run(api, node_monitor_grace_period=options.node_monitor_grace_period,
                           lb_pool=options.lb_pool, metrics=metrics, ready=ready, root_ca=options.root_ca,
                           service_account_private_key_file=options.service_account_private_key_file,
                           terminated_pod_gc_threshold=options.terminated_pod_gc_threshold)
