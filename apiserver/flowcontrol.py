"""kube-apiserver's request timeout and in-flight limits: what keeps one client's requests from taking
the API server away from the others (the connection side is serving.py's).

* The request timeout (`--request-timeout`, 1 min): a request that is not long-running gets 504 Timeout
  when it runs past it (WithTimeoutForNonLongRunningRequests).
* The in-flight limits (`--max-requests-inflight` 400 reads, `--max-mutating-requests-inflight` 200 writes,
  WithMaxInFlightLimit): past them a request gets 429 with `Retry-After: 1` and Go's http.Error text.
  Exempt, as kube exempts them: long-running requests (watch, proxy; exec, attach, log, portforward),
  system:masters; as API Priority and Fairness makes them: the probes (/healthz, /livez, /readyz, APF's
  `probes` flow schema); and `kubelab up`'s own components on their private socket
  (serving.INTERNAL_KEY). Nodes have seats of their own (APF's `node-high` level): Lease renewals and
  Node status must survive a flood of anything else.
* LISTs are charged by the objects they go through, as APF's list work estimator charges them (a seat per
  100, at most 10), and those of the most seats are served `big_lists` at a time, queueing for a lane up
  to a quarter of the request timeout (APF's queue wait), then 429.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import codecs, errors, requestinfo
from .auth import user_of
from .requestinfo import RequestInfo
from .serving import INTERNAL_KEY, ServingOptions

MASTERS_GROUP = "system:masters"
NODES_GROUP = "system:nodes"
PROBE_PATHS = frozenset({"/healthz", "/livez", "/readyz"})
# LongRunningRequestCheck of kube-apiserver: these verbs and subresources hold a request open by design.
LONG_RUNNING_VERBS = frozenset({"watch", "proxy"})
LONG_RUNNING_SUBRESOURCES = frozenset({"attach", "exec", "proxy", "log", "portforward"})
RETRY_AFTER = "1"
# APF's list work estimator: a seat per 100 objects a LIST goes through, at most 10.
OBJECTS_PER_SEAT = 100
MAX_SEATS = 10
TOO_MANY_REQUESTS = b"Too many requests, please try again later.\n"


def is_long_running(info: RequestInfo) -> bool:
    return info.verb in LONG_RUNNING_VERBS or info.subresource in LONG_RUNNING_SUBRESOURCES


def list_seats(stored: int | None, *, limit: int | None = None, selective: bool = False) -> int:
    """The seats a LIST takes (APF's listWorkEstimator): the objects it goes through, a seat per 100, 1 to
    10. Without selectors a limit bounds it (kube counts twice the limit: the page and the look-ahead);
    with them every stored object may be read. Unknown counts take one seat. E.g. 10,000 pods: 10 seats;
    limit=500: 10; limit=50: 1; 250 pods: 3."""
    if stored is None:
        return 1
    objects = stored
    if limit and not selective:
        objects = min(stored, 2 * limit)
    return max(1, min(MAX_SEATS, math.ceil(objects / OBJECTS_PER_SEAT)))


# --- connections -----------------------------------------------------------------------------------


class Seats:
    """A pool of in-flight seats, taken without waiting (the max-in-flight filter never queues). `kind` is
    its request_kind label in the metrics."""

    def __init__(self, kind: str, size: int, metrics: Any = None) -> None:
        self.kind = kind
        self.size = size
        self.used = 0
        if metrics is not None:  # read when scraped, not set on every request (a lock each time)
            metrics.inflight.labels(kind).set_function(lambda: self.used)
        self._dropped = metrics.dropped.labels(kind) if metrics is not None else None

    def take(self, seats: int) -> bool:
        if self.size and self.used + seats > self.size:
            self.dropped()
            return False
        self.used += seats
        return True

    def dropped(self) -> None:
        if self._dropped is not None:
            self._dropped.inc()

    def give(self, seats: int) -> None:
        self.used -= seats


class RequestGuard:
    """kube's request timeout and in-flight limits, in front of everything but the authentication layer's
    own answers (see the module docstring). `width(scope, info)` estimates how many seats a LIST takes
    (list_seats; 1 without it)."""

    def __init__(self, app: ASGIApp, options: ServingOptions, *, metrics: Any = None,
                 width: Callable[[Scope, RequestInfo], int] | None = None) -> None:
        self.app = app
        self.options = options
        self.width = width
        self.readonly = Seats("readOnly", options.max_requests_inflight, metrics)
        self.mutating = Seats("mutating", options.max_mutating_requests_inflight, metrics)
        # APF gives node-high 40 of 245 concurrency shares; a sixth of both limits is about that.
        limits = options.max_requests_inflight + options.max_mutating_requests_inflight
        self.node_high = Seats("nodeHigh", max(1, limits // 6) if limits else 0, metrics)
        # Big LISTs take their seats and then a lane: seats bound how many may wait, lanes how many are
        # decoded and encoded at once. 500 LISTs of 3 MiB at once, 40 of them running (the seats alone),
        # grew the API server by 626 MB, held /healthz 5 s and ran etcd reads past their 10 s timeout.
        self.big_lists = asyncio.Semaphore(options.big_lists)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        info = requestinfo.of(scope)
        if is_long_running(info):
            await self.app(scope, receive, send)
            return
        pool = self._pool(scope, info)
        seats = 1
        if pool is not None and self.width is not None and info.verb == "list":
            seats = max(1, min(self.width(scope, info), pool.size or 1))
        if pool is not None and not pool.take(seats):
            await _too_many_requests(send)
            return
        try:
            if seats < MAX_SEATS:
                await self._with_timeout(scope, receive, send)
                return
            try:
                async with asyncio.timeout(self.options.request_timeout / 4):
                    await self.big_lists.acquire()
            except TimeoutError:
                if pool is not None:
                    pool.dropped()
                await _too_many_requests(send)
                return
            try:
                await self._with_timeout(scope, receive, send)
            finally:
                self.big_lists.release()
        finally:
            if pool is not None:
                pool.give(seats)

    def _pool(self, scope: Scope, info: RequestInfo) -> Seats | None:
        """The seats a request takes, None for exempt ones (probes, the private socket, system:masters)."""
        if info.path in PROBE_PATHS or scope.get(INTERNAL_KEY):
            return None
        user = user_of(scope)  # None: the API is open (no token file), there are no users
        groups = user.groups if user is not None else ()
        if MASTERS_GROUP in groups:
            return None
        if NODES_GROUP in groups or user is None and _is_node_heartbeat(info):
            return self.node_high
        return self.readonly if info.is_read else self.mutating

    async def _with_timeout(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            async with asyncio.timeout(self.options.request_timeout):
                await self.app(scope, receive, tracking_send)
        except TimeoutError:
            if started:
                raise  # half an answer is out: the connection is cut, as Go's handler panics with ErrAbortHandler
            response = codecs.status_response(errors.timeout(
                "Timeout: request did not complete within the allotted timeout"))
            await response(scope, receive, send)


def _is_node_heartbeat(info: RequestInfo) -> bool:
    """Without authentication there are no users to classify: a node's Lease and its Node (status) are
    what APF's system-nodes flow schema would carry at node-high."""
    return info.group == "coordination.k8s.io" and info.namespace == "kube-node-lease" or \
        info.group == "" and info.resource == "nodes"


async def _too_many_requests(send: Send) -> None:
    """tooManyRequests: 429, `Retry-After: 1` and Go's http.Error text (not a Status), as kube answers it;
    client-go and kubelab's client retry after that many seconds."""
    await send({"type": "http.response.start", "status": 429,
                "headers": [(b"retry-after", RETRY_AFTER.encode()), (b"content-type", b"text/plain; charset=utf-8"),
                            (b"x-content-type-options", b"nosniff"),
                            (b"content-length", str(len(TOO_MANY_REQUESTS)).encode())]})
    await send({"type": "http.response.body", "body": TOO_MANY_REQUESTS})


__all__ = ["MAX_SEATS", "RequestGuard", "Seats", "is_long_running", "list_seats"]
