"""Server-side Tables: the columns and cells kube-apiserver's printers produce, which kubectl prints.

kubectl get asks for `application/json;as=Table;g=meta.k8s.io;v=v1` and prints the cells verbatim, so
everything a user sees in `kubectl get` output is decided here (pkg/printers/internalversion).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubelab import kinds, timeutil
from kubelab.kinds import ResourceType

from .registry.eventsv1 import to_core as events_to_core

Column = tuple[str, str, int, str]  # name, type, priority, format
Row = list[Any]

NAME: Column = ("Name", "string", 0, "name")
AGE: Column = ("Age", "string", 0, "")


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def _age(obj: dict[str, Any]) -> str:
    return timeutil.age(_meta(obj).get("creationTimestamp"))


def _join_more(items: list[str], limit: int = 3, more_fmt: str = " + {n} more...") -> str:
    if not items:
        return "<none>"
    shown = ",".join(items[:limit])
    return shown + more_fmt.format(n=len(items) - limit) if len(items) > limit else shown


# --- per-kind printers ---------------------------------------------------------------------------

def _terminated_reason(term: dict[str, Any], prefix: str = "") -> str:
    if term.get("reason"):
        return prefix + str(term["reason"])
    if term.get("signal"):
        return f"{prefix}Signal:{term['signal']}"
    return f"{prefix}ExitCode:{term.get('exitCode', 0)}"


def _pod_row(obj: dict[str, Any]) -> Row:
    """kubectl's printPod (pkg/printers/internalversion/printers.go): the first init container that has not
    succeeded names the status (Init:<reason>, or Init:i/n while it runs); after them the first container
    with a waiting or terminated reason does, counting from the end as kube does; Completed with a container
    still running reads Running (or NotReady)."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    containers = spec.get("containers") or []
    init_specs = {c.get("name"): c for c in spec.get("initContainers") or []}
    total = len(containers) + sum(1 for c in init_specs.values() if c.get("restartPolicy") == "Always")
    phase = status.get("phase") or "Pending"
    reason = status.get("reason") or phase
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    ready = restarts = sidecar_restarts = 0
    initializing = False
    init_statuses = status.get("initContainerStatuses") or []
    # The RESTARTS column says when the last restart was: "2 (5s ago)".
    last_restart = max((str(((s.get("lastState") or {}).get("terminated") or {}).get("finishedAt") or "")
                        for s in init_statuses + (status.get("containerStatuses") or [])), default="")
    for i, s in enumerate(init_statuses):
        restarts += int(s.get("restartCount") or 0)
        state = s.get("state") or {}
        term, waiting = state.get("terminated"), state.get("waiting")
        sidecar = (init_specs.get(s.get("name")) or {}).get("restartPolicy") == "Always"
        if sidecar:
            sidecar_restarts += int(s.get("restartCount") or 0)
        if term is not None and term.get("exitCode") == 0:
            continue
        if sidecar and s.get("started"):
            ready += 1 if s.get("ready") else 0
            continue
        if term is not None:
            reason = _terminated_reason(term, "Init:")
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(spec.get('initContainers') or [])}"
        initializing = True
        break
    if not initializing or conditions.get("Initialized") == "True":
        restarts = sidecar_restarts
        running = False
        for s in reversed(status.get("containerStatuses") or []):
            restarts += int(s.get("restartCount") or 0)
            state = s.get("state") or {}
            if (state.get("waiting") or {}).get("reason"):
                reason = state["waiting"]["reason"]
            elif "terminated" in state:
                reason = _terminated_reason(state["terminated"])
            elif s.get("ready") and "running" in state:
                running = True
                ready += 1
        if reason == "Completed" and running:
            reason = "Running" if conditions.get("Ready") == "True" else "NotReady"
    if _meta(obj).get("deletionTimestamp") and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif _meta(obj).get("deletionTimestamp") and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    gates = spec.get("readinessGates") or []
    gate_cell = "<none>" if not gates else \
        f"{sum(1 for g in gates if conditions.get(g.get('conditionType')) == 'True')}/{len(gates)}"
    restarts_cell = f"{restarts} ({timeutil.age(last_restart)} ago)" if last_restart else str(restarts)
    return [_meta(obj).get("name"), f"{ready}/{total}", reason, restarts_cell, _age(obj),
            status.get("podIP") or "<none>", spec.get("nodeName") or "<none>",
            status.get("nominatedNodeName") or "<none>", gate_cell]


