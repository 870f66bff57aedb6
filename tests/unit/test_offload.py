"""apiserver/offload.py: heavy request work runs in the worker thread, small work inline, and either
way the request sees what it would have seen inline (its context, its errors); the garbage collector
pauses only while heavy work is in flight."""

from __future__ import annotations

import asyncio
import gc
import threading

import pytest

from apiserver import offload, requestctx
from apiserver.errors import StatusError, bad_request

HEAVY = offload.INLINE_BYTES
SMALL = offload.INLINE_BYTES - 1


def where() -> str:
    return threading.current_thread().name


def test_small_work_runs_on_the_loop_and_heavy_work_in_the_worker() -> None:
    async def main() -> tuple[str, str, str]:
        return where(), await offload.run(SMALL, where), await offload.run(HEAVY, where)

    loop_thread, small, heavy = asyncio.run(main())
    assert small == loop_thread
    assert heavy != loop_thread and heavy.startswith("apiserver-cpu")


def test_heavy_work_sees_the_request_context_and_its_warnings_come_back() -> None:
    def work() -> str:
        requestctx.warn('unknown field "spec.x"')
        return requestctx.field_validation.get()

    async def request() -> tuple[str, list[str]]:
        requestctx.field_validation.set("Strict")
        warnings = requestctx.start()
        return await offload.run(HEAVY, work), warnings

    mode, warnings = asyncio.run(request())
    assert (mode, warnings) == ("Strict", ['unknown field "spec.x"'])


def test_errors_raised_in_the_worker_reach_the_request() -> None:
    def refuse() -> None:
        raise bad_request("no")

    with pytest.raises(StatusError) as err:
        asyncio.run(offload.run(HEAVY, refuse))
    assert (err.value.code, err.value.message) == (400, "no")


def test_the_collector_pauses_only_while_heavy_work_is_in_flight() -> None:
    assert gc.isenabled()

    async def main() -> list[bool]:
        seen = [await offload.run(HEAVY, gc.isenabled)]
        with pytest.raises(ZeroDivisionError):
            await offload.run(HEAVY, lambda: 1 / 0)
        seen.append(gc.isenabled())
        return seen

    assert asyncio.run(main()) == [False, True]
    assert gc.isenabled()


def test_the_body_size_belongs_to_its_request() -> None:
    async def request(size: int) -> int:
        offload.note_body(size)
        await asyncio.sleep(0)  # the other request runs meanwhile
        return offload.body_bytes()

    async def main() -> list[int]:
        return list(await asyncio.gather(request(10), request(HEAVY)))

    assert asyncio.run(main()) == [10, HEAVY]
    assert offload.object_bytes({"a": "b"}) == len(b'{"a":"b"}')
