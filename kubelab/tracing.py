"""`kubelab trace KIND/NAME`: the path of an object's latest change through the cluster, as the API
server recorded it (apiserver/traces.py): accepted at revision R, delivered to each watcher, the
Endpoints/EndpointSlice writes that followed, each node's iptables-restore that applied them.

`resolve` and `render` are pure; the command asks the API server for the timeline and prints it.
"""

from __future__ import annotations

from typing import Any

from . import kinds
from .kinds import ResourceType

# kubelab's own API path for traces: components POST milestones to it (client/tracereport.py), the API
# server keeps and joins them (apiserver/traces.py), `kubelab trace` reads the timeline from it.
GROUP = "kubelab.dev"
VERSION = "v1alpha1"
PATH = f"/apis/{GROUP}/{VERSION}/traces"


def resolve(kind: str) -> ResourceType | None:
    """`service`, `svc`, `services`, `Service`, `deployments.apps`... -> the resource type."""
    wanted = kind.lower()
    for rt in kinds.BUILTIN:
        names = {rt.plural, rt.singular_name, rt.kind.lower(), *rt.short_names}
        if rt.group:
            names |= {f"{n}.{rt.group}" for n in (rt.plural, rt.singular_name)}
        if wanted in names:
            return rt
    return None


def storage_key(rt: ResourceType, namespace: str | None, name: str) -> str:
    """The key `kubelab trace KIND/NAME` asks about: the default namespace when none is given."""
    return rt.storage_key(namespace or "default", name)


def render(result: dict[str, Any]) -> str:
    """The timeline as a table: time since the write was accepted, the step, who, what, and how long
    a restore took (ms)."""
    if not result.get("found"):
        return f"{result.get('key')}: {result.get('message', 'nothing recorded')}\n"
    rows = [("T+ms", "STEP", "COMPONENT", "DETAIL", "TOOK ms")]
    for step in result["steps"]:
        took = step.get("took")
        rows.append((f"{1000 * step['sinceAccepted']:.1f}", step["step"], step["component"], step["detail"],
                     "" if took is None else f"{1000 * took:.1f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [f"{result['key']} at revision {result['revision']}"
             + (f" (Services: {', '.join(result['services'])})" if result.get("services") else "")]
    for row in rows:
        lines.append("  ".join([row[0].rjust(widths[0]), *(row[i].ljust(widths[i]) for i in (1, 2, 3)), row[4]])
                     .rstrip())
    applied = [s for s in result["steps"] if s["step"] == "rules applied"]
    if not applied and not any(s["step"] == "endpoints written" for s in result["steps"]):
        # Attribution is by construction (apiserver/traces.py): later writes are not this change's.
        lines.append("nothing downstream: no endpoints were written and no node's rules changed for this change")
    if applied:
        last = max(s["sinceAccepted"] for s in applied)
        lines.append(f"every reporting node applied it {1000 * last:.1f} ms after the API server accepted it "
                     f"({len(applied)} nodes)")
    return "\n".join(lines) + "\n"