def _service_ports(spec: dict[str, Any]) -> str:
    parts = []
    for p in spec.get("ports") or []:
        proto = p.get("protocol") or "TCP"
        parts.append(f"{p.get('port')}:{p['nodePort']}/{proto}" if p.get("nodePort") else f"{p.get('port')}/{proto}")
    return ",".join(parts) or "<none>"


def _service_external_ip(obj: dict[str, Any]) -> str:
    spec = obj.get("spec") or {}
    svc_type = spec.get("type")
    external = list(spec.get("externalIPs") or [])
    if svc_type == "ExternalName":
        return spec.get("externalName") or "<none>"
    if svc_type == "LoadBalancer":
        ingress = ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
        addrs = [i.get("ip") or i.get("hostname") for i in ingress if i.get("ip") or i.get("hostname")]
        addrs += external
        return ",".join(addrs) if addrs else "<pending>"
    return ",".join(external) if external else "<none>"


def _service_row(obj: dict[str, Any]) -> Row:
    spec = obj.get("spec") or {}
    ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
    selector = spec.get("selector") or {}
    return [_meta(obj).get("name"), spec.get("type") or "ClusterIP", ips[0] if ips else "<none>",
            _service_external_ip(obj), _service_ports(spec), _age(obj),
            ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>"]


def format_endpoints(obj: dict[str, Any]) -> str:
    """`10.244.1.3:5000,10.244.1.4:5000 + 1 more...` as kubectl shows Endpoints."""
    items = []
    for subset in obj.get("subsets") or []:
        addresses = subset.get("addresses") or []
        ports = subset.get("ports") or []
        if not ports:
            items += [a.get("ip", "") for a in addresses]
        for port in ports:
            items += [f"{a.get('ip', '')}:{port.get('port')}" for a in addresses]
    return _join_more(items)


def _endpoints_row(obj: dict[str, Any]) -> Row:
    return [_meta(obj).get("name"), format_endpoints(obj), _age(obj)]


def _slice_row(obj: dict[str, Any]) -> Row:
    ports = [str(p.get("port")) for p in obj.get("ports") or [] if p.get("port") is not None]
    addresses = [a for ep in obj.get("endpoints") or [] for a in (ep.get("addresses") or [])]
    return [_meta(obj).get("name"), obj.get("addressType") or "", ",".join(ports) if ports else "<unset>",
            _join_more(addresses, more_fmt=" + {n} more..."), _age(obj)]


def node_roles(labels: dict[str, str]) -> str:
    roles = set()
    for key, value in labels.items():
        if key.startswith("node-role.kubernetes.io/") and key[len("node-role.kubernetes.io/"):]:
            roles.add(key[len("node-role.kubernetes.io/"):])
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    return ",".join(sorted(roles)) or "<none>"


def node_status(obj: dict[str, Any]) -> str:
    conditions = {c.get("type"): c.get("status") for c in (obj.get("status") or {}).get("conditions") or []}
    ready = conditions.get("Ready")
    text = "Unknown" if ready is None else ("Ready" if ready == "True" else "NotReady")
    if (obj.get("spec") or {}).get("unschedulable"):
        text += ",SchedulingDisabled"
    return text


def _node_row(obj: dict[str, Any]) -> Row:
    status = obj.get("status") or {}
    info = status.get("nodeInfo") or {}
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    return [_meta(obj).get("name"), node_status(obj), node_roles(_meta(obj).get("labels") or {}), _age(obj),
            info.get("kubeletVersion") or "", addresses.get("InternalIP") or "<none>",
            addresses.get("ExternalIP") or "<none>", info.get("osImage") or "<unknown>",
            info.get("kernelVersion") or "<unknown>", info.get("containerRuntimeVersion") or "<unknown>"]


def _namespace_row(obj: dict[str, Any]) -> Row:
    return [_meta(obj).get("name"), (obj.get("status") or {}).get("phase") or "", _age(obj)]


def _event_row(obj: dict[str, Any]) -> Row:
    """printEvent: first seen is firstTimestamp, else the events API's eventTime; last seen is
    lastTimestamp, else first seen, or the series' last observation; the count is the series', else
    count, else 1 (a singleton event of the new API has none). The source falls back to the reporting
    controller and instance for events the events API wrote (formatEventSource)."""
    inv = obj.get("involvedObject") or {}
    source = obj.get("source") or {}
    first_at = obj.get("firstTimestamp") or obj.get("eventTime")
    first = timeutil.age(first_at) if first_at else "<unknown>"
    last = timeutil.age(obj["lastTimestamp"]) if obj.get("lastTimestamp") else first
    count = obj.get("count") or 1
    series = obj.get("series")
    if isinstance(series, dict):
        observed = series.get("lastObservedTime")
        last = timeutil.age(observed) if observed else "<unknown>"
        count = series.get("count") or 0
    component = source.get("component") or obj.get("reportingComponent") or ""
    instance = source.get("host") or obj.get("reportingInstance") or ""
    kind = (inv.get("kind") or "").lower()
    target = f"{kind}/{inv['name']}" if inv.get("name") else kind
    return [last, obj.get("type") or "", obj.get("reason") or "", target, inv.get("fieldPath") or "",
            f"{component}, {instance}" if instance else component, (obj.get("message") or "").strip(), first,
            count, _meta(obj).get("name")]


def _events_v1_row(obj: dict[str, Any]) -> Row:
    # kube prints both versions with one printer, of the internal (core) type they convert to.
    return _event_row(events_to_core(obj))


def _template_cells(obj: dict[str, Any]) -> tuple[str, str, str]:
    spec = obj.get("spec") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    labels = (spec.get("selector") or {}).get("matchLabels") or {}
    exprs = (spec.get("selector") or {}).get("matchExpressions") or []
    selector = ",".join([f"{k}={v}" for k, v in sorted(labels.items())] +
                        [f"{e.get('key')} {e.get('operator', '').lower()} ({','.join(e.get('values') or [])})"
                         for e in exprs])
    return (",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers),
            selector or "<none>")


def _deployment_row(obj: dict[str, Any]) -> Row:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    containers, images, selector = _template_cells(obj)
    return [_meta(obj).get("name"), f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}",
            status.get("updatedReplicas", 0), status.get("availableReplicas", 0), _age(obj), containers, images,
            selector]


