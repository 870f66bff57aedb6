"""The catalogue of resource types kubelab serves: group, version, plural, kind, scope, discovery data.

Both sides use it: the API server to route and to answer discovery, the client to build paths.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import quote

from . import models

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    model: type[models.TypedObject]
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    singular: str = field(default="")
    # Where the objects live under /registry/: the plural for built-in kinds, `<group>/<plural>` for the
    # kinds CustomResourceDefinitions define (as kube-apiserver's apiextensions stores them).
    storage_name: str = ""
    # Custom kinds: the JSON of the definition's version this resource serves (schema, columns,
    # subresources). Part of the identity, so a changed definition is a new resource type to serve.
    definition: str = field(default="", repr=False)
    # Custom kinds whose definition is Terminating: the verbs discovery lists (apiextensions' discovery
    # controller keeps the kind with delete, deletecollection, get, list and watch); requests are routed by
    # `verbs` all the same, since its handler still takes patches and updates (finalizers come off so).
    discovery_verbs: tuple[str, ...] = ()

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def api_version(self) -> str:
        return self.group_version

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()

    @property
    def storage_path(self) -> str:
        """`/registry/pods/`: the etcd prefix every object of this resource is stored under."""
        return f"/registry/{self.storage_name or self.plural}/"

    def storage_prefix(self, namespace: str | None = None) -> str:
        """`/registry/pods/default/`: the prefix of one namespace's objects (all of them without one)."""
        if self.namespaced and namespace:
            return f"{self.storage_path}{namespace}/"
        return self.storage_path

    def storage_key(self, namespace: str | None, name: str) -> str:
        """`/registry/pods/default/web-1`, `/registry/nodes/node-1`: where one object is stored. The one
        spelling of the key layout; every package that names a key (tracing, the UI, the endpoint
        controllers' trigger causes) derives it here."""
        if self.namespaced:
            return f"{self.storage_path}{namespace}/{name}"
        return f"{self.storage_path}{name}"

    @property
    def group_resource(self) -> str:
        """`services`, or `endpointslices.discovery.k8s.io`: how kube-apiserver names a resource in messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def base_path(self, namespace: str | None = None) -> str:
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            return f"{root}/namespaces/{path_segment(namespace)}/{self.plural}"
        return f"{root}/{self.plural}"

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        path = self.base_path(namespace)
        if name:
            path = f"{path}/{path_segment(name)}"
            if subresource:
                path = f"{path}/{subresource}"
        return path


def path_segment(text: str) -> str:
    """A namespace or name as one URL path segment, percent-encoded as client-go's request builder
    escapes it. Names the API validates are already safe and come back unchanged; a name stored
    without validation ("x\\n" written straight into etcd) must still be reachable, or nothing can
    ever delete or finalize it."""
    return quote(text, safe="")


NAMESPACES = ResourceType("", "v1", "namespaces", "Namespace", False, models.Namespace,
                          short_names=("ns",), subresources=("status", "finalize"),
                          verbs=("create", "delete", "get", "list", "patch", "update", "watch"))
NODES = ResourceType("", "v1", "nodes", "Node", False, models.Node, short_names=("no",),
                     subresources=("status", "proxy"))
# attach, exec, log, portforward reach the pod's kubelet, proxy the pod itself (apiserver/routers/proxy.py).
PODS = ResourceType("", "v1", "pods", "Pod", True, models.Pod, short_names=("po",), categories=("all",),
                    subresources=("status", "binding", "eviction", "attach", "exec", "log", "portforward", "proxy"))
SERVICES = ResourceType("", "v1", "services", "Service", True, models.Service, short_names=("svc",),
                        categories=("all",), subresources=("status", "proxy"),
                        verbs=("create", "delete", "deletecollection", "get", "list", "patch", "update",
                               "watch"))
ENDPOINTS = ResourceType("", "v1", "endpoints", "Endpoints", True, models.Endpoints, short_names=("ep",),
                         singular="endpoints")
EVENTS = ResourceType("", "v1", "events", "Event", True, models.Event, short_names=("ev",))
ENDPOINTSLICES = ResourceType("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True,
                              models.EndpointSlice)
LEASES = ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True, models.Lease)
CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", True, models.ConfigMap, short_names=("cm",))
SECRETS = ResourceType("", "v1", "secrets", "Secret", True, models.Secret)
SERVICEACCOUNTS = ResourceType("", "v1", "serviceaccounts", "ServiceAccount", True, models.ServiceAccount,
                               short_names=("sa",), subresources=("token",))
DEPLOYMENTS = ResourceType("apps", "v1", "deployments", "Deployment", True, models.Deployment,
                           short_names=("deploy",), categories=("all",), subresources=("status", "scale"))
REPLICASETS = ResourceType("apps", "v1", "replicasets", "ReplicaSet", True, models.ReplicaSet,
                           short_names=("rs",), categories=("all",), subresources=("status", "scale"))
PODDISRUPTIONBUDGETS = ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True,
                                    models.PodDisruptionBudget, short_names=("pdb",), subresources=("status",))
# Stored and listed as kube-aggregator stores them; the API server registers one "Local" APIService per
# group version it serves. Aggregation itself (proxying a group to the Service an APIService names) is
# not served.
APISERVICES = ResourceType("apiregistration.k8s.io", "v1", "apiservices", "APIService", False, models.APIService,
                           categories=("api-extensions",), subresources=("status",))

JOBS = ResourceType("batch", "v1", "jobs", "Job", True, models.Job, categories=("all",), subresources=("status",))
CRONJOBS = ResourceType("batch", "v1", "cronjobs", "CronJob", True, models.CronJob, short_names=("cj",),
                        categories=("all",), subresources=("status",))

# DaemonSets and StatefulSets keep their template history in ControllerRevisions (`kubectl rollout history`).
DAEMONSETS = ResourceType("apps", "v1", "daemonsets", "DaemonSet", True, models.DaemonSet,
                          short_names=("ds",), categories=("all",), subresources=("status",))
STATEFULSETS = ResourceType("apps", "v1", "statefulsets", "StatefulSet", True, models.StatefulSet,
                            short_names=("sts",), categories=("all",), subresources=("status", "scale"))
CONTROLLERREVISIONS = ResourceType("apps", "v1", "controllerrevisions", "ControllerRevision", True,
                                   models.ControllerRevision)
REPLICATIONCONTROLLERS = ResourceType("", "v1", "replicationcontrollers", "ReplicationController", True,
                                      models.ReplicationController, short_names=("rc",), categories=("all",),
                                      subresources=("status", "scale"))

BUILTIN: tuple[ResourceType, ...] = (NAMESPACES, NODES, PODS, SERVICES, ENDPOINTS, EVENTS, CONFIGMAPS, SECRETS,
                                     SERVICEACCOUNTS, ENDPOINTSLICES, LEASES, DEPLOYMENTS, REPLICASETS, APISERVICES,
                                     PODDISRUPTIONBUDGETS, JOBS, CRONJOBS)
BUILTIN += (DAEMONSETS, STATEFULSETS, CONTROLLERREVISIONS, REPLICATIONCONTROLLERS)

# The ranges ClusterIPs come from (GA in 1.33): the API server keeps `kubernetes` for its own range;
# kube-proxy's nftables mode reads them all.
SERVICECIDRS = ResourceType("networking.k8s.io", "v1", "servicecidrs", "ServiceCIDR", False, models.ServiceCIDR,
                            subresources=("status",))
BUILTIN += (SERVICECIDRS,)
# Served as kube-apiserver serves them, for controllers it does not run either: an ingress controller
# routes by Ingresses and IngressClasses, a network plugin enforces NetworkPolicies (kubelab runs neither).
INGRESSES = ResourceType("networking.k8s.io", "v1", "ingresses", "Ingress", True, models.Ingress,
                         short_names=("ing",), subresources=("status",))
INGRESSCLASSES = ResourceType("networking.k8s.io", "v1", "ingressclasses", "IngressClass", False, models.IngressClass)
NETWORKPOLICIES = ResourceType("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True,
                               models.NetworkPolicy, short_names=("netpol",))
BUILTIN += (INGRESSES, INGRESSCLASSES, NETWORKPOLICIES)
# Requests for a signer to sign: approved through the approval subresource, signed through status (by
# kube-controller-manager's signers on a real cluster; kubelab runs none).
CERTIFICATESIGNINGREQUESTS = ResourceType("certificates.k8s.io", "v1", "certificatesigningrequests",
                                          "CertificateSigningRequest", False, models.CertificateSigningRequest,
                                          short_names=("csr",), subresources=("approval", "status"))
BUILTIN += (CERTIFICATESIGNINGREQUESTS,)
# What CSI drivers report of their capacity per storage class and topology (published by a driver's
# external-provisioner on a real cluster; kubelab has no storage, so only what clients write).
CSISTORAGECAPACITIES = ResourceType("storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", True,
                                    models.CSIStorageCapacity)
BUILTIN += (CSISTORAGECAPACITIES,)
# apiextensions.k8s.io/v1: the kinds these define are served at run time, once Established
# (apiserver/apiextensions.py), as ResourceTypes built from the definition (registry/crds.py).
CUSTOMRESOURCEDEFINITIONS = ResourceType("apiextensions.k8s.io", "v1", "customresourcedefinitions",
                                         "CustomResourceDefinition", False, models.CustomResourceDefinition,
                                         short_names=("crd", "crds"), categories=("api-extensions",),
                                         subresources=("status",))
BUILTIN += (CUSTOMRESOURCEDEFINITIONS,)
# Who may do what (apiserver/rbac.py judges requests by them; the bootstrap policy is written at start).
RBAC_GROUP = "rbac.authorization.k8s.io"
ROLES = ResourceType(RBAC_GROUP, "v1", "roles", "Role", True, models.Role)
CLUSTERROLES = ResourceType(RBAC_GROUP, "v1", "clusterroles", "ClusterRole", False, models.ClusterRole)
ROLEBINDINGS = ResourceType(RBAC_GROUP, "v1", "rolebindings", "RoleBinding", True, models.RoleBinding)
CLUSTERROLEBINDINGS = ResourceType(RBAC_GROUP, "v1", "clusterrolebindings", "ClusterRoleBinding", False,
                                   models.ClusterRoleBinding)
BUILTIN += (ROLES, CLUSTERROLES, ROLEBINDINGS, CLUSTERROLEBINDINGS)

# `kubectl auth can-i` creates one of these and reads the answer back; the API server answers it without
# storing anything (apiserver/routers/reviews.py), so it is served and discovered but not in BUILTIN, the
# kinds that are stored, watched and garbage-collected.
SELFSUBJECTACCESSREVIEWS = ResourceType("authorization.k8s.io", "v1", "selfsubjectaccessreviews",
                                        "SelfSubjectAccessReview", False, models.SelfSubjectAccessReview,
                                        verbs=("create",))
# `kubectl auth whoami` creates one of these: who the API server takes the asker for (never stored either).
SELFSUBJECTREVIEWS = ResourceType("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", False,
                                  models.SelfSubjectReview, verbs=("create",))
# A webhook or an aggregated API server asks who a bearer token is (apiserver/routers/reviews.py; never stored).
TOKENREVIEWS = ResourceType("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False, models.TokenReview,
                            verbs=("create",))
# Answered from the authorizers and never stored either (apiserver/routers/reviews.py): may a user do something
# (a webhook's question), may a user do something in a namespace, and what may I do (`kubectl auth can-i --list`).
SUBJECTACCESSREVIEWS = ResourceType("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview",
                                    False, models.SubjectAccessReview, verbs=("create",))
LOCALSUBJECTACCESSREVIEWS = ResourceType("authorization.k8s.io", "v1", "localsubjectaccessreviews",
                                         "LocalSubjectAccessReview", True, models.LocalSubjectAccessReview,
                                         verbs=("create",))
SELFSUBJECTRULESREVIEWS = ResourceType("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview",
                                       False, models.SelfSubjectRulesReview, verbs=("create",))
SERVED: tuple[ResourceType, ...] = (*BUILTIN, SELFSUBJECTACCESSREVIEWS, SELFSUBJECTREVIEWS, TOKENREVIEWS,
                                    SUBJECTACCESSREVIEWS, LOCALSUBJECTACCESSREVIEWS, SELFSUBJECTRULESREVIEWS)
# events.k8s.io/v1 Events are the core/v1 Events in the events API's field names: kube-apiserver stores
# them once, under /registry/events, and converts on every read and write (the API server's
# conversion.py). Served and discovered, but not in BUILTIN: a component that lists or watches every
# stored kind (garbage collector, namespace deletion) sees each event once, as v1.
EVENTS_V1 = ResourceType("events.k8s.io", "v1", "events", "Event", True, models.EventsV1Event, short_names=("ev",))
SERVED += (EVENTS_V1,)
# metrics.k8s.io, as metrics-server serves it behind kube-apiserver: read from the kubelets' stats/summary
# when asked (apiserver/routers/metrics_api.py), never stored; in discovery so that `kubectl top` finds it.
NODE_METRICS = ResourceType("metrics.k8s.io", "v1beta1", "nodes", "NodeMetrics", False, models.NodeMetrics,
                            verbs=("get", "list"))
POD_METRICS = ResourceType("metrics.k8s.io", "v1beta1", "pods", "PodMetrics", True, models.PodMetrics,
                           verbs=("get", "list"))
METRICS: tuple[ResourceType, ...] = (NODE_METRICS, POD_METRICS)


def by_kind(api_version: str, kind: str) -> ResourceType | None:
    for rt in BUILTIN:
        if rt.api_version == api_version and rt.kind == kind:
            return rt
    return None


def by_plural(group: str, version: str, plural: str) -> ResourceType | None:
    for rt in BUILTIN:
        if rt.group == group and rt.version == version and rt.plural == plural:
            return rt
    return None
