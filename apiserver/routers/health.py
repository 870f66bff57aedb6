"""/healthz, /livez, /readyz: `ok` as text, as kube-apiserver answers them."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from starlette.responses import PlainTextResponse

from ..storage import StorageError

router = APIRouter()

# kube-apiserver's --etcd-healthcheck-timeout: a hung etcd fails the check in 2 s, not the storage timeout.
ETCD_HEALTHCHECK_TIMEOUT = 2.0


async def _check(request: Request, verbose: bool) -> PlainTextResponse:
    checks = {"ping": True, "etcd": True}
    try:
        await asyncio.wait_for(request.app.state.registry.storage.revision(), ETCD_HEALTHCHECK_TIMEOUT)
    except (StorageError, TimeoutError):
        checks["etcd"] = False
    ok = all(checks.values())
    if verbose or not ok:
        lines = [f"[{'+' if good else '-'}]{name} {'ok' if good else 'failed: reason withheld'}"
                 for name, good in checks.items()]
        lines.append(f"{request.url.path.strip('/')} check {'passed' if ok else 'failed'}")
        return PlainTextResponse("\n".join(lines) + "\n", status_code=200 if ok else 500)
    return PlainTextResponse("ok", status_code=200)


@router.get("/healthz")
async def healthz(request: Request) -> PlainTextResponse:
    return await _check(request, "verbose" in request.query_params)


@router.get("/livez")
async def livez(request: Request) -> PlainTextResponse:
    return await _check(request, "verbose" in request.query_params)


@router.get("/readyz")
async def readyz(request: Request) -> PlainTextResponse:
    return await _check(request, "verbose" in request.query_params)
