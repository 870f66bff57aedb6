"""Version conversion: one storage served under several group/versions.

kube-apiserver keeps each resource once in etcd, in one storage version, and serves it in every version
its scheme can convert to (the REST storage's codec decodes the stored bytes, converts through the
internal hub type to the request's version, and back on writes). events.k8s.io/v1 Events are core/v1
Events stored once under /registry/events; a CustomResourceDefinition's versions share one key prefix
and one `storage: true` version.

kubelab has no internal hub type: the storage version is the hub. A served version registers two pure
functions, `to_storage` and `from_storage`, over the objects' JSON (dicts); converting between two
non-storage versions goes through storage. The registry (registry/store.py) applies them at its edges:

* reads (get, list, every watch event): stored JSON -> `from_storage` -> the served version;
* writes (create, update, patch, apply): the body is decoded, defaulted and validated as the served
  version (its strategy, its schema), then `to_storage` before the one etcd transaction, and the answer
  is the stored result converted back (kube answers a write with the stored object in the request's
  version);
* selectors: label and field selectors are matched against the served version with the served kind's
  strategy, so each version has its own field labels (`regarding.name` in events.k8s.io/v1,
  `involvedObject.name` in v1), as kube's per-version field label conversion funcs do.

A version whose strategy is None (a CRD's `conversion: {strategy: None}`) only rewrites apiVersion:
`rewrite_api_version` builds that pair. A CRD registers every served version so, its storage version too
(served from itself: an object written before the storage version moved is stored in the old one until it
is written again, as in kube, and is still served in the version asked for). Conversion functions must round-trip (from_storage(to_storage(x))
== x for every valid x of the served version): a no-op update is detected by comparing the converted
object with what is stored, and a write must not lose what another version's reader relies on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubelab.kinds import ResourceType

Convert = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class ServedVersion:
    """`served` is read and written as `storage` is stored: same etcd prefix, same objects."""

    served: ResourceType
    storage: ResourceType
    to_storage: Convert
    from_storage: Convert
    # Whether labels and field labels read the same on the stored object as on the served one (true of an
    # apiVersion rewrite): then the watch cache's stored objects can be selected and paged as they are.
    same_selectors: bool = False


def rewrite_api_version(served: ResourceType, storage: ResourceType) -> ServedVersion:
    """A conversion that changes nothing but apiVersion (and kind, should the two differ): what a CRD's
    `strategy: None` does (apiextensions-apiserver's nopConverter sets the apiVersion on each object)."""

    def rewrite(obj: dict[str, Any], target: ResourceType) -> dict[str, Any]:
        # The object itself when it already is the target's: no copy, and a watch line stays shared.
        if obj.get("apiVersion") == target.api_version and obj.get("kind") == target.kind:
            return obj
        return {**obj, "apiVersion": target.api_version, "kind": target.kind}

    def to_storage(obj: dict[str, Any]) -> dict[str, Any]:
        return rewrite(obj, storage)

    def from_storage(obj: dict[str, Any]) -> dict[str, Any]:
        return rewrite(obj, served)

    return ServedVersion(served, storage, to_storage, from_storage, same_selectors=True)


class Conversions:
    """The served versions whose storage is another's. A kind not registered here is stored as it is
    served (every built-in kind but events.k8s.io/v1 Event), and its objects pass through unconverted."""

    def __init__(self, versions: Iterable[ServedVersion] = ()) -> None:
        self._versions: dict[ResourceType, ServedVersion] = {}
        for version in versions:
            self.register(version)

    def register(self, version: ServedVersion) -> None:
        """Serve `version.served` from `version.storage`. The storage kind may register itself too (a CRD's
        storage version rewrites objects stored under an earlier storage version), never from another."""
        below = self._versions.get(version.storage)
        if below is not None and below.storage != version.storage:
            raise ValueError(f"{version.storage.group_resource} is itself served from another storage")
        self._versions[version.served] = version

    def unregister(self, served: ResourceType) -> None:
        """Stop converting `served` (a CRD version no longer served)."""
        self._versions.pop(served, None)

    def storage_of(self, rt: ResourceType) -> ResourceType:
        """The kind whose etcd keys, watch cache and stored JSON `rt` shares (`rt` itself by default)."""
        version = self._versions.get(rt)
        return version.storage if version is not None else rt

    def is_converted(self, rt: ResourceType) -> bool:
        return rt in self._versions

    def to_storage(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        version = self._versions.get(rt)
        return version.to_storage(obj) if version is not None else obj

    def from_storage(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        version = self._versions.get(rt)
        return version.from_storage(obj) if version is not None else obj

    def viewer(self, rt: ResourceType) -> Convert | None:
        """The stored -> served function of `rt`, or None when its objects are served as stored."""
        version = self._versions.get(rt)
        return version.from_storage if version is not None else None

    def selects_stored(self, rt: ResourceType) -> bool:
        """Whether `rt`'s selectors may be matched on stored objects (served as stored, or only rewritten)."""
        version = self._versions.get(rt)
        return version is None or version.same_selectors

    def convert(self, obj: dict[str, Any], source: ResourceType, target: ResourceType) -> dict[str, Any]:
        """An object of `source`'s version as `target`'s (both served from the same storage), through the
        storage version, as kube's scheme converts through the internal type."""
        if self.storage_of(source) != self.storage_of(target):
            raise ValueError(f"{source.group_resource} and {target.group_resource} do not share a storage")
        return self.from_storage(target, self.to_storage(source, obj))
