"""API object models (pydantic): camelCase on the wire, snake_case in Python, unknown fields kept."""

from .apiregistration import APIService, APIServiceSpec, APIServiceStatus, ServiceReference
from .apps import (
    ConfigMap,
    Deployment,
    DeploymentCondition,
    DeploymentSpec,
    DeploymentStatus,
    DeploymentStrategy,
    PodTemplateSpec,
    ReplicaSet,
    ReplicaSetSpec,
    ReplicaSetStatus,
    RollingUpdateDeployment,
    Scale,
    ScaleSpec,
    ScaleStatus,
)
from .authorization import (
    LocalSubjectAccessReview,
    SelfSubjectAccessReview,
    SelfSubjectReview,
    SelfSubjectRulesReview,
    SubjectAccessReview,
    TokenReview,
)
from .base import Model, to_wire
from .batch import (
    CronJob,
    CronJobSpec,
    CronJobStatus,
    Job,
    JobCondition,
    JobSpec,
    JobStatus,
    JobTemplateSpec,
    PodFailurePolicy,
    PodFailurePolicyRule,
    SuccessPolicy,
    SuccessPolicyRule,
    UncountedTerminatedPods,
)
from .certificates import (
    CertificateSigningRequest,
    CertificateSigningRequestCondition,
    CertificateSigningRequestSpec,
    CertificateSigningRequestStatus,
)
from .core import (
    Binding,
    ClientIPConfig,
    Container,
    ContainerPort,
    ContainerStatus,
    EndpointAddress,
    EndpointPort,
    Endpoints,
    EndpointSubset,
    Event,
    EventSource,
    LoadBalancerIngress,
    LoadBalancerStatus,
    LocalObjectReference,
    Namespace,
    NamespaceSpec,
    NamespaceStatus,
    Node,
    NodeAddress,
    NodeCondition,
    NodeSpec,
    NodeStatus,
    NodeSystemInfo,
    ObjectReference,
    Pod,
    PodCondition,
    PodIP,
    PodSpec,
    PodStatus,
    ResourceRequirements,
    Secret,
    Service,
    ServiceAccount,
    ServicePort,
    ServiceSpec,
    ServiceStatus,
    SessionAffinityConfig,
    Taint,
    Toleration,
)
from .discovery import Endpoint, EndpointConditions, EndpointSlice, EndpointSlicePort, Lease, LeaseSpec
from .meta import (
    IntOrString,
    LabelSelector,
    LabelSelectorRequirement,
    ListMeta,
    ObjectMeta,
    OwnerReference,
    Status,
    StatusCause,
    StatusDetails,
    TypedObject,
)
from .metrics import ContainerMetrics, NodeMetrics, PodMetrics
from .networking import (
    HTTPIngressPath,
    HTTPIngressRuleValue,
    Ingress,
    IngressBackend,
    IngressClass,
    IngressClassParametersReference,
    IngressClassSpec,
    IngressLoadBalancerIngress,
    IngressLoadBalancerStatus,
    IngressRule,
    IngressServiceBackend,
    IngressSpec,
    IngressStatus,
    IngressTLS,
    IPBlock,
    NetworkPolicy,
    NetworkPolicyEgressRule,
    NetworkPolicyIngressRule,
    NetworkPolicyPeer,
    NetworkPolicyPort,
    NetworkPolicySpec,
    ServiceBackendPort,
    ServiceCIDR,
    ServiceCIDRSpec,
    ServiceCIDRStatus,
)
from .policy import Eviction, PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus
from .rbac import (
    AggregationRule,
    ClusterRole,
    ClusterRoleBinding,
    PolicyRule,
    Role,
    RoleBinding,
    RoleRef,
    Subject,
)
from .storage import CSIStorageCapacity

