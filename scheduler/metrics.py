"""kube-scheduler's metrics (pkg/scheduler/metrics), in the scheduler's own registry.

* `scheduler_schedule_attempts_total{result,profile}`: result is `scheduled`, `unschedulable` or `error`;
* `scheduler_scheduling_attempt_duration_seconds{result,profile}`: from the start of the scheduling
  cycle to the decision (unschedulable) or to the end of the binding (scheduled, error), buckets
  ExponentialBuckets(0.001, 2, 15) as upstream;
* `scheduler_pending_pods{queue}`: active, backoff, unschedulable, gated (read at scrape time).
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

SCHEDULED, UNSCHEDULABLE, ERROR = "scheduled", "unschedulable", "error"
ATTEMPT_BUCKETS = [0.001 * 2**i for i in range(15)]


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = r = registry if registry is not None else CollectorRegistry()
        self.attempts = Counter("scheduler_schedule_attempts_total", "Number of attempts to schedule pods, by the "
                                "result. 'unschedulable' means a pod could not be scheduled, while 'error' means an "
                                "internal scheduler problem.", ["result", "profile"], registry=r)
        self.attempt_duration = Histogram("scheduler_scheduling_attempt_duration_seconds", "Scheduling attempt "
                                          "latency in seconds (scheduling algorithm + binding)", ["result", "profile"],
                                          buckets=ATTEMPT_BUCKETS, registry=r)
        self.pending = Gauge("scheduler_pending_pods", "Number of pending pods, by the queue type. 'active' means "
                             "number of pods in activeQ; 'backoff' means number of pods in backoffQ; "
                             "'unschedulable' means number of pods in unschedulablePods that the scheduler attempted "
                             "to schedule and failed; 'gated' is the number of unschedulable pods that the scheduler "
                             "never attempted to schedule because they are gated.", ["queue"], registry=r)

    def observe(self, result: str, profile: str, seconds: float) -> None:
        self.attempts.labels(result, profile).inc()
        self.attempt_duration.labels(result, profile).observe(seconds)

    def track_queue(self, counts: Callable[[], dict[str, int]]) -> None:
        def reader(queue: str) -> Callable[[], float]:
            return lambda: float(counts().get(queue, 0))

        for queue in ("active", "backoff", "unschedulable"):
            self.pending.labels(queue).set_function(reader(queue))
        self.pending.labels("gated").set(0)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
