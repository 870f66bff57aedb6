"""kube-apiserver's bootstrap RBAC policy (plugin/pkg/auth/authorizer/rbac/bootstrappolicy), as kubelab
needs it: the default ClusterRoles and ClusterRoleBindings written at start, each labelled
`kubernetes.io/bootstrapping: rbac-defaults` and annotated `rbac.authorization.kubernetes.io/autoupdate:
"true"` (bootstrap.py reconciles them: missing rules and subjects put back unless autoupdate is "false").

The user-facing roles: cluster-admin (bound to system:masters), admin, edit and view (aggregated from the
system:aggregate-to-* roles by their labels), system:basic-user, system:discovery and
system:public-info-viewer (bound to everyone authenticated, the last to the unauthenticated too),
system:service-account-issuer-discovery, system:auth-delegator, system:monitoring; the certificates.k8s.io
ones (system:node-bootstrapper, the nodeclient and selfnodeclient roles, the four signers' approver roles),
bound to nobody, as kube ships them.

The components' roles: system:kube-scheduler, system:kube-controller-manager, system:kube-dns,
system:node-proxier, system:node, and one system:controller:<name> per controller kubelab runs, bound to
the service account kube-system/<name> as kube binds them. Differences from kube, on purpose: kubelab's
controllers share one credential (the user system:kube-controller-manager, as kube-controller-manager with
--use-service-account-credentials=false), so each system:controller:* binding names that user as well;
kubelab's DNS authenticates as the user system:kube-dns, which the system:kube-dns binding names beside the
kube-system/kube-dns service account; the scheduler and the controllers may report to kubelab's own trace
API (`kubelab trace`). Only the controller roles of controllers kubelab runs are written.

Pure data: functions that return the objects as JSON.
"""

from __future__ import annotations

from typing import Any

from kubelab import tracing
from kubelab.rbacaggregation import aggregated_rules
from kubelab.tokenfile import CONTROLLERS_USER, DNS_USER, MASTERS_GROUP, PROXY_USER, SCHEDULER_USER

RBAC_GROUP = "rbac.authorization.k8s.io"
CERTIFICATES_GROUP = "certificates.k8s.io"
AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate"
BOOTSTRAPPING = "kubernetes.io/bootstrapping"
AGGREGATE_TO = "rbac.authorization.k8s.io/aggregate-to-"

READ = ("get", "list", "watch")
WRITE = ("create", "delete", "deletecollection", "patch", "update")
EVERY = (*READ, *WRITE)


def rule(verbs: tuple[str, ...] | str, groups: tuple[str, ...] | str, resources: tuple[str, ...] | str,
         *, names: tuple[str, ...] = ()) -> dict[str, Any]:
    """rbacv1helpers.NewRule(verbs...).Groups(...).Resources(...).Names(...)."""
    out: dict[str, Any] = {"verbs": list(_tuple(verbs)), "apiGroups": list(_tuple(groups)),
                           "resources": list(_tuple(resources))}
    if names:
        out["resourceNames"] = list(names)
    return out


def urls(verbs: tuple[str, ...] | str, *paths: str) -> dict[str, Any]:
    return {"verbs": list(_tuple(verbs)), "nonResourceURLs": list(paths)}


def _tuple(value: tuple[str, ...] | str) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else value


EVENTS = [rule(("create", "patch", "update"), ("", "events.k8s.io"), "events")]
TRACES = rule("create", tracing.GROUP, "traces")  # kubelab's own: `kubelab trace` (apiserver/traces.py)


def _meta(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"name": name, "labels": {BOOTSTRAPPING: "rbac-defaults", **(labels or {})},
            "annotations": {AUTOUPDATE: "true"}}


def cluster_role(name: str, rules: list[dict[str, Any]], *, labels: dict[str, str] | None = None,
                 aggregate_from: str = "") -> dict[str, Any]:
    role: dict[str, Any] = {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole", "metadata": _meta(name, labels),
                            "rules": rules}
    if aggregate_from:
        role["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {aggregate_from: "true"}}]}
    return role


def binding(role: str, *subjects: tuple[str, str], name: str = "") -> dict[str, Any]:
    """A ClusterRoleBinding of `role` (named after it unless `name`) to ("User"|"Group", name) or
    ("ServiceAccount", "namespace/name") subjects."""
    out = []
    for kind, who in subjects:
        if kind == "ServiceAccount":
            namespace, _, account = who.partition("/")
            out.append({"kind": kind, "name": account, "namespace": namespace})
        else:
            out.append({"kind": kind, "apiGroup": RBAC_GROUP, "name": who})
    return {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRoleBinding", "metadata": _meta(name or role),
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role}, "subjects": out}