__all__ = [
    "APIService", "APIServiceSpec", "APIServiceStatus",
    "Binding", "ClientIPConfig", "ConfigMap", "Container", "ContainerMetrics", "ContainerPort", "ContainerStatus", "Deployment",
    "DeploymentCondition", "DeploymentSpec", "DeploymentStatus", "DeploymentStrategy", "Endpoint",
    "EndpointAddress", "EndpointConditions", "EndpointPort", "EndpointSlice", "EndpointSlicePort",
    "EndpointSubset", "Endpoints", "Event", "EventSource", "Eviction", "IntOrString", "LabelSelector",
    "LabelSelectorRequirement", "Lease", "LeaseSpec", "ListMeta", "LoadBalancerIngress", "LoadBalancerStatus",
    "LocalObjectReference", "Model", "Namespace", "NamespaceSpec", "NamespaceStatus", "Node", "NodeAddress",
    "NodeCondition", "NodeMetrics", "NodeSpec", "NodeStatus", "NodeSystemInfo", "ObjectMeta", "ObjectReference",
    "OwnerReference", "Pod", "PodCondition", "PodDisruptionBudget", "PodDisruptionBudgetSpec", "PodDisruptionBudgetStatus", "PodIP", "PodMetrics", "PodSpec", "PodStatus", "PodTemplateSpec", "ReplicaSet",
    "ReplicaSetSpec", "ReplicaSetStatus", "ResourceRequirements", "RollingUpdateDeployment", "Scale",
    "ScaleSpec", "ScaleStatus", "Secret", "SelfSubjectAccessReview", "SelfSubjectReview",
    "Service", "ServiceAccount", "ServicePort", "ServiceReference", "ServiceSpec",
    "ServiceStatus", "SessionAffinityConfig", "Status", "StatusCause", "StatusDetails", "Taint", "TokenReview",
    "Toleration", "TypedObject", "to_wire",
]

# apps/v1 DaemonSet, StatefulSet, ControllerRevision and v1 ReplicationController (models/workloads.py).
from .workloads import (
    ControllerRevision,
    DaemonSet,
    DaemonSetSpec,
    DaemonSetStatus,
    DaemonSetUpdateStrategy,
    ReplicationController,
    ReplicationControllerSpec,
    ReplicationControllerStatus,
    RollingUpdateDaemonSet,
    RollingUpdateStatefulSetStrategy,
    StatefulSet,
    StatefulSetPersistentVolumeClaimRetentionPolicy,
    StatefulSetSpec,
    StatefulSetStatus,
    StatefulSetUpdateStrategy,
)

__all__ += [
    "ControllerRevision", "DaemonSet", "DaemonSetSpec", "DaemonSetStatus", "DaemonSetUpdateStrategy",
    "ReplicationController", "ReplicationControllerSpec", "ReplicationControllerStatus", "RollingUpdateDaemonSet",
    "RollingUpdateStatefulSetStrategy", "StatefulSet", "StatefulSetPersistentVolumeClaimRetentionPolicy",
    "StatefulSetSpec", "StatefulSetStatus", "StatefulSetUpdateStrategy",
]
# batch/v1
__all__ += ["CronJob", "CronJobSpec", "CronJobStatus", "Job", "JobCondition", "JobSpec", "JobStatus", "JobTemplateSpec",
            "PodFailurePolicy", "PodFailurePolicyRule", "SuccessPolicy", "SuccessPolicyRule", "UncountedTerminatedPods"]

# networking.k8s.io/v1 ServiceCIDR (models/networking.py).
__all__ += ["ServiceCIDR", "ServiceCIDRSpec", "ServiceCIDRStatus"]
# apiextensions.k8s.io/v1 (models/apiextensions.py).
from .apiextensions import CustomObject, CustomResourceDefinition

__all__ += ["CustomObject", "CustomResourceDefinition"]
# events.k8s.io/v1 (models/events.py): core/v1 Events served in the events API's field names.
from .events import EventsV1Event

__all__ += ["EventsV1Event"]
__all__ += [
    "AggregationRule",
    "ClusterRole",
    "ClusterRoleBinding",
    "LocalSubjectAccessReview",
    "PolicyRule",
    "Role",
    "RoleBinding",
    "RoleRef",
    "SelfSubjectRulesReview",
    "Subject",
    "SubjectAccessReview",
]

# networking.k8s.io/v1 Ingress, IngressClass, NetworkPolicy (models/networking.py).
__all__ += [
    "HTTPIngressPath",
    "HTTPIngressRuleValue",
    "IPBlock",
    "Ingress",
    "IngressBackend",
    "IngressClass",
    "IngressClassParametersReference",
    "IngressClassSpec",
    "IngressLoadBalancerIngress",
    "IngressLoadBalancerStatus",
    "IngressRule",
    "IngressServiceBackend",
    "IngressSpec",
    "IngressStatus",
    "IngressTLS",
    "NetworkPolicy",
    "NetworkPolicyEgressRule",
    "NetworkPolicyIngressRule",
    "NetworkPolicyPeer",
    "NetworkPolicyPort",
    "NetworkPolicySpec",
    "ServiceBackendPort",
]

# certificates.k8s.io/v1 CertificateSigningRequest (models/certificates.py).
__all__ += ["CertificateSigningRequest", "CertificateSigningRequestCondition", "CertificateSigningRequestSpec",
            "CertificateSigningRequestStatus"]

# storage.k8s.io/v1 CSIStorageCapacity (models/storage.py).
__all__ += ["CSIStorageCapacity"]