def _replicaset_row(obj: dict[str, Any]) -> Row:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    containers, images, selector = _template_cells(obj)
    return [_meta(obj).get("name"), spec.get("replicas", 0), status.get("replicas", 0),
            status.get("readyReplicas", 0), _age(obj), containers, images, selector]


def _daemonset_row(obj: dict[str, Any]) -> Row:
    """printDaemonSet: the counts from status, the template's nodeSelector as labels.FormatLabels prints it."""
    status = obj.get("status") or {}
    containers, images, selector = _template_cells(obj)
    node_selector = (((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeSelector") or {}
    return [_meta(obj).get("name"), status.get("desiredNumberScheduled", 0), status.get("currentNumberScheduled", 0),
            status.get("numberReady", 0), status.get("updatedNumberScheduled", 0), status.get("numberAvailable", 0),
            ",".join(f"{k}={v}" for k, v in sorted(node_selector.items())) or "<none>", _age(obj), containers, images,
            selector]


def _statefulset_row(obj: dict[str, Any]) -> Row:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    containers, images, _ = _template_cells(obj)
    return [_meta(obj).get("name"), f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}", _age(obj),
            containers, images]


def _replicationcontroller_row(obj: dict[str, Any]) -> Row:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    containers, images, _ = _template_cells(obj)
    selector = ",".join(f"{k}={v}" for k, v in sorted((spec.get("selector") or {}).items())) or "<none>"
    return [_meta(obj).get("name"), spec.get("replicas", 0), status.get("replicas", 0),
            status.get("readyReplicas", 0), _age(obj), containers, images, selector]


def _controllerrevision_row(obj: dict[str, Any]) -> Row:
    """printControllerRevision: the controller as `<kind>.<group>/<name>`, or <none>."""
    controller = "<none>"
    for ref in _meta(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            group = str(ref.get("apiVersion") or "").rpartition("/")[0]
            kind = str(ref.get("kind") or "").lower()
            controller = f"{kind}.{group}/{ref.get('name')}" if group else f"{kind}/{ref.get('name')}"
    return [_meta(obj).get("name"), controller, obj.get("revision", 0), _age(obj)]
def _has_condition(obj: dict[str, Any], ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def _job_row(obj: dict[str, Any]) -> Row:
    """printJob: COMPLETIONS is succeeded/completions (or `n/1 of <parallelism>` for a work queue),
    DURATION runs from startTime to completionTime (or now), STATUS the first of Complete, Failed,
    Terminating, Suspended, FailureTarget, else Running."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    succeeded = status.get("succeeded", 0)
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{spec['completions']}"
    elif (spec.get("parallelism") or 0) > 1:
        completions = f"{succeeded}/1 of {spec['parallelism']}"
    else:
        completions = f"{succeeded}/1"
    start, end = timeutil.parse(status.get("startTime")), timeutil.parse(status.get("completionTime"))
    duration = "" if start is None else \
        timeutil.human_duration(((end or timeutil.now()) - start).total_seconds())
    if _has_condition(obj, "Complete"):
        state = "Complete"
    elif _has_condition(obj, "Failed"):
        state = "Failed"
    elif _meta(obj).get("deletionTimestamp"):
        state = "Terminating"
    elif _has_condition(obj, "Suspended"):
        state = "Suspended"
    elif _has_condition(obj, "FailureTarget"):
        state = "FailureTarget"
    else:
        state = "Running"
    containers, images, selector = _template_cells(obj)
    return [_meta(obj).get("name"), state, completions, duration, _age(obj), containers, images, selector]


def _cronjob_row(obj: dict[str, Any]) -> Row:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    last = status.get("lastScheduleTime")
    containers, images, selector = _template_cells({"spec": (spec.get("jobTemplate") or {}).get("spec") or {}})
    return [_meta(obj).get("name"), spec.get("schedule") or "",
            spec["timeZone"] if spec.get("timeZone") is not None else "<none>",
            "True" if spec.get("suspend") else ("False" if spec.get("suspend") is not None else "<unset>"),
            len(status.get("active") or []), timeutil.age(last) if last else "<none>", _age(obj),
            containers, images, selector]


def _configmap_row(obj: dict[str, Any]) -> Row:
    return [_meta(obj).get("name"), len(obj.get("data") or {}) + len(obj.get("binaryData") or {}), _age(obj)]


def _secret_row(obj: dict[str, Any]) -> Row:
    return [_meta(obj).get("name"), obj.get("type") or "", len(obj.get("data") or {}), _age(obj)]


def _service_account_row(obj: dict[str, Any]) -> Row:
    return [_meta(obj).get("name"), len(obj.get("secrets") or []), _age(obj)]


def _lease_row(obj: dict[str, Any]) -> Row:
    return [_meta(obj).get("name"), (obj.get("spec") or {}).get("holderIdentity") or "<unknown>", _age(obj)]


def _apiservice_row(obj: dict[str, Any]) -> Row:
    """kube-aggregator's ConvertToTable: Local or namespace/name; Available's status, with its reason
    when not True; Unknown without the condition."""
    service = (obj.get("spec") or {}).get("service")
    where = f"{service.get('namespace', '')}/{service.get('name', '')}" if service else "Local"
    available = "Unknown"
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Available":
            status, reason = condition.get("status") or "", condition.get("reason") or ""
            available = f"{status} ({reason})" if status != "True" and reason else status
            break
    return [_meta(obj).get("name"), where, available, _age(obj)]


def _pdb_row(obj: dict[str, Any]) -> Row:
    """printPodDisruptionBudget: N/A for the bound not set."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    least, most = spec.get("minAvailable"), spec.get("maxUnavailable")
    return [_meta(obj).get("name"), "N/A" if least is None else str(least), "N/A" if most is None else str(most),
            int(status.get("disruptionsAllowed") or 0), _age(obj)]


def _servicecidr_row(obj: dict[str, Any]) -> Row:
    """printServiceCIDR: the CIDRs comma-joined."""
    return [_meta(obj).get("name"), ",".join((obj.get("spec") or {}).get("cidrs") or []), _age(obj)]


def _ingress_row(obj: dict[str, Any]) -> Row:
    """printIngress: the class or <none>; up to three rule hosts ("*" if none, then " + N more..." counted over
    all rules); the load balancer's IPs or hostnames, sorted and de-duplicated (never clipped to 16 bytes:
    kube-apiserver's TableConvertor prints with Wide: true); "80" or "80, 443" with TLS."""
    spec = obj.get("spec") or {}
    rules = spec.get("rules") or []
    hosts: list[str] = []
    more = False
    for rule in rules:
        if len(hosts) == 3:
            more = True
        if not more and rule.get("host"):
            hosts.append(rule["host"])
    host_cell = ",".join(hosts) if hosts else "*"
    if more:
        host_cell += f" + {len(rules) - 3} more..."
    points = (((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress")) or []
    address = ",".join(sorted({p.get("ip") or p.get("hostname") for p in points if p.get("ip") or p.get("hostname")}))
    return [_meta(obj).get("name"), spec.get("ingressClassName") or "<none>", host_cell, address,
            "80, 443" if spec.get("tls") else "80", _age(obj)]


def _ingressclass_row(obj: dict[str, Any]) -> Row:
    """printIngressClass: PARAMETERS as Kind[.apiGroup]/name."""
    spec = obj.get("spec") or {}
    params = spec.get("parameters")
    cell = "<none>"
    if params is not None:
        cell = (params.get("kind") or "") + (f".{params['apiGroup']}" if params.get("apiGroup") is not None else "")
        cell += "/" + (params.get("name") or "")
    return [_meta(obj).get("name"), spec.get("controller") or "", cell, _age(obj)]


def format_label_selector(selector: dict[str, Any] | None) -> str:
    """metav1.FormatLabelSelector: the selector as labels.Parse reads it (requirements sorted by key), or
    <none> when it selects everything."""
    selector = selector or {}
    parts = [(k, f"{k}={v}") for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key") or "", expr.get("operator"), expr.get("values") or []
        if op == "In":
            parts.append((key, f"{key} in ({','.join(sorted(values))})"))
        elif op == "NotIn":
            parts.append((key, f"{key} notin ({','.join(sorted(values))})"))
        elif op == "Exists":
            parts.append((key, key))
        elif op == "DoesNotExist":
            parts.append((key, f"!{key}"))
    return ",".join(text for _, text in sorted(parts, key=lambda p: p[0])) or "<none>"


def _networkpolicy_row(obj: dict[str, Any]) -> Row:
    """printNetworkPolicy: the pod selector as FormatLabelSelector prints it."""
    return [_meta(obj).get("name"), format_label_selector((obj.get("spec") or {}).get("podSelector")), _age(obj)]


def _csr_row(obj: dict[str, Any]) -> Row:
    """printCertificateSigningRequest: CONDITION is Denied, Approved or Pending (in that precedence), then
    ",Failed" and ",Issued" (a certificate written)."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    types = {c.get("type") for c in status.get("conditions") or []}
    condition = "Denied" if "Denied" in types else "Approved" if "Approved" in types else "Pending"
    condition += ",Failed" if "Failed" in types else ""
    condition += ",Issued" if status.get("certificate") else ""
    seconds = spec.get("expirationSeconds")
    duration = timeutil.human_duration(seconds) if seconds is not None else "<none>"
    return [_meta(obj).get("name"), _age(obj), spec.get("signerName") or "<none>", spec.get("username") or "",
            duration, condition]


def _csistoragecapacity_row(obj: dict[str, Any]) -> Row:
    """printCSIStorageCapacity: no AGE column; the capacity or <unset>."""
    return [_meta(obj).get("name"), obj.get("storageClassName") or "", obj.get("capacity") or "<unset>"]


def _default_row(obj: dict[str, Any]) -> Row:
    return [_meta(obj).get("name"), _meta(obj).get("creationTimestamp")]


PRINTERS: dict[ResourceType, tuple[list[Column], Callable[[dict[str, Any]], Row]]] = {
    kinds.PODS: ([NAME, ("Ready", "string", 0, ""), ("Status", "string", 0, ""), ("Restarts", "string", 0, ""), AGE,
                  ("IP", "string", 1, ""), ("Node", "string", 1, ""), ("Nominated Node", "string", 1, ""),
                  ("Readiness Gates", "string", 1, "")], _pod_row),
    kinds.SERVICES: ([NAME, ("Type", "string", 0, ""), ("Cluster-IP", "string", 0, ""),
                      ("External-IP", "string", 0, ""), ("Port(s)", "string", 0, ""), AGE,
                      ("Selector", "string", 1, "")], _service_row),
    kinds.ENDPOINTS: ([NAME, ("Endpoints", "string", 0, ""), AGE], _endpoints_row),
    kinds.ENDPOINTSLICES: ([NAME, ("AddressType", "string", 0, ""), ("Ports", "string", 0, ""),
                            ("Endpoints", "string", 0, ""), AGE], _slice_row),
    kinds.NODES: ([NAME, ("Status", "string", 0, ""), ("Roles", "string", 0, ""), AGE, ("Version", "string", 0, ""),
                   ("Internal-IP", "string", 1, ""), ("External-IP", "string", 1, ""), ("OS-Image", "string", 1, ""),
                   ("Kernel-Version", "string", 1, ""), ("Container-Runtime", "string", 1, "")], _node_row),
    kinds.NAMESPACES: ([NAME, ("Status", "string", 0, ""), AGE], _namespace_row),
    kinds.EVENTS: ([("Last Seen", "string", 0, ""), ("Type", "string", 0, ""), ("Reason", "string", 0, ""),
                    ("Object", "string", 0, ""), ("Subobject", "string", 1, ""), ("Source", "string", 1, ""),
                    ("Message", "string", 0, ""), ("First Seen", "string", 1, ""), ("Count", "integer", 1, ""),
                    ("Name", "string", 1, "name")], _event_row),
    kinds.EVENTS_V1: ([("Last Seen", "string", 0, ""), ("Type", "string", 0, ""), ("Reason", "string", 0, ""),
                       ("Object", "string", 0, ""), ("Subobject", "string", 1, ""), ("Source", "string", 1, ""),
                       ("Message", "string", 0, ""), ("First Seen", "string", 1, ""), ("Count", "integer", 1, ""),
                       ("Name", "string", 1, "name")], _events_v1_row),
    kinds.LEASES: ([NAME, ("Holder", "string", 0, ""), AGE], _lease_row),
    kinds.DEPLOYMENTS: ([NAME, ("Ready", "string", 0, ""), ("Up-to-date", "string", 0, ""),
                         ("Available", "string", 0, ""), AGE, ("Containers", "string", 1, ""),
                         ("Images", "string", 1, ""), ("Selector", "string", 1, "")], _deployment_row),
    kinds.REPLICASETS: ([NAME, ("Desired", "integer", 0, ""), ("Current", "integer", 0, ""),
                         ("Ready", "integer", 0, ""), AGE, ("Containers", "string", 1, ""),
                         ("Images", "string", 1, ""), ("Selector", "string", 1, "")], _replicaset_row),
    kinds.DAEMONSETS: ([NAME, ("Desired", "integer", 0, ""), ("Current", "integer", 0, ""),
                        ("Ready", "integer", 0, ""), ("Up-to-date", "integer", 0, ""), ("Available", "integer", 0, ""),
                        ("Node Selector", "string", 0, ""), AGE, ("Containers", "string", 1, ""),
                        ("Images", "string", 1, ""), ("Selector", "string", 1, "")], _daemonset_row),
    kinds.STATEFULSETS: ([NAME, ("Ready", "string", 0, ""), AGE, ("Containers", "string", 1, ""),
                          ("Images", "string", 1, "")], _statefulset_row),
    kinds.REPLICATIONCONTROLLERS: ([NAME, ("Desired", "integer", 0, ""), ("Current", "integer", 0, ""),
                                    ("Ready", "integer", 0, ""), AGE, ("Containers", "string", 1, ""),
                                    ("Images", "string", 1, ""), ("Selector", "string", 1, "")],
                                   _replicationcontroller_row),
    kinds.CONTROLLERREVISIONS: ([NAME, ("Controller", "string", 0, ""), ("Revision", "integer", 0, ""), AGE],
                                _controllerrevision_row),
    kinds.JOBS: ([NAME, ("Status", "string", 0, ""), ("Completions", "string", 0, ""),
                  ("Duration", "string", 0, ""), AGE, ("Containers", "string", 1, ""), ("Images", "string", 1, ""),
                  ("Selector", "string", 1, "")], _job_row),
    kinds.CRONJOBS: ([NAME, ("Schedule", "string", 0, ""), ("Timezone", "string", 0, ""),
                      ("Suspend", "boolean", 0, ""), ("Active", "integer", 0, ""),
                      ("Last Schedule", "string", 0, ""), AGE, ("Containers", "string", 1, ""),
                      ("Images", "string", 1, ""), ("Selector", "string", 1, "")], _cronjob_row),
    kinds.CONFIGMAPS: ([NAME, ("Data", "integer", 0, ""), AGE], _configmap_row),
    kinds.SECRETS: ([NAME, ("Type", "string", 0, ""), ("Data", "integer", 0, ""), AGE], _secret_row),
    kinds.SERVICEACCOUNTS: ([NAME, ("Secrets", "integer", 0, ""), AGE], _service_account_row),
    kinds.PODDISRUPTIONBUDGETS: ([NAME, ("Min Available", "string", 0, ""), ("Max Unavailable", "string", 0, ""),
                                  ("Allowed Disruptions", "integer", 0, ""), AGE], _pdb_row),
    kinds.APISERVICES: ([NAME, ("Service", "string", 0, ""), ("Available", "string", 0, ""), AGE], _apiservice_row),
    kinds.SERVICECIDRS: ([NAME, ("CIDRs", "string", 0, ""), AGE], _servicecidr_row),
    kinds.INGRESSES: ([NAME, ("Class", "string", 0, ""), ("Hosts", "string", 0, ""), ("Address", "string", 0, ""),
                       ("Ports", "string", 0, ""), AGE], _ingress_row),
    kinds.INGRESSCLASSES: ([NAME, ("Controller", "string", 0, ""), ("Parameters", "string", 0, ""), AGE],
                           _ingressclass_row),
    kinds.NETWORKPOLICIES: ([NAME, ("Pod-Selector", "string", 0, ""), AGE], _networkpolicy_row),
    kinds.CERTIFICATESIGNINGREQUESTS: ([NAME, AGE, ("SignerName", "string", 0, ""), ("Requestor", "string", 0, ""),
                                        ("RequestedDuration", "string", 0, ""), ("Condition", "string", 0, "")],
                                       _csr_row),
    kinds.CSISTORAGECAPACITIES: ([NAME, ("StorageClassName", "string", 0, ""), ("Capacity", "string", 0, "")],
                                 _csistoragecapacity_row),
}
DEFAULT_PRINTER: tuple[list[Column], Callable[[dict[str, Any]], Row]] = (
    [NAME, ("Created At", "date", 0, "")], _default_row)


def register(rt: ResourceType, columns: list[Column], row: Callable[[dict[str, Any]], Row]) -> None:
    PRINTERS[rt] = (columns, row)


def unregister(rt: ResourceType) -> None:
    """A kind no longer served (a custom kind whose definition changed or went) loses its printer."""
    PRINTERS.pop(rt, None)


def column_definitions(rt: ResourceType) -> list[dict[str, Any]]:
    columns, _ = PRINTERS.get(rt, DEFAULT_PRINTER)
    return [{"name": name, "type": typ, "format": fmt, "description": "", "priority": prio}
            for name, typ, prio, fmt in columns]


def row(rt: ResourceType, obj: dict[str, Any], include_object: str) -> dict[str, Any]:
    _, printer = PRINTERS.get(rt, DEFAULT_PRINTER)
    result: dict[str, Any] = {"cells": printer(obj)}
    if include_object == "Object":
        result["object"] = obj
    elif include_object != "None":
        result["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                            "metadata": _meta(obj)}
    return result


def table(rt: ResourceType, objects: list[dict[str, Any]], resource_version: str, *, include_object: str = "Metadata",
          with_columns: bool = True) -> dict[str, Any]:
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": resource_version},
            "columnDefinitions": column_definitions(rt) if with_columns else [],
            "rows": [row(rt, o, include_object) for o in objects]}