PUBLIC_INFO = ("/healthz", "/livez", "/readyz", "/version", "/version/")
DISCOVERY = ("/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz",
             "/version", "/version/")


def _view_rules() -> list[dict[str, Any]]:
    return [
        rule(READ, "", ("pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services",
                        "services/status", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status",
                        "configmaps")),
        rule(READ, "", ("limitranges", "resourcequotas", "bindings", "events", "pods/status", "resourcequotas/status",
                        "namespaces/status", "replicationcontrollers/status", "pods/log")),
        rule(READ, "", "namespaces"),
        rule(READ, "discovery.k8s.io", "endpointslices"),
        rule(READ, "apps", ("controllerrevisions", "statefulsets", "statefulsets/scale", "statefulsets/status",
                            "daemonsets", "daemonsets/status", "deployments", "deployments/scale",
                            "deployments/status", "replicasets", "replicasets/scale", "replicasets/status")),
        rule(READ, "autoscaling", ("horizontalpodautoscalers", "horizontalpodautoscalers/status")),
        rule(READ, "batch", ("jobs", "cronjobs", "cronjobs/status", "jobs/status")),
        rule(READ, "policy", ("poddisruptionbudgets", "poddisruptionbudgets/status")),
        rule(READ, "networking.k8s.io", ("ingresses", "ingresses/status", "networkpolicies")),
    ]


def _edit_rules() -> list[dict[str, Any]]:
    return [
        rule("impersonate", "", "serviceaccounts"),
        rule(WRITE, "", ("pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward")),
        rule("create", "", "pods/eviction"),
        rule(WRITE, "", ("replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services",
                         "services/proxy", "persistentvolumeclaims", "configmaps", "secrets", "events")),
        rule("create", "", "serviceaccounts/token"),
        rule(WRITE, "apps", ("statefulsets", "statefulsets/scale", "daemonsets", "deployments", "deployments/scale",
                             "deployments/rollback", "replicasets", "replicasets/scale")),
        rule(WRITE, "autoscaling", "horizontalpodautoscalers"),
        rule(WRITE, "batch", ("jobs", "cronjobs")),
        rule(WRITE, "networking.k8s.io", ("ingresses", "networkpolicies")),
        rule(WRITE, "policy", "poddisruptionbudgets"),
        # What edit may read beyond view: the subresources that run things, and secrets.
        rule(READ, "", ("pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy")),
    ]


def _admin_rules() -> list[dict[str, Any]]:
    return [rule("create", "authorization.k8s.io", "localsubjectaccessreviews"),
            rule(EVERY, RBAC_GROUP, ("rolebindings", "roles"))]


