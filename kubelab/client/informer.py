"""Informer: list, then watch from the list's resourceVersion, keeping a local cache up to date.

The loop is client-go's reflector: on 410 Gone it lists again at once; on any other error it backs off
(800 ms doubling to 30 s) and resumes. The cache is updated before handlers are told, and handlers are
plain functions that should only enqueue keys.

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
from .errors import Expired
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
        self._handlers: list[Handler] = []
        self._synced = asyncio.Event()
        # Objects left out because they do not fit the model: key -> the resourceVersion last logged.
        self.undecodable: dict[str, str] = {}

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

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

    async def run(self) -> None:
        backoff = 0.8
        need_list = True
        while True:
            try:
                if need_list:
                    items, rv = await self.api.list(self.rt, self.namespace, label_selector=self.label_selector,
                                                    field_selector=self.field_selector,
                                                    on_undecodable=self._undecodable)
                    self._replace(items)
                    self.resource_version = rv
                    self._synced.set()
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
                log.info("%s informer: resourceVersion %s expired, listing again", self.name,
                         self.resource_version)
                need_list = True
            except Exception as exc:  # noqa: BLE001 - reflector semantics: back off and resume
                log.warning("%s informer: %s; retrying in %.1fs", self.name, repr(exc), backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 30.0)
