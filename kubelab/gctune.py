"""Python's cyclic garbage collector, set for a component that runs for long and caches a cluster.

With CPython's defaults (a young collection every 700 net allocations, a full one after ten of the
middle generation's) the API server spent about a fifth of its CPU in the collector while pods were
created, bound and watched: every full collection walks the whole heap, and the heap is the watch
cache. Kubernetes objects decoded from JSON hold no reference cycles; what does (asyncio's tasks,
futures and exceptions) is short-lived. So a component, once started, moves what start-up made
(modules, models, schemas: never garbage) out of the collector's sight and collects the young
generation every YOUNG_THRESHOLD allocations instead (Instagram's gc.freeze recipe). Reference
counting still frees everything acyclic at once; cycles are still collected, later.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000


def tune_for_long_running() -> None:
    """Call once, after start-up work and before serving. Process-wide: for entry points, not libraries."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
