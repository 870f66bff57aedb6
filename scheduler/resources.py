"""Resource arithmetic: what a pod requests and what a node has, in millicores and bytes."""

from __future__ import annotations

from dataclasses import dataclass, field

from kubelab import quantity
from kubelab.models import Container, Node, Pod

# kube-scheduler's defaults for containers without requests, used only for scoring (NonZeroRequested).
DEFAULT_MILLI_CPU = 100
DEFAULT_MEMORY = 200 * 1024 * 1024


@dataclass
class Resources:
    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    pods: int = 0
    scalar: dict[str, int] = field(default_factory=dict)

    def add(self, other: Resources, sign: int = 1) -> None:
        self.milli_cpu += sign * other.milli_cpu
        self.memory += sign * other.memory
        self.ephemeral_storage += sign * other.ephemeral_storage
        self.pods += sign * other.pods
        for name, value in other.scalar.items():
            self.scalar[name] = self.scalar.get(name, 0) + sign * value

    def is_zero(self) -> bool:
        return not (self.milli_cpu or self.memory or self.ephemeral_storage or any(self.scalar.values()))

    @classmethod
    def from_list(cls, values: dict[str, str] | None) -> Resources:
        res = cls()
        for name, text in (values or {}).items():
            if name == "cpu":
                res.milli_cpu = quantity.milli_value(text)
            elif name == "memory":
                res.memory = quantity.value(text)
            elif name == "ephemeral-storage":
                res.ephemeral_storage = quantity.value(text)
            elif name == "pods":
                res.pods = quantity.value(text)
            else:
                res.scalar[name] = quantity.value(text)
        return res

    def copy(self) -> Resources:
        return Resources(self.milli_cpu, self.memory, self.ephemeral_storage, self.pods, dict(self.scalar))


def _container_requests(c: Container, defaults: dict[str, str] | None = None) -> Resources:
    requests = dict((c.resources.requests if c.resources else None) or {})
    # NonMissingContainerRequests: a default fills only a request that is absent; an explicit 0 stays 0.
    for name, text in (defaults or {}).items():
        requests.setdefault(name, text)
    return Resources.from_list(requests)


def _max(a: Resources, b: Resources) -> Resources:
    names = set(a.scalar) | set(b.scalar)
    return Resources(max(a.milli_cpu, b.milli_cpu), max(a.memory, b.memory),
                     max(a.ephemeral_storage, b.ephemeral_storage), 0,
                     {n: max(a.scalar.get(n, 0), b.scalar.get(n, 0)) for n in names})


def _aggregate(pod: Pod, defaults: dict[str, str] | None = None) -> Resources:
    """resourcehelper.PodRequests: max(sum of containers, the largest init step) + overhead.

    Restartable init containers (sidecars) keep running, so they add to the sum and to every later init
    step. Worked example: init IC1{cpu 2}, IC2{cpu 2}; containers C1{2}, C2{1} -> cpu max(3, 2) = 3.
    With a sidecar S{cpu 1} first: sum 2+1+1 = 4, init steps S 1, IC1 2+1 = 3, IC2 3 -> cpu 4.
    """
    spec = pod.spec
    if spec is None:
        return Resources()
    total = Resources()
    for c in spec.containers or []:
        total.add(_container_requests(c, defaults))
    init_max = Resources()
    sidecars = Resources()
    for c in spec.init_containers or []:
        req = _container_requests(c, defaults)
        if c.restart_policy == "Always":
            total.add(req)
            sidecars.add(req)
            candidate = sidecars.copy()
        else:
            candidate = req.copy()
            candidate.add(sidecars)
        init_max = _max(init_max, candidate)
    result = _max(total, init_max)
    if spec.overhead:
        result.add(Resources.from_list(spec.overhead))
    return result


def pod_requests(pod: Pod) -> Resources:
    """What the pod asks of a node for filtering: a missing request counts 0."""
    return _aggregate(pod)


_NON_ZERO_DEFAULTS = {"cpu": f"{DEFAULT_MILLI_CPU}m", "memory": str(DEFAULT_MEMORY)}


def pod_nonzero_requests(pod: Pod) -> tuple[int, int]:
    """(milli cpu, memory) for scoring: the same aggregate as pod_requests, sidecars and overhead
    included, but a container (init or not) without a cpu or memory request counts 100m / 200Mi, as
    kube-scheduler's PodRequests(..., NonMissingContainerRequests) does."""
    res = _aggregate(pod, _NON_ZERO_DEFAULTS)
    return res.milli_cpu, res.memory


def node_allocatable(node: Node) -> Resources:
    status = node.status
    return Resources.from_list((status.allocatable or status.capacity) if status else None)
