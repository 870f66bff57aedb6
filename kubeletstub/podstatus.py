"""A pod's status from what its containers are doing, as kubelet computes it (pkg/kubelet/kubelet_pods.go:
getPhase, convertToAPIContainerStatuses; pkg/kubelet/status/generate.go for the conditions). Pure: the
containers' observed states come in (`Observed`), the PodStatus goes out; no clock, no runtime.

kubectl derives its STATUS column from exactly these fields: `Completed`/`Error` from a terminated
state's reason, `CrashLoopBackOff` from a waiting one, `Init:1/2` from initContainerStatuses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubelab.models import Container, ContainerStatus, Pod, PodCondition, PodIP, PodStatus


@dataclass(frozen=True)
class Observed:
    """One container as the kubelet sees it now."""

    name: str
    image: str
    state: dict[str, Any]                     # {"running": ...} | {"terminated": ...} | {"waiting": ...}
    last_state: dict[str, Any] = field(default_factory=dict)
    restart_count: int = 0
    ready: bool = False
    started: bool = True                      # its startup probe passed (or it has none)
    container_id: str | None = None
    will_restart: bool = False                # terminated, and the restart policy brings it back


def terminated(*, exit_code: int, reason: str, started: str, finished: str, container_id: str,
               message: str = "") -> dict[str, Any]:
    data: dict[str, Any] = {"exitCode": exit_code, "reason": reason, "startedAt": started, "finishedAt": finished,
                            "containerID": container_id}
    if message:
        data["message"] = message
    return data


def will_restart(policy: str, exit_code: int) -> bool:
    return policy == "Always" or (policy == "OnFailure" and exit_code != 0)


def init_done(observed: Sequence[Observed]) -> bool:
    return all("terminated" in o.state and o.state["terminated"].get("exitCode") == 0 for o in observed)


def phase(policy: str, init: Sequence[Observed], main: Sequence[Observed]) -> str:
    """getPhase: Pending while an init container has not succeeded (Failed once one failed for good);
    then Running while a container runs or will restart; Succeeded when all exited 0; Failed otherwise."""
    for o in init:
        term = o.state.get("terminated")
        if term is not None and term.get("exitCode") != 0 and policy == "Never":
            return "Failed"
    if not init_done(init):
        return "Pending"
    if any("waiting" in o.state and not o.last_state and o.restart_count == 0 for o in main):
        return "Pending"
    if any("running" in o.state or o.will_restart or "waiting" in o.state for o in main):
        return "Running"
    codes = [o.state["terminated"].get("exitCode") for o in main if "terminated" in o.state]
    return "Succeeded" if all(code == 0 for code in codes) else "Failed"


def _condition(before: Mapping[str, PodCondition], type_: str, status: str, reason: str | None,
               message: str | None, now: str) -> PodCondition:
    old = before.get(type_)
    when = old.last_transition_time if old is not None and old.status == status else now
    return PodCondition(type=type_, status=status, reason=reason, message=message, last_transition_time=when)


def _status(o: Observed) -> ContainerStatus:
    # kubelet's prober manager: started once running and past its startup probe; ready only once started.
    started = "running" in o.state and o.started
    return ContainerStatus(name=o.name, image=o.image, image_id="", container_id=o.container_id,
                           ready=o.ready and started, started=started, restart_count=o.restart_count,
                           state=o.state, last_state=o.last_state)


# kubetypes.PodConditionsByKubelet: the conditions kubelet writes; every other one (DisruptionTarget from an
# eviction, readiness gates' conditions) belongs to someone else and is kept as the API server has it.
KUBELET_CONDITIONS = frozenset({"PodScheduled", "Ready", "Initialized", "ContainersReady",
                                "PodReadyToStartContainers"})


def preserved_conditions(previous: PodStatus | None) -> list[PodCondition]:
    """mergePodStatus: the conditions kubelet does not own, first and unchanged."""
    return [c for c in (previous.conditions if previous else None) or [] if c.type not in KUBELET_CONDITIONS]


def pod_status(pod: Pod, *, init: Sequence[Observed], main: Sequence[Observed], ip: str, host_ip: str,
               sandbox_ready: bool, now: str, started: str) -> PodStatus:
    """The whole status; `main` and `init` in the pod's spec order (statuses are written sorted by name for
    containers, in spec order for init containers, as kubelet writes them)."""
    spec = pod.spec
    policy = (spec.restart_policy if spec else None) or "Always"
    previous = pod.status or PodStatus()
    before = {c.type or "": c for c in previous.conditions or []}
    current = phase(policy, init, main)
    conditions = preserved_conditions(previous)
    conditions.append(_condition(before, "PodReadyToStartContainers", "True" if sandbox_ready else "False",
                                 None, None, now))
    incomplete = [o.name for o in init if not ("terminated" in o.state and o.state["terminated"].get("exitCode") == 0)]
    if current in ("Succeeded", "Failed") and not incomplete:
        conditions.append(_condition(before, "Initialized", "True", "PodCompleted" if current == "Succeeded"
                                     else None, None, now))
    elif incomplete:
        conditions.append(_condition(before, "Initialized", "False", "ContainersNotInitialized",
                                     f"containers with incomplete status: [{' '.join(incomplete)}]", now))
    else:
        conditions.append(_condition(before, "Initialized", "True", None, None, now))
    unready = [o.name for o in main if not (o.ready and o.started and "running" in o.state)]
    if current == "Succeeded":
        ready: tuple[str, str | None, str | None] = ("False", "PodCompleted", None)
    elif current == "Failed":
        ready = ("False", "PodFailed", None)
    elif unready:
        ready = ("False", "ContainersNotReady", f"containers with unready status: [{' '.join(unready)}]")
    else:
        ready = ("True", None, None)
    conditions.append(_condition(before, "Ready", *ready, now))
    conditions.append(_condition(before, "ContainersReady", *ready, now))
    conditions.append(before.get("PodScheduled") or PodCondition(type="PodScheduled", status="True",
                                                                 last_transition_time=now))
    status = PodStatus(phase=current, conditions=conditions, host_ip=host_ip, host_ips=[PodIP(ip=host_ip)],
                       pod_ip=ip or None, pod_ips=[PodIP(ip=ip)] if ip else None,
                       start_time=previous.start_time or started,
                       container_statuses=[_status(o) for o in sorted(main, key=lambda o: o.name)],
                       qos_class=previous.qos_class)
    if init:
        status.init_container_statuses = [_status(o) for o in init]
    return status


def container_image(container: Container) -> str:
    image = container.image or ""
    return image if "/" in image else f"docker.io/library/{image}"


def go_duration(seconds: float) -> str:
    """time.Duration's String for whole seconds: 10s, 1m20s, 5m0s."""
    total = int(seconds)
    if total < 60:
        return f"{total}s"
    return f"{total // 60}m{total % 60}s"
