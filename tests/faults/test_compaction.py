"""etcd compaction under a watching informer: its resourceVersion is compacted away while it is cut
off, the API server answers its next watch with 410 Gone (Expired), and the informer lists again,
so its cache ends equal to the API's, changes made while it was away included (the deletion among
them could only be learnt from the fresh list: its event was compacted).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
from faultkit import ApiServerProcess, Figures, OwnedEtcd, configmap, until

from apiserver.storage import Storage
from kubelab import kinds
from kubelab.client import ApiClient, Informer
from kubelab.client.errors import Expired

CM = "/api/v1/namespaces/default/configmaps"




def test_an_informer_relists_after_410(own_etcd: OwnedEtcd, apiserver_process: Callable[..., ApiServerProcess],
                                       figures: Figures) -> None:
    watched = apiserver_process(own_etcd.url)
    other = apiserver_process(own_etcd.url)

    async def main() -> None:
        api = ApiClient(watched.url)
        lists, expired = 0, 0
        real_list, real_watch = api.list, api.watch

        async def counting_list(*args: Any, **kwargs: Any) -> Any:
            nonlocal lists
            lists += 1
            return await real_list(*args, **kwargs)

        async def recording_watch(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            nonlocal expired
            try:
                async for event in real_watch(*args, **kwargs):
                    yield event
            except Expired:
                expired += 1
                raise

        api.list, api.watch = counting_list, recording_watch  # type: ignore[method-assign]
        informer: Informer[Any] = Informer(api, kinds.CONFIGMAPS, namespace="default")
        events: list[tuple[str, str]] = []
        informer.add_handler(lambda kind, old, new: events.append((kind, (new or old).metadata.name)))
        task = asyncio.create_task(informer.run())
        try:
            async with httpx.AsyncClient(base_url=other.url, timeout=30) as client:
                for name in ("one", "two", "three"):
                    assert (await client.post(CM, json=configmap(name, "1"))).status_code == 201
                await until("the informer to see three configmaps",
                            lambda: {"one", "two", "three"} <= {o.metadata.name for o in informer.items()})
                cut_at = informer.resource_version

                # The informer's server goes; while it is away things change and etcd is compacted.
                watched.kill()
                assert (await client.delete(f"{CM}/one")).status_code == 200
                assert (await client.patch(f"{CM}/two", json={"data": {"v": "2"}},
                                           headers={"Content-Type": "application/merge-patch+json"})).status_code == 200
                assert (await client.post(CM, json=configmap("four", "1"))).status_code == 201
                storage = Storage([own_etcd.url])
                try:
                    revision = await storage.revision()
                    await storage.compact(revision)
                finally:
                    await storage.close()
                # What the informer will be told: its version is gone.
                async with client.stream("GET", f"{CM}?watch=true&resourceVersion={cut_at}") as resp:
                    answer = [json.loads(line) async for line in resp.aiter_lines() if line.strip()]
                assert [e["type"] for e in answer] == ["ERROR"], answer
                assert (answer[0]["object"]["code"], answer[0]["object"]["reason"]) == (410, "Expired"), answer

                lists_before, events_before = lists, len(events)
                await asyncio.to_thread(watched.start)  # same port: the informer reconnects by itself
                restarted = time.monotonic()
                current = {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                           for o in (await client.get(CM)).json()["items"]}
                await until("the informer's cache to equal the API", lambda: {
                    o.metadata.name: o.metadata.resource_version for o in informer.items()} == current)
                converged = time.monotonic() - restarted
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await api.close()
        assert expired >= 1 and lists > lists_before, (expired, lists, lists_before)
        # The relist told the handlers what the compacted events would have.
        assert sorted(events[events_before:]) == [("ADDED", "four"), ("DELETED", "one"), ("MODIFIED", "two")]
        figures.update(compacted_at_revision=revision, watch_answer=410, relists=lists - lists_before,
                       seconds_to_converge_after_server_back=round(converged, 2), missed_changes=0)

    asyncio.run(main())
