"""The sync loop: watch Services and EndpointSlices, coalesce changes, render, apply.

Like kube-proxy's BoundedFrequencyRunner: a change syncs at once when the loop has been idle, bursts
are coalesced so syncs happen at most `burst` times per `min_sync_period`, and a sync happens at
least every `sync_period` anyway. Syncs are partial (only changed Services' chains are rewritten)
except at start, after a failure, and once an hour. Nothing is written before both informers synced.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from pathlib import Path

from kubelab import kinds
from kubelab.client import ApiClient, Informer
from kubelab.models import EndpointSlice, Service

from .apply import Applier, RecordingApplier
from .render import ProxyConfig, Ruleset, render

log = logging.getLogger(__name__)

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
FULL_SYNC_PERIOD = 3600.0


class ProxyAgent:
    def __init__(self, api: ApiClient, config: ProxyConfig, applier: Applier | None = None, *,
                 min_sync_period: float = 1.0, sync_period: float = 30.0, burst: int = 2,
                 state_file: Path | None = None) -> None:
        self.api = api
        self.config = config
        self.applier = applier or RecordingApplier()
        self.min_sync_period = min_sync_period
        self.sync_period = sync_period
        self.burst = burst
        self.state_file = state_file
        name = config.node_name or "proxy"
        self.services: Informer[Service] = Informer(api, kinds.SERVICES, name=f"proxy-{name}-services")
        self.slices: Informer[EndpointSlice] = Informer(api, kinds.ENDPOINTSLICES, name=f"proxy-{name}-slices")
        self.services.add_handler(self._on_service)
        self.slices.add_handler(self._on_slice)
        self._changed: set[str] = set()
        self._trigger = asyncio.Event()
        self._need_full = True
        self._last_full = 0.0
        self._tokens = float(burst)
        self._last_refill = time.monotonic()
        self.last_ruleset: Ruleset | None = None
        self.syncs = 0
        self.synced = asyncio.Event()

    def _on_service(self, event: str, old: Service | None, new: Service | None) -> None:
        self._changed.add((new or old).key)  # type: ignore[union-attr]
        self._trigger.set()

    def _on_slice(self, event: str, old: EndpointSlice | None, new: EndpointSlice | None) -> None:
        for obj in (old, new):
            if obj is not None:
                service = (obj.metadata.labels or {}).get(SERVICE_NAME_LABEL)
                if service:
                    self._changed.add(f"{obj.metadata.namespace}/{service}")
        self._trigger.set()

    async def _wait_for_token(self) -> None:
        """BoundedFrequencyRunner: `burst` tokens, one more every `min_sync_period`."""
        while True:
            now = time.monotonic()
            if self.min_sync_period > 0:
                self._tokens = min(float(self.burst), self._tokens + (now - self._last_refill) / self.min_sync_period)
            else:
                self._tokens = float(self.burst)
            self._last_refill = now
            if self._tokens >= 1:
                self._tokens -= 1
                return
            await asyncio.sleep((1 - self._tokens) * self.min_sync_period)

    async def sync(self) -> Ruleset:
        full = self._need_full or time.monotonic() - self._last_full > FULL_SYNC_PERIOD
        changed = None if full else set(self._changed)
        self._changed.clear()
        try:
            existing = await self.applier.existing_nat_chains()
            ruleset = render(self.services.items(), self.slices.items(), self.config, changed=changed,
                             existing_nat_chains=existing)
            await self.applier.apply(ruleset.text, full=full)
        except Exception:
            self._need_full = True
            raise
        if full:
            self._need_full = False
            self._last_full = time.monotonic()
        self.last_ruleset = ruleset
        self.syncs += 1
        if self.state_file is not None:
            await asyncio.to_thread(self._write_state)
        self.synced.set()
        log.debug("proxy %s: %s sync, %d service ports, %d nat rules written", self.config.node_name,
                  "full" if full else "partial", ruleset.service_ports, ruleset.nat_rules)
        return ruleset

    def _write_state(self) -> None:
        assert self.state_file is not None and self.last_ruleset is not None
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(self.last_ruleset.text)
        tmp.replace(self.state_file)

    async def run(self) -> None:
        if isinstance(self.applier, RecordingApplier) is False and hasattr(self.applier, "supports_random_fully"):
            try:
                supported = await self.applier.supports_random_fully()  # type: ignore[attr-defined]
                self.config = replace(self.config, random_fully=supported)
            except Exception as exc:  # noqa: BLE001 - assume the modern default
                log.debug("proxy: could not probe --random-fully: %s", exc)
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.services.run(), name=f"{self.services.name}-informer")
            tg.create_task(self.slices.run(), name=f"{self.slices.name}-informer")
            await self.services.wait_synced()
            await self.slices.wait_synced()
            self._trigger.set()
            while True:
                try:
                    await asyncio.wait_for(self._trigger.wait(), timeout=self.sync_period)
                except TimeoutError:
                    pass
                await self._wait_for_token()
                self._trigger.clear()
                try:
                    await self.sync()
                except Exception as exc:  # noqa: BLE001 - kube-proxy retries, with a full sync
                    log.warning("proxy %s: sync failed, retrying with a full sync: %s", self.config.node_name, exc)
                    await asyncio.sleep(min(self.min_sync_period, 1.0) or 0.5)
                    self._trigger.set()


async def run(api: ApiClient, config: ProxyConfig, applier: Applier | None = None, **kwargs: object) -> None:
    await ProxyAgent(api, config, applier, **kwargs).run()  # type: ignore[arg-type]
