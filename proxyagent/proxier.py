"""The Proxier: kube-proxy's iptables Proxier minus the informers (pkg/proxy/iptables/proxier.go).

It is fed Service and EndpointSlice events (`on_service`, `on_slice`), keeps kube-proxy's model
of them (`changes.ProxyState`), and decides when and how to sync:

* nothing is written until both informers have synced; the first sync is full;
* events request a sync through a BoundedFrequencyRunner (min_sync_period, burst 2, at least hourly);
* a sync is full at start, after any failure, when the iptables monitor finds its canary chains
  gone, and when the last full sync is more than an hour old; otherwise it is partial and rewrites
  only the chains of Services whose Service or EndpointSlices changed;
* a full sync first ensures the jumps from the built-in chains; every sync is then exactly one
  iptables-restore, and stale service chains (found with iptables-save; in large-cluster mode at
  most once per sync_period) are flushed and deleted in that same restore;
* a failed sync is retried after sync_period, as a full sync.

A restarted agent thus converges on its first, full sync: the restore rewrites everything it owns
and deletes the service chains it no longer owns.

With `delta_sync` (off by default; see delta.py) a partial sync also leaves out the shared chains
(KUBE-SERVICES, KUBE-NODEPORTS, the filter table, ...) whose rules are what the last sync wrote, so
its restore costs what changed rather than what exists; the kernel ends up with the same rules.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from kubelab.models import EndpointSlice, Service

from .apply import CANARY_TABLES, Applier, ApplyError, RecordingApplier
from .changes import Changes, ProxyState
from .delta import ChainRules, minimize
from .healthcheck import ServiceHealthServer, health_check_ports, local_ready_endpoints
from .metrics import LocalPolicyCounts, ProxyMetrics
from .render import LARGE_CLUSTER_ENDPOINTS_THRESHOLD, ProxyConfig, Ruleset, render_ports
from .runner import BoundedFrequencyRunner
from .screening import Screen, service_problems, slice_problems
from .servicerules import FragmentCache
from .timer import MONOTONIC, Timer

log = logging.getLogger(__name__)

FULL_SYNC_PERIOD = 3600.0  # proxyutil.FullSyncPeriod
MAX_SYNC_INTERVAL = 3600.0  # the runner's maxInterval ("time.Hour is arbitrary")
BURST_SYNCS = 2
MAX_APPLIED_REPORTED = 5000  # (object, revision) pairs per sync report (kubelab trace)
CANARY_FLUSH_POLL = 0.1  # iptablesFlushPollTime
CANARY_FLUSH_TIMEOUT = 5.0  # iptablesFlushTimeout


class Proxier:
    def __init__(self, config: ProxyConfig, applier: Applier | None = None, *, min_sync_period: float = 1.0,
                 sync_period: float = 30.0, burst: int = BURST_SYNCS, state_file: Path | None = None,
                 metrics: ProxyMetrics | None = None, timer: Timer = MONOTONIC,
                 delta_sync: bool = False) -> None:
        self.config = config
        self.delta_sync = delta_sync
        self._applied_shared: ChainRules = {}  # delta_sync: the shared chains' rules the kernel holds
        self._kernel_chains: frozenset[str] = frozenset()  # service chains the last sync left in the kernel
        self.applier: Applier = applier if applier is not None else RecordingApplier()
        self.sync_period = sync_period
        self.state_file = state_file
        self.metrics = metrics if metrics is not None else ProxyMetrics()
        self.state = ProxyState(node_name=config.node_name, family=config.ip_family)
        self.screen = Screen(node_name=config.node_name,
                             on_skip=lambda kind: self.metrics.invalid_objects.labels(kind).inc())
        self.cache = FragmentCache()
        self.runner = BoundedFrequencyRunner(self.sync_proxy_rules, min_interval=min_sync_period,
                                             max_interval=max(MAX_SYNC_INTERVAL, min_sync_period), burst=burst,
                                             name=f"proxy-{config.node_name or 'node'}-sync", timer=timer)
        self._timer = timer
        self._clock = timer.now
        self._lock = asyncio.Lock()  # proxier.mu: syncs never overlap (the monitor syncs directly too)
        self.need_full_sync = True
        self._last_full_sync = float("-inf")
        self._last_cleanup = float("-inf")
        self._services_synced = self._slices_synced = False
        self._initialized = asyncio.Event()
        # proxier health (healthcheck.ProxierHealthServer): when the oldest still-unapplied sync
        # request was made, and when the last successful sync ended (wall clock).
        self.oldest_pending_queued: float | None = None
        self.last_updated: float | None = None
        self.last_ruleset: Ruleset | None = None
        self.last_payload = ""  # what the last sync restored: the ruleset's text, or less with delta_sync
        self.last_changes: frozenset[str] = frozenset()  # services rewritten by the last partial sync
        self.last_timings: dict[str, float] = {}  # seconds per step of the last sync (jumps, save, ...)
        self._state_written: str | None = None  # the text the state file holds (None: not written yet)
        self.syncs = 0
        self.failures = 0
        self.synced = asyncio.Event()  # set after the first successful sync
        # For `kubelab trace`: revisions() gives the (Services, EndpointSlices) resourceVersions the
        # informers had reached when a sync took its changes; on_synced(record) hears of each applied sync.
        self.revisions: Callable[[], tuple[int, int]] | None = None
        self.on_synced: Callable[[dict[str, object]], None] | None = None
        # The health-check NodePorts of eTP=Local LoadBalancer Services (healthcheck.py); None: not served.
        self.health: ServiceHealthServer | None = None
        # The events whose change is pending, by Service: (storage key, resourceVersion) pairs. A sync
        # reports the ones it applied, every version of an object that changed twice before it (the
        # first write's trace ends in this sync too); an event undone before a sync applied nothing.
        self._causes: dict[str, set[tuple[str, int]]] = {}

    # --- events (informer handlers: handler(event, old, new)) ------------------------------------

    @property
    def initialized(self) -> bool:
        return self._services_synced and self._slices_synced

    def on_service(self, event: str, old: Service | None, new: Service | None) -> None:
        if event == "DELETED" or new is None:
            if old is not None:
                self.screen.forget("Service", old.key)
            new = None
        elif not self.screen.admit("Service", new.key, service_problems(new)):
            # Left out as if deleted: the rules of an earlier, valid version go with the next sync.
            old, new = new, None
        self.metrics.skipped_objects.labels("Service").set(self.screen.count("Service"))
        pending = self.state.update_service(old, new)
        self._note_causes("services", new or old)
        self.metrics.service_changes_total.inc()
        self.metrics.service_changes_pending.set(self.state.pending_services)
        if pending and self.initialized:
            self.request_sync()

    def on_slice(self, event: str, old: EndpointSlice | None, new: EndpointSlice | None) -> None:
        if event == "DELETED" or new is None:
            if old is not None:
                self.screen.forget("EndpointSlice", old.key)
            new = None
        elif not self.screen.admit("EndpointSlice", new.key, slice_problems(new)):
            old, new = new, None
        self.metrics.skipped_objects.labels("EndpointSlice").set(self.screen.count("EndpointSlice"))
        pending = self.state.update_slice(old, new)
        self._note_causes("endpointslices", new or old)
        self.metrics.endpoint_changes_total.inc()
        self.metrics.endpoint_changes_pending.set(self.state.pending_endpoints)
        if pending and self.initialized:
            self.request_sync()

    def _note_causes(self, resource: str, obj: Service | EndpointSlice | None) -> None:
        if obj is None:
            return
        for service in self.state.last_changed:
            if self.state.is_pending(service):
                key = f"/registry/{resource}/{obj.metadata.namespace}/{obj.metadata.name}"
                self._causes.setdefault(service, set()).add((key, int(obj.metadata.resource_version or 0)))
            else:
                self._causes.pop(service, None)

    def on_services_synced(self) -> None:
        self._services_synced = True
        if self.initialized:
            self._initialized.set()

    def on_slices_synced(self) -> None:
        self._slices_synced = True
        if self.initialized:
            self._initialized.set()

    def on_service_cidrs_changed(self, cidrs: tuple[str, ...]) -> None:
        """OnServiceCIDRsChanged: every ServiceCIDR's ranges. The iptables proxier has no use for them
        (upstream's method is empty too); the nftables proxier overrides this."""

    def request_sync(self) -> None:
        """proxier.Sync(): queue a sync with the rate limiter."""
        self.metrics.last_queued_timestamp.set(time.time())
        if self.oldest_pending_queued is None:
            self.oldest_pending_queued = time.time()
        self.runner.run()

    async def force_sync(self) -> Ruleset | None:
        """forceSyncProxyRules: a full sync now (the iptables monitor saw a flush)."""
        self.need_full_sync = True
        return await self.sync_proxy_rules()

    # --- the sync ------------------------------------------------------------------------------

    async def sync_proxy_rules(self) -> Ruleset | None:
        """One sync. Returns the applied ruleset, or None if nothing was (or could be) applied;
        failures are logged, counted and retried, never raised."""
        if not self.initialized:
            log.debug("%s: not syncing until Services and EndpointSlices have been listed",
                      self.config.node_name)
            return None
        async with self._lock:
            return await self._sync_locked()

    async def _sync_locked(self) -> Ruleset | None:
        now = self._clock()
        full = self.need_full_sync or now - self._last_full_sync > FULL_SYNC_PERIOD
        start = time.perf_counter()
        started_at = time.time()
        ruleset: Ruleset | None = None
        timings = self.last_timings = {}
        mark = start
        changes, covered = Changes(), (0, 0)
        taken: dict[str, set[tuple[str, int]]] = {}
        applied: list[list[str | int]] = []
        try:
            if full:
                # Jumps from the built-in chains cannot be part of the restore without rewriting
                # the built-in chains; they only go missing when someone flushed, which forces a
                # full sync anyway.
                await self.applier.ensure_jumps()
            timings["jumps"], mark = time.perf_counter() - mark, time.perf_counter()
            existing: frozenset[str] = frozenset()
            large = self.state.endpoints_total() > LARGE_CLUSTER_ENDPOINTS_THRESHOLD
            # iptables-save takes seconds on big hosts; stale chains are harmless (nothing jumps
            # to them), so in large clusters they are only looked for once per sync period.
            if not large or now - self._last_cleanup > self.sync_period:
                try:
                    existing = await self.applier.existing_nat_chains()
                    self._last_cleanup = now
                except ApplyError as exc:
                    log.error("%s: iptables-save failed, stale chains will not be deleted: %s",
                              self.config.node_name, exc)
            timings["save"], mark = time.perf_counter() - mark, time.perf_counter()
            # The changes are taken only now, with no await between them and the render: events
            # keep arriving while iptables runs, and the model the render reads is live. Taken
            # before the save, a Service added during it would be rendered (its KUBE-SERVICES jump)
            # but not counted as changed (its chains), and the restore would fail on "Chain
            # 'KUBE-SVC-...' does not exist". kube-proxy takes its changes and maps together under
            # proxier.mu for the same reason.
            covered = self.revisions() if self.revisions is not None else (0, 0)
            changes = self.state.checkout()
            # Every Service with causes left is pending, so this sync applies them all (a full sync too).
            taken, applied = self._take_causes()
            self.metrics.service_changes_pending.set(0)
            self.metrics.endpoint_changes_pending.set(0)
            ruleset = render_ports(self.state.service_ports(), self.state.endpoints_map(), self.config,
                                   changed=None if full else changes.all, existing_nat_chains=existing,
                                   applied_chains=None if full else self._kernel_chains, cache=self.cache)
            self.metrics.record_ruleset(ruleset)
            timings["render"], mark = time.perf_counter() - mark, time.perf_counter()
            payload, shared = ruleset.text, self._applied_shared
            if self.delta_sync:
                # A full sync writes everything: it is how a lost or tampered-with state is repaired.
                payload, shared, _ = minimize(ruleset.text, {} if full else self._applied_shared)
                timings["delta"], mark = time.perf_counter() - mark, time.perf_counter()
            try:
                if payload:  # a delta sync of a change that did not change any rule has nothing to write
                    await self.applier.restore(payload)
            except ApplyError:
                self.metrics.restore_failures.inc()
                raise
            timings["restore"] = time.perf_counter() - mark
        except Exception as exc:  # noqa: BLE001 - any failure: kube-proxy retries with a full sync
            self._sync_failed(exc, taken, full=full, start=start)
            return None
        self.need_full_sync = False
        self._applied_shared = shared
        self._kernel_chains = ruleset.active_nat_chains
        self.last_payload = payload
        self._sync_succeeded(ruleset, changes.trigger_times, timings, full=full, now=now, start=start)
        self.last_ruleset = ruleset
        self.last_changes = frozenset() if full else changes.all
        self.syncs += 1
        await self._sync_health_checks(ruleset.health_check_node_ports)
        self.synced.set()
        if self.on_synced is not None:
            self.on_synced({"type": "proxy-sync", "node": self.config.node_name, "servicesRevision": covered[0],
                            "slicesRevision": covered[1], "full": full, "startedAt": started_at,
                            "doneAt": self.last_updated, "restoreSeconds": timings["restore"],
                            "syncSeconds": timings["total"], "services": sorted(changes.all)[:1000],
                            "applied": applied[:MAX_APPLIED_REPORTED]})
        log.debug("%s: %s sync: %d service ports (%d rewritten), %d nat rules written, %d chains deleted; "
                  "%s", self.config.node_name, "full" if full else "partial", ruleset.service_ports,
                  ruleset.services_written, ruleset.nat_rules, ruleset.deleted_chains,
                  ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in timings.items()))
        if self.state_file is not None:
            await self._write_rules_state(ruleset)
        return ruleset

    async def _sync_health_checks(self, ports: Iterable[tuple[str, int]]) -> None:
        """After a successful sync, as kube-proxy's syncProxyRules ends: the health-check NodePorts
        of the Services (SyncServices) and their local ready endpoints (SyncEndpoints)."""
        if self.health is None:
            return
        wanted = health_check_ports(ports)
        try:
            await self.health.sync_services(wanted)
        except Exception:  # a health check must never fail the sync that was applied
            log.exception("%s: could not sync the health-check NodePorts", self.config.node_name)
        self.health.sync_endpoints(local_ready_endpoints(wanted, self.state.ports_of, self.state.endpoints_map()))

    def _take_causes(self) -> tuple[dict[str, set[tuple[str, int]]], list[list[str | int]]]:
        """The pending causes, by Service, taken by the sync that is about to render them, and the
        [key, revision] pairs it will report as applied."""
        taken, self._causes = self._causes, {}
        return taken, [[key, rv] for service in sorted(taken) for key, rv in sorted(taken[service])]

    def _sync_failed(self, exc: BaseException, taken: dict[str, set[tuple[str, int]]], *, full: bool,
                     start: float) -> None:
        """A sync (either mode's) that did not apply: the objects it took are reported by the full sync
        that retries it (kube-proxy's behaviour on failure), and its duration is observed."""
        for service, causes in taken.items():  # the retry applies them: it reports them
            self._causes[service] = causes | self._causes.get(service, set())
        self._failed(exc, full=full)
        self.metrics.observe_sync(time.perf_counter() - start, full=full)

    def _sync_succeeded(self, ruleset: LocalPolicyCounts, trigger_times: Iterable[float], timings: dict[str, float], *,
                        full: bool, now: float, start: float) -> None:
        """A sync (either mode's) that applied: its metrics, and the times /healthz and the next full
        sync go by (`now` is the timer's, decisions; the wall clock is what /metrics and /healthz report)."""
        if full:
            self._last_full_sync = now
        self.metrics.record_success(ruleset, trigger_times)
        timings["total"] = time.perf_counter() - start
        self.metrics.observe_sync(timings["total"], full=full)
        self.last_updated = time.time()
        self.oldest_pending_queued = None

    def _failed(self, exc: BaseException, *, full: bool) -> None:
        # The changes may have been checked out already: only a full sync can recover the lost state.
        self.failures += 1
        self.need_full_sync = True
        self._applied_shared = {}
        if not full:
            self.metrics.partial_restore_failures.inc()
        log.warning("%s: %s sync failed, retrying with a full sync in %gs: %s", self.config.node_name,
                    "full" if full else "partial", self.sync_period, exc)
        self.runner.retry_after(self.sync_period)

    async def _write_rules_state(self, ruleset: Ruleset) -> None:
        """The whole ruleset this agent owns (not just the last, maybe partial, payload), for
        `kubelab iptables NODE` and `kubelab ui` (which sort it canonically when they read it).

        A sync that wrote every service port (in a rollout behind one Service, every sync of every
        node) restored exactly that text besides its deletions, so no render is needed; otherwise the
        fragment cache is warm and it costs a join. A text equal to the last one written is not
        written again."""
        assert self.state_file is not None
        if ruleset.services_written == ruleset.service_ports:
            text = ruleset.text_without_deletions
        else:
            text = render_ports(self.state.service_ports(), self.state.endpoints_map(), self.config,
                                cache=self.cache).text
        if text == self._state_written:
            return
        await self._replace_state_file(text)
        self._state_written = text

    async def _replace_state_file(self, text: str) -> None:
        """The state file replaced whole, atomically (a reader never sees half of it), off the loop."""
        assert self.state_file is not None
        path = self.state_file

        def write() -> None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.replace(path)

        await asyncio.to_thread(write)

    # --- running -------------------------------------------------------------------------------

    def is_healthy(self, now: float | None = None) -> bool:
        """ProxierHealthServer: unhealthy once a queued sync has waited more than 2 * sync_period."""
        now = time.time() if now is None else now
        return self.oldest_pending_queued is None or now - self.oldest_pending_queued < 2 * self.sync_period

    async def probe(self) -> None:
        """What kube-proxy learns from (and sets on) the machine before its first sync."""
        supported = await self.applier.supports_random_fully()
        if supported is not None and supported != self.config.random_fully:
            self.config = dataclasses.replace(self.config, random_fully=supported)
        if self.config.localhost_nodeports and self.config.ip_family == "IPv4":
            await self.applier.enable_route_localnet()

    async def run(self) -> None:
        """Sync once (full) as soon as both informers have synced, then follow changes forever.
        The caller feeds events and calls on_services_synced/on_slices_synced."""
        try:
            await self.probe()
        except ApplyError as exc:
            log.warning("%s: could not probe iptables: %s", self.config.node_name, exc)
        await self._initialized.wait()
        async with asyncio.TaskGroup() as tg:
            await self.sync_proxy_rules()  # "called once per lifetime" on the informers' sync
            tg.create_task(self.runner.loop(), name=self.runner.name)
            tg.create_task(self.monitor(), name=f"{self.runner.name}-monitor")

    async def monitor(self) -> None:
        """utiliptables.Monitor: plant KUBE-PROXY-CANARY in mangle, nat and filter; when the mangle
        one vanishes (someone flushed iptables), wait for the others to go too, then force a full
        sync and plant them again. Polls every sync_period."""
        while True:
            try:
                await self.applier.ensure_canary()
            except ApplyError as exc:
                log.warning("%s: could not set up the iptables canary: %s", self.config.node_name, exc)
                await self._timer.sleep(self.sync_period)
                continue
            while True:
                await self._timer.sleep(self.sync_period)
                try:
                    if not await self.applier.canary_exists(CANARY_TABLES[0]):
                        break
                except ApplyError as exc:
                    log.warning("%s: could not check the iptables canary: %s", self.config.node_name, exc)
            deadline = self._clock() + CANARY_FLUSH_TIMEOUT
            while self._clock() < deadline:
                remaining = [t for t in CANARY_TABLES[1:] if await self._canary_left(t)]
                if not remaining:
                    break
                await self._timer.sleep(CANARY_FLUSH_POLL)
            log.info("%s: iptables canary gone (flushed?), resyncing everything", self.config.node_name)
            await self.force_sync()

    async def _canary_left(self, table: str) -> bool:
        try:
            return await self.applier.canary_exists(table)
        except ApplyError:
            return True
