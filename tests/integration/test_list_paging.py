"""LIST with `limit` and `continue`, as kube-apiserver pages: against a real etcd, with the real kubectl
(`--chunk-size`), the official Python client and plain HTTP.

Every page holds at most `limit` items, in key order; the pages together are exactly the unpaged list
at the first page's resourceVersion, whatever is written between pages (each page is read from etcd
at that revision); selectors filter as the pages are read, so pages may be short while more follow;
`remainingItemCount` is given without selectors; Tables page too. A continue token whose revision
etcd compacted is 410 with kube's message and a token that continues at the current revision.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest
from apitools import CORE, TABLE_ACCEPT, assert_status, create, unique_name
from kubectltools import Kubectl, RecordingProxy, write_kubeconfig
from kubernetes import client

from kubelab.etcd import Etcd

COUNT = 23


def names(items: list[dict[str, Any]]) -> list[str]:
    return [item["metadata"]["name"] for item in items]


def pages(api: httpx.Client, path: str, limit: int, *, most: int = COUNT + 1, **params: str) -> list[dict[str, Any]]:
    """Every page of a paged LIST, following the continue tokens (at most `most` pages)."""
    out: list[dict[str, Any]] = []
    token = ""
    while True:
        resp = api.get(path, params={"limit": str(limit), **params, **({"continue": token} if token else {})})
        assert resp.status_code == 200, resp.text
        out.append(resp.json())
        token = out[-1]["metadata"].get("continue", "")
        if not token:
            return out
        assert len(out) <= most, "the pages never end"


@pytest.fixture(scope="module")
def ns(apiserver: str) -> Iterator[str]:
    """COUNT ConfigMaps; every third is labelled pick=yes."""
    name = unique_name("paging")
    with httpx.Client(base_url=apiserver, timeout=30) as api:
        create(api, f"{CORE}/namespaces", {"metadata": {"name": name}})
        for i in range(COUNT):
            create(api, f"{CORE}/namespaces/{name}/configmaps",
                   {"metadata": {"name": f"cm-{i:02}", "labels": {"pick": "yes" if i % 3 == 0 else "no"}},
                    "data": {"i": str(i)}})
        yield name


@pytest.mark.parametrize("limit", [1, 2, 5, COUNT - 1, COUNT, 500])
def test_pages_together_are_the_whole_list(api: httpx.Client, ns: str, limit: int) -> None:
    path = f"{CORE}/namespaces/{ns}/configmaps"
    whole = api.get(path).json()
    got = pages(api, path, limit)
    assert [len(p["items"]) for p in got[:-1]] == [limit] * (len(got) - 1)
    assert 0 < len(got[-1]["items"]) <= limit
    assert [item for p in got for item in p["items"]] == whole["items"]
    assert len(got) == -(-COUNT // limit)
    # Every page says which revision it was read at (the first page's), and how many items remain.
    assert {p["metadata"]["resourceVersion"] for p in got} == {got[0]["metadata"]["resourceVersion"]}
    for index, page in enumerate(got[:-1]):
        assert page["metadata"]["remainingItemCount"] == COUNT - limit * (index + 1)
    assert "remainingItemCount" not in got[-1]["metadata"] and "continue" not in got[-1]["metadata"]


def test_the_pages_are_one_snapshot_whatever_is_written_between_them(api: httpx.Client, ns: str) -> None:
    path = f"{CORE}/namespaces/{ns}/configmaps"
    first = api.get(path, params={"limit": "5"}).json()
    before = api.get(path, params={"resourceVersion": first["metadata"]["resourceVersion"],
                                   "resourceVersionMatch": "Exact"}).json()
    assert before["items"][:5] == first["items"]
    # Between pages: one object the later pages would show is deleted, one changed, one added.
    victim, changed, added = "cm-10", "cm-15", "cm-99"
    assert api.delete(f"{path}/{victim}").status_code == 200
    assert api.patch(f"{path}/{changed}", json={"data": {"i": "changed"}},
                     headers={"Content-Type": "application/merge-patch+json"}).status_code == 200
    create(api, path, {"metadata": {"name": added}})
    try:
        rest = []
        token = first["metadata"]["continue"]
        while token:
            page = api.get(path, params={"limit": "5", "continue": token}).json()
            assert page["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
            rest += page["items"]
            token = page["metadata"].get("continue")
        assert first["items"] + rest == before["items"]
        assert victim in names(rest) and added not in names(rest)
        assert next(i for i in rest if i["metadata"]["name"] == changed)["data"] == {"i": "15"}
        # A new list sees the writes.
        now = names(api.get(path).json()["items"])
        assert victim not in now and added in now
    finally:
        api.delete(f"{path}/{added}")
        create(api, path, {"metadata": {"name": victim, "labels": {"pick": "no"}}, "data": {"i": "10"}})


@pytest.mark.parametrize("limit", [1, 2, 3, 10])
def test_selectors_filter_across_pages(api: httpx.Client, ns: str, limit: int) -> None:
    path = f"{CORE}/namespaces/{ns}/configmaps"
    wanted = names(api.get(path, params={"labelSelector": "pick=yes"}).json()["items"])
    assert len(wanted) == 8
    got = pages(api, path, limit, labelSelector="pick=yes")
    assert [name for p in got for name in names(p["items"])] == wanted
    assert all(len(p["items"]) <= limit for p in got)
    # kube counts what remains only when nothing is filtered out.
    assert all("remainingItemCount" not in p["metadata"] for p in got)
    # A selector nothing matches: one empty page, however many objects were read to find that out.
    nothing = pages(api, path, limit, labelSelector="pick=never")
    assert len(nothing) == 1 and nothing[0]["items"] == []


def test_all_namespaces_pages_across_namespaces(api: httpx.Client, ns: str) -> None:
    everything = names(api.get(f"{CORE}/configmaps").json()["items"])
    # Every module's ConfigMaps are in the shared etcd: the bound follows how many there are.
    got = pages(api, f"{CORE}/configmaps", 7, most=len(everything) // 7 + 2)
    assert [name for p in got for name in names(p["items"])] == everything
    assert [len(p["items"]) for p in got[:-1]] == [7] * (len(got) - 1) and len(got) == -(-len(everything) // 7)


def test_tables_page_as_lists_do(api: httpx.Client, ns: str) -> None:
    path = f"{CORE}/namespaces/{ns}/configmaps"
    rows: list[str] = []
    token = ""
    while True:
        resp = api.get(path, params={"limit": "4", **({"continue": token} if token else {})},
                       headers={"Accept": TABLE_ACCEPT})
        table = resp.json()
        assert table["kind"] == "Table" and len(table["rows"]) <= 4
        rows += [row["cells"][0] for row in table["rows"]]
        token = table["metadata"].get("continue", "")
        if not token:
            break
    assert rows == names(api.get(path).json()["items"])


def test_exact_and_too_new_resource_versions(api: httpx.Client, ns: str) -> None:
    path = f"{CORE}/namespaces/{ns}/configmaps"
    name = unique_name("exact")
    created = create(api, path, {"metadata": {"name": name}, "data": {"v": "1"}})
    rv = created["metadata"]["resourceVersion"]
    api.patch(f"{path}/{name}", json={"data": {"v": "2"}}, headers={"Content-Type": "application/merge-patch+json"})
    try:
        for params in ({"resourceVersion": rv, "resourceVersionMatch": "Exact"},
                       {"resourceVersion": rv, "limit": "100"}):  # a resourceVersion with a limit: exact (legacy)
            old = api.get(path, params=params).json()
            assert old["metadata"]["resourceVersion"] == rv
            assert next(i for i in old["items"] if i["metadata"]["name"] == name)["data"] == {"v": "1"}
        current = int(api.get(path).json()["metadata"]["resourceVersion"])
        body = assert_status(api.get(path, params={"resourceVersion": str(current + 1000),
                                                   "resourceVersionMatch": "NotOlderThan", "limit": "3"}),
                             504, "Timeout")
        assert body["message"].startswith(f"Timeout: Too large resource version: {current + 1000}, current: ")
    finally:
        api.delete(f"{path}/{name}")


def test_a_continue_token_etcd_compacted_is_410_with_a_token_to_go_on(
        tmp_path: Path, start_apiserver: Callable[..., AbstractContextManager[str]]) -> None:
    with Etcd(tmp_path / "etcd") as etcd, start_apiserver(etcd.url) as url, \
            httpx.Client(base_url=url, timeout=30) as api:
        path = f"{CORE}/namespaces/default/configmaps"
        for i in range(6):
            create(api, path, {"metadata": {"name": f"c-{i}"}})
        first = api.get(path, params={"limit": "2"}).json()
        created = create(api, path, {"metadata": {"name": "c-9"}})
        compact = httpx.post(f"{etcd.url}/v3/kv/compaction",
                             json={"revision": created["metadata"]["resourceVersion"], "physical": True}, timeout=10)
        assert compact.status_code == 200, compact.text
        old_exact = api.get(path, params={"resourceVersion": first["metadata"]["resourceVersion"],
                                          "resourceVersionMatch": "Exact"})
        assert_status(old_exact, 410, "Expired", "The resourceVersion for the provided list is too old.")
        resp = api.get(path, params={"limit": "2", "continue": first["metadata"]["continue"]})
        body = assert_status(resp, 410, "Expired")
        assert body["message"].startswith("The provided continue parameter is too old to display a consistent list "
                                          "result. You can start a new list without the continue parameter, or use "
                                          "the continue token in this response")
        # The token in the Status goes on from where the list was, at the current revision.
        rest = pages(api, path, 2, **{"continue": body["metadata"]["continue"]})
        assert [name for p in rest for name in names(p["items"])] == ["c-2", "c-3", "c-4", "c-5", "c-9"]


def test_kubectl_chunk_size_pages_and_prints_everything(apiserver: str, ns: str,
                                                        tmp_path_factory: pytest.TempPathFactory) -> None:
    with RecordingProxy(apiserver) as proxy:
        kubeconfig = write_kubeconfig(tmp_path_factory.mktemp("chunks"), proxy.url)
        kubectl = Kubectl("dispatcher", kubeconfig, tmp_path_factory.mktemp("chunks-cache"))
        out = kubectl.ok("get", "configmaps", "-n", ns, "--chunk-size=2", "-o", "name")
        lists = [path for method, path, _, _ in proxy.requests
                 if method == "GET" and path.startswith(f"{CORE}/namespaces/{ns}/configmaps?")]
    assert out.splitlines() == [f"configmap/{name}" for name in names_in(apiserver, ns)]
    assert len(lists) == -(-len(names_in(apiserver, ns)) // 2), lists  # kubectl followed every continue token
    assert all("limit=2" in path for path in lists) and sum("continue=" in path for path in lists) == len(lists) - 1


def names_in(apiserver: str, ns: str) -> list[str]:
    return names(httpx.get(f"{apiserver}{CORE}/namespaces/{ns}/configmaps", timeout=10).json()["items"])


def test_the_python_client_pages(apiserver: str, ns: str) -> None:
    with client.ApiClient(client.Configuration(host=apiserver)) as api_client:
        core = client.CoreV1Api(api_client)
        seen: list[str] = []
        token = None
        rounds = 0
        while True:
            page = core.list_namespaced_config_map(ns, limit=4, _continue=token)
            assert len(page.items) <= 4
            seen += [item.metadata.name for item in page.items]
            token = page.metadata._continue
            rounds += 1
            if not token:
                break
            assert page.metadata.remaining_item_count == len(names_in(apiserver, ns)) - len(seen)
        assert seen == names_in(apiserver, ns)
        assert rounds == -(-len(seen) // 4)
