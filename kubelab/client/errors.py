"""Errors the client raises: one class per Kubernetes Status reason a caller acts on."""

from __future__ import annotations

from typing import Any


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
