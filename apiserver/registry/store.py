"""The generic store: create, get, list, update, patch, delete and watch for every kind.

It is kube-apiserver's generic registry in small: decode and type-check the body, run the kind's
strategy (defaults, validation, allocation), then one etcd transaction. Storage errors are turned into
Kubernetes Status errors here, where the resource and name are known.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import orjson

from kubelab import timeutil
from kubelab.kinds import NAMESPACES, ResourceType
from kubelab.models import TypedObject
from kubelab.selectors import FieldSelector, Selector

from .. import continuetoken, errors, managedfields, offload, requestctx, strconv
from ..cacher import Cacher, NotServable, TooOld, WatchEvent
from ..conversion import Conversions
from ..listoptions import EXACT, ListOptions
from ..storage import (
    Compacted,
    ForbiddenKeyPresent,
    FutureRevision,
    KeyExists,
    KeyNotFound,
    Range,
    RequiredKeyMissing,
    RevisionConflict,
    Storage,
    StorageEvent,
    Stored,
    Txn,
    Unavailable,
    range_end,
)
from . import decoding
from .cluster import terminating_key
from .strategy import Strategy, generate_name

log = logging.getLogger(__name__)

MAX_RETRIES = 16

# on_write(key, revision, verb, sent): every write etcd applied, and when it was sent to etcd (the API
# server's trace ring).
WriteHook = Callable[[str, int, str, float], None]


# etcd3 store's maxLimit: how far a page that filtering left short grows its next etcd read.
MAX_FETCH = 10_000
# etcd's revisions are int64: a resourceVersion (uint64) from here on is one etcd never reaches.
MAX_REVISION = 2**63 - 1


# ObjectMeta's collections are `omitempty` in Go: an object decoded into kube's structs and encoded again
# loses `annotations: {}`, so kube stores none and a dry-run patch that adds an empty map (kubectl diff's
# merge of an object with no last-applied annotation) shows no difference. managedFields is left alone:
# an empty list there is a request (strip them), which the field manager reads.
_OMITTED_WHEN_EMPTY = ("labels", "annotations", "finalizers", "owner_references")


def _parsed_resource_version(text: str) -> int:
    """APIObjectVersioner.ParseResourceVersion: "" and "0" are 0, anything else strconv.ParseUint
    (ASCII digits, uint64), refused as `resourceVersion: Invalid value: "x": strconv.ParseUint: ...`."""
    if text in ("", "0"):
        return 0
    try:
        return strconv.parse_uint(text)
    except strconv.NumError as exc:
        raise ValueError(f"resourceVersion: Invalid value: {strconv.quote(text)}: {exc}") from None


def parse_resource_version(text: str | None) -> int | None:
    """A watch's starting resourceVersion: None for unset or "0" (replay the current state first).

    kube-apiserver's watch cache reports a malformed one in the versioner's words with code 500
    (kubernetes#139485); it is the client's mistake, so kubelab answers 400 with the same words, before
    any stream starts. `²` and a 5,000-digit number are malformed too (Go reads ASCII digits only, up to
    2^64-1), not a 500."""
    try:
        return _parsed_resource_version(text or "") or None
    except ValueError as exc:
        raise errors.bad_request(str(exc)) from None


def list_resource_version(text: str) -> int:
    """A LIST's resourceVersion (0 for "" and "0"), refused as kube's etcd3 store refuses it:
    `400 invalid resource version: resourceVersion: Invalid value: ...`."""
    try:
        return _parsed_resource_version(text)
    except ValueError as exc:
        raise errors.bad_request(f"invalid resource version: {exc}") from None


@dataclass
class ListPage:
    """What a LIST answers: the items, the resourceVersion they were read at, and for a page with more
    after it the continue token and (without selectors) how many items remain."""

    items: list[dict[str, Any]]
    revision: int
    continue_token: str = ""
    remaining: int | None = None
    size: int = 0  # bytes of the items as stored: what encoding the answer will cost (offload.py)


class Registry:
    def __init__(self, storage: Storage, strategies: dict[ResourceType, Strategy], *,
                 cacher: Cacher | None = None, on_write: WriteHook | None = None,
                 conversions: Conversions | None = None) -> None:
        self.storage = storage
        self.strategies = strategies
        # Served versions stored as another kind (conversion.py): keys, watch cache and stored JSON are
        # the storage kind's; bodies, strategies, selectors and answers the served version's.
        self.conversions = conversions or Conversions()
        # The watch cache (cacher.py): watches are served from it, and updates try its copy of the
        # object before reading etcd, as kube's GuaranteedUpdate does with cachedExistingObject.
        self.cacher = cacher
        self.on_write = on_write

    def _written(self, key: str, revision: int, verb: str, sent: float) -> None:
        if self.on_write is not None:
            self.on_write(key, revision, verb, sent)

    def strategy(self, rt: ResourceType) -> Strategy:
        return self.strategies[rt]

    def storage_of(self, rt: ResourceType) -> ResourceType:
        """The kind `rt` is stored as (itself, unless it is a converted version of another)."""
        return self.conversions.storage_of(rt)

    def _served(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        return self.conversions.from_storage(rt, obj)

    # --- keys ------------------------------------------------------------------------------------

    @staticmethod
    def key(rt: ResourceType, namespace: str | None, name: str) -> str:
        return rt.storage_key(namespace, name)

    @staticmethod
    def prefix(rt: ResourceType, namespace: str | None) -> str:
        return rt.storage_prefix(namespace)

    # --- decoding --------------------------------------------------------------------------------

    def decode(self, rt: ResourceType, body: Any, namespace: str | None) -> TypedObject:
        body = self._check_fields(rt, decoding.check_kind(rt, body))
        obj: TypedObject = decoding.to_model(rt, body)
        meta = obj.metadata
        for attr in _OMITTED_WHEN_EMPTY:
            if getattr(meta, attr) in ({}, []):
                setattr(meta, attr, None)
        if rt.namespaced:
            body_ns = obj.metadata.namespace
            if body_ns and namespace and body_ns != namespace:
                raise errors.bad_request("the namespace of the provided object does not match the namespace sent "
                                         "on the request")
            obj.metadata.namespace = namespace or body_ns
        self.strategy(rt).set_defaults(obj)
        return obj

    def _check_fields(self, rt: ResourceType, body: dict[str, Any]) -> dict[str, Any]:
        """fieldValidation: kube-apiserver decodes into Go structs, so fields the kind does not have are
        refused (Strict) or dropped (Warn, with a warning each; Ignore)."""
        pruned, unknown = self.strategy(rt).prune_unknown(body)
        if not unknown:
            return body
        mode = requestctx.field_validation.get()
        if mode == "Strict":
            fields = ", ".join(f'unknown field "{path}"' for path in unknown)
            raise errors.bad_request(f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                                     f"strict decoding error: {fields}")
        if mode == "Warn":
            for path in unknown:
                requestctx.warn(f'unknown field "{path}"')
        return pruned

    def _to_model(self, rt: ResourceType, data: dict[str, Any]) -> TypedObject:
        return rt.model.model_validate(data)

    # --- reads -----------------------------------------------------------------------------------

    async def get(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        try:
            stored = await self.storage.get(self.key(self.storage_of(rt), namespace, name))
        except KeyNotFound:
            raise errors.not_found(rt, name) from None
        except Unavailable as exc:
            raise errors.from_storage(exc) from exc
        return self._served(rt, stored.obj)

    def matcher(self, rt: ResourceType, labels: Selector, fields: FieldSelector) -> Callable[[dict[str, Any]], bool]:
        strategy = self.strategy(rt)
        unsupported = fields.fields() - strategy.supported_fields()
        if unsupported:
            raise errors.bad_request(f'field label not supported: {min(unsupported)}')

        def matches(obj: dict[str, Any]) -> bool:
            if not labels.is_empty() and not labels.matches((obj.get("metadata") or {}).get("labels")):
                return False
            return fields.is_empty() or fields.matches(strategy.field_labels(obj))

        return matches

    async def list(self, rt: ResourceType, namespace: str | None, labels: Selector, fields: FieldSelector
                   ) -> tuple[list[dict[str, Any]], int]:
        """Every matching object, read at the current revision (the API server's own reads)."""
        matches = self.matcher(rt, labels, fields)
        try:
            items, revision = await self.storage.list(self.prefix(self.storage_of(rt), namespace))
        except Unavailable as exc:
            raise errors.from_storage(exc) from exc
        view = self.conversions.viewer(rt)
        objs = [s.obj for s in items] if view is None else [view(s.obj) for s in items]
        return [obj for obj in objs if matches(obj)], revision

    async def list_page(self, rt: ResourceType, namespace: str | None, labels: Selector, fields: FieldSelector,
                        options: ListOptions) -> ListPage:
        """A LIST as kube-apiserver serves it from etcd (etcd3 store's GetList), its options already
        validated (listoptions.checked_list_options).

        * No limit, no continue, no exact version: one read of the whole prefix at the current revision,
          the fast path every unpaged list takes. A resourceVersion newer than etcd's waits, as kube's
          watch cache does, up to 3 s for the store to reach it, then answers 504 Too large resource
          version (retry after 1 s).
        * `limit`: pages of at most `limit` items in key order. The first page is read at the current
          revision and its continue token carries that revision, so every later page is read at it from
          etcd: the pages together are one consistent snapshot. Selectors filter as the pages are read,
          so a page may hold fewer than `limit` items while more follow; a short page reads on, each
          etcd read twice the last (up to 10,000 keys), until the page is full or the prefix ends.
          `remainingItemCount` is given only without selectors, as kube gives it.
        * A continue token whose revision etcd compacted: 410 Expired, with a token that continues the
          same list at the current revision (inconsistent, and says so), as kube answers.
        * resourceVersionMatch=Exact, or a resourceVersion with a limit (the legacy exact match): read at
          that revision (410 if compacted, 504 Too large if etcd has not reached it).
        """
        matches = self.matcher(rt, labels, fields)
        view = self.conversions.viewer(rt)
        everything = labels.is_empty() and fields.is_empty()
        prefix = self.prefix(self.storage_of(rt), namespace)
        wanted = list_resource_version(options.resource_version)
        limit = max(options.limit, 0)
        start, at, continuing = prefix, 0, bool(options.continue_token)
        if continuing:
            try:
                start, token_revision = continuetoken.decode(options.continue_token, prefix)
            except continuetoken.InvalidContinue as exc:
                raise errors.bad_request(f"invalid continue token: {exc}") from None
            if options.resource_version not in ("", "0"):
                raise errors.bad_request("specifying resource version is not allowed when using continue")
            at = max(token_revision, 0)  # -1: continue at the current revision (after a compaction)
        elif options.resource_version_match == EXACT or (not options.resource_version_match and limit and wanted):
            at = wanted
        if self.cacher is not None and not at and not continuing:
            cached = await self._list_from_cache(rt, prefix, None if everything else matches,
                                                 consistent=options.resource_version == "", wanted=wanted,
                                                 limit=limit, everything=everything)
            if cached is not None:
                return cached
        if not limit and not at and not continuing:
            return await self._list_whole(rt, prefix, matches, wanted)

        end = range_end(prefix)
        key, fetch = start, limit
        items: list[dict[str, Any]] = []
        size = 0
        last_key = ""
        while True:
            page = await self._range(key, end, fetch, at, continuing=continuing, start=start, prefix=prefix)
            if wanted and not at and page.revision < wanted:
                raise errors.too_large_resource_version(wanted, page.revision)
            more = page.more
            for stored in page.items:
                if limit and len(items) >= limit:
                    more = True
                    break
                last_key = stored.key
                obj = stored.obj if view is None else view(stored.obj)
                if matches(obj):
                    items.append(obj)
                    size += stored.size
            if not at:
                at = page.revision  # the later reads of this page, and the later pages, read here
            if not more or not limit or len(items) >= limit:
                break
            fetch = min(fetch * 2, MAX_FETCH) if fetch < MAX_FETCH else fetch
            key = last_key + "\x00"
        if not more:
            return ListPage(items, at, size=size)
        token = continuetoken.encode(last_key + "\x00", prefix, at)
        return ListPage(items, at, token, page.count - limit if everything else None, size=size)

    async def _list_from_cache(self, rt: ResourceType, prefix: str, matches: Callable[[dict[str, Any]], bool] | None,
                               *, consistent: bool, wanted: int, limit: int, everything: bool) -> ListPage | None:
        """A LIST from the watch cache, as kube-apiserver's cacher serves it (None: read etcd instead).

        The cache answers only once it has been filled from a LIST of etcd (its start, shared by every
        request that finds it not started), and only at a revision it has seen every event up to:
        * resourceVersion "0": whatever the cache holds now, however old (kube's "Any").
        * resourceVersion N (not older than): once the cache has seen N. Past the events it has, only a
          progress notification can tell it nothing more happened up to N; on an etcd whose progress
          notifications can overtake events (see cacher.progress_requests_reliable) etcd answers at once
          instead (kube would wait up to 3 s for events, then answer 504).
        * no resourceVersion, the consistent read: only when etcd's progress notifications are reliable
          (kube's ConsistentListFromCache needs the same, etcd >= 3.4.31 / 3.5.13); etcd's current revision
          is read (one cheap range of a single key) and the cache answers once a progress notification
          says it has caught up to it; when that takes over 3 s, etcd answers, as kube falls back to it.
          On an older etcd the consistent read is etcd's.
        * `limit`: the first page comes from the cache (kube 1.33+ pages from the cache); its continue token
          carries the cache's revision, so later pages are read from etcd at exactly that revision: together
          they are one snapshot, as with pages read from etcd alone. Continuations and exact resourceVersions
          are not the cache's (the caller reads etcd)."""
        assert self.cacher is not None
        view = self.conversions.viewer(rt)
        if not self.conversions.selects_stored(rt):
            # A version converted from its storage (events.k8s.io/v1): selectors and pages are on the served
            # objects, which the cache does not hold; etcd answers (the cache serves its watches). A version
            # that only rewrites apiVersion (a CRD's strategy None) selects the same on stored objects.
            return None
        cache = self.cacher.cache(self.storage_of(rt))
        reliable = await self.cacher.progress_reliable()  # the first call starts etcd's version check
        try:
            if consistent and not reliable:
                return None
            await cache.ensure_started()
            needed = await self._current_revision() if consistent else wanted
            if needed > cache.revision:
                if not reliable:
                    return None
                await cache.wait_fresh(needed)
                if needed > cache.revision:  # etcd said so before the trust in it was known: not enough
                    return None
        except NotServable:
            return None
        except Unavailable as exc:
            raise errors.from_storage(exc) from exc
        listed = cache.list(prefix, matches, limit)
        if listed is None:
            return None
        if view is not None:
            listed.items = [view(item) for item in listed.items]
        if not listed.last_key:
            return ListPage(listed.items, listed.revision, size=listed.size)
        token = continuetoken.encode(listed.last_key + "\x00", prefix, listed.revision)
        return ListPage(listed.items, listed.revision, token, listed.total - limit if everything else None,
                        size=listed.size)

    async def _list_whole(self, rt: ResourceType, prefix: str, matches: Callable[[dict[str, Any]], bool],
                          wanted: int) -> ListPage:
        try:
            stored, revision = await self.storage.list(prefix)
            if wanted > revision:
                revision = await self._wait_for_revision(rt, wanted, revision)
                stored, revision = await self.storage.list(prefix)
        except Unavailable as exc:
            raise errors.from_storage(exc) from exc
        view = self.conversions.viewer(rt)
        if view is not None:
            served = [(obj, s.size) for s in stored if matches(obj := view(s.obj))]
            return ListPage([obj for obj, _ in served], revision, size=sum(size for _, size in served))
        kept = [s for s in stored if matches(s.obj)]
        return ListPage([s.obj for s in kept], revision, size=sum(s.size for s in kept))

    async def _wait_for_revision(self, rt: ResourceType, wanted: int, current: int) -> int:
        """kube's watch cache (waitUntilFreshAndBlock) waits up to 3 s for a resourceVersion it has not
        seen, then answers 504 asking to retry after 1 s. kubelab's lists read etcd, but the watch
        cache knows when etcd has passed a revision, so the wait is the same."""
        if self.cacher is not None:
            cache = self.cacher.cache(self.storage_of(rt))
            try:
                await cache.ensure_started()
                await cache.wait_fresh(wanted)
            except NotServable:
                pass
            else:
                return wanted
        current = max(current, await self.storage.revision())
        if current >= wanted:
            return current
        raise errors.too_large_resource_version(wanted, current, retry_after=1 if self.cacher is not None else 0)

    async def _current_revision(self) -> int:
        try:
            return await self.storage.revision()
        except Unavailable as exc:
            raise errors.from_storage(exc) from exc

    async def _range(self, key: str, end: str, limit: int, at: int, *, continuing: bool, start: str,
                     prefix: str) -> Range:
        if at >= MAX_REVISION:
            raise errors.too_large_resource_version(at, await self._current_revision())
        try:
            return await self.storage.list_range(key, end, limit=limit, revision=at)
        except Compacted:
            if continuing:
                raise errors.expired_continue(continuetoken.encode(start, prefix, -1)) from None
            raise errors.gone("The resourceVersion for the provided list is too old.") from None
        except FutureRevision:
            raise errors.too_large_resource_version(at, await self._current_revision()) from None
        except Unavailable as exc:
            raise errors.from_storage(exc) from exc

    # --- create ----------------------------------------------------------------------------------

    async def create(self, rt: ResourceType, namespace: str | None, body: Any, *, dry_run: bool = False,
                     manager: str | None = None) -> dict[str, Any]:
        """`manager` names the field manager of the write (fieldManager, or the client's user agent);
        None leaves managedFields as the body has them (the API server's own writes, applies)."""
        strategy = self.strategy(rt)

        def prepare() -> tuple[TypedObject, bool, list[Any]]:
            # CPU only, no I/O: off the event loop for a big body (offload.py).
            obj = self.decode(rt, body, namespace)
            if rt.namespaced and not obj.metadata.namespace:
                raise errors.bad_request("the server could not find the requested resource (namespace is required)")
            if manager:
                # Before PrepareForCreate, as kube-apiserver's field manager runs before the strategy: the
                # creator owns what it sent and the defaults, not what the server fills in (uid, clusterIP).
                self._track(rt, None, obj, manager, None)
            strategy.prepare_create(obj)
            strategy.fill_status(obj)
            generated = not obj.metadata.name
            if generated and obj.metadata.generate_name:
                obj.metadata.name = generate_name(obj.metadata.generate_name)
            return obj, generated, strategy.validate_create(obj)

        obj, generated, errs = await offload.run(offload.body_bytes(), prepare)
        if errs:
            await self._check_namespace(rt, obj)
            raise errors.invalid(rt, obj.metadata.name or obj.metadata.generate_name or "", errs)
        warnings = strategy.warnings_on_create(obj)
        if warnings or dry_run:
            # Admission (NamespaceLifecycle) answers a missing namespace before BeforeCreate adds warnings.
            await self._check_namespace(rt, obj)
        for text in warnings:
            requestctx.warn(text)
        return await self._store_new(rt, strategy, obj, generated=generated, dry_run=dry_run)

    @staticmethod
    def _track(rt: ResourceType, old: dict[str, Any] | None, new: TypedObject, manager: str,
               subresource: str | None) -> None:
        """Field ownership of an update (managedfields.track_update), written into `new`. A body
        without managedFields keeps the stored ones. metadata, spec and status are compared as
        existing even when absent, as the Go types' zero values have them: the creator owns
        `spec.type`, not `spec` as a whole."""
        data = new.to_dict()
        raw = new.metadata.managed_fields
        if raw is None and old is not None:
            raw = (old.get("metadata") or {}).get("managedFields")
        before = dict(old or {})
        for key in ("metadata", "spec", "status"):
            if isinstance(data.get(key), dict):
                before.setdefault(key, {})
        entries = managedfields.track_update(managedfields.type_name(rt), before, data, managedfields.decode_entries(raw),
                                             manager=manager, api_version=rt.api_version,
                                             subresource=subresource or "", now=timeutil.rfc3339())
        new.metadata.managed_fields = managedfields.encode_entries(entries)

    async def _check_namespace(self, rt: ResourceType, obj: TypedObject) -> None:
        """NamespaceLifecycle admission, which kube-apiserver runs before validation: a create into a
        missing namespace is `namespaces "x" not found` whatever else is wrong with the object. The
        write itself checks the same in its etcd transaction; this read only runs on the paths that
        answer without writing (an invalid object, a dry run, a refused allocation)."""
        namespace = obj.metadata.namespace
        if not rt.namespaced or not namespace:
            return
        try:
            await self.storage.get(self.key(NAMESPACES, None, namespace))
        except KeyNotFound:
            raise errors.namespace_not_found(namespace) from None
        except Unavailable as exc:
            raise errors.from_storage(exc) from exc
        try:
            await self.storage.get(terminating_key(namespace))
        except KeyNotFound:
            return
        raise errors.namespace_terminating(rt, obj.metadata.name or "", namespace)

    async def _store_new(self, rt: ResourceType, strategy: Strategy, obj: TypedObject, *, generated: bool,
                         dry_run: bool) -> dict[str, Any]:
        avoid: set[str] = set()
        base = obj
        # Only allocating kinds (Services) change the object in ways a retry must undo; the others
        # write `base` itself and skip a deep copy per create.
        allocates = type(strategy).allocate is not Strategy.allocate
        for _ in range(MAX_RETRIES):
            attempt = base.model_copy(deep=True) if allocates else base
            alloc = strategy.allocate(attempt, None, avoid=avoid)
            if alloc.errors:
                await self._check_namespace(rt, attempt)
                raise errors.invalid(rt, attempt.metadata.name or "", alloc.errors)
            data = await offload.run(offload.body_bytes(), attempt.to_dict)
            if dry_run:
                return data
            data = self.conversions.to_storage(rt, data)
            key = self.key(self.storage_of(rt), attempt.metadata.namespace, attempt.metadata.name or "")
            txn = alloc.txn
            if rt.namespaced:
                txn.require.append(self.key(NAMESPACES, None, attempt.metadata.namespace or ""))
                txn.absent.append(terminating_key(attempt.metadata.namespace or ""))
            lease = await self._lease(strategy)
            sent = time.time()
            try:
                revision = await self.storage.create(key, data, extra=txn, lease=lease)
            except KeyExists as exc:
                if exc.key == key:
                    if generated and base.metadata.generate_name:
                        base.metadata.name = generate_name(base.metadata.generate_name)
                        continue
                    raise errors.already_exists(rt, attempt.metadata.name or "") from None
                if exc.key in alloc.taken_errors:
                    raise errors.invalid(rt, attempt.metadata.name or "", [alloc.taken_errors[exc.key]]) from None
                avoid.add(exc.key)
                continue
            except RequiredKeyMissing:
                raise errors.namespace_not_found(attempt.metadata.namespace or "") from None
            except ForbiddenKeyPresent:
                raise errors.namespace_terminating(rt, attempt.metadata.name or "",
                                                   attempt.metadata.namespace or "") from None
            except Unavailable as exc:
                self._lease_failed(lease)
                raise errors.from_storage(exc) from exc
            self._written(key, revision, "create", sent)
            data["metadata"]["resourceVersion"] = str(revision)
            return self._served(rt, data)
        raise errors.StatusError(500, "InternalError", "Internal error occurred: could not allocate after "
                                                       f"{MAX_RETRIES} attempts")

    # --- update and patch ------------------------------------------------------------------------

    async def update(self, rt: ResourceType, namespace: str | None, name: str, body: Any, *,
                     subresource: str | None = None, dry_run: bool = False, manager: str | None = None
                     ) -> dict[str, Any]:
        new_obj = await offload.run(offload.body_bytes(), self.decode, rt, body, namespace)
        if new_obj.metadata.name and new_obj.metadata.name != name:
            raise errors.bad_request(f"the name of the object ({new_obj.metadata.name}) does not match the name "
                                     f"on the URL ({name})")
        new_obj.metadata.name = name
        precondition = new_obj.metadata.resource_version or None
        attempts = 0

        def replacement(_current: dict[str, Any]) -> TypedObject:
            # The first attempt takes the decoded body itself; a retry decodes it again rather than
            # paying a deep copy on every PUT.
            nonlocal attempts
            attempts += 1
            if attempts == 1:
                return new_obj
            again = self.decode(rt, body, namespace)
            again.metadata.name = name
            return again

        return await self.guaranteed_update(rt, namespace, name, replacement, subresource=subresource,
                                            dry_run=dry_run, precondition=precondition, manager=manager)

    async def guaranteed_update(self, rt: ResourceType, namespace: str | None, name: str,
                                mutate: Callable[[dict[str, Any]], TypedObject | dict[str, Any]], *,
                                subresource: str | None = None, dry_run: bool = False,
                                precondition: str | None = None, manager: str | None = None,
                                field_subresource: str | None = None) -> dict[str, Any]:
        """Read, mutate, validate, write; retry on a storage conflict unless the caller named a version.
        With a `manager`, the fields the write changed become that manager's in managedFields, under
        `field_subresource` when the write came through one the strategy does not see (scale)."""
        strategy = self.strategy(rt)
        key = self.key(self.storage_of(rt), namespace, name)
        avoid: set[str] = set()
        cached = self._cached(self.storage_of(rt), key, precondition)
        for _ in range(MAX_RETRIES):
            from_cache = cached is not None
            try:
                stored = cached if cached is not None else await self.storage.get(key)
            except KeyNotFound:
                raise errors.not_found(rt, name) from None
            except Unavailable as exc:
                raise errors.from_storage(exc) from exc
            cached = None  # a retry reads etcd
            if precondition is not None and precondition != str(stored.mod_revision):
                raise errors.stale_update(rt, name)

            def prepare(stored: Stored) -> tuple[TypedObject, Any, dict[str, Any], bool]:
                # CPU only, no I/O: off the event loop for a big body or object (offload.py).
                current = self._served(rt, stored.obj)
                old = self._to_model(rt, current)
                result = mutate(current)
                new = result if isinstance(result, TypedObject) else self.decode(rt, result, namespace)
                new.metadata.name = name
                if precondition is None:
                    new.metadata.resource_version = str(stored.mod_revision)
                elif new.metadata.resource_version and new.metadata.resource_version != str(stored.mod_revision):
                    raise errors.stale_update(rt, name)
                strategy.prepare_update(new, old, subresource)
                strategy.fill_status(new)
                if manager:
                    self._track(rt, current, new, manager, field_subresource or subresource)
                errs = strategy.validate_update(new, old, subresource)
                if errs:
                    raise errors.invalid(rt, name, errs)
                alloc = strategy.allocate(new, old, avoid=avoid) if subresource is None else None
                if alloc is not None and alloc.errors:
                    raise errors.invalid(rt, name, alloc.errors)
                data = self.conversions.to_storage(rt, new.to_dict())
                data["metadata"].pop("resourceVersion", None)
                return new, alloc, data, data == {**stored.obj, "metadata": {
                    k: v for k, v in stored.obj["metadata"].items() if k != "resourceVersion"}}

            size = offload.body_bytes()
            if not offload.is_heavy(size):
                size = offload.object_bytes(stored.obj)  # a small patch of a big object is heavy too
            new, alloc, data, unchanged = await offload.run(size, prepare, stored)
            if unchanged:
                if from_cache:
                    continue  # no-op against the cache's copy, which may be stale: ask etcd
                # a no-op update writes nothing and keeps the resourceVersion
                return self._served(rt, stored.obj)
            if dry_run:
                data["metadata"]["resourceVersion"] = str(stored.mod_revision)
                return self._served(rt, data)
            if strategy.should_delete_on_update(new):
                # The last finalizer is gone: the object goes now (ShouldDeleteDuringUpdate).
                sent = time.time()
                try:
                    revision = await self.storage.delete(key, stored.mod_revision, extra=strategy.release(new))
                except RevisionConflict:
                    continue
                except KeyNotFound:
                    raise errors.not_found(rt, name) from None
                self._written(key, revision, "delete", sent)
                data["metadata"]["resourceVersion"] = str(revision)
                return self._served(rt, data)
            lease = await self._lease(strategy)
            sent = time.time()
            try:
                revision = await self.storage.update(key, data, stored.mod_revision,
                                                     extra=alloc.txn if alloc else None, lease=lease)
            except RevisionConflict:
                if precondition is not None:
                    raise errors.stale_update(rt, name) from None
                continue
            except KeyNotFound:
                raise errors.not_found(rt, name) from None
            except KeyExists as exc:
                if alloc is not None and exc.key in alloc.taken_errors:
                    raise errors.invalid(rt, name, [alloc.taken_errors[exc.key]]) from None
                avoid.add(exc.key)
                continue
            except Unavailable as exc:
                self._lease_failed(lease)
                raise errors.from_storage(exc) from exc
            self._written(key, revision, "update", sent)
            data["metadata"]["resourceVersion"] = str(revision)
            return self._served(rt, data)
        raise errors.conflict(rt, name, "too many concurrent updates, please try again")

    async def _lease(self, strategy: Strategy) -> int | None:
        """The etcd lease a write of this kind goes under: None for kinds that live until deleted."""
        if strategy.ttl is None:
            return None
        try:
            return await self.storage.leases.for_ttl(strategy.ttl)
        except Unavailable as exc:
            raise errors.from_storage(exc) from exc

    def _lease_failed(self, lease: int | None) -> None:
        # A write under a lease etcd no longer knows (revoked by hand, say) fails as unavailable; the
        # next write then asks for a fresh lease instead of failing the same way until the window ends.
        if lease is not None:
            self.storage.leases.forget()

    def _cached(self, rt: ResourceType, key: str, precondition: str | None) -> Stored | None:
        """The watch cache's copy of an object as a first guess for an update, cloned (mutations get
        their own dicts); None when the cache has none, or not the version the caller named."""
        if self.cacher is None:
            return None
        obj = self.cacher.cached(rt, key)
        if obj is None:
            return None
        revision = int(obj["metadata"]["resourceVersion"])
        if precondition is not None and precondition != str(revision):
            return None
        return Stored(key, orjson.loads(orjson.dumps(obj)), revision, 0)

    # --- delete ----------------------------------------------------------------------------------

    async def delete(self, rt: ResourceType, namespace: str | None, name: str, *,
                     preconditions: dict[str, Any] | None = None, dry_run: bool = False,
                     options: dict[str, Any] | None = None) -> dict[str, Any]:
        """Delete now, or — for objects with finalizers, running pods and namespaces — mark the object
        with a deletionTimestamp and leave it for its finalizer, kubelet or controller (200 either way,
        with the object as it now is)."""
        strategy = self.strategy(rt)
        key = self.key(self.storage_of(rt), namespace, name)
        preconditions = preconditions or {}
        options = options or {}
        for _ in range(MAX_RETRIES):
            try:
                stored = await self.storage.get(key)
            except KeyNotFound:
                raise errors.not_found(rt, name) from None
            except Unavailable as exc:
                raise errors.from_storage(exc) from exc
            meta = stored.obj.get("metadata") or {}
            uid = preconditions.get("uid")
            if uid and uid != meta.get("uid"):
                raise errors.conflict(rt, name, f"Precondition failed: UID in precondition: {uid}, UID in object "
                                                f"meta: {meta.get('uid')}")
            rv = preconditions.get("resourceVersion")
            if rv and rv != str(stored.mod_revision):
                raise errors.conflict(rt, name, f"Precondition failed: ResourceVersion in precondition: {rv}, "
                                                f"ResourceVersion in object meta: {stored.mod_revision}")
            obj = self._to_model(rt, self._served(rt, stored.obj))
            strategy.set_gc_finalizers(obj, options)
            marking = strategy.mark_for_deletion(obj, options)
            if marking is not None:
                data = self.conversions.to_storage(rt, obj.to_dict())
                data["metadata"].pop("resourceVersion", None)
                unchanged = {**stored.obj, "metadata": {k: v for k, v in stored.obj["metadata"].items()
                                                        if k != "resourceVersion"}}
                if dry_run or data == unchanged:
                    data["metadata"]["resourceVersion"] = str(stored.mod_revision)
                    return self._served(rt, data)
                sent = time.time()
                try:
                    revision = await self.storage.update(key, data, stored.mod_revision, extra=marking)
                except (RevisionConflict, KeyExists):
                    continue
                except KeyNotFound:
                    raise errors.not_found(rt, name) from None
                except Unavailable as exc:
                    raise errors.from_storage(exc) from exc
                self._written(key, revision, "delete", sent)
                data["metadata"]["resourceVersion"] = str(revision)
                return self._served(rt, data)
            if dry_run:
                return self._served(rt, stored.obj)
            txn = strategy.release(obj)
            sent = time.time()
            try:
                revision = await self.storage.delete(key, stored.mod_revision, extra=txn)
            except RevisionConflict:
                continue
            except KeyNotFound:
                raise errors.not_found(rt, name) from None
            except Unavailable as exc:
                raise errors.from_storage(exc) from exc
            self._written(key, revision, "delete", sent)
            return self._served(rt, stored.obj)
        raise errors.conflict(rt, name, "too many concurrent updates, please try again")

    # --- watch -----------------------------------------------------------------------------------

    async def watch(self, rt: ResourceType, namespace: str | None, resource_version: str | None,
                    labels: Selector, fields: FieldSelector) -> AsyncIterator[WatchEvent]:
        """kube-apiserver's watch: rv unset or "0" replays the current objects as ADDED first.

        A change that moves an object into or out of the selection is reported as ADDED or DELETED,
        as the watch cache's filtering does.
        """
        served_matches = self.matcher(rt, labels, fields)
        view = self.conversions.viewer(rt)
        # The watch cache and etcd hold stored objects: a served version's selectors see them converted.
        matches = served_matches if view is None else (lambda obj: served_matches(view(obj)))
        prefix = self.prefix(self.storage_of(rt), namespace)
        since = parse_resource_version(resource_version)
        if since is not None and since >= MAX_REVISION:
            # A uint64 resourceVersion etcd's int64 revisions never reach (nor can a watch ask etcd for).
            raise errors.too_large_resource_version(since, await self._current_revision())
        if self.cacher is not None:
            cached = self.cacher.cache(self.storage_of(rt)).watch(prefix, since, None if labels.is_empty() and fields.is_empty()
                                                 else matches, current_revision=self.storage.revision)
            try:
                first = await anext(cached)
            except StopAsyncIteration:
                return
            except NotServable as exc:
                log.debug("watch of %s from %s not served by the watch cache: %s", prefix, since, exc)
            except TooOld as exc:
                raise errors.gone(str(exc)) from None
            except Unavailable as exc:
                raise errors.from_storage(exc) from exc
            else:
                try:
                    yield first if view is None else _served_event(first, view)
                    async for event in cached:
                        yield event if view is None else _served_event(event, view)
                except Unavailable as exc:
                    raise errors.from_storage(exc) from exc
                finally:
                    await cached.aclose()
                return
        if since is None:
            try:
                items, revision = await self.storage.list(prefix)
            except Unavailable as exc:
                raise errors.from_storage(exc) from exc
            for item in items:
                if matches(item.obj):
                    added = WatchEvent("ADDED", item.obj, item.key, item.mod_revision)
                    yield added if view is None else _served_event(added, view)
            start = revision + 1
        else:
            start = since + 1
        try:
            async for change in self.storage.watch(prefix, start):
                converted = self._convert(change, matches)
                if converted is not None:
                    yield converted if view is None else _served_event(converted, view)
        except Compacted as exc:
            raise errors.gone(f"too old resource version: {start - 1} ({exc.compacted})") from exc
        except Unavailable as exc:
            raise errors.from_storage(exc) from exc

    @staticmethod
    def _convert(event: StorageEvent, matches: Callable[[dict[str, Any]], bool]) -> WatchEvent | None:
        if event.type == "PROGRESS":
            return None
        if event.type == "DELETE":
            if event.prev is None or not matches(event.prev):
                return None
            obj = event.prev
            obj["metadata"]["resourceVersion"] = str(event.revision)
            return WatchEvent("DELETED", obj, event.key, event.revision)
        assert event.obj is not None
        now_matches = matches(event.obj)
        before = event.prev is not None and not event.created and matches(event.prev)
        if now_matches:
            return WatchEvent("MODIFIED" if before else "ADDED", event.obj, event.key, event.revision)
        if before:
            return WatchEvent("DELETED", event.obj, event.key, event.revision)
        return None

    # --- helpers for the API server's own bookkeeping ------------------------------------------

    async def ensure(self, rt: ResourceType, body: dict[str, Any]) -> None:
        """Create an object unless it exists (bootstrap objects: default namespaces, the kubernetes Service)."""
        meta = body.get("metadata") or {}
        try:
            await self.create(rt, meta.get("namespace"), body)
        except errors.StatusError as exc:
            if exc.code != 409:
                raise

    async def wait_for_storage(self, timeout: float = 30.0) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        told = False
        while True:
            try:
                await self.storage.revision()
                return
            except Unavailable as exc:
                if asyncio.get_running_loop().time() > deadline:
                    raise
                if not told:  # once: the start-up says what it waits for, rather than nothing for 30 s
                    told = True
                    log.warning("waiting up to %.0fs for etcd: %s", timeout, exc)
                await asyncio.sleep(0.2)


def _served_event(event: WatchEvent, view: Callable[[dict[str, Any]], dict[str, Any]]) -> WatchEvent:
    """A watch event of a converted version: its object converted, its JSON line its own (the stored
    version's line, shared by that version's watchers, does not serve this one). An object the view leaves
    as it is (a CRD's storage version, rewritten only when stored under an older one) keeps the shared line."""
    served = view(event.object)
    if served is event.object:
        return event
    return WatchEvent(event.type, served, event.key, event.revision, event.size)


__all__ = ["Registry", "Txn", "WatchEvent"]