def _controller_roles() -> dict[str, list[dict[str, Any]]]:
    """controller_policy.go's roles of the controllers kubelab runs (controllers/manager.py)."""
    def status(group: str, *resources: str) -> dict[str, Any]:
        return rule("update", group, tuple(f"{r}/{s}" for r in resources for s in ("status", "finalizers")))
    workload_reads = rule(READ, ("", "apps"), ("replicationcontrollers", "deployments", "replicasets", "statefulsets"))
    return {
        "clusterrole-aggregation-controller": [rule(("escalate", "get", "list", "patch", "update", "watch"),
                                                    RBAC_GROUP, "clusterroles")],
        "cronjob-controller": [rule(("get", "list", "watch", "update"), "batch", "cronjobs"),
                               rule(("get", "list", "watch", "create", "update", "delete", "patch"), "batch", "jobs"),
                               status("batch", "cronjobs"), rule(("list", "delete"), "", "pods"), *EVENTS],
        "daemon-set-controller": [rule(READ, "apps", "daemonsets"), status("apps", "daemonsets"),
                                  rule(("list", "watch"), "", "nodes"),
                                  rule(("list", "watch", "create", "delete", "patch"), "", "pods"),
                                  rule("create", "", "pods/binding"),
                                  rule(("get", "list", "watch", "create", "delete", "update", "patch"), "apps",
                                       "controllerrevisions"), *EVENTS],
        "deployment-controller": [rule(("get", "list", "watch", "update"), "apps", "deployments"),
                                  status("apps", "deployments"),
                                  rule(("get", "list", "watch", "create", "update", "patch", "delete"), "apps",
                                       "replicasets"),
                                  rule(("get", "list", "watch", "update"), "", "pods"), *EVENTS],
        "disruption-controller": [workload_reads, rule(READ, "policy", "poddisruptionbudgets"),
                                  rule("update", "policy", "poddisruptionbudgets/status"),
                                  rule(("patch", "update"), "", "pods/status"), *EVENTS],
        "endpoint-controller": [rule(READ, "", ("services", "pods")),
                                rule(("get", "list", "create", "update", "delete"), "", "endpoints"),
                                rule("create", "", "endpoints/restricted"), *EVENTS],
        "endpointslice-controller": [rule(READ, "", ("services", "pods", "nodes")),
                                     rule(("get", "list", "create", "update", "delete"), "discovery.k8s.io",
                                          "endpointslices"), *EVENTS],
        "generic-garbage-collector": [rule(("get", "list", "watch", "patch", "update", "delete"), "*", "*")],
        "job-controller": [rule(("get", "list", "watch", "update", "patch"), "batch", "jobs"),
                           rule(("update", "patch"), "batch", ("jobs/status", "jobs/finalizers")),
                           rule(("list", "watch", "create", "delete", "patch"), "", "pods"), *EVENTS],
        "namespace-controller": [rule(("get", "list", "watch", "delete"), "", "namespaces"),
                                 rule("update", "", ("namespaces/finalize", "namespaces/status")),
                                 rule(("get", "list", "delete", "deletecollection"), "*", "*")],
        "node-controller": [rule(("get", "list", "update", "delete", "patch"), "", "nodes"),
                            rule(("patch", "update"), "", ("nodes/status", "pods/status")),
                            rule(("list", "delete"), "", "pods"), *EVENTS],
        "pod-garbage-collector": [rule(("list", "watch", "delete"), "", "pods"), rule("patch", "", "pods/status"),
                                  rule(("get", "list", "watch"), "", "nodes")],
        "replicaset-controller": [rule(("get", "list", "watch", "update"), "apps", "replicasets"),
                                  status("apps", "replicasets"),
                                  rule(("list", "watch", "patch", "create", "delete"), "", "pods"), *EVENTS],
        "replication-controller": [rule(("get", "list", "watch", "update"), "", "replicationcontrollers"),
                                   status("", "replicationcontrollers"),
                                   rule(("list", "watch", "patch", "create", "delete"), "", "pods"), *EVENTS],
        "root-ca-cert-publisher": [rule(("create", "update"), "", "configmaps"), *EVENTS],
        "service-account-controller": [rule("create", "", "serviceaccounts"), *EVENTS],
        "service-controller": [rule(READ, "", "services"), rule(("patch", "update"), "", "services/status"),
                               rule(("list", "watch"), "", "nodes"), *EVENTS],
        "statefulset-controller": [rule(("list", "watch"), "", "pods"), rule(READ, "apps", "statefulsets"),
                                   status("apps", "statefulsets"),
                                   rule(("get", "create", "delete", "update", "patch"), "", "pods"),
                                   rule(("get", "create", "delete", "update", "patch", "list", "watch"), "apps",
                                        "controllerrevisions"),
                                   rule(("get", "create"), "", "persistentvolumeclaims"), *EVENTS],
        "ttl-after-finished-controller": [rule(("get", "list", "watch", "delete"), "batch", "jobs"), *EVENTS],
    }


