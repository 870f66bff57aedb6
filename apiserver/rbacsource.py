"""Where the RBAC authorizer's policy comes from: the watch caches of Roles, ClusterRoles, RoleBindings and
ClusterRoleBindings (cacher.py), as kube-apiserver's RBAC authorizer reads them from its informers.

A `Policy` snapshot (rbac.py) is built from the four caches and kept until one of them moves. A request
after a write of this API server to one of the four waits until its cache has seen that write (the
revision the registry reports through `written`), so a RoleBinding just created authorizes the very next
request, as it would if every check read etcd; writes through another API server take effect within the
watch's latency, as they do behind kube's informers.
"""

from __future__ import annotations

from typing import Any

from kubelab import kinds
from kubelab.kinds import ResourceType

from .cacher import Cacher, NotServable
from .rbac import Policy

RESOURCES = (kinds.CLUSTERROLES, kinds.ROLES, kinds.CLUSTERROLEBINDINGS, kinds.ROLEBINDINGS)


class PolicySource:
    """The API server's current RBAC policy. `cacher` is its watch cache (a private one over `storage`
    when the API server runs without --watch-cache)."""

    def __init__(self, cacher: Cacher | None, storage: Any) -> None:
        self.cacher = cacher if cacher is not None else Cacher(storage)
        self.private = cacher is None
        self.prefixes = {rt.storage_path: rt for rt in RESOURCES}
        self.last_written: dict[ResourceType, int] = {}
        self._policy: Policy | None = None
        self._built_at: tuple[int, ...] = ()

    def written(self, key: str, revision: int) -> None:
        """The registry's write hook: this API server wrote `key` at `revision`."""
        for prefix, rt in self.prefixes.items():
            if key.startswith(prefix):
                self.last_written[rt] = max(self.last_written.get(rt, 0), revision)
                return

    async def policy(self) -> Policy:
        """The policy as of every write this API server made to it (see the module docstring)."""
        caches = [self.cacher.cache(rt) for rt in RESOURCES]
        for rt, cache in zip(RESOURCES, caches, strict=True):
            await cache.ensure_started()
            wanted = self.last_written.get(rt, 0)
            if cache.revision < wanted:
                try:
                    await cache.wait_fresh(wanted)
                except NotServable:
                    pass  # the cache is stuck behind etcd: judge by what it has rather than fail the request
        revisions = tuple(cache.revision for cache in caches)
        if self._policy is None or revisions != self._built_at:
            cluster_roles, roles, cluster_bindings, bindings = (list(cache.store.values()) for cache in caches)
            self._policy = Policy.of(cluster_roles=cluster_roles, roles=roles,
                                     cluster_role_bindings=cluster_bindings, role_bindings=bindings)
            self._built_at = revisions
        return self._policy

    async def stop(self) -> None:
        if self.private:
            await self.cacher.stop()


__all__ = ["RESOURCES", "PolicySource"]
