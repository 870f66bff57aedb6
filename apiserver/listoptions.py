"""The query parameters of reads and deletes, decoded and validated as kube-apiserver does.

kube-apiserver turns a request's query into metav1.ListOptions (or DeleteOptions, TableOptions) with
apimachinery's generated url.Values conversion before anything else runs: the first value of each
parameter counts, numbers go through strconv.ParseInt (a failure is `400 BadRequest` with strconv's
own message, `strconv.ParseInt: parsing "x": invalid syntax`), booleans are true unless "0" or
"false". Then ValidateListOptions / ValidateDeleteOptions refuse combinations (`422 Invalid`,
`ListOptions.meta.k8s.io "" is invalid: ...`). This module does both, so a parameter kube would
refuse is never silently ignored and never reaches int() (which accepts `²` and fails with a 500 on
5,000 digits).

The resourceVersion and continue token of a LIST are checked by the registry, where kube's storage
checks them (`invalid resource version: ...`, `invalid continue token: ...`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kubelab import validation
from kubelab.validation import FieldError

from . import errors, strconv

EXACT = "Exact"
NOT_OLDER_THAN = "NotOlderThan"
PROPAGATION_POLICIES = ("Foreground", "Background", "Orphan")
INCLUDE_OBJECT = ("Metadata", "Object", "None", "")


class Query(Protocol):
    """Starlette's QueryParams, or anything with the same getlist (tests pass a dict of lists)."""

    def getlist(self, key: str) -> Sequence[str]: ...


def first(query: Query, name: str) -> str | None:
    """The value kube reads: url.Values' first one (Starlette's `get` returns the last)."""
    values = query.getlist(name)
    return values[0] if values else None


@dataclass(frozen=True)
class ListOptions:
    """metav1.ListOptions as decoded from a query, field for field."""

    label_selector: str = ""
    field_selector: str = ""
    watch: bool = False
    allow_watch_bookmarks: bool = False
    resource_version: str = ""
    resource_version_match: str = ""
    timeout_seconds: int | None = None
    limit: int = 0
    continue_token: str = ""
    send_initial_events: bool | None = None


def _int64(value: str) -> int:
    try:
        return strconv.parse_int(value)
    except strconv.NumError as exc:
        raise errors.bad_request(str(exc)) from None


def list_options(query: Query) -> ListOptions:
    """Convert_url_Values_To_v1_ListOptions: the parameters in the struct's order, so the first bad
    number is the one reported (timeoutSeconds before limit)."""
    def text(name: str) -> str:
        return first(query, name) or ""

    def flag(name: str) -> bool | None:
        value = first(query, name)
        return None if value is None else strconv.parse_bool_param(value)

    timeout = first(query, "timeoutSeconds")
    limit = first(query, "limit")
    return ListOptions(
        label_selector=text("labelSelector"), field_selector=text("fieldSelector"),
        watch=bool(flag("watch")), allow_watch_bookmarks=bool(flag("allowWatchBookmarks")),
        resource_version=text("resourceVersion"), resource_version_match=text("resourceVersionMatch"),
        timeout_seconds=None if timeout is None else _int64(timeout),
        limit=0 if limit is None else _int64(limit),
        continue_token=text("continue"), send_initial_events=flag("sendInitialEvents"))


def list_errors(options: ListOptions, *, watch: bool) -> list[FieldError]:
    """ValidateListOptions, with kube-apiserver's WatchList feature off (kubelab does not send the
    initial-events bookmark, so a client asking for sendInitialEvents is told so and falls back to
    list-then-watch, as against a kube-apiserver without the feature)."""
    match = options.resource_version_match
    problems: list[FieldError] = []
    if watch:
        if options.send_initial_events is not None:
            if match != NOT_OLDER_THAN:
                problems.append(validation.forbidden("resourceVersionMatch", "sendInitialEvents requires setting "
                                                     f"resourceVersionMatch to {NOT_OLDER_THAN}"))
            problems.append(validation.forbidden("sendInitialEvents", "sendInitialEvents is forbidden for watch "
                                                 "unless the WatchList feature gate is enabled"))
        if match:
            if options.send_initial_events is None:
                problems.append(validation.forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden for "
                                                     "watch unless sendInitialEvents is provided"))
            if match != NOT_OLDER_THAN:
                problems.append(validation.not_supported("resourceVersionMatch", match, [NOT_OLDER_THAN]))
            if options.continue_token:
                problems.append(validation.forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when "
                                                     "continue is provided"))
        return problems
    if match:
        if not options.resource_version:
            problems.append(validation.forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden unless "
                                                 "resourceVersion is provided"))
        if options.continue_token:
            problems.append(validation.forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when "
                                                 "continue is provided"))
        if match not in (EXACT, NOT_OLDER_THAN):
            problems.append(validation.not_supported("resourceVersionMatch", match, [EXACT, NOT_OLDER_THAN, ""]))
        if match == EXACT and options.resource_version == "0":
            problems.append(validation.forbidden("resourceVersionMatch", 'resourceVersionMatch "exact" is forbidden '
                                                 'for resourceVersion "0"'))
    if options.send_initial_events is not None:
        problems.append(validation.forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    return problems


def checked_list_options(query: Query, *, watch: bool) -> ListOptions:
    """Decode (400 on a bad number) and validate (422 ListOptions invalid) a LIST's or WATCH's query."""
    options = list_options(query)
    problems = list_errors(options, watch=watch)
    if problems:
        raise errors.invalid_options("ListOptions", problems)
    return options


def include_object(query: Query) -> str:
    """TableOptions.includeObject for a Table answer (ValidateTableOptions): Metadata, Object, None or
    empty (Metadata); anything else is kube's 400 `Unable to convert to Table as requested: ...`."""
    value = first(query, "includeObject")
    if value is None or value == "":
        return "Metadata"
    if value not in INCLUDE_OBJECT:
        problem = validation.invalid("includeObject", value, "must be 'Metadata', 'Object', 'None', or empty")
        raise errors.bad_request(f"Unable to convert to Table as requested: {problem}")
    return value


def delete_options_from_query(query: Query) -> dict[str, Any]:
    """Convert_url_Values_To_v1_DeleteOptions: what a DELETE without a body asks for in its query."""
    options: dict[str, Any] = {}
    grace = first(query, "gracePeriodSeconds")
    if grace is not None:
        options["gracePeriodSeconds"] = _int64(grace)
    orphan = first(query, "orphanDependents")
    if orphan is not None:
        options["orphanDependents"] = strconv.parse_bool_param(orphan)
    policy = first(query, "propagationPolicy")
    if policy is not None:
        options["propagationPolicy"] = policy
    dry_run = list(query.getlist("dryRun"))
    if dry_run:
        options["dryRun"] = dry_run
    return options


def delete_errors(options: Mapping[str, Any]) -> list[FieldError]:
    """ValidateDeleteOptions: orphanDependents and propagationPolicy not both, a known policy, dryRun
    only "All"."""
    problems: list[FieldError] = []
    policy = options.get("propagationPolicy")
    if options.get("orphanDependents") is not None and policy is not None:
        problems.append(validation.invalid("propagationPolicy", policy,
                                           "orphanDependents and deletionPropagation cannot be both set"))
    if policy is not None and policy not in PROPAGATION_POLICIES:
        problems.append(validation.not_supported("propagationPolicy", policy, [*PROPAGATION_POLICIES, "nil"]))
    dry_run = options.get("dryRun") or []
    if any(value != "All" for value in dry_run):
        problems.append(validation.not_supported("dryRun", list(dry_run), ["All"]))
    return problems