def cluster_roles() -> list[dict[str, Any]]:
    """ClusterRoles(): kube's default cluster roles, as far as kubelab serves what they name."""
    roles = [
        cluster_role("cluster-admin", [rule("*", "*", "*"), urls("*", "*")]),
        cluster_role("system:discovery", [urls("get", *DISCOVERY)]),
        cluster_role("system:monitoring", [urls("get", "/metrics", "/metrics/slis", "/livez", "/readyz", "/healthz",
                                                "/livez/*", "/readyz/*", "/healthz/*")]),
        cluster_role("system:basic-user", [rule("create", "authentication.k8s.io", "selfsubjectreviews"),
                                           rule("create", "authorization.k8s.io",
                                                ("selfsubjectaccessreviews", "selfsubjectrulesreviews"))]),
        cluster_role("system:public-info-viewer", [urls("get", *PUBLIC_INFO)]),
        cluster_role("admin", [], aggregate_from=f"{AGGREGATE_TO}admin"),
        cluster_role("edit", [], labels={f"{AGGREGATE_TO}admin": "true"}, aggregate_from=f"{AGGREGATE_TO}edit"),
        cluster_role("view", [], labels={f"{AGGREGATE_TO}edit": "true"}, aggregate_from=f"{AGGREGATE_TO}view"),
        cluster_role("system:aggregate-to-admin", _admin_rules(), labels={f"{AGGREGATE_TO}admin": "true"}),
        cluster_role("system:aggregate-to-edit", _edit_rules(), labels={f"{AGGREGATE_TO}edit": "true"}),
        cluster_role("system:aggregate-to-view", _view_rules(), labels={f"{AGGREGATE_TO}view": "true"}),
        cluster_role("system:service-account-issuer-discovery",
                     [urls("get", "/.well-known/openid-configuration", "/.well-known/openid-configuration/",
                           "/openid/v1/jwks", "/openid/v1/jwks/")]),
        cluster_role("system:auth-delegator", [rule("create", "authentication.k8s.io", "tokenreviews"),
                                               rule("create", "authorization.k8s.io", "subjectaccessreviews")]),
        cluster_role("system:node-proxier", [rule(("list", "watch"), "", ("services", "endpoints")),
                                             rule(READ, "", "nodes"), *EVENTS,
                                             rule(("list", "watch"), "discovery.k8s.io", "endpointslices"),
                                             # kube-proxy 1.33's server.go starts a ServiceCIDR informer while
                                             # MultiCIDRServiceAllocator is on (GA, on by default in 1.33), so
                                             # its role must let it list and watch them (not seen in kube's
                                             # policy.go itself: the copies searched were older).
                                             rule(("list", "watch"), "networking.k8s.io", "servicecidrs")]),
        cluster_role("system:node", [
            rule("create", "authentication.k8s.io", "tokenreviews"),
            rule("create", "authorization.k8s.io", ("subjectaccessreviews", "localsubjectaccessreviews")),
            rule(READ, "", ("services", "nodes", "pods", "endpoints")),
            rule(("create", "update", "patch", "delete"), "", "nodes"), rule(("update", "patch"), "", "nodes/status"),
            rule(("create", "delete"), "", "pods"), rule(("update", "patch"), "", "pods/status"),
            rule("create", "", ("pods/eviction", "serviceaccounts/token")), *EVENTS,
            rule(("get", "create", "update", "patch", "delete"), "coordination.k8s.io", "leases"),
            # NodeRules: a kubelet rotating its own client certificate requests and watches it.
            rule(("create", "get", "list", "watch"), CERTIFICATES_GROUP, "certificatesigningrequests")]),
        cluster_role("system:kube-scheduler", [
            *EVENTS, rule("create", "coordination.k8s.io", "leases"),
            rule(("get", "update"), "coordination.k8s.io", "leases", names=("kube-scheduler",)),
            rule(READ, "", "nodes"), rule(("get", "list", "watch", "delete"), "", "pods"),
            rule("create", "", ("bindings", "pods/binding")), rule(("patch", "update"), "", "pods/status"),
            rule(READ, "", ("replicationcontrollers", "services", "namespaces", "persistentvolumeclaims",
                            "persistentvolumes")),
            rule(READ, "apps", ("replicasets", "statefulsets")), rule(READ, "policy", "poddisruptionbudgets"),
            rule("create", "authentication.k8s.io", "tokenreviews"),
            rule("create", "authorization.k8s.io", "subjectaccessreviews"), TRACES]),
        cluster_role("system:kube-controller-manager", [
            *EVENTS, rule("create", "coordination.k8s.io", "leases"),
            rule(("get", "update"), "coordination.k8s.io", "leases", names=("kube-controller-manager",)),
            rule(("create", "delete", "get", "update"), "", "secrets"),
            rule(("create", "get", "update"), "", "serviceaccounts"),
            rule(("create", "get", "update"), "", "endpoints"),
            rule("create", "", "serviceaccounts/token"),
            rule("create", "authentication.k8s.io", "tokenreviews"),
            rule("create", "authorization.k8s.io", "subjectaccessreviews"),
            rule(("list", "watch", "get"), "*", "*"), TRACES]),
        cluster_role("system:kube-dns", [rule(("list", "watch"), "", ("endpoints", "services", "namespaces")),
                                         rule(("list", "watch"), "discovery.k8s.io", "endpointslices")]),
        # The certificates.k8s.io roles kube ships, bound to nobody (kubeadm and the cluster's admin bind
        # them): a kubelet's bootstrap identity requests its client certificate (system:node-bootstrapper);
        # the csrapproving controller auto-approves a request for a node client certificate when its
        # requestor may create the nodeclient (a new node) or selfnodeclient (a renewal) pseudo-subresource;
        # approving for a signer takes `approve` on signers/<signerName>. Verbs sorted, as NewRule stores them.
        cluster_role("system:node-bootstrapper", [rule(("create", "get", "list", "watch"), CERTIFICATES_GROUP,
                                                       "certificatesigningrequests")]),
        cluster_role("system:certificates.k8s.io:certificatesigningrequests:nodeclient",
                     [rule("create", CERTIFICATES_GROUP, "certificatesigningrequests/nodeclient")]),
        cluster_role("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
                     [rule("create", CERTIFICATES_GROUP, "certificatesigningrequests/selfnodeclient")]),
        *(cluster_role(f"system:certificates.k8s.io:{role}",
                       [rule("approve", CERTIFICATES_GROUP, "signers", names=(f"kubernetes.io/{signer}",))])
          for role, signer in (("kube-apiserver-client-approver", "kube-apiserver-client"),
                               ("kube-apiserver-client-kubelet-approver", "kube-apiserver-client-kubelet"),
                               ("kubelet-serving-approver", "kubelet-serving"),
                               ("legacy-unknown-approver", "legacy-unknown"))),
    ]
    roles += [cluster_role(f"system:controller:{name}", rules) for name, rules in _controller_roles().items()]
    return roles


