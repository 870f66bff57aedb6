"""The resourceVersions an informer lists at, as client-go's reflector chooses them (relistResourceVersion),
seen on the wire by a real API server process in front of its own etcd (requesttap.py notes each request):

* the first LIST asks for resourceVersion "0" (the API server's watch cache answers it, etcd is not read);
* a watch answered 410 Expired (its version compacted away while the informer's server was gone) relists
  at the last version the informer synced to, not with a consistent read, and the handlers are told
  every change made meanwhile: replaying what they were told gives the API's state, so no event is lost;
* a LIST whose version the server cannot serve (not reached: 504 ResourceVersionTooLarge, as for an
  informer that synced against an etcd since restored from an older backup) is followed at once by a
  consistent LIST (resourceVersion "", sent as none), and the informer converges on what the server holds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from faultkit import ApiServerProcess, OwnedEtcd, configmap, until
from requesttap import RequestTap

from apiserver.storage import Storage
from kubelab import kinds
from kubelab.client import ApiClient, ApiError, Informer
from kubelab.client.errors import resource_version_unavailable

CM = "/api/v1/namespaces/default/configmaps"




def lists_of_configmaps(tap: RequestTap) -> list[str | None]:
    """The resourceVersion of every LIST of default's ConfigMaps through `tap` (None: not given)."""
    versions: list[str | None] = []
    for request in tap.noted():
        url = urlsplit(request.target)
        query = parse_qs(url.query, keep_blank_values=True)
        if request.method == "GET" and url.path == CM and "watch" not in query:
            versions.append(query.get("resourceVersion", [None])[0])
    return versions


@pytest.fixture
def tapped(own_etcd: OwnedEtcd, apiserver_process: Callable[..., ApiServerProcess]
           ) -> Iterator[tuple[ApiServerProcess, RequestTap]]:
    server = apiserver_process(own_etcd.url)
    tap = RequestTap(server.port).start()
    try:
        yield server, tap
    finally:
        tap.stop()


class Replay:
    """What the handlers were told, applied in order: name -> resourceVersion."""

    def __init__(self) -> None:
        self.state: dict[str, str] = {}

    def __call__(self, event: str, old: Any, new: Any) -> None:
        if event == "DELETED":
            self.state.pop(old.metadata.name, None)
        else:
            self.state[new.metadata.name] = new.metadata.resource_version


async def api_state(client: httpx.AsyncClient) -> dict[str, str]:
    answer = (await client.get(CM)).json()
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in answer["items"]}


def test_first_list_is_from_the_cache_and_a_relist_after_410_starts_from_the_synced_version(
        own_etcd: OwnedEtcd, apiserver_process: Callable[..., ApiServerProcess],
        tapped: tuple[ApiServerProcess, RequestTap]) -> None:
    watched, tap = tapped
    writer = apiserver_process(own_etcd.url)

    async def main() -> None:
        api = ApiClient(tap.url)
        informer: Informer[Any] = Informer(api, kinds.CONFIGMAPS, namespace="default")
        replay = Replay()
        informer.add_handler(replay)
        task = asyncio.create_task(informer.run())
        try:
            async with httpx.AsyncClient(base_url=writer.url, timeout=30) as client:
                for name in ("one", "two", "three"):
                    assert (await client.post(CM, json=configmap(name, "1"))).status_code == 201
                await until("the informer to see three configmaps",
                            lambda: {"one", "two", "three"} <= set(replay.state), timeout=90.0)
                # The first LIST asked for "0": the watch cache's answer (kube: "Any").
                assert lists_of_configmaps(tap)[:1] == ["0"], lists_of_configmaps(tap)

                # Its server goes; meanwhile every kind of change happens and etcd compacts them away.
                synced = informer.resource_version
                watched.kill()
                assert (await client.delete(f"{CM}/one")).status_code == 200
                assert (await client.patch(f"{CM}/two", json={"data": {"v": "2"}},
                                           headers={"Content-Type": "application/merge-patch+json"})).status_code == 200
                assert (await client.post(CM, json=configmap("four", "1"))).status_code == 201
                storage = Storage([own_etcd.url])
                try:
                    await storage.compact(await storage.revision())
                finally:
                    await storage.close()
                lists_before = len(lists_of_configmaps(tap))
                # Same port: the tap reaches it again (a loaded machine may take minutes to start Python).
                await asyncio.to_thread(watched.start, 240)

                # Changes keep coming while the informer relists.
                for i in range(5):
                    assert (await client.post(CM, json=configmap(f"late-{i}", "1"))).status_code == 201
                current = await api_state(client)
                await until("the informer's handlers to have been told the API's state",
                            lambda: replay.state == current, timeout=90.0)
                assert {o.metadata.name: o.metadata.resource_version for o in informer.items()} == current
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await api.close()
        relists = lists_of_configmaps(tap)[lists_before:]
        # The watch was answered 410; the relist asked for the version it had synced to (which the
        # server answers with anything not older), not for a consistent read.
        assert relists[:1] == [synced], (relists, synced)

    asyncio.run(main())


