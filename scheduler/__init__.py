"""kubelab's scheduler: places pods on nodes by kube-scheduler's rules and in its words.

It owns the decision — pure filters (`fit.py`), scores (`score.py`) and one scheduling cycle with
node sampling (`algorithm.py`) — the node accounting cache with assumed pods (`cache.py`), the
scheduling queue with backoff and event-driven requeueing (`queue.py`), the loop that pops, decides
and binds (`scheduling.py`), the events and PodScheduled conditions it writes (`reporting.py`), and
the explanation `kubelab explain pod` prints (`explain.py`). It reads nodes and pods only through the
API server; node readiness reaches it only as the node lifecycle controller's taints.
"""

from .scheduling import Scheduler, run

__all__ = ["Scheduler", "run"]
