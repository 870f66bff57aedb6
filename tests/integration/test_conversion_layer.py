"""The version-conversion layer (apiserver/conversion.py) on a kind of its own, the way a CustomResourceDefinition
with versions v1alpha1 and v1 (storage v1, conversion strategy None) plugs into it: one registry over a real
etcd, one storage (example.com/v1 under /registry/widgets), and every verb through the other version reads
and writes the same objects, each answer in the version asked for, watched from etcd and from the watch
cache alike."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from apiserver import errors
from apiserver.cacher import Cacher
from apiserver.conversion import Conversions, rewrite_api_version
from apiserver.registry import Registry
from apiserver.registry.cluster import NamespaceStrategy
from apiserver.registry.store import WatchEvent
from apiserver.registry.strategy import Strategy
from apiserver.storage import Storage
from kubelab import kinds
from kubelab.etcd import Etcd
from kubelab.kinds import ResourceType
from kubelab.models import TypedObject
from kubelab.selectors import parse_field_selector, parse_label_selector


class Widget(TypedObject):
    """A custom object: whatever fields it has are kept (extra="allow")."""


V1 = ResourceType("example.com", "v1", "widgets", "Widget", True, Widget)
V1ALPHA1 = ResourceType("example.com", "v1alpha1", "widgets", "Widget", True, Widget)
NS = "conversion-layer"
EVERYTHING = parse_label_selector(""), parse_field_selector("")


class WidgetStrategy(Strategy):
    has_status = False
    default_gc_policy = None


@pytest.fixture(params=["etcd", "watch cache"])
async def registry(request: pytest.FixtureRequest, etcd: Etcd) -> AsyncIterator[Registry]:
    storage = Storage([etcd.url])
    cacher = Cacher(storage) if request.param == "watch cache" else None
    strategies: dict[ResourceType, Strategy] = {kinds.NAMESPACES: NamespaceStrategy(kinds.NAMESPACES),
                                                V1: WidgetStrategy(V1), V1ALPHA1: WidgetStrategy(V1ALPHA1)}
    # What a CRD's versions register: each served version that is not the storage version.
    conversions = Conversions([rewrite_api_version(V1ALPHA1, V1)])
    registry = Registry(storage, strategies, cacher=cacher, conversions=conversions)
    try:
        await registry.ensure(kinds.NAMESPACES, {"metadata": {"name": NS}})
        yield registry
    finally:
        if cacher is not None:
            await cacher.stop()
        await storage.close()


def widget(name: str, api_version: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": "Widget", "metadata": {"name": name, "labels": {"app": "w"}},
            "spec": spec}


async def test_every_verb_through_either_version(registry: Registry) -> None:
    name = f"w-{id(registry):x}"
    created = await registry.create(V1ALPHA1, NS, widget(name, "example.com/v1alpha1", size=1))
    assert created["apiVersion"] == "example.com/v1alpha1"
    raw = await registry.storage.get(f"/registry/widgets/{NS}/{name}")
    assert raw.obj["apiVersion"] == "example.com/v1"  # stored once, in the storage version

    read = await registry.get(V1, NS, name)
    assert read["apiVersion"] == "example.com/v1" and read["spec"] == {"size": 1}
    assert read["metadata"]["uid"] == created["metadata"]["uid"]

    updated = await registry.guaranteed_update(V1ALPHA1, NS, name, lambda cur: {**cur, "spec": {"size": 2}})
    assert updated["apiVersion"] == "example.com/v1alpha1"
    assert (await registry.get(V1, NS, name))["spec"] == {"size": 2}
    # A no-op update through the converted version writes nothing.
    again = await registry.guaranteed_update(V1ALPHA1, NS, name, lambda cur: cur)
    assert again["metadata"]["resourceVersion"] == updated["metadata"]["resourceVersion"]

    for rt in (V1, V1ALPHA1):
        items, _ = await registry.list(rt, NS, *EVERYTHING)
        assert [(i["apiVersion"], i["metadata"]["name"]) for i in items] == [(rt.api_version, name)]
        selected, _ = await registry.list(rt, NS, parse_label_selector("app=w"),
                                          parse_field_selector(f"metadata.name={name}"))
        assert len(selected) == 1

    with pytest.raises(errors.StatusError) as exists:
        await registry.create(V1, NS, widget(name, "example.com/v1"))
    assert exists.value.code == 409

    deleted = await registry.delete(V1ALPHA1, NS, name)
    assert deleted["apiVersion"] == "example.com/v1alpha1"
    with pytest.raises(errors.StatusError) as gone:
        await registry.get(V1, NS, name)
    assert gone.value.code == 404
    assert gone.value.status()["message"] == f'widgets.example.com "{name}" not found'


async def _collect(events: AsyncIterator[WatchEvent], count: int) -> list[WatchEvent]:
    seen: list[WatchEvent] = []
    async for event in events:
        seen.append(event)
        if len(seen) == count:
            break
    return seen


async def test_watch_through_both_versions(registry: Registry) -> None:
    name = f"watched-{id(registry):x}"
    if registry.cacher is not None:
        # Started before the watches' revision, so they are served from the cache, not etcd.
        await registry.cacher.cache(V1).ensure_started()
        assert registry.cacher.caches.keys() == {V1}  # one cache: the storage version's
    revision = await registry.storage.revision()
    watches = {rt: registry.watch(rt, NS, str(revision), *EVERYTHING) for rt in (V1, V1ALPHA1)}
    collectors = {rt: asyncio.ensure_future(_collect(w, 3)) for rt, w in watches.items()}
    await registry.create(V1, NS, widget(name, "example.com/v1", size=1))
    await registry.guaranteed_update(V1ALPHA1, NS, name, lambda cur: {**cur, "spec": {"size": 5}})
    await registry.delete(V1, NS, name)
    for rt, collector in collectors.items():
        events = await asyncio.wait_for(collector, 60)
        await watches[rt].aclose()
        assert [e.type for e in events] == ["ADDED", "MODIFIED", "DELETED"]
        assert {e.object["apiVersion"] for e in events} == {rt.api_version}
        assert events[1].object["spec"] == {"size": 5}
    if registry.cacher is not None:
        assert registry.cacher.caches.keys() == {V1}
