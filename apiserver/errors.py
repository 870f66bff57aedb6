"""The API server's errors: each is a Kubernetes Status, raised anywhere and rendered in one handler.

Messages follow kube-apiserver's wording, because kubectl prints them verbatim:
`Error from server (NotFound): services "web" not found`. Names are quoted as Go's %q quotes them
(`"evil\\n"`, never a raw line break in a message).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubelab.kinds import ResourceType
from kubelab.validation import FieldError, go_quote

from .storage import RequestTooLarge, StorageError
from .storage import Timeout as StorageTimeout


class StatusError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        # A Status is a list type: a 410 for an expired continue token carries a fresh token here.
        self.list_meta: dict[str, Any] = {}

    def status(self) -> dict[str, Any]:
        # metav1.Status's field order, which Go's encoder keeps: details before code.
        body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": dict(self.list_meta),
                                "status": "Failure", "message": self.message, "reason": self.reason}
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def _details(rt: ResourceType | None, name: str | None, **extra: Any) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if rt is not None:
        if rt.group:
            details["group"] = rt.group
        details["kind"] = rt.plural
    details.update(extra)
    return details


def not_found(rt: ResourceType, name: str) -> StatusError:
    return StatusError(404, "NotFound", f'{rt.group_resource} {go_quote(name)} not found', _details(rt, name))


def namespace_not_found(name: str) -> StatusError:
    return StatusError(404, "NotFound", f'namespaces {go_quote(name)} not found', {"name": name, "kind": "namespaces"})


def namespace_terminating(rt: ResourceType, name: str, namespace: str) -> StatusError:
    """NamespaceLifecycle admission: nothing new in a namespace that is being deleted."""
    return StatusError(403, "Forbidden", f'{rt.group_resource} {go_quote(name)} is forbidden: unable to create new content '
                                         f"in namespace {namespace} because it is being terminated",
                       {**_details(rt, name), "causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace",
                                                         "message": f"namespace {namespace} is being terminated"}]})


def already_exists(rt: ResourceType, name: str) -> StatusError:
    return StatusError(409, "AlreadyExists", f'{rt.group_resource} {go_quote(name)} already exists', _details(rt, name))


def conflict(rt: ResourceType, name: str, detail: str, *, subresource: str | None = None) -> StatusError:
    """409 Conflict. With a subresource the resource reads `pods/binding`, as in kube-apiserver's
    `NewConflict(Resource("pods/binding"), ...)`: `Operation cannot be fulfilled on pods/binding "web": ...`."""
    if subresource is None:
        return StatusError(409, "Conflict", f'Operation cannot be fulfilled on {rt.group_resource} {go_quote(name)}: '
                                            f"{detail}", _details(rt, name))
    resource = f"{rt.plural}/{subresource}"
    details: dict[str, Any] = {"name": name}
    if rt.group:
        details["group"] = rt.group
    details["kind"] = resource
    if rt.group:
        resource = f"{resource}.{rt.group}"
    return StatusError(409, "Conflict", f'Operation cannot be fulfilled on {resource} {go_quote(name)}: {detail}', details)


def apply_conflict(message: str, causes: Sequence[tuple[str, str]]) -> StatusError:
    """NewApplyConflict: 409 Conflict whose causes (reason FieldManagerConflict) name the manager
    and the field; kubectl prints the message and its --force-conflicts advice."""
    return StatusError(409, "Conflict", message, {"causes": [
        {"reason": "FieldManagerConflict", "message": text, "field": field} for text, field in causes]})


def invalid_options(kind: str, errors: Sequence[FieldError]) -> StatusError:
    """422 for bad request options, e.g. `PatchOptions.meta.k8s.io "" is invalid: fieldManager: ...`."""
    text = "; ".join(str(e) for e in errors) if len(errors) == 1 else "[" + ", ".join(str(e) for e in errors) + "]"
    return StatusError(422, "Invalid", f'{kind}.meta.k8s.io "" is invalid: {text}',
                       {"group": "meta.k8s.io", "kind": kind,
                        "causes": [{"reason": e.reason, "message": e.body, "field": e.field} for e in errors]})


def stale_update(rt: ResourceType, name: str) -> StatusError:
    return conflict(rt, name, "the object has been modified; please apply your changes to the latest version "
                              "and try again")


def _aggregate(errors: Sequence[FieldError]) -> str:
    """ErrorList.ToAggregate().Error(): each distinct message once, in order, bracketed when several (the
    causes keep every error, duplicates included)."""
    messages = list(dict.fromkeys(str(e) for e in errors))
    return messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"


def invalid(rt: ResourceType, name: str, errors: Sequence[FieldError]) -> StatusError:
    """422 Invalid; `details.kind` is the Kind, which kubectl prints: `The Service "x" is invalid: ...`."""
    text = _aggregate(errors)
    # StatusDetails' field order (name, group, kind, causes); the message names the GroupKind as Go's
    # GroupKind.String() does: `Deployment.apps "web" is invalid: ...` (kubectl prints `The Deployment ...`
    # from details.kind).
    details: dict[str, Any] = {"name": name}
    if rt.group:
        details["group"] = rt.group
    details["kind"] = rt.kind
    details["causes"] = [{"reason": e.reason, "message": e.body, "field": e.field} for e in errors]
    qualified = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
    return StatusError(422, "Invalid", f'{qualified} {go_quote(name)} is invalid: {text}', details)


def bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def forbidden(message: str, rt: ResourceType | None = None, name: str | None = None) -> StatusError:
    return StatusError(403, "Forbidden", message, _details(rt, name) if rt else None)


def method_not_allowed(message: str = "the server does not allow this method on the requested resource"
                       ) -> StatusError:
    return StatusError(405, "MethodNotAllowed", message, {})


def route_not_found() -> StatusError:
    return StatusError(404, "NotFound", "the server could not find the requested resource", {})


def gone(message: str) -> StatusError:
    return StatusError(410, "Expired", message)


def expired_continue(token: str | None) -> StatusError:
    """410 for a LIST continued at a revision etcd compacted (etcd3 store's handleCompactedErrorForPaging):
    with `token`, one that continues the same list at the current revision, at the price of consistency."""
    if token is None:
        return gone("The provided continue parameter is too old to display a consistent list result. You can start "
                    "a new list without the continue parameter.")
    exc = gone("The provided continue parameter is too old to display a consistent list result. You can start a new "
               "list without the continue parameter, or use the continue token in this response to retrieve the "
               "remainder of the results. Continuing with the provided token results in an inconsistent list - "
               "objects that were created, modified, or deleted between the time the first chunk was returned and "
               "now may show up in the list.")
    exc.list_meta["continue"] = token
    return exc


def too_large_resource_version(wanted: int, current: int, retry_after: int = 0) -> StatusError:
    """storage.NewTooLargeResourceVersionError: a read at a resourceVersion the store has not reached
    (504, with the ResourceVersionTooLarge cause clients look for)."""
    details: dict[str, Any] = {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    return StatusError(504, "Timeout", f"Timeout: Too large resource version: {wanted}, current: {current}", details)


def unsupported_media_type(accepted: Sequence[str]) -> StatusError:
    """NewUnsupportedMediaTypeError: what the endpoint accepts, in kube-apiserver's words and order."""
    return StatusError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted "
                                                    f"media types include: {', '.join(accepted)}")


def too_large(message: str = "limit is 3145728") -> StatusError:
    """NewRequestEntityTooLargeError: a body over the 3 MiB limit, or a request that would make more."""
    return StatusError(413, "RequestEntityTooLarge", f"Request entity too large: {message}")


def unavailable(message: str) -> StatusError:
    return StatusError(503, "ServiceUnavailable", message)


def timeout(message: str) -> StatusError:
    return StatusError(504, "Timeout", message, {})


def from_storage(exc: StorageError) -> StatusError:
    """The Status of a storage failure, decided here once for every caller: etcd out of reach is 503,
    a storage timeout kube-apiserver's 504 (the write may yet land), a write over etcd's size limit 413.
    None is a server bug, so none is a 500."""
    if isinstance(exc, RequestTooLarge):
        return StatusError(413, "RequestEntityTooLarge", f"Request entity too large: {exc}")
    if isinstance(exc, StorageTimeout):
        return timeout(f"Timeout: request did not complete within the allotted timeout ({exc})")
    return unavailable(f"etcd is unavailable: {exc}")


def internal(message: str) -> StatusError:
    return StatusError(500, "InternalError", f"Internal error occurred: {message}",
                       {"causes": [{"message": message}]})
