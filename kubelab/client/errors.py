"""Errors the client raises: one class per Kubernetes Status reason a caller acts on."""

from __future__ import annotations

from typing import Any

import httpx

# What a request that got no answer raises (refused, cut off, timed out): httpx's family, aiohttp's errors
# translated into it (http.py). Callers outside the client catch it by this name, so that only
# kubelab/client knows which HTTP library speaks to the API server.
TransportError = httpx.HTTPError


class ApiError(Exception):
    """A non-2xx answer from the API server, carrying its Status body."""

    def __init__(self, code: int, reason: str, message: str, status: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.status = status or {}

    @classmethod
    def from_status(cls, code: int, body: Any) -> ApiError:
        status = body if isinstance(body, dict) else {}
        reason = str(status.get("reason") or "")
        message = str(status.get("message") or body)
        for sub in (NotFound, Conflict, AlreadyExists, Expired):
            if sub.matches(code, reason):
                return sub(code, reason, message, status)
        return cls(code, reason, message, status)

    @staticmethod
    def matches(code: int, reason: str) -> bool:
        return False


class NotFound(ApiError):
    @staticmethod
    def matches(code: int, reason: str) -> bool:
        return code == 404


class AlreadyExists(ApiError):
    @staticmethod
    def matches(code: int, reason: str) -> bool:
        return code == 409 and reason == "AlreadyExists"


class Conflict(ApiError):
    @staticmethod
    def matches(code: int, reason: str) -> bool:
        return code == 409 and reason != "AlreadyExists"


class Expired(ApiError):
    """410 Gone: the resourceVersion a watch asked for was compacted away; list again."""

    @staticmethod
    def matches(code: int, reason: str) -> bool:
        return code == 410


def resource_version_unavailable(exc: ApiError) -> bool:
    """Whether a LIST's resourceVersion cannot be served: 410 Expired, or the server has not reached it
    (504 with the ResourceVersionTooLarge cause, or older servers' "Too large resource version" message):
    client-go's isExpiredError || isTooLargeResourceVersionError, after which the reflector lists with
    resourceVersion="" instead."""
    if isinstance(exc, Expired):
        return True
    causes = (exc.status.get("details") or {}).get("causes") if isinstance(exc.status.get("details"), dict) else None
    if exc.code == 504 and any(isinstance(c, dict) and c.get("reason") == "ResourceVersionTooLarge"
                               for c in causes or []):
        return True
    return exc.code in (500, 504) and "Too large resource version" in exc.message
