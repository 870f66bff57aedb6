"""The attack classes bench/hostile.py fires at an API server, and the registry they join.

An attack class is a small async function registered with @attack: it prepares what it needs with
`arena.seed(...)` / `arena.request(...)` (not measured) and fires one hostile request or a short sequence
with `arena.fire(...)` (measured, answers recorded). The first paragraph of its docstring says what it
sends and what kube-apiserver answers (`bench/hostile.py --list` prints it). To add one (slowloris,
many concurrent LISTs, ...), write it here; hostile.py runs every registered class unless told which.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

NAMESPACE = "hostile"
CONFIGMAPS = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"


# --- the registry of attack classes --------------------------------------------------------------

AttackFn = Callable[["Arena"], Awaitable[None]]


@dataclass(frozen=True)
class Attack:
    name: str
    doc: str
    run: AttackFn


ATTACKS: dict[str, Attack] = {}


def attack(name: str) -> Callable[[AttackFn], AttackFn]:
    """Register an attack class under `name`; the first paragraph of its docstring describes it in --list."""
    def register(fn: AttackFn) -> AttackFn:
        ATTACKS[name] = Attack(name, " ".join((fn.__doc__ or "").split("\n\n")[0].split()), fn)
        return fn
    return register


@dataclass
class Shot:
    """One measured request: when it was sent and answered (monotonic clock, shared with the probe)."""
    method: str
    path: str
    sent: float
    answered: float
    status: int
    reason: str
    message: str


@dataclass
class Arena:
    """What an attack works with: a client for the API server, the namespace, and the measured shots."""
    http: httpx.AsyncClient
    namespace: str = NAMESPACE
    shots: list[Shot] = field(default_factory=list)
    _names: int = 0

    def name(self, prefix: str) -> str:
        self._names += 1
        return f"{prefix}-{self._names}"

    async def request(self, method: str, path: str, *, body: Any = None, content: bytes | str | None = None,
                      content_type: str = "application/json", expect: tuple[int, ...] = (200, 201)) -> Any:
        """An unmeasured request (setup); it must succeed."""
        resp = await self.http.request(method, path, content=content if content is not None else orjson.dumps(body),
                                       headers={"Content-Type": content_type})
        if resp.status_code not in expect:
            raise RuntimeError(f"setup {method} {path} answered {resp.status_code}: {resp.text[:300]}")
        return resp.json()

    async def seed(self, body: dict[str, Any], path: str = CONFIGMAPS) -> str:
        """Create an object to attack (unmeasured); returns its path."""
        await self.request("POST", path, body=body)
        return f"{path}/{body['metadata']['name']}"

    async def fire(self, method: str, path: str, *, body: Any = None, content: bytes | str | None = None,
                   content_type: str = "application/json", params: dict[str, str] | None = None,
                   accept: str | None = None) -> httpx.Response:
        """The hostile request itself: measured, with its answer recorded. Without a body or content, none
        is sent (a GET)."""
        data = content if content is not None else None if body is None else orjson.dumps(body)
        headers = {"Content-Type": content_type} if data is not None else {}
        if accept:
            headers["Accept"] = accept
        sent = time.monotonic()
        try:
            resp = await self.http.request(method, path, content=data, params=params, headers=headers)
        except httpx.HTTPError as exc:
            self.shots.append(Shot(method, path, sent, time.monotonic(), 0, type(exc).__name__, str(exc)[:200]))
            raise
        answered = time.monotonic()
        reason, message = "", ""
        if resp.status_code >= 400:
            try:
                doc = resp.json()
                reason, message = str(doc.get("reason") or ""), str(doc.get("message") or "")
            except (ValueError, AttributeError):  # not a Status: what it is instead
                message = resp.text[:200]
        self.shots.append(Shot(method, path, sent, answered, resp.status_code, reason, message))
        return resp


def configmap(name: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, **extra}


# --- attack classes ------------------------------------------------------------------------------

@attack("json-patch-10001-ops")
async def json_patch_too_many_ops(arena: Arena) -> None:
    """JSON patch of 10,001 `add` ops (kube: 413, at most 10,000 operations)."""
    path = await arena.seed(configmap(arena.name("ops"), data={"seed": "x"}))
    ops = [{"op": "add", "path": f"/data/k{i}", "value": "v"} for i in range(10_001)]
    await arena.fire("PATCH", path, body=ops, content_type=JSON_PATCH)


@attack("json-patch-8000-adds")
async def json_patch_many_adds(arena: Arena) -> None:
    """JSON patch of 8,000 `add` ops on a ConfigMap (kube: 200)."""
    path = await arena.seed(configmap(arena.name("adds"), data={"seed": "x"}))
    ops = [{"op": "add", "path": f"/data/k{i}", "value": "v"} for i in range(8_000)]
    await arena.fire("PATCH", path, body=ops, content_type=JSON_PATCH)


@attack("json-patch-copy-doubling")
async def json_patch_copy_doubling(arena: Arena) -> None:
    """~1.6 KiB JSON patch: `add` a 900-byte subtree, then 20 `copy` ops of it into itself (doubling each
    op: 900 MB), kube: 422 once the copies pass 3 MiB (AccumulatedCopySizeLimit)."""
    path = await arena.seed(configmap(arena.name("copy")))
    ops: list[dict[str, Any]] = [{"op": "add", "path": "/x", "value": {"s": "a" * 900}}]
    ops += [{"op": "copy", "from": "/x", "path": f"/x/c{i}"} for i in range(20)]
    await arena.fire("PATCH", path, body=ops, content_type=JSON_PATCH)


@attack("json-patch-front-inserts")
async def json_patch_front_inserts(arena: Arena) -> None:
    """9,000 `add` ops at the front of a 20,000-item list (each shifts the whole list; kube: 200)."""
    name = arena.name("front")
    path = await arena.seed(configmap(name, metadata={"name": name,
                                                      "finalizers": [f"example.com/f{i}" for i in range(20_000)]}))
    ops = [{"op": "add", "path": "/metadata/finalizers/0", "value": f"example.com/g{i}"} for i in range(9_000)]
    await arena.fire("PATCH", path, body=ops, content_type=JSON_PATCH)


@attack("smp-10000-finalizers")
async def smp_finalizers(arena: Arena) -> None:
    """Strategic merge patch adding 10,000 finalizers (a set-merged list; kube: 200)."""
    name = arena.name("fin")
    path = await arena.seed(configmap(name, metadata={"name": name,
                                                      "finalizers": [f"example.com/old{i}" for i in range(100)]}))
    patch = {"metadata": {"finalizers": [f"example.com/f{i}" for i in range(10_000)]}}
    await arena.fire("PATCH", path, body=patch, content_type=STRATEGIC)


def owner(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": f"o{i}", "uid": f"uid-{i}"}


@attack("smp-set-element-order-6000")
async def smp_set_element_order(arena: Arena) -> None:
    """Strategic merge patch of 3,000 new ownerReferences (merged by uid) into 3,000 live ones, with a
    $setElementOrder of all 6,000 interleaved (kube: 200)."""
    name = arena.name("order")
    path = await arena.seed(configmap(name, metadata={"name": name,
                                                      "ownerReferences": [owner(i) for i in range(0, 6_000, 2)]}))
    patch = {"metadata": {"$setElementOrder/ownerReferences": [{"uid": f"uid-{i}"} for i in range(6_000)],
                          "ownerReferences": [owner(i) for i in range(1, 6_000, 2)]}}
    await arena.fire("PATCH", path, body=patch, content_type=STRATEGIC)


@attack("yaml-alias-count")
async def yaml_alias_count(arena: Arena) -> None:
    """YAML "billion laughs": nine aliases of nine aliases of ... (kube: 400, excessive aliasing)."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]
    lines += [f"metadata: {{name: {arena.name('laughs')}}}", "data: {k: *i}"]
    await arena.fire("POST", CONFIGMAPS, content="\n".join(lines), content_type="application/yaml")


