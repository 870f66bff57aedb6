"""The FastAPI application: routers, the one Status exception handler, and the lifespan that connects
storage and creates the API server's own objects."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from fastapi import FastAPI, Request
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from kubelab import addressing, kinds
from kubelab.kinds import ResourceType

from . import codecs, errors
from .bootstrap import bootstrap
from .registry import Registry, default_strategies
from .routers import discovery, health, resources
from .storage import Storage

log = logging.getLogger(__name__)


@dataclass
class Config:
    etcd_servers: Sequence[str]
    advertise_ip: str = "127.0.0.1"
    port: int = 8080
    service_cidr: str = addressing.SERVICE_CIDR
    resources: tuple[ResourceType, ...] = field(default_factory=lambda: kinds.BUILTIN)


def create_app(config: Config) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        storage = Storage(config.etcd_servers)
        registry = Registry(storage, default_strategies(service_cidr=config.service_cidr))
        app.state.registry = registry
        await registry.wait_for_storage()
        import ipaddress
        service_ip = str(ipaddress.ip_network(config.service_cidr)[1])
        await bootstrap(registry, advertise_ip=config.advertise_ip, port=config.port, service_ip=service_ip)
        log.info("apiserver: storage %s ready", ",".join(config.etcd_servers))
        try:
            yield
        finally:
            await storage.close()

    app = FastAPI(title="kubelab apiserver", lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None)
    app.state.resources = config.resources
    app.state.config = config
    app.include_router(health.router)
    app.include_router(discovery.router)
    app.include_router(resources.router)

    @app.exception_handler(errors.StatusError)
    async def status_error(request: Request, exc: errors.StatusError) -> Response:
        return codecs.status_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404:
            return codecs.status_response(errors.route_not_found())
        if exc.status_code == 405:
            return codecs.status_response(errors.method_not_allowed())
        return codecs.status_response(errors.StatusError(exc.status_code, "", str(exc.detail)))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        log.exception("apiserver: %s %s failed", request.method, request.url.path)
        return codecs.status_response(errors.internal(f"{type(exc).__name__}: {exc}"))

    return app
