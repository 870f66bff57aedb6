"""kubelab's scheduler: places pods on nodes by kube-scheduler's rules.

It owns the decision (pure filter and score functions in `fit.py` and `score.py`), the node
accounting cache with assumed pods (`cache.py`) and the loop that pops pending pods, decides and
binds them through the API (`scheduling.py`). It reads nodes and pods only through the API server.
"""

from .scheduling import Scheduler, run

__all__ = ["Scheduler", "run"]