@attack("yaml-alias-bytes")
async def yaml_alias_bytes(arena: Arena) -> None:
    """150 KB of YAML: one 64 KiB scalar and 8,000 aliases of it (few aliases for the count, 524 MB
    expanded): refused before expansion with 400 (excessive aliasing)."""
    keys = ", ".join(f"k{i}: *s" for i in range(8_000))
    text = f"x: &s \"{'a' * 65536}\"\nmetadata: {{name: {arena.name('aliasbytes')}}}\ndata: {{{keys}}}\n"
    await arena.fire("POST", CONFIGMAPS, content=text, content_type="application/yaml")


@attack("yaml-3mib-body")
async def yaml_big_body(arena: Arena) -> None:
    """A 2.9 MiB YAML ConfigMap of 100,000 short keys, no aliases (create; kube: 413 from etcd's limit)."""
    lines = [f"metadata:\n  name: {arena.name('yamlbig')}", "data:"]
    lines += [f"  key-{i:06}: value-{i:06}-{'v' * 6}" for i in range(100_000)]
    await arena.fire("POST", CONFIGMAPS, content="\n".join(lines)[:3 * 1024 * 1024 - 100],
                     content_type="application/yaml")


@attack("json-3mib-tiny-items")
async def json_tiny_items(arena: Arena) -> None:
    """A 3 MiB JSON body of 1M empty objects in an unknown field (create; kube: 201, the field dropped)."""
    items = b",".join([b"{}"] * 1_000_000)
    body = b'{"metadata":{"name":"%s"},"x":[%s]}' % (arena.name("tiny").encode(), items)
    await arena.fire("POST", CONFIGMAPS, content=body)


