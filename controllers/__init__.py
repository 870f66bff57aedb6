"""kubelab's controllers (kube-controller-manager in small): endpoints, endpointslices, node lifecycle,
namespace, LoadBalancer, the ReplicaSet and Deployment controllers and the garbage collector.

Each controller is a level-triggered reconcile loop: shared informers feed a work queue keyed
`namespace/name` (the garbage collector's is keyed by UID); `reconcile(key)` reads the caches,
computes the desired objects with pure helpers (`endpoints.py`, `endpointslices.py`, `rollout.py`,
the ranking in `replicaset.py`, `garbagecollector.plan`) and writes only what differs. Cluster DNS
is not here: it is a component of its own (`clusterdns/`).
"""

from .manager import run

__all__ = ["run"]
