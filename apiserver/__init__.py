"""kubelab's API server: Kubernetes REST over etcd.

It owns storage (`storage.py` is the only module in kubelab that imports the etcd client), the
registry of kinds (defaults, validation, ClusterIP and NodePort allocation), patching, watch
streaming, discovery and the Tables kubectl prints. It knows nothing of scheduling, endpoints or
iptables: those components are its clients.
"""

# Before storage.py imports the etcd client: gRPC reads its fork-support setting when it is imported, and
# kubelab's package turns it off (kubelab/__init__.py says why).
import kubelab  # noqa: F401
