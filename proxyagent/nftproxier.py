"""The nftables Proxier: kube-proxy's pkg/proxy/nftables/proxier.go minus the informers.

It is the iptables `Proxier` (proxier.py) with another sync: the same events, screening, model of
Services and endpoints (`changes.ProxyState`), BoundedFrequencyRunner, full/partial decision,
failure handling (retry after sync_period as a full sync), metrics, health and `kubelab trace`
reports. What differs is what one sync writes, and how:

* every sync is one `nft -f` transaction (nftables/render.py), applied all or nothing;
* a full sync rewrites the fixed chains, sets and maps and refills the tracked maps; the first one
  after start also recreates the base chains (a kube-proxy of another version may have left others);
* a partial sync rewrites only the chains of the Services that changed and adds/deletes only the
  map elements that differ from what the last successful sync left (knftables' element storage:
  the renderer is given the last sync's `elements`);
* service chains nobody uses any more are flushed in the sync that drops them and deleted by a later
  one, at least a second afterwards: before Linux 6.2 the kernel notices only a little later that a
  deleted map element no longer references a chain, and deleting it in the same transaction fails
  (kube-proxy's staleChains);
* which chains and affinity sets exist is asked of the kernel (`nft list chains` / `list sets`) on
  full syncs, which is how a restarted agent finds what an earlier one left; between full syncs the
  agent knows, since only it writes the table: the last ruleset's active chains plus the stale ones.
  A partial sync hands the render that ruleset (whose bookkeeping it updates in place) and the stale
  chains only, so its work follows the change, never the 40k chains of a 10k-Service table.

There is no iptables canary: a table someone deleted makes the next partial sync fail (its element
deletes and chain flushes name missing objects), and the retry is a full sync.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path

from .apply import ApplyError
from .metrics import ProxyMetrics
from .nftables.apply import NftApplierLike, RecordingNftApplier
from .nftables.render import TABLE, NftConfig, NftRuleset, render_nft_ports
from .proxier import BURST_SYNCS, FULL_SYNC_PERIOD, MAX_APPLIED_REPORTED, Proxier
from .render import ProxyConfig, Ruleset
from .serviceports import family_of, parse_cidr_sloppy
from .timer import MONOTONIC, Timer

log = logging.getLogger(__name__)

STALE_CHAIN_DELAY = 1.0  # kube-proxy deletes a flushed chain once it has been stale for a second
DEFAULT_SERVICE_CIDRS = ("10.96.0.0/12",)  # the default `kubernetes` ServiceCIDR's


def _family_of_cidr(text: str) -> str | None:
    """netutils.IsIPv4CIDRString, as OnServiceCIDRsChanged splits the ranges between the proxiers."""
    net = parse_cidr_sloppy(text.strip())
    return family_of(net) if net is not None else None


def nft_config_of(config: ProxyConfig, *, service_cidrs: tuple[str, ...] = DEFAULT_SERVICE_CIDRS) -> NftConfig:
    """The nftables proxier's view of the agent's configuration. kube-proxy defaults
    --nodeport-addresses to "primary" (the node IP) in nftables mode (platformApplyDefaults)."""
    return NftConfig(node_name=config.node_name, node_ips=config.node_ips, cluster_cidr=config.cluster_cidr,
                     masquerade_all=config.masquerade_all, masquerade_bit=config.masquerade_bit,
                     nodeport_addresses=config.nodeport_addresses or ("primary",), service_cidrs=service_cidrs,
                     ip_family=config.ip_family)


class NftProxier(Proxier):
    """kube-proxy's nftables proxier. `nft` applies the transactions (RecordingNftApplier if None)."""

    def __init__(self, config: ProxyConfig, nft: NftApplierLike | None = None, *,
                 nft_config: NftConfig | None = None, min_sync_period: float = 1.0, sync_period: float = 30.0,
                 burst: int = BURST_SYNCS, state_file: Path | None = None, metrics: ProxyMetrics | None = None,
                 timer: Timer = MONOTONIC) -> None:
        super().__init__(config, None, min_sync_period=min_sync_period, sync_period=sync_period, burst=burst,
                         state_file=state_file, metrics=metrics, timer=timer)
        self.nft: NftApplierLike = nft if nft is not None else RecordingNftApplier(
            "ip6" if config.ip_family == "IPv6" else "ip")
        self.nft_config = nft_config if nft_config is not None else nft_config_of(config)
        self.first_sync = True  # until one transaction has been applied since start
        # The last successful sync's ruleset: the tracked maps' elements and each Service's footprint,
        # from which a partial sync redoes only the changed Services.
        # It carries the active chains and affinity sets: between full syncs the table's per-service
        # chains are those plus the stale ones below (only this agent writes the table).
        self._previous: NftRuleset | None = None
        self._stale: dict[str, float] = {}  # stale chain -> when it was first flushed (clock)
        self.last_nft: NftRuleset | None = None
        self.last_transaction = ""

    def on_service_cidrs_changed(self, cidrs: tuple[str, ...]) -> None:
        """OnServiceCIDRsChanged: the ranges of this proxier's family go into the drop rule for
        unallocated ClusterIPs, which only a full sync rewrites (setupNFTables). Upstream records them
        and requests nothing, so they reach the rule at its next full sync (hourly, or after a
        failure); here a change asks for a full sync at once, so that a new ServiceCIDR is honoured
        in seconds. Ranges of the other family, or the same ones again, change nothing."""
        mine = tuple(c for c in cidrs if _family_of_cidr(c) == self.nft_config.ip_family)
        if mine == self.nft_config.service_cidrs:
            return
        log.info("%s: Service CIDRs now %s", self.config.node_name, ", ".join(mine) or "none")
        self.nft_config = dataclasses.replace(self.nft_config, service_cidrs=mine)
        self.need_full_sync = True
        if self.initialized:
            self.request_sync()

    async def _sync_locked(self) -> Ruleset | None:
        # The iptables Ruleset return value has no nftables counterpart: see last_nft.
        await self.sync_nft()
        return None

    async def sync_nft(self) -> NftRuleset | None:
        """One sync (the caller holds the lock). Returns the applied transaction's ruleset, or None;
        failures are logged, counted and retried as a full sync, never raised."""
        now = self._clock()
        full = self.need_full_sync or now - self._last_full_sync > FULL_SYNC_PERIOD or self._previous is None
        start = time.perf_counter()
        started_at = time.time()
        timings = self.last_timings = {}
        mark = start
        ruleset: NftRuleset | None = None
        covered = (0, 0)
        taken: dict[str, set[tuple[str, int]]] = {}
        applied: list[list[str | int]] = []
        changed: frozenset[str] = frozenset()
        trigger_times: tuple[float, ...] = ()
        deleting: set[str] = set()
        previous = None if full else self._previous
        self._previous = None  # a partial render takes its bookkeeping over, applied or not
        try:
            chains: frozenset[str] = frozenset()
            sets: frozenset[str] = frozenset()
            if full:
                chains, sets = await self.nft.existing()
                # A chain someone else deleted is no longer ours to delete.
                self._stale = {c: since for c, since in self._stale.items() if c in chains}
            timings["list"], mark = time.perf_counter() - mark, time.perf_counter()
            # Chains flushed at least a second ago are deleted now, so they are not "existing" to the
            # render. Everything here is proportional to the stale chains, never to the table.
            deleting = {c for c, since in self._stale.items() if now - since >= STALE_CHAIN_DELAY}
            # Taken only now, with no await until the render (see Proxier._sync_locked).
            covered = self.revisions() if self.revisions is not None else (0, 0)
            changes = self.state.checkout()
            changed, trigger_times = changes.all, tuple(changes.trigger_times)
            taken, applied = self._take_causes()
            self.metrics.service_changes_pending.set(0)
            self.metrics.endpoint_changes_pending.set(0)
            if previous is None:
                ruleset = render_nft_ports(self.state.service_ports, self.state.endpoints_map(), self.nft_config,
                                           changed=None, existing_chains=chains - deleting,
                                           existing_sets=sets, first_sync=full and self.first_sync)
            else:
                ruleset = render_nft_ports(self.state.service_ports, self.state.endpoints_map(), self.nft_config,
                                           changed=changed, previous=previous,
                                           changed_ports=self.state.ports_of(changed),
                                           stale_chains={c for c in self._stale if c not in deleting})
            active = ruleset.active_chains
            deleting = {c for c in deleting if c not in active}  # used again (a Service came back): keep it
            transaction = ruleset.text + "".join(f"delete chain {self.nft_config_family} {TABLE} {chain}\n"
                                                 for chain in sorted(deleting))
            timings["render"], mark = time.perf_counter() - mark, time.perf_counter()
            try:
                await self.nft.transact(transaction)
            except ApplyError:
                self.metrics.nftables_sync_failures.inc()
                raise
            timings["transact"] = time.perf_counter() - mark
        except Exception as exc:  # noqa: BLE001 - any failure: kube-proxy retries with a full sync
            self._sync_failed(exc, taken, full=full, start=start)
            return None
        self.need_full_sync = False
        self.first_sync = False
        self._previous = ruleset
        for chain in deleting:
            self._stale.pop(chain, None)
        for chain in [c for c in self._stale if c in active]:
            del self._stale[chain]
        for chain in ruleset.stale_chains:
            self._stale.setdefault(chain, now)
        self._sync_succeeded(ruleset, trigger_times, timings, full=full, now=now, start=start)
        self.last_nft = ruleset
        self.last_transaction = self.last_payload = transaction
        self.last_changes = frozenset() if full else changed
        self.syncs += 1
        await self._sync_health_checks(ruleset.health_check_node_ports)
        self.synced.set()
        if self._stale:
            # Nothing else may come to delete them for an hour (the runner's max interval).
            self.runner.retry_after(STALE_CHAIN_DELAY)
        if self.on_synced is not None:
            self.on_synced({"type": "proxy-sync", "node": self.config.node_name, "servicesRevision": covered[0],
                            "slicesRevision": covered[1], "full": full, "startedAt": started_at,
                            "doneAt": self.last_updated, "restoreSeconds": timings["transact"],
                            "syncSeconds": timings["total"], "services": sorted(changed)[:1000],
                            "applied": applied[:MAX_APPLIED_REPORTED]})
        log.debug("%s: %s nftables sync: %d service ports (%d rewritten), %d operations, %d chains deleted; %s",
                  self.config.node_name, "full" if full else "partial", ruleset.service_ports,
                  ruleset.services_written, ruleset.operations, len(deleting),
                  ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in timings.items()))
        if self.state_file is not None:
            await self._write_state()
        return ruleset

    @property
    def nft_config_family(self) -> str:
        return "ip6" if self.nft_config.ip_family == "IPv6" else "ip"

    async def _write_state(self) -> None:
        """The table as the last transactions left it, for `kubelab nftables NODE` in render mode.
        Only the model knows it without asking the kernel; a real node is asked with `nft list`."""
        if self.state_file is None or not isinstance(self.nft, RecordingNftApplier):
            return
        text = await self.nft.listed()
        await self._replace_state_file(text)

    async def probe(self) -> None:
        """Nothing to learn: `masquerade fully-random` is nft's, and NodePorts on localhost (what
        route_localnet is for) are not supported in nftables mode."""

    async def monitor(self) -> None:
        """No canary in nftables mode (see the module docstring)."""