def cluster_role_bindings() -> list[dict[str, Any]]:
    bindings = [
        binding("cluster-admin", ("Group", MASTERS_GROUP)),
        binding("system:monitoring", ("Group", "system:monitoring")),
        binding("system:discovery", ("Group", "system:authenticated")),
        binding("system:basic-user", ("Group", "system:authenticated")),
        binding("system:public-info-viewer", ("Group", "system:authenticated"), ("Group", "system:unauthenticated")),
        binding("system:service-account-issuer-discovery", ("Group", "system:serviceaccounts")),
        binding("system:node-proxier", ("User", PROXY_USER)),
        binding("system:kube-scheduler", ("User", SCHEDULER_USER)),
        binding("system:kube-controller-manager", ("User", CONTROLLERS_USER)),
        binding("system:kube-dns", ("ServiceAccount", "kube-system/kube-dns"), ("User", DNS_USER)),
    ]
    bindings += [binding(f"system:controller:{name}", ("ServiceAccount", f"kube-system/{name}"),
                         ("User", CONTROLLERS_USER)) for name in _controller_roles()]
    return bindings


NAMESPACE = "kube-system"
DNS_REGISTRATION = "kubelab:dns-registration"


def namespaced() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """NamespaceRoles / NamespaceRoleBindings in kube-system. kubelab's own: its DNS registers the kube-dns
    Service, Endpoints and EndpointSlice itself (an add-on installer writes them in kube), so the user
    system:kube-dns may create and update those three there."""
    role = {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "Role", "metadata": {**_meta(DNS_REGISTRATION),
                                                                          "namespace": NAMESPACE},
            "rules": [rule(("create", "get", "update"), "", ("services", "endpoints")),
                      rule(("create", "get", "update"), "discovery.k8s.io", "endpointslices")]}
    binding_ = {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "RoleBinding",
                "metadata": {**_meta(DNS_REGISTRATION), "namespace": NAMESPACE},
                "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": DNS_REGISTRATION},
                "subjects": [{"kind": "User", "apiGroup": RBAC_GROUP, "name": DNS_USER}]}
    return [role], [binding_]


def policy() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The bootstrap ClusterRoles, with admin, edit and view already aggregated (edit aggregates into
    admin, view into edit: computed in that order), and the ClusterRoleBindings."""
    roles = cluster_roles()
    by_name = {r["metadata"]["name"]: r for r in roles}
    for name in ("view", "edit", "admin"):
        by_name[name]["rules"] = aggregated_rules(by_name[name], roles) or []
    return roles, cluster_role_bindings()


__all__ = ["AUTOUPDATE", "BOOTSTRAPPING", "cluster_role_bindings", "cluster_roles", "namespaced", "policy"]
