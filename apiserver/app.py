"""The FastAPI application: routers, the one Status exception handler, and the lifespan that connects
storage and creates the API server's own objects."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from starlette.datastructures import QueryParams
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from kubelab import addressing, kinds, tokenfile
from kubelab.kinds import ResourceType

from . import authz, codecs, endpointreconciler, errors, identitylease, requestinfo, satokens, strconv
from .apiextensions import CustomResources
from .auth import AuthMiddleware
from .bootstrap import bootstrap
from .cacher import Cacher
from .defaults import ENDPOINT_RECONCILER_TYPE
from .flowcontrol import RequestGuard, list_seats
from .identitylease import IdentityLease
from .metrics import ApiserverMetrics
from .rbacsource import PolicySource
from .recovery import PanicRecovery
from .registry import Registry, default_conversions, default_strategies
from .registry.counts import ObjectCounts
from .registry.events import DEFAULT_EVENT_TTL
from .routers import discovery, health, issuer, observability, resources
from .serving import ServingOptions, is_stopped_during_startup
from .storage import EtcdTLS, Storage, StorageError
from .tokengetters import TokenObjectGetter
from .traces import TraceRecorder

log = logging.getLogger(__name__)


@dataclass
class Config:
    etcd_servers: Sequence[str]
    advertise_ip: str = "127.0.0.1"
    port: int = 8080
    service_cidr: str = addressing.SERVICE_CIDR
    resources: tuple[ResourceType, ...] = field(default_factory=lambda: kinds.SERVED)
    # kube-apiserver's --min-request-timeout: a watch without timeoutSeconds ends after a random time
    # between this and twice this, so long-lived watches re-list and rebalance (clients resume).
    min_request_timeout: float = 1800.0
    # kube-apiserver's --token-auth-file: with it, requests authenticate with bearer tokens and node
    # users are restricted (auth.py); without it, the API is open to whoever reaches it.
    token_auth_file: str | None = None
    # kube-apiserver's --authorization-mode, used when a token file is configured (authz.py).
    authorization_modes: tuple[str, ...] = authz.DEFAULT_MODES
    # kube-apiserver's --watch-cache: watches are served from one etcd watch per resource (cacher.py).
    watch_cache: bool = True
    # kube-apiserver's --event-ttl, in seconds: an event is deleted this long after its last write.
    event_ttl: int = DEFAULT_EVENT_TTL
    # Timeouts and in-flight limits (--request-timeout, --max-requests-inflight, ...): serving.py, flowcontrol.py.
    serving: ServingOptions = field(default_factory=ServingOptions)
    # kube-apiserver's --etcd-cafile, --etcd-certfile, --etcd-keyfile: for https etcd servers, the CA their
    # certificate chains to and the client certificate an etcd with --client-cert-auth wants.
    etcd_cafile: str | None = None
    etcd_certfile: str | None = None
    etcd_keyfile: str | None = None
    # kube-apiserver's --service-account-signing-key-file (a P-256 key, PEM): signs the tokens TokenRequest
    # issues and checks the ones presented. None: a key of this process's own (tokens die with it).
    service_account_key_file: str | None = None
    service_account_issuer: str = satokens.ISSUER  # --service-account-issuer; also the API's audience
    # kube-apiserver's --disable-admission-plugins; only "ServiceAccount" can be turned off (an API server
    # without a controller manager making default accounts, as kube's own integration tests run it).
    disable_admission_plugins: tuple[str, ...] = ()
    # The network namespace kubelets are dialed from (pods/exec, log, ...: nodeproxy.py): `kubelab up
    # --dataplane netns` puts the API server on the lab network there; None dials from this process's own.
    kubelet_netns: str | None = None
    # Where every kubelet is dialed instead of its Node's InternalIP (at its advertised port): 127.0.0.1 for
    # `kubelab up --dataplane render`, whose kubelets all listen on this machine's loopback.
    kubelet_address: str | None = None
    # --kubelet-client-certificate/--kubelet-client-key: with them kubelets are dialed over TLS, presenting
    # this certificate; --kubelet-certificate-authority: what the kubelets' serving certificates must chain to.
    kubelet_client_certificate: str | None = None
    kubelet_client_key: str | None = None
    kubelet_certificate_authority: str | None = None
    # The identity Lease (identitylease.py): the hostname its name is derived from (None: this machine's),
    # and kube's IdentityLeaseRenewIntervalPeriod and IdentityLeaseGCPeriod (exposed there for tests too).
    identity_hostname: str | None = None
    identity_lease_renew_interval: float = identitylease.RENEW_INTERVAL
    identity_lease_gc_period: float = identitylease.GC_PERIOD
    # kube-apiserver's --endpoint-reconciler-type: "lease" (its default: every API server of the cluster is an
    # endpoint of the kubernetes Service while its master lease lives, endpointreconciler.py) or "none"
    # (this server leaves the Service's endpoints alone); with the lease TTL and reconcile interval.
    endpoint_reconciler_type: str = ENDPOINT_RECONCILER_TYPE
    endpoint_reconciler_ttl: int = endpointreconciler.TTL
    endpoint_reconciler_interval: float = endpointreconciler.INTERVAL


class ApiServer:
    """What uvicorn serves. Resource requests (`/api/<v>/...`, `/apis/<g>/<v>/...` with one of the five
    verbs: nearly every request a cluster makes) go straight to resources.dispatch; everything else
    (discovery, health, OpenAPI, metrics, traces, the lifespan) goes through the FastAPI app. FastAPI's
    stack around a handler (body limit, telemetry, two exception layers, an exit stack, the router, and
    a wrapper of `send` per layer that a watch pays on every event) was ~0.1 ms of CPU per request
    (BENCHMARKS.md). Authentication (auth.py) wraps this whole app: with a token file it authenticates and
    authorizes every request; without one it only checks service account tokens."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.state = app.state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in resources.METHODS:
            info = requestinfo.of(scope)  # the parse the authorizer judged, when there is one
            if resources.serves(info):
                scope["app"] = self.app
                response = await resources.dispatch(Request(scope, receive, send), info)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _list_width(state: Any, scope: Scope, info: requestinfo.RequestInfo) -> int:
    """The in-flight seats of a LIST: by the objects of its resource (registry/counts.py), its limit and
    selectors (flowcontrol.list_seats)."""
    counts = getattr(state, "counts", None)  # None until storage is connected
    rt = next((rt for rt in state.resources if (rt.group, rt.version, rt.plural) == (info.group, info.version,
                                                                                      info.resource)), None)
    if counts is None or rt is None:
        return 1
    query = QueryParams(scope.get("query_string", b""))
    limit: int | None = None
    with contextlib.suppress(ValueError):
        limit = strconv.parse_int(query.get("limit") or "0")
    return list_seats(counts.get(rt), limit=limit, selective=bool(query.get("labelSelector")
                                                                  or query.get("fieldSelector")))