@attack("json-3mib-finalizers")
async def json_many_finalizers(arena: Arena) -> None:
    """A 2.8 MiB JSON body with 200,000 finalizers (create; every one checked and owned in managedFields,
    then kube: 413 from etcd's limit)."""
    name = arena.name("manyfin")
    finalizers = [f"e.io/{i}" for i in range(200_000)]
    await arena.fire("POST", CONFIGMAPS, body=configmap(name, metadata={"name": name, "finalizers": finalizers}))


@attack("huge-label-map")
async def huge_label_map(arena: Arena) -> None:
    """A 2.9 MiB create with 120,000 labels (every key and value validated, then kube: 413 from etcd's
    limit)."""
    name = arena.name("labels")
    labels = {f"l{i:06}": f"v{i:06}" for i in range(120_000)}
    await arena.fire("POST", CONFIGMAPS, body=configmap(name, metadata={"name": name, "labels": labels}))


@attack("configmap-20k-keys")
async def configmap_many_keys(arena: Arena) -> None:
    """Create, then replace (another field manager, every value changed), a 0.5 MiB ConfigMap of 20,000
    keys: validation and managedFields of 20,000 fields, twice (kube: 201, 200)."""
    name = arena.name("keys")
    data = {f"key-{i:06}": f"value-{i:06}" for i in range(20_000)}
    await arena.fire("POST", CONFIGMAPS, body=configmap(name, data=data), params={"fieldManager": "first"})
    changed = {k: v + "x" for k, v in data.items()}
    await arena.fire("PUT", f"{CONFIGMAPS}/{name}", body=configmap(name, data=changed),
                     params={"fieldManager": "second"})


@attack("ssa-20k-keys")
async def ssa_many_keys(arena: Arena) -> None:
    """Server-side apply (JSON as apply-patch+yaml) of a 0.5 MiB ConfigMap of 20,000 keys, twice by two
    managers (the second forced): field sets of 20,000 paths (kube: 201, 200)."""
    name = arena.name("ssa")
    data = {f"key-{i:06}": f"value-{i:06}" for i in range(20_000)}
    body = orjson.dumps(configmap(name, data=data))
    await arena.fire("PATCH", f"{CONFIGMAPS}/{name}", content=body, content_type=APPLY,
                     params={"fieldManager": "first"})
    body = orjson.dumps(configmap(name, data={k: v + "x" for k, v in data.items()}))
    await arena.fire("PATCH", f"{CONFIGMAPS}/{name}", content=body, content_type=APPLY,
                     params={"fieldManager": "second", "force": "true"})


@attack("smp-one-label-on-20k-keys")
async def smp_small_patch_big_object(arena: Arena) -> None:
    """A 40-byte strategic merge patch (one label) of a 0.5 MiB ConfigMap of 20,000 keys: the work is the
    object's (decode, validation, managedFields diff), not the patch's (kube: 200)."""
    name = arena.name("bigobj")
    path = await arena.seed(configmap(name, data={f"key-{i:06}": f"value-{i:06}" for i in range(20_000)}))
    await arena.fire("PATCH", path, body={"metadata": {"labels": {"touched": "yes"}}}, content_type=STRATEGIC)


@attack("get-as-yaml")
async def get_as_yaml(arena: Arena) -> None:
    """GET of a 0.5 MiB ConfigMap of 20,000 keys with Accept: application/yaml (kube: 200, YAML)."""
    name = arena.name("yamlout")
    path = await arena.seed(configmap(name, data={f"key-{i:06}": f"value-{i:06}" for i in range(20_000)}))
    await arena.fire("GET", path, accept="application/yaml")


@attack("table-of-2000")
async def table_of_many(arena: Arena) -> None:
    """LIST of 2,000 ConfigMaps of 20 keys each, as a Table (kubectl get's Accept; kube: 200)."""
    namespace = arena.name("tablens")
    await arena.request("POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
    data = {f"k{i}": "v" * 20 for i in range(20)}
    sem = asyncio.Semaphore(16)

    async def create(i: int) -> None:
        async with sem:
            await arena.request("POST", f"/api/v1/namespaces/{namespace}/configmaps",
                                body=configmap(f"cm-{i}", data=data))
    await asyncio.gather(*(create(i) for i in range(2_000)))
    await arena.fire("GET", f"/api/v1/namespaces/{namespace}/configmaps",
                     accept="application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