def test_a_list_at_a_version_the_server_has_not_reached_falls_back_to_a_consistent_list(
        own_etcd: OwnedEtcd, tapped: tuple[ApiServerProcess, RequestTap]) -> None:
    server, tap = tapped

    async def main() -> None:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            for name in ("a", "b"):
                assert (await client.post(CM, json=configmap(name, "1"))).status_code == 201
            current = await api_state(client)
            revision = int((await client.get(CM)).json()["metadata"]["resourceVersion"])
        api = ApiClient(tap.url)
        informer: Informer[Any] = Informer(api, kinds.CONFIGMAPS, namespace="default")
        replay = Replay()
        informer.add_handler(replay)
        # An informer that last synced at a revision this etcd has not reached (its etcd was restored
        # from an older backup): its next LIST asks for that version.
        ahead = str(revision + 10_000)
        informer.resource_version = ahead
        assert informer.relist_resource_version() == ahead
        task = asyncio.create_task(informer.run())
        try:
            await until("the informer to list what the server holds", lambda: replay.state == current, timeout=90.0)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await api.close()
        # resourceVersion "" is sent as no resourceVersion at all, as client-go does.
        assert lists_of_configmaps(tap)[:2] == [ahead, None], lists_of_configmaps(tap)
        # Once a list succeeded, relists ask for the synced version again.
        assert informer.relist_resource_version() == informer.resource_version != ""

    asyncio.run(main())


def test_unavailable_versions_are_told_apart_on_real_answers(own_etcd: OwnedEtcd,
                                                              tapped: tuple[ApiServerProcess, RequestTap]) -> None:
    """The answers after which the reflector lists with "": a LIST page at a compacted revision (410
    Expired) and a LIST at a revision not reached (504 ResourceVersionTooLarge); a bad request is not."""
    _, tap = tapped

    async def main() -> None:
        async with ApiClient(tap.url) as api, httpx.AsyncClient(base_url=tap.url, timeout=30) as client:
            for name in ("x", "y"):
                assert (await client.post(CM, json=configmap(name, "1"))).status_code == 201
            old = int((await client.get(CM)).json()["metadata"]["resourceVersion"])
            assert (await client.post(CM, json=configmap("z", "1"))).status_code == 201
            storage = Storage([own_etcd.url])
            try:
                await storage.compact(await storage.revision())
            finally:
                await storage.close()
            answers: list[ApiError] = []
            for params in ({"resourceVersion": str(old), "resourceVersionMatch": "Exact"},
                           {"resourceVersion": str(old + 10_000)},
                           {"resourceVersion": "not-a-number"}):
                with pytest.raises(ApiError) as caught:
                    await api.request("GET", CM, params=params)
                answers.append(caught.value)
        assert [(a.code, resource_version_unavailable(a)) for a in answers] == [
            (410, True), (504, True), (400, False)], [(a.code, a.reason, a.message) for a in answers]

    asyncio.run(main())
