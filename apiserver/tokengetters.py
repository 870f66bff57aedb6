"""What service account token checks read — the account, and the Secret, pod or node a token is bound to —
from the watch cache, as kube-apiserver's getters read them from its informers' listers (lister first,
a live read on a miss: serviceaccount.NewGetterFromClient), instead of etcd on every request.

The watch cache of each of those resources (cacher.py) is started on first use and then followed; a read
is served from it when it has seen every write this API server made to that resource (the revision of
its last write, `written`), so a token of a pod this API server just deleted is refused at once, as it
was when every check read etcd; a cache that is behind, not running, or without the object sends the
read to etcd. Writes through another API server reach the cache within its watch's latency, as they
reach kube's informers.
"""

from __future__ import annotations

from typing import Any

from kubelab import kinds
from kubelab.kinds import ResourceType

from . import errors

# Namespaces and accounts: also what ServiceAccount admission reads for every pod create (saadmission.py).
RESOURCES = (kinds.SERVICEACCOUNTS, kinds.SECRETS, kinds.PODS, kinds.NODES, kinds.NAMESPACES)


class TokenObjectGetter:
    """The getter of auth.py's token checks; `registry` is the API server's (its cacher may be None)."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry
        self.prefixes = {rt.storage_path: rt for rt in RESOURCES}
        self.last_written: dict[ResourceType, int] = {}
        self.served_from_cache = 0  # counted for tests and benchmarks
        self.read_live = 0

    def written(self, key: str, revision: int) -> None:
        """The registry's write hook: this API server wrote `key` at `revision`."""
        for prefix, rt in self.prefixes.items():
            if key.startswith(prefix):
                self.last_written[rt] = max(self.last_written.get(rt, 0), revision)
                return

    async def get(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The object, from the cache when it is current (see the module docstring), else from etcd; None
        when it does not exist."""
        cacher = getattr(self.registry, "cacher", None)
        if cacher is not None:
            cache = cacher.cache(rt)
            try:
                await cache.ensure_started()
            except Exception:  # noqa: BLE001 - etcd unreachable now: the live read says so in its own words
                cache = None
            if cache is not None and cache.ready and cache.revision >= self.last_written.get(rt, 0):
                obj: dict[str, Any] | None = cache.get(self.registry.key(rt, namespace, name))
                if obj is not None:
                    self.served_from_cache += 1
                    return obj
        self.read_live += 1
        try:
            live: dict[str, Any] = await self.registry.get(rt, namespace, name)
        except errors.StatusError as exc:
            if exc.code == 404:
                return None
            raise
        return live


__all__ = ["RESOURCES", "TokenObjectGetter"]
