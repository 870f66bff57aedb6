"""The proxy agent: informers on Services, EndpointSlices and ServiceCIDRs feeding a Proxier
(kube-proxy's ServiceConfig / EndpointSliceConfig / ServiceCIDRConfig handlers, cmd/kube-proxy/app/server.go).

The informers list, then watch, and call the Proxier's handlers for every event; once both have
listed, the Proxier syncs (fully) for the first time and from then on follows the changes. The
ServiceCIDRs do not hold the first sync back (upstream's proxier waits for Services and EndpointSlices
only): until they are listed the nftables proxier uses the default range, and a list that differs
brings a full sync. All
sync decisions live in `proxier.py`; this module only wires the API to them. The informers are the
agent's own, or, for the agents of one process (`kubelab up`), shared by all of them
(`sharedinformers.py`): one watch and one decode per event, each agent still its own handler.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from kubelab import kinds
from kubelab.client import ApiClient, Informer
from kubelab.client.tracereport import TraceReporter
from kubelab.models import EndpointSlice, Service, ServiceCIDR

from .apply import Applier, ApplyError
from .healthcheck import ServiceHealthServer, listen_addresses
from .metrics import ProxyMetrics
from .nftables.apply import NftApplierLike
from .nftproxier import NftProxier
from .proxier import BURST_SYNCS, Proxier
from .render import ProxyConfig, Ruleset
from .servicecidrs import ServiceCIDRTracker
from .sharedinformers import SharedProxyInformers
from .timer import MONOTONIC, Timer

log = logging.getLogger(__name__)


PROXY_MODES = ("iptables", "nftables")  # kube-proxy's --proxy-mode on Linux (ipvs is not built)


class ProxyAgent:
    """kube-proxy for one node. `metrics` is its own registry; `proxier` does the work: the
    iptables Proxier, or with proxy_mode="nftables" the NftProxier, which applies its transactions
    with `nft` (and ignores `applier` and `delta_sync`, iptables-mode settings). `timer`: the monotonic time
    its syncs are paced by (timer.py)."""

    def __init__(self, api: ApiClient, config: ProxyConfig, applier: Applier | None = None, *,
                 min_sync_period: float = 1.0, sync_period: float = 30.0, burst: int = BURST_SYNCS,
                 state_file: Path | None = None, metrics: ProxyMetrics | None = None,
                 delta_sync: bool = False, proxy_mode: str = "iptables", nft: NftApplierLike | None = None,
                 informers: SharedProxyInformers | None = None, health_checks: bool = False,
                 health_netns: str | None = None, timer: Timer = MONOTONIC) -> None:
        if proxy_mode not in PROXY_MODES:
            raise ValueError(f"unknown proxy mode {proxy_mode!r} (one of {', '.join(PROXY_MODES)})")
        self.api = api
        self.proxy_mode = proxy_mode
        self.proxier: Proxier
        # The other mode's applier, used once at start to remove what that mode left (platformCleanup).
        self._other_mode: Applier | NftApplierLike | None = applier if proxy_mode == "nftables" else nft
        if proxy_mode == "nftables":
            self.proxier = NftProxier(config, nft, min_sync_period=min_sync_period, sync_period=sync_period,
                                      burst=burst, state_file=state_file, metrics=metrics, timer=timer)
        else:
            self.proxier = Proxier(config, applier, min_sync_period=min_sync_period, sync_period=sync_period,
                                   burst=burst, state_file=state_file, metrics=metrics, delta_sync=delta_sync,
                                   timer=timer)
        name = config.node_name or "proxy"
        # kube-proxy's health-check NodePorts (healthcheck.py), opened in `health_netns` (the node's
        # network namespace) on the addresses its --nodeport-addresses select, in either mode.
        if health_checks:
            addresses = self.proxier.nft_config if isinstance(self.proxier, NftProxier) else self.proxier.config
            self.proxier.health = ServiceHealthServer(node_name=config.node_name, addresses=listen_addresses(addresses),
                                                      netns=health_netns, healthy=self.proxier.is_healthy)
        # `informers`: shared with the process's other agents, which run them; this agent subscribes
        # while it runs. Otherwise its own, run by it.
        self._shared = informers
        if informers is not None:
            self.services: Informer[Service] = informers.services
            self.slices: Informer[EndpointSlice] = informers.slices
            self.service_cidrs: Informer[ServiceCIDR] = informers.service_cidrs
        else:
            self.services = Informer(api, kinds.SERVICES, name=f"proxy-{name}-services")
            self.slices = Informer(api, kinds.ENDPOINTSLICES, name=f"proxy-{name}-slices")
            self.service_cidrs = Informer(api, kinds.SERVICECIDRS, name=f"proxy-{name}-servicecidrs")
        # Every agent tracks the ranges for its own proxier (ServiceCIDRConfig), shared informer or not.
        self.cidr_tracker = ServiceCIDRTracker(self.proxier.on_service_cidrs_changed)
        if informers is None:
            self.services.add_handler(self.proxier.on_service)
            self.slices.add_handler(self.proxier.on_slice)
            self.service_cidrs.add_handler(self.cidr_tracker.on_event)
        # Each applied sync is reported to the API server's trace ring (kubelab trace).
        self.traces = TraceReporter(api)
        self.proxier.revisions = self._revisions
        self.proxier.on_synced = self.traces.report

    def _revisions(self) -> tuple[int, int]:
        return int(self.services.resource_version or 0), int(self.slices.resource_version or 0)

    # The agent's face to the runner and the CLI.

    @property
    def config(self) -> ProxyConfig:
        return self.proxier.config

    @property
    def applier(self) -> Applier:
        return self.proxier.applier

    @property
    def metrics(self) -> ProxyMetrics:
        return self.proxier.metrics

    @property
    def synced(self) -> asyncio.Event:
        """Set once the first sync has been applied."""
        return self.proxier.synced

    @property
    def last_ruleset(self) -> Ruleset | None:
        return self.proxier.last_ruleset

    @property
    def syncs(self) -> int:
        return self.proxier.syncs

    def metrics_text(self) -> bytes:
        return self.proxier.metrics.exposition()

    def is_healthy(self) -> bool:
        return self.proxier.is_healthy()

    async def cleanup_leftovers(self) -> None:
        """kube-proxy's platformCleanup at start: in nftables mode remove the iptables mode's chains,
        in iptables mode the nftables mode's tables, so that a node switched from one mode to the
        other is not programmed by both. Failures are logged, never fatal (as upstream)."""
        if self._other_mode is None:
            return
        try:
            await self._other_mode.cleanup_leftovers()
        except ApplyError as exc:
            log.warning("%s: could not remove the other proxy mode's rules: %s", self.config.node_name, exc)

    async def run(self) -> None:
        await self.cleanup_leftovers()
        if self._shared is not None:
            # Told what the shared caches already hold, then every change, until this agent stops.
            self.services.add_handler(self.proxier.on_service, replay=True)
            self.slices.add_handler(self.proxier.on_slice, replay=True)
            self.service_cidrs.add_handler(self.cidr_tracker.on_event, replay=True)
        try:
            async with asyncio.TaskGroup() as tg:
                if self._shared is None:
                    tg.create_task(self.services.run(), name=f"{self.services.name}-informer")
                    tg.create_task(self.slices.run(), name=f"{self.slices.name}-informer")
                    tg.create_task(self.service_cidrs.run(), name=f"{self.service_cidrs.name}-informer")
                tg.create_task(self._cidrs_listed(), name=f"proxy-{self.config.node_name or 'node'}-cidrs-synced")
                tg.create_task(self.proxier.run(), name=f"proxy-{self.config.node_name or 'node'}")
                tg.create_task(self.traces.run(), name=f"proxy-{self.config.node_name or 'node'}-traces")
                await self.services.wait_synced()
                self.proxier.on_services_synced()
                await self.slices.wait_synced()
                self.proxier.on_slices_synced()
        finally:
            if self.proxier.health is not None:
                await self.proxier.health.close()
            if self._shared is not None:
                self.services.remove_handler(self.proxier.on_service)
                self.slices.remove_handler(self.proxier.on_slice)
                self.service_cidrs.remove_handler(self.cidr_tracker.on_event)

    async def _cidrs_listed(self) -> None:
        await self.service_cidrs.wait_synced()
        self.cidr_tracker.mark_synced()

