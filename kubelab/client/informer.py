"""Informer: list, then watch from the list's resourceVersion, keeping a local cache up to date.

The loop is client-go's reflector (tools/cache/reflector.go), and so are the resourceVersions it lists
at (relistResourceVersion): the first LIST asks for resourceVersion "0", which the API server answers
from its watch cache without a read of etcd, so a whole cluster's components starting at once cost the
store nothing; a relist asks for the last resourceVersion the informer synced to (the list's, then each
watch event's), which any server that has reached it may answer from its cache too, and which never
takes the informer back in time; only when a server answers that version is unavailable (410 Expired,
or not reached yet: 504 ResourceVersionTooLarge, as after a failover to a server of a restored etcd)
does it list with "" (a consistent read), and then resumes the "not older than" lists after that
list succeeds. A watch answered 410 relists at once from the last synced version; a watch that fails
at the API (an ERROR event, a 4xx/5xx) relists after a back-off (800 ms doubling to 30 s), as
ListAndWatch returning to its BackoffUntil does; a watch the transport cuts (server gone, stream cut)
is retried from the last version after the back-off, without a list. The cache is updated before
handlers are told, and handlers are plain functions that should only enqueue keys; a relist tells them
what changed while the watch was away (ADDED/MODIFIED/DELETED against the cache), so none is lost.

An object that does not fit its model (a field of the wrong type, written straight into etcd past the
API server's decoding) is left out of the cache, as if deleted, and logged once; client-go would fail
the whole list, or end the watch at that event and relist into the same failure, so that one such
object froze the view of every other object of its kind.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from .. import models
from ..kinds import ResourceType
from .errors import ApiError, Expired, resource_version_unavailable
from .http import ApiClient

log = logging.getLogger(__name__)

T = TypeVar("T", bound=models.TypedObject)

# handler(event_type, old, new): ADDED has old=None, DELETED has new=None.
Handler = Callable[[str, Any, Any], None]


class Informer(Generic[T]):
    def __init__(self, api: ApiClient, rt: ResourceType, *, namespace: str | None = None,
                 label_selector: str | None = None, field_selector: str | None = None,
                 name: str | None = None) -> None:
        self.api = api
        self.rt = rt
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.name = name or rt.plural
        self.cache: dict[str, T] = {}
        self.resource_version = ""
        # client-go's isLastSyncResourceVersionUnavailable: the last list's version was refused; list with "".
        self._version_unavailable = False
        self._handlers: list[Handler] = []
        self._synced = asyncio.Event()
        # Objects left out because they do not fit the model: key -> the resourceVersion last logged.
        self.undecodable: dict[str, str] = {}

    def add_handler(self, handler: Handler, *, replay: bool = False) -> None:
        """`replay`: first tell `handler` every object the cache holds, as ADDED (client-go's
        sharedIndexInformer.AddEventHandler for a handler that joins a running informer); nothing can
        change the cache in between, so the handler misses no event and sees none twice."""
        self._handlers.append(handler)
        if replay:
            for obj in list(self.cache.values()):
                try:
                    handler("ADDED", None, obj)
                except Exception:  # as _notify: a broken handler must not stop its caller
                    log.exception("%s informer: handler failed on a replayed ADDED", self.name)

    def remove_handler(self, handler: Handler) -> None:
        """Stop telling `handler` (one added with add_handler; equal bound methods are the same handler)."""
        if handler in self._handlers:
            self._handlers.remove(handler)

    def has_synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    def get(self, key: str) -> T | None:
        return self.cache.get(key)

    def items(self) -> list[T]:
        return list(self.cache.values())

    def _notify(self, event_type: str, old: T | None, new: T | None) -> None:
        for handler in self._handlers:
            try:
                handler(event_type, old, new)
            except Exception:  # one broken handler must not stop the informer
                log.exception("%s informer: handler failed on %s", self.name, event_type)

    def _replace(self, items: list[T]) -> None:
        fresh = {item.key: item for item in items}
        old_cache, self.cache = self.cache, fresh
        for key, obj in fresh.items():
            previous = old_cache.get(key)
            if previous is None:
                self._notify("ADDED", None, obj)
            elif previous.metadata.resource_version != obj.metadata.resource_version:
                self._notify("MODIFIED", previous, obj)
        for key, obj in old_cache.items():
            if key not in fresh:
                self._notify("DELETED", obj, None)

    def _undecodable(self, event_type: str | None, raw: dict[str, Any], error: Exception) -> None:
        """An object that does not fit the model: out of the cache (handlers hear it was deleted), logged
        once per version."""
        meta: dict[str, Any] = raw["metadata"] if isinstance(raw.get("metadata"), dict) else {}
        namespace, name = meta.get("namespace"), meta.get("name")
        key = f"{namespace}/{name}" if namespace else str(name or "")
        version = str(meta.get("resourceVersion") or "")
        if event_type == "DELETED":
            self.undecodable.pop(key, None)
        elif self.undecodable.get(key) != version:
            self.undecodable[key] = version
            problem = " ".join(line.strip() for line in str(error).splitlines()[1:3])
            log.warning("%s informer: leaving out %r, it does not decode: %s", self.name, key, problem)
        if event_type is not None and version:
            self.resource_version = version  # the watch has gone past it
        old = self.cache.pop(key, None)
        if old is not None:
            self._notify("DELETED", old, None)

    def _apply(self, event_type: str, obj: T) -> None:
        key = obj.key
        if event_type == "DELETED":
            # Handlers get the watch event's object, as client-go's DeleteFunc does: the last state,
            # at the deletion's resourceVersion (`kubelab trace` joins on that revision).
            self.cache.pop(key, None)
            self._notify("DELETED", obj, None)
            return
        old = self.cache.get(key)
        self.cache[key] = obj
        self._notify("ADDED" if old is None else "MODIFIED", old, obj)

    def relist_resource_version(self) -> str:
        """The resourceVersion the next LIST asks for (client-go's relistResourceVersion)."""
        if self._version_unavailable:
            return ""
        return self.resource_version or "0"

    async def _list(self) -> None:
        try:
            items, rv = await self._list_at(self.relist_resource_version())
        except ApiError as exc:
            if not resource_version_unavailable(exc):
                raise
            log.info("%s informer: resourceVersion %r unavailable (%s), listing with a consistent read",
                     self.name, self.relist_resource_version(), exc.message)
            self._version_unavailable = True
            items, rv = await self._list_at("")
        self._version_unavailable = False
        self._replace(items)
        self.resource_version = rv
        self._synced.set()

    async def _list_at(self, resource_version: str) -> tuple[list[T], str]:
        return await self.api.list(self.rt, self.namespace, label_selector=self.label_selector,
                                   field_selector=self.field_selector, on_undecodable=self._undecodable,
                                   resource_version=resource_version)

    async def run(self) -> None:
        backoff = 0.8
        need_list = True
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                    backoff = 0.8
                # Servers end watches after timeoutSeconds; a jittered timeout spreads the re-watches.
                async for event in self.api.watch(self.rt, self.namespace, resource_version=self.resource_version,
                                                  label_selector=self.label_selector,
                                                  field_selector=self.field_selector,
                                                  timeout_seconds=random.randint(300, 600),
                                                  allow_bookmarks=True, on_undecodable=self._undecodable):
                    if event.type != "BOOKMARK":
                        self._apply(event.type, event.object)  # type: ignore[arg-type]
                    self.resource_version = event.resource_version or self.resource_version
                    backoff = 0.8
            except asyncio.CancelledError:
                raise
            except Expired:
                # client-go does not mark the version unavailable here: a LIST at it is answered with
                # anything not older, so the relist first asks for the last synced version.
                log.info("%s informer: resourceVersion %s expired, listing again", self.name,
                         self.resource_version)
                need_list = True
            except Exception as exc:  # noqa: BLE001 - reflector semantics: back off and resume
                # An answer from the API (an ERROR event, a refused watch or list) ends ListAndWatch in
                # client-go, which lists again; a transport failure retries the watch.
                need_list = need_list or (isinstance(exc, ApiError) and exc.code != 429)
                log.warning("%s informer: %s; retrying in %.1fs", self.name, repr(exc), backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 30.0)
