"""CPU-heavy request work, run off the event loop.

The API server answers every request on one asyncio event loop, and in `kubelab up` the whole cluster
shares it: a request that computed for seconds (decoding a 3 MiB body, applying a patch, validating
and diffing an object of 100,000 fields for managedFields) held /healthz, every watch and every other
request for that long. Such work runs here instead, in one worker thread, and the loop keeps serving:

- the worker gives the GIL up to the loop within the interpreter's switch interval, set to 1 ms on the
  first offload (Python's 5 ms default made every socket call of the loop wait up to 5 ms);
- long single calls into C hold the GIL throughout (a sort, a regular expression, one pydantic
  validation), so the heavy paths below work in bounded steps (codecs.json_depth,
  managedfields.fieldpath._sorted_keys);
- the cyclic garbage collector pauses while heavy work is in flight (_GcPause), and the memory the
  work freed is handed back to the system afterwards (_trim).

One worker, not several: pure-Python work gains nothing from more threads under the GIL, and each more
would be one more thread the loop waits behind. Small work (most requests: a pod, a lease, a status
update) stays on the loop, where a thread hop would cost more than the work. How heavy a request is,
is judged from its size: the body it sent (`note_body`, called by the router as it reads it) or the
object it changes, whichever is bigger.

What a thread cannot do: when every CPU is busy, the worker can be descheduled while it holds the GIL
and the loop waits for both (bench/hostile.py measures it; a worker process would not share the GIL).
"""

from __future__ import annotations

import asyncio
import contextvars
import ctypes
import ctypes.util
import gc
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import orjson

T = TypeVar("T")

# Work on less than this many bytes of JSON runs inline. A 64 KiB object decodes, validates and diffs in a
# few milliseconds; a thread hop and the GIL handover cost around a tenth of a millisecond.
INLINE_BYTES = 64 * 1024
SWITCH_INTERVAL = 0.001

_body_bytes: contextvars.ContextVar[int] = contextvars.ContextVar("offload_body_bytes", default=0)
_executor: ThreadPoolExecutor | None = None


def note_body(size: int) -> None:
    """The request body's size, for the heavy-work decisions below it (the router calls this)."""
    _body_bytes.set(size)


def body_bytes() -> int:
    return _body_bytes.get()


def object_bytes(obj: Any) -> int:
    """An object's JSON size (orjson: a few microseconds for a pod)."""
    try:
        return len(orjson.dumps(obj))
    except (TypeError, orjson.JSONEncodeError):
        return INLINE_BYTES  # not plain JSON: treat as heavy rather than guess


def is_heavy(size: int) -> bool:
    return size >= INLINE_BYTES


async def run(size: int, fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)`, inline when `size` (bytes of JSON it works on) is small, else in the worker thread with
    the caller's context (request-scoped context variables: field validation mode, warnings)."""
    if not is_heavy(size):
        return fn(*args)
    context = contextvars.copy_context()
    loop = asyncio.get_running_loop()
    _gc_pause.start()
    try:
        return await loop.run_in_executor(_worker(), context.run, fn, *args)
    finally:
        _gc_pause.end(loop)


class _GcPause:
    """The cyclic garbage collector, paused while heavy work is in flight.

    Heavy work builds millions of objects (JSON trees, field paths). Each time they pass the collector's
    thresholds it walks the young ones, and past a quarter more than the long-lived ones (few, once
    start-up's are frozen: kubelab/gctune.py) it walks every live container, holding the GIL all along:
    the loop waited 250-500 ms behind such passes while a 3 MiB body was decoded. JSON trees hold no
    cycles and reference counting frees them as before; what the work leaves alive is walked once by
    the next young pass after it. Nothing is frozen here: a freeze would also catch whatever cyclic
    garbage the rest of the server made meanwhile, and unfreezing would undo start-up's freeze.

    A second after the last heavy work ends, the memory it freed is handed back to the system (_trim)."""

    TRIM_AFTER = 1.0

    def __init__(self) -> None:
        self.in_flight = 0
        self.was_enabled = True
        self.lock = threading.Lock()  # several event loops may offload (API servers in one test process)

    def start(self) -> None:
        with self.lock:
            if self.in_flight == 0:
                self.was_enabled = gc.isenabled()
                gc.disable()
            self.in_flight += 1

    def end(self, loop: asyncio.AbstractEventLoop) -> None:
        with self.lock:
            self.in_flight -= 1
            if self.in_flight:
                return
            if self.was_enabled:
                gc.enable()
        loop.call_later(self.TRIM_AFTER, self._trim_if_idle, loop)

    def _trim_if_idle(self, loop: asyncio.AbstractEventLoop) -> None:
        if self.in_flight == 0:
            loop.run_in_executor(_worker(), _trim)  # in the worker: malloc_trim walks every arena


_gc_pause = _GcPause()


def _trim() -> None:
    """Give the memory heavy work freed back to the system: glibc keeps what a thread frees in that
    thread's own arena (after a 2.8 MiB body the API server held 60 MB more than it needed). ctypes
    lets go of the GIL for the call."""
    if _malloc_trim is not None:
        _malloc_trim(0)


def _load_malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to trim, or no way to
        return None


_malloc_trim = _load_malloc_trim()


def _worker() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        sys.setswitchinterval(SWITCH_INTERVAL)
        _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="apiserver-cpu")
        # Start its thread with an empty job: submit() waits for a thread it starts to run, and with the
        # first heavy job that thread took the GIL into a 70 ms decode before the loop got it back.
        _executor.submit(int).result()
    return _executor
