"""Per-request state the layers below the router need without threading it through every call:
the fieldValidation mode and the warnings to send back as `Warning: 299 - "..."` headers."""

from __future__ import annotations

from contextvars import ContextVar

from kubelab.tokenfile import UserInfo

MODES = ("Strict", "Warn", "Ignore")

# kube-apiserver's default for requests that do not say (server-side field validation, GA in 1.27).
field_validation: ContextVar[str] = ContextVar("field_validation", default="Warn")
_warnings: ContextVar[list[str] | None] = ContextVar("warnings", default=None)
# The authenticated user (auth.py sets it beside the ASGI scope's): whom a CertificateSigningRequest records
# as its requestor, as kube's strategy reads it from the request context. None: an open API server.
user: ContextVar[UserInfo | None] = ContextVar("user", default=None)


def start() -> list[str]:
    collected: list[str] = []
    _warnings.set(collected)
    return collected


def collected() -> list[str]:
    """The warnings this request has recorded so far."""
    return list(_warnings.get() or [])


def warn(message: str) -> None:
    collected = _warnings.get()
    if collected is not None and message not in collected:
        collected.append(message)


# kube-apiserver's warning recorder: past 4096 characters in all, each warning is cut to 256, and what
# still does not fit is dropped (k8s.io/apiserver/pkg/endpoints/filters/warning.go).
WARNINGS_TOTAL = 4096
WARNING_ITEM = 256
_CONTROL = dict.fromkeys([*range(0x20), 0x7F], " ")


def warning_headers(collected: list[str]) -> list[tuple[str, str]]:
    """RFC 7234 warn-code 299 with the text quoted, as kube-apiserver writes them (kubectl prints
    each as `Warning: <text>`). The text comes from the request (unknown field names), so control
    characters become spaces, as Go's header writer does, and it goes out as UTF-8 bytes, as Go sends
    it (Starlette encodes header values as latin-1, hence the round trip): a hostile field name can
    neither split the header nor fail the response."""
    texts = [text.translate(_CONTROL) for text in collected]
    if sum(len(t) for t in texts) > WARNINGS_TOTAL:
        texts = [t[:WARNING_ITEM] for t in texts]
        kept, total = [], 0
        for text in texts:
            if total + len(text) > WARNINGS_TOTAL:
                break
            kept.append(text)
            total += len(text)
        texts = kept
    return [("Warning", ('299 - "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"')
             .encode("utf-8", "replace").decode("latin-1")) for text in texts]
