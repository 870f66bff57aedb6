"""kubelab's controllers: the endpoints and endpointslice controllers (and, later, node lifecycle).

Each controller is a level-triggered reconcile loop: shared informers feed a work queue keyed
`namespace/name`; `reconcile(key)` reads the caches, computes the desired objects with the pure
helpers in `endpoints.py` / `endpointslices.py`, and writes only what differs.
"""

from .manager import run

__all__ = ["run"]
