"""Pods: defaults (kube-apiserver's SetDefaults plus the DefaultTolerationSeconds admission plugin),
validation, the QoS class, and the binding subresource's rules."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kubelab import quantity, timeutil, validation
from kubelab.models import Pod, PodCondition, PodStatus, ResourceRequirements, Toleration, TypedObject
from kubelab.validation import FieldError, invalid, not_supported, required

from ..storage import Txn
from .strategy import Strategy

PROTOCOLS = ["SCTP", "TCP", "UDP"]
RESTART_POLICIES = ["Always", "Never", "OnFailure"]


def qos_class(pod: Pod) -> str:
    """Guaranteed: every container sets equal cpu and memory requests and limits; BestEffort: none set."""
    containers = list(pod.spec.containers or []) + list(pod.spec.init_containers or []) if pod.spec else []
    any_set = False
    guaranteed = True
    for c in containers:
        req = (c.resources.requests if c.resources else None) or {}
        lim = (c.resources.limits if c.resources else None) or {}
        if req or lim:
            any_set = True
        for res in ("cpu", "memory"):
            limit = lim.get(res)
            request = req.get(res, limit)
            if limit is None or request is None or quantity.parse(limit) != quantity.parse(request):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"

MAX_DURATION_SECONDS = (2**63 - 1) // 10**9  # the longest time.Duration, in seconds


def _status_ip_errors(status: PodStatus | None) -> list[FieldError]:
    """validatePodIPs and validateHostIPs of a status write: the kubelet's addresses become endpoints,
    so each must be an IP as Go parses one. v1 keeps podIP as podIPs[0], so it is checked there when
    podIPs is absent."""
    if status is None:
        return []
    errs: list[FieldError] = []
    for wire, single, many in (("podIPs", status.pod_ip, status.pod_ips), ("hostIPs", status.host_ip, status.host_ips)):
        texts = [entry.ip or "" for entry in many] if many else ([single] if single else [])
        for i, text in enumerate(texts):
            try:
                validation.parse_ip(text)
            except ValueError:
                errs.append(invalid(f"status.{wire}[{i}]", text, "must be a valid IP address, (e.g. 10.9.8.7 or "
                                                                  "2001:db8::ffff)"))
    return errs


def default_probe(probe: dict[str, Any]) -> None:
    """SetDefaults_Probe (a zero is unset in Go), SetDefaults_HTTPGetAction and SetDefaults_GRPCAction:
    what `kubectl describe` then shows as `timeout=1s period=10s #success=1 #failure=3`."""
    for field, default in (("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1),
                           ("failureThreshold", 3)):
        if not probe.get(field):
            probe[field] = default
    http = probe.get("httpGet")
    if isinstance(http, dict):
        http["path"] = http.get("path") or "/"
        http["scheme"] = http.get("scheme") or "HTTP"
    grpc = probe.get("grpc")
    if isinstance(grpc, dict) and grpc.get("service") is None:
        grpc["service"] = ""


class PodStrategy(Strategy):
    def set_defaults(self, obj: TypedObject) -> None:
        """SetDefaults_PodSpec and the containers' defaults (set_template_defaults), then what only a Pod
        gets, not a workload's pod template: SetDefaults_Pod's enableServiceLinks true and a host-network
        pod's hostPorts (templates keep theirs unset since 1.28, DefaultHostNetworkHostPortsInPodTemplates
        off), and the Priority admission plugin's priority 0 and preemptionPolicy PreemptLowerPriority."""
        assert isinstance(obj, Pod)
        self.set_template_defaults(obj)
        spec = obj.spec
        if spec is not None:
            if spec.priority is None:
                spec.priority = 0
            extra = spec.model_extra if spec.model_extra is not None else {}
            extra.setdefault("preemptionPolicy", "PreemptLowerPriority")
            if extra.get("enableServiceLinks") is None:
                extra["enableServiceLinks"] = True
            if spec.host_network:
                # defaultHostNetworkPorts: with the node's network, a port is the same on the host.
                for c in list(spec.containers or []) + list(spec.init_containers or []):
                    for p in c.ports or []:
                        if not p.host_port:
                            p.host_port = p.container_port

    def set_template_defaults(self, obj: Pod) -> None:
        """SetDefaults_PodSpec (restartPolicy, dnsPolicy, schedulerName, terminationGracePeriodSeconds 30,
        securityContext {}) and the containers' defaults: what a Pod and a pod template both get. A
        container's `resources` is a struct in Go, so it reads `{}` when unset, as securityContext does."""
        spec = obj.spec
        if spec is not None:
            spec.restart_policy = spec.restart_policy or "Always"
            spec.dns_policy = spec.dns_policy or "ClusterFirst"
            spec.scheduler_name = spec.scheduler_name or "default-scheduler"
            if spec.termination_grace_period_seconds is None:
                spec.termination_grace_period_seconds = 30
            spec_extra = spec.model_extra if spec.model_extra is not None else {}
            if spec_extra.get("securityContext") is None:
                spec_extra["securityContext"] = {}
            for c in list(spec.containers or []) + list(spec.init_containers or []):
                if c.resources is None:
                    c.resources = ResourceRequirements()
                for p in c.ports or []:
                    p.protocol = p.protocol or "TCP"
                if c.resources is not None and c.resources.limits and not c.resources.requests:
                    # A limit without a request requests the limit (SetDefaults_ResourceRequirements... as
                    # kube-apiserver defaults container requests from limits).
                    c.resources.requests = dict(c.resources.limits)
                elif c.resources is not None and c.resources.limits and c.resources.requests:
                    for res, lim in c.resources.limits.items():
                        c.resources.requests.setdefault(res, lim)
                extra = c.model_extra if c.model_extra is not None else {}
                if "imagePullPolicy" not in extra and c.image:
                    tagless = ":" not in c.image.rsplit("/", 1)[-1]
                    extra["imagePullPolicy"] = "Always" if tagless or c.image.endswith(":latest") else "IfNotPresent"
                extra.setdefault("terminationMessagePath", "/dev/termination-log")
                extra.setdefault("terminationMessagePolicy", "File")
                for probe in (c.liveness_probe, c.readiness_probe, extra.get("startupProbe")):
                    if isinstance(probe, dict):
                        default_probe(probe)

    def prepare_create(self, obj: TypedObject) -> None:
        super().prepare_create(obj)
        assert isinstance(obj, Pod)
        spec = obj.spec
        if spec is not None:
            # The DefaultTolerationSeconds admission plugin: on create only, unlike field defaults.
            spec.tolerations = _with_default_tolerations(spec.tolerations)
        status = PodStatus(phase="Pending", qos_class=qos_class(obj))
        if spec is not None and spec.node_name:
            status.conditions = None
        obj.status = status

    def mark_for_deletion(self, obj: TypedObject, options: dict[str, Any]) -> Txn | None:
        """Graceful deletion (CheckGracefulDelete): a running pod gets deletionTimestamp = now + grace and
        stays until its kubelet has stopped it and deletes it with grace 0. The grace period is the
        request's gracePeriodSeconds, else spec.terminationGracePeriodSeconds; it is 0 for a pod that
        was never scheduled or has finished; a later delete may only shorten it."""
        assert isinstance(obj, Pod)
        grace = options.get("gracePeriodSeconds")
        if grace is None:
            grace = (obj.spec.termination_grace_period_seconds if obj.spec else None)
            grace = 30 if grace is None else grace
        if not obj.node_name or obj.is_terminal():
            grace = 0
        if grace < 0:
            grace = 1  # a negative grace period means "as short as possible" (newer apiservers)
        if grace == 0:
            return super().mark_for_deletion(obj, options)
        meta = obj.metadata
        if meta.deletion_timestamp and meta.deletion_grace_period_seconds is not None \
                and grace >= meta.deletion_grace_period_seconds:
            return Txn()  # already terminating at least as fast
        now = timeutil.now()
        # Go adds the grace period as a time.Duration, at most 2^63-1 ns (292 years); datetime would
        # overflow (a 500) on the int64 gracePeriodSeconds a client may send.
        meta.deletion_timestamp = timeutil.rfc3339(now + timedelta(seconds=min(grace, MAX_DURATION_SECONDS)))
        meta.deletion_grace_period_seconds = grace
        return Txn()

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, Pod)
        return self.validate_meta(obj) + self.validate_spec(obj)

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        assert isinstance(new, Pod) and isinstance(old, Pod)
        errs = super().validate_update(new, old, subresource)
        if subresource == "status":
            errs += _status_ip_errors(new.status)
        if subresource is None and new.spec != old.spec:
            changed = _changed_fields(new.spec.to_dict() if new.spec else {}, old.spec.to_dict() if old.spec else {})
            mutable = {"activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds", "schedulingGates"}
            image_only = _only_images_changed(new, old)
            if not image_only and not set(changed) <= mutable:
                errs.append(validation.forbidden(
                    "spec", "pod updates may not change fields other than `spec.containers[*].image`,"
                    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
                    "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set "
                    "to 1 if it was previously negative)"))
        return errs

    def validate_spec(self, pod: Pod) -> list[FieldError]:
        spec = pod.spec
        if spec is None:
            return [required("spec")]
        errs: list[FieldError] = []
        if not spec.containers:
            errs.append(required("spec.containers"))
        names: set[str] = set()
        for group, path in ((spec.init_containers or [], "spec.initContainers"), (spec.containers or [], "spec.containers")):
            for i, c in enumerate(group):
                cpath = f"{path}[{i}]"
                if not c.name:
                    errs.append(required(f"{cpath}.name"))
                else:
                    errs += [invalid(f"{cpath}.name", c.name, p) for p in validation.dns1123_label_errors(c.name)]
                    if c.name in names:
                        errs.append(validation.duplicate(f"{cpath}.name", c.name))
                    names.add(c.name)
                if not c.image:
                    errs.append(required(f"{cpath}.image"))
                port_names: set[str] = set()
                for j, p in enumerate(c.ports or []):
                    ppath = f"{cpath}.ports[{j}]"
                    if p.container_port is None:
                        errs.append(required(f"{ppath}.containerPort"))
                    else:
                        errs += [invalid(f"{ppath}.containerPort", p.container_port, m)
                                 for m in validation.port_number_errors(p.container_port)]
                    if p.name:
                        errs += [invalid(f"{ppath}.name", p.name, m) for m in validation.port_name_errors(p.name)]
                        if p.name in port_names:
                            errs.append(validation.duplicate(f"{ppath}.name", p.name))
                        port_names.add(p.name)
                    if p.protocol not in PROTOCOLS:
                        errs.append(not_supported(f"{ppath}.protocol", p.protocol, PROTOCOLS))
                res = c.resources
                for kind in ("requests", "limits"):
                    for name, value in ((getattr(res, kind) if res else None) or {}).items():
                        if not isinstance(value, str) or not quantity.is_valid(value):
                            errs.append(invalid(f"{cpath}.resources.{kind}[{name}]", value,
                                                "must match the regex ^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"))
                        elif quantity.parse(value) < 0:
                            errs.append(invalid(f"{cpath}.resources.{kind}[{name}]", value,
                                                "must be greater than or equal to 0"))
                if res and res.limits and res.requests:
                    for name, req in res.requests.items():
                        lim = res.limits.get(name)
                        if lim and quantity.is_valid(lim) and quantity.is_valid(req) and \
                                quantity.parse(req) > quantity.parse(lim):
                            errs.append(invalid(f"{cpath}.resources.requests", req,
                                                f"must be less than or equal to {name} limit of {lim}"))
        if spec.restart_policy not in RESTART_POLICIES:
            errs.append(not_supported("spec.restartPolicy", spec.restart_policy, RESTART_POLICIES))
        for key, value in (spec.node_selector or {}).items():
            errs += [invalid("spec.nodeSelector", key, p) for p in validation.label_key_errors(key)]
            # ValidateLabels reports a bad value at the map itself, not at `[key]`.
            errs += [invalid("spec.nodeSelector", value, p) for p in validation.label_value_errors(value)]
        if spec.node_name:
            errs += [invalid("spec.nodeName", spec.node_name, p)
                     for p in validation.dns1123_subdomain_errors(spec.node_name)]
        # ValidatePodSpec: the endpoints controllers copy hostname into Endpoints and EndpointSlices, and
        # cluster DNS serves it, so a bad one would make every write of the Service's endpoints fail.
        for wire, value in (("hostname", spec.hostname), ("subdomain", spec.subdomain)):
            if value:
                errs += [invalid(f"spec.{wire}", value, p) for p in validation.dns1123_label_errors(value)]
        return errs

    def field_labels(self, obj: dict[str, Any]) -> dict[str, str]:
        fields = super().field_labels(obj)
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        fields.update({
            "spec.nodeName": spec.get("nodeName", ""),
            "spec.restartPolicy": spec.get("restartPolicy", ""),
            "spec.schedulerName": spec.get("schedulerName", ""),
            "spec.serviceAccountName": spec.get("serviceAccountName", ""),
            "spec.hostNetwork": "true" if spec.get("hostNetwork") else "false",
            "status.phase": status.get("phase", ""),
            "status.podIP": status.get("podIP", ""),
            "status.nominatedNodeName": status.get("nominatedNodeName", ""),
        })
        return fields

    def supported_fields(self) -> set[str]:
        return super().supported_fields() | {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                                             "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
                                             "status.podIP", "status.nominatedNodeName"}


