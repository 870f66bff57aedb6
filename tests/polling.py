"""Waiting in tests: poll until something is so. The time budget is a safety net against a hung test,
never an assertion about speed. Each harness says which errors mean "not yet" (`retry_on`); a check
raises GiveUp when waiting longer cannot help (the process it waits on has died)."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class GiveUp(AssertionError):
    """Raised by a `wait_for` check to end the wait at once."""


def wait_for(what: str, check: Callable[[], T | None], timeout: float = 60.0, *, interval: float = 0.1,
             retry_on: tuple[type[BaseException], ...] = (Exception,)) -> T:
    """Poll `check` until it returns something truthy and return that; fail with `what`, and the last
    error or falsy answer, after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            result = check()
        except GiveUp:
            raise
        except retry_on as exc:
            last = exc
        else:
            if result:
                return result
            last = result
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}" + (f" (last: {last!r})" if last else ""))


async def wait_for_async(what: str, check: Callable[[], Awaitable[T | None] | T | None], timeout: float = 60.0, *,
                         interval: float = 0.05) -> T:
    """`wait_for` on the event loop, for tests whose informers or clients run on it: `check` may be a
    coroutine function or a plain one (reading a cache the loop fills); the loop runs between polls."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result  # type: ignore[return-value]
        last = result
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}" + (f" (last: {last!r})" if last else ""))
