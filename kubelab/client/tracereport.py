"""Reporting milestones to the API server's trace ring (`kubelab trace`, apiserver/traces.py).

Components POST small JSON records to `/apis/kubelab.dev/v1alpha1/traces`: the endpoints controllers
when they wrote an Endpoints or EndpointSlice, proxy agents when an iptables-restore is done. Posting
never holds up the component: `report()` only queues (at most `MAX_QUEUED`, the rest dropped), and
`run()` (a supervised task of the component) sends them one at a time. An API server without the
endpoint (404) or a failed post costs a debug line, nothing more.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..tracing import PATH
from .http import ApiClient

log = logging.getLogger(__name__)

MAX_QUEUED = 1000


class TraceReporter:
    def __init__(self, api: ApiClient) -> None:
        self.api = api
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(MAX_QUEUED)
        self.sent = 0
        self.dropped = 0

    def report(self, record: dict[str, Any]) -> None:
        try:
            self._queue.put_nowait(record)
        except asyncio.QueueFull:
            self.dropped += 1

    async def run(self) -> None:
        while True:
            record = await self._queue.get()
            try:
                await self.api.request("POST", PATH, body=record)
                self.sent += 1
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - traces are best effort
                log.debug("trace report not sent: %s", exc)
