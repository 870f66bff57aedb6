"""Service account issuer discovery: /.well-known/openid-configuration and /openid/v1/jwks, which
kube-apiserver serves so that others can check its service account tokens (ServiceAccountIssuerDiscovery,
pkg/serviceaccount/openidmetadata.go). Both are JSON, as kube answers them, the keys as a JWK set."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse

router = APIRouter()


@router.get("/.well-known/openid-configuration")
async def openid_configuration(request: Request) -> JSONResponse:
    return JSONResponse(request.app.state.signer.openid_configuration(),
                        headers={"Cache-Control": "public, max-age=3600"})


@router.get("/openid/v1/jwks")
async def jwks(request: Request) -> JSONResponse:
    return JSONResponse(request.app.state.signer.jwks(), media_type="application/jwk-set+json",
                        headers={"Cache-Control": "public, max-age=3600"})
