"""client-go's workqueue metrics (k8s.io/component-base/metrics/prometheus/workqueue), one registry
per component: `workqueue_depth`, `workqueue_adds_total`, `workqueue_queue_duration_seconds`,
`workqueue_work_duration_seconds`, `workqueue_unfinished_work_seconds`,
`workqueue_longest_running_processor_seconds` and `workqueue_retries_total`, each labelled `name`."""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# ExponentialBuckets(10e-9, 10, 10): 10 ns to 10 s.
DURATION_BUCKETS = [1e-8 * 10**i for i in range(10)]


class WorkQueueMetricsProvider:
    """Creates the metric families once in `registry`; `for_queue(name)` gives one queue's handles."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = r = registry if registry is not None else CollectorRegistry()
        self.depth = Gauge("workqueue_depth", "Current depth of workqueue", ["name"], registry=r)
        self.adds = Counter("workqueue_adds_total", "Total number of adds handled by workqueue", ["name"], registry=r)
        self.latency = Histogram("workqueue_queue_duration_seconds", "How long in seconds an item stays in workqueue "
                                 "before being requested.", ["name"], buckets=DURATION_BUCKETS, registry=r)
        self.work = Histogram("workqueue_work_duration_seconds", "How long in seconds processing an item from "
                              "workqueue takes.", ["name"], buckets=DURATION_BUCKETS, registry=r)
        self.unfinished = Gauge("workqueue_unfinished_work_seconds", "How many seconds of work has done that is in "
                                "progress and hasn't been observed by work_duration. Large values indicate stuck "
                                "threads. One can deduce the number of stuck threads by observing the rate at which "
                                "this increases.", ["name"], registry=r)
        self.longest = Gauge("workqueue_longest_running_processor_seconds", "How many seconds has the longest running "
                             "processor for workqueue been running.", ["name"], registry=r)
        self.retries = Counter("workqueue_retries_total", "Total number of retries handled by workqueue", ["name"],
                               registry=r)

    def for_queue(self, name: str) -> QueueMetrics:
        return QueueMetrics(self, name)


class QueueMetrics:
    """The hooks a WorkQueue calls (defaultQueueMetrics): add, get, done, retry."""

    def __init__(self, provider: WorkQueueMetricsProvider, name: str, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self._clock = clock
        self._depth = provider.depth.labels(name)
        self._adds = provider.adds.labels(name)
        self._latency = provider.latency.labels(name)
        self._work = provider.work.labels(name)
        self._retries = provider.retries.labels(name)
        self._added_at: dict[str, float] = {}
        self._started_at: dict[str, float] = {}
        provider.unfinished.labels(name).set_function(self._unfinished)
        provider.longest.labels(name).set_function(self._longest)

    def add(self, key: str) -> None:
        self._adds.inc()
        self._depth.inc()
        self._added_at.setdefault(key, self._clock())

    def get(self, key: str) -> None:
        self._depth.dec()
        now = self._clock()
        added = self._added_at.pop(key, None)
        if added is not None:
            self._latency.observe(now - added)
        self._started_at[key] = now

    def done(self, key: str) -> None:
        started = self._started_at.pop(key, None)
        if started is not None:
            self._work.observe(self._clock() - started)

    def retry(self) -> None:
        self._retries.inc()

    def _unfinished(self) -> float:
        now = self._clock()
        return sum(now - t for t in self._started_at.values())

    def _longest(self) -> float:
        now = self._clock()
        return max((now - t for t in self._started_at.values()), default=0.0)