def bind(pod: Pod, node_name: str) -> None:
    """What the binding subresource does to the stored pod (BindingREST.setPodHostAndAnnotations)."""
    assert pod.spec is not None
    pod.spec.node_name = node_name
    status = pod.status or PodStatus()
    conditions = [c for c in status.conditions or [] if c.type != "PodScheduled"]
    conditions.append(PodCondition(type="PodScheduled", status="True", last_transition_time=timeutil.rfc3339()))
    status.conditions = conditions
    pod.status = status


def _with_default_tolerations(tolerations: list[Toleration] | None) -> list[Toleration]:
    """DefaultTolerationSeconds: tolerate not-ready and unreachable nodes for 300 s unless told otherwise."""
    result = list(tolerations or [])
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        covered = any((t.key in (key, None, "")) and t.effect in ("NoExecute", None, "") for t in result
                      if not (t.key in (None, "") and t.operator != "Exists"))
        if not covered:
            result.append(Toleration(key=key, operator="Exists", effect="NoExecute", toleration_seconds=300))
    return result


def _changed_fields(new: dict[str, Any], old: dict[str, Any]) -> list[str]:
    return [k for k in set(new) | set(old) if new.get(k) != old.get(k)]


def _only_images_changed(new: Pod, old: Pod) -> bool:
    def strip(pod: Pod) -> dict[str, Any]:
        spec = pod.spec.to_dict() if pod.spec else {}
        for group in ("containers", "initContainers"):
            for c in spec.get(group) or []:
                c.pop("image", None)
        for k in ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds", "schedulingGates"):
            spec.pop(k, None)
        return spec
    return strip(new) == strip(old)