# etcd that times out a write (a loaded machine: "etcdserver: request timed out") must not fail the start:
# kube-apiserver's post-start hooks retry until they succeed. Every bootstrap step reconciles, so a repeat is
# safe; anything but an unavailable or timed-out storage still fails the start at once.
BOOTSTRAP_RETRY_SECONDS = 120.0


async def _bootstrap_retrying(run: Callable[[], Awaitable[None]]) -> None:
    deadline = asyncio.get_running_loop().time() + BOOTSTRAP_RETRY_SECONDS
    delay = 0.5
    while True:
        try:
            await run()
            return
        except errors.StatusError as exc:
            if exc.code not in (503, 504) or asyncio.get_running_loop().time() + delay > deadline:
                raise
            log.warning("bootstrap: %s; trying again in %.1fs", exc.message, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)


def create_app(config: Config) -> ASGIApp:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        storage = Storage(config.etcd_servers, tls=EtcdTLS(config.etcd_cafile, config.etcd_certfile,
                                                           config.etcd_keyfile))
        storage.observe = app.state.metrics.observe_etcd
        cacher = Cacher(storage, metrics=app.state.metrics) if config.watch_cache else None
        strategies = default_strategies(service_cidr=config.service_cidr, event_ttl=config.event_ttl)
        counts = app.state.counts = ObjectCounts(storage, cacher)

        def written(key: str, revision: int, verb: str, sent: float) -> None:
            app.state.traces.accept(key, revision, verb, sent)
            counts.written(key, verb)
            getter.written(key, revision)
            policy_source.written(key, revision)

        registry = Registry(storage, strategies, cacher=cacher, on_write=written, conversions=default_conversions())
        app.state.registry = registry
        getter = app.state.token_getter = TokenObjectGetter(registry)  # token checks read the watch cache
        policy_source = app.state.policy_source = PolicySource(cacher, storage)  # the RBAC authorizer's policy
        reconciler: endpointreconciler.LeaseEndpointReconciler | None = None
        custom: CustomResources | None = None
        heartbeats: list[asyncio.Task[None]] = []
        try:
            await registry.wait_for_storage()
            import ipaddress
            service_ip = str(ipaddress.ip_network(config.service_cidr)[1])
            await _bootstrap_retrying(lambda: bootstrap(
                registry, advertise_ip=config.advertise_ip, port=config.port, service_ip=service_ip,
                group_versions=[rt.group_version for rt in (*config.resources, *kinds.METRICS)],
                service_cidr=config.service_cidr if kinds.SERVICECIDRS in config.resources else None,
                endpoints=False))
            # The kubernetes Service's endpoints: the first pass before serving, so they name this server at once.
            if config.endpoint_reconciler_type == "lease":
                reconciler = endpointreconciler.LeaseEndpointReconciler(
                    registry, storage, (config.advertise_ip, config.port), ttl=config.endpoint_reconciler_ttl,
                    interval=config.endpoint_reconciler_interval)
                await _bootstrap_retrying(reconciler.reconcile)
            app.state.counts.prime(config.resources)
            # The kinds CustomResourceDefinitions define join the served resources once Established.
            custom = app.state.custom_resources = CustomResources(
                registry, config.resources, on_change=lambda served: setattr(app.state, "resources", served))
            await custom.start()
            log.info("storage %s ready", ",".join(config.etcd_servers))
            identity = IdentityLease(registry, hostname=config.identity_hostname,
                                     renew_interval=config.identity_lease_renew_interval,
                                     gc_period=config.identity_lease_gc_period)
            app.state.identity_lease = identity
            heartbeats = [asyncio.create_task(identity.keep(), name="apiserver-identity-lease"),
                          asyncio.create_task(identity.collect_forever(), name="apiserver-identity-lease-gc")]
            if reconciler is not None:
                heartbeats.append(asyncio.create_task(reconciler.run(), name="apiserver-endpoint-reconciler"))
        except asyncio.CancelledError:
            if not is_stopped_during_startup():
                raise
            # SIGTERM or SIGINT during the start-up (etcd unreachable: the storage wait, the bootstrap's
            # retries): nothing failed. The start-up ends here and uvicorn, told to stop, shuts down at once.
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()  # the stop is taken: the shutdown's own calls are not cancelled
            log.info("stopped during start-up")
        try:
            yield
        finally:
            for task in heartbeats:
                task.cancel()
            await asyncio.gather(*heartbeats, return_exceptions=True)
            if reconciler is not None:  # kube's RemoveEndpoints on shutdown: the others need not wait for the TTL
                try:
                    async with asyncio.timeout(5):
                        await reconciler.remove()
                except Exception as exc:  # noqa: BLE001 - etcd away: the lease expires after its TTL instead
                    log.warning("unable to remove this API server from the kubernetes service's endpoints: %s", exc)
            if custom is not None:
                await custom.stop()
            await app.state.counts.stop()
            await policy_source.stop()
            if cacher is not None:
                await cacher.stop()
            await storage.close()

    app = FastAPI(title="kubelab apiserver", lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None)
    # kube's muxes answer a path they do not serve with 404, never with Starlette's 307 to the same path
    # without (or with) a trailing slash; the discovery paths with a slash are served (routers/discovery.py).
    app.router.redirect_slashes = False
    app.state.resources = config.resources
    app.state.config = config
    app.state.authorization_modes = config.authorization_modes
    app.state.service_account_admission = "ServiceAccount" not in config.disable_admission_plugins
    app.state.metrics = ApiserverMetrics()
    app.state.traces = TraceRecorder()
    # Read now, so a bad file stops the API server before it serves anything (TokenFileError).
    tokens = tokenfile.load(config.token_auth_file) if config.token_auth_file else None
    app.state.tokens = tokens  # TokenReview authenticates with the same authenticators (routers/reviews.py)
    if config.service_account_key_file:
        app.state.signer = satokens.Signer.from_file(config.service_account_key_file,
                                                     issuer=config.service_account_issuer)
    else:
        log.warning("no --service-account-signing-key-file: service account tokens are signed with a key that "
                    "dies with this process")
        app.state.signer = satokens.Signer.ephemeral(issuer=config.service_account_issuer)
    app.include_router(health.router)
    app.include_router(discovery.router)
    # The resource routes match only /api/<v>/... and /apis/<g>/<v>/...; they go first, as plain
    # Starlette routes, so the hot paths skip matching every other route (resources.py). The trace
    # endpoint goes before them (kubelab.dev would be a 404 there).
    app.router.routes[0:0] = [*observability.routes, *resources.routes]
    app.include_router(observability.router)
    app.include_router(issuer.router)

    @app.exception_handler(errors.StatusError)
    async def status_error(request: Request, exc: errors.StatusError) -> Response:
        return codecs.error_response(request, exc)

    @app.exception_handler(StorageError)
    async def storage_error(request: Request, exc: StorageError) -> Response:
        return codecs.error_response(request, exc)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404:
            return codecs.status_response(errors.route_not_found())
        if exc.status_code == 405:
            return codecs.status_response(errors.method_not_allowed())
        return codecs.status_response(errors.StatusError(exc.status_code, "", str(exc.detail)))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        return codecs.error_response(request, exc)

    # Outermost first: authentication (with impersonation and authorization), then the request timeout and
    # in-flight limits (which see the user), then the resource front.
    guarded = RequestGuard(ApiServer(app), config.serving, metrics=app.state.metrics,
                           width=lambda scope, info: _list_width(app.state, scope, info))
    # Without a token file the middleware only checks service account tokens (auth.py). Panic recovery goes
    # around everything, so that nothing escapes to uvicorn's plain-text 500 (recovery.py).
    return PanicRecovery(AuthMiddleware(guarded, tokens=tokens, state=app.state))
