"""Per-request state the layers below the router need without threading it through every call:
the fieldValidation mode and the warnings to send back as `Warning: 299 - "..."` headers."""

from __future__ import annotations

from contextvars import ContextVar

MODES = ("Strict", "Warn", "Ignore")

# kube-apiserver's default for requests that do not say (server-side field validation, GA in 1.27).
field_validation: ContextVar[str] = ContextVar("field_validation", default="Warn")
_warnings: ContextVar[list[str] | None] = ContextVar("warnings", default=None)


def start() -> list[str]:
    collected: list[str] = []
    _warnings.set(collected)
    return collected


def warn(message: str) -> None:
    collected = _warnings.get()
    if collected is not None and message not in collected:
        collected.append(message)


def warning_headers(collected: list[str]) -> list[tuple[str, str]]:
    """RFC 7234 warn-code 299 with the text quoted, as kube-apiserver writes them (kubectl prints
    each as `Warning: <text>`)."""
    return [("Warning", '299 - "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"') for text in collected]
