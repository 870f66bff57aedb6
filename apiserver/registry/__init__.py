"""The registry: per-kind strategies (defaults, validation, allocation) and the generic store that runs
them in kube-apiserver's order. Routers call the store; the store calls storage; nothing here speaks HTTP."""

from __future__ import annotations

from kubelab import kinds

from ..conversion import Conversions
from .apiservices import APIServiceStrategy
from .apps import ConfigMapStrategy, DeploymentsStrategy, ReplicaSetsStrategy
from .batch import JobStrategy
from .certificates import CertificateSigningRequestStrategy
from .cluster import NamespaceStrategy, NodeStrategy
from .crds import CustomResourceDefinitionStrategy
from .cronjobs import CronJobStrategy
from .csistoragecapacities import CSIStorageCapacityStrategy
from .daemonsets import ControllerRevisionStrategy, DaemonSetStrategy
from .events import DEFAULT_EVENT_TTL, EventStrategy, LeaseStrategy
from .eventsv1 import EventsV1Strategy, served_version
from .ingresses import IngressClassStrategy, IngressStrategy
from .networking import EndpointSliceStrategy, EndpointsStrategy
from .networkpolicies import NetworkPolicyStrategy
from .pods import PodStrategy
from .policy import PodDisruptionBudgetStrategy
from .rbac import ClusterRoleBindingStrategy, ClusterRoleStrategy, RoleBindingStrategy, RoleStrategy
from .replicationcontrollers import ReplicationControllerStrategy
from .secrets import SecretStrategy, ServiceAccountStrategy
from .servicecidrs import ServiceCIDRStrategy
from .services import ServiceStrategy
from .statefulsets import StatefulSetStrategy
from .store import Registry, WatchEvent
from .strategy import Strategy


def default_strategies(*, service_cidr: str | None = None, event_ttl: int = DEFAULT_EVENT_TTL
                       ) -> dict[kinds.ResourceType, Strategy]:
    from .allocation import IPRange

    pods = PodStrategy(kinds.PODS)
    return {
        kinds.NAMESPACES: NamespaceStrategy(kinds.NAMESPACES),
        kinds.NODES: NodeStrategy(kinds.NODES),
        kinds.PODS: pods,
        kinds.SERVICES: ServiceStrategy(kinds.SERVICES, ip_range=IPRange(service_cidr) if service_cidr else None),
        kinds.ENDPOINTS: EndpointsStrategy(kinds.ENDPOINTS),
        kinds.EVENTS: EventStrategy(kinds.EVENTS, ttl=event_ttl),
        kinds.ENDPOINTSLICES: EndpointSliceStrategy(kinds.ENDPOINTSLICES),
        kinds.LEASES: LeaseStrategy(kinds.LEASES),
        kinds.CONFIGMAPS: ConfigMapStrategy(kinds.CONFIGMAPS),
        kinds.SECRETS: SecretStrategy(kinds.SECRETS),
        kinds.SERVICEACCOUNTS: ServiceAccountStrategy(kinds.SERVICEACCOUNTS),
        kinds.DEPLOYMENTS: DeploymentsStrategy(kinds.DEPLOYMENTS, pods),
        kinds.REPLICASETS: ReplicaSetsStrategy(kinds.REPLICASETS, pods),
        kinds.APISERVICES: APIServiceStrategy(kinds.APISERVICES),
        kinds.PODDISRUPTIONBUDGETS: PodDisruptionBudgetStrategy(kinds.PODDISRUPTIONBUDGETS),
        kinds.JOBS: JobStrategy(kinds.JOBS, pods),
        kinds.CRONJOBS: CronJobStrategy(kinds.CRONJOBS, pods),
        kinds.DAEMONSETS: DaemonSetStrategy(kinds.DAEMONSETS, pods),
        kinds.STATEFULSETS: StatefulSetStrategy(kinds.STATEFULSETS, pods),
        kinds.CONTROLLERREVISIONS: ControllerRevisionStrategy(kinds.CONTROLLERREVISIONS),
        kinds.REPLICATIONCONTROLLERS: ReplicationControllerStrategy(kinds.REPLICATIONCONTROLLERS, pods),
        kinds.SERVICECIDRS: ServiceCIDRStrategy(kinds.SERVICECIDRS),
        kinds.CUSTOMRESOURCEDEFINITIONS: CustomResourceDefinitionStrategy(kinds.CUSTOMRESOURCEDEFINITIONS),
        kinds.EVENTS_V1: EventsV1Strategy(kinds.EVENTS_V1, ttl=event_ttl),
        kinds.ROLES: RoleStrategy(kinds.ROLES),
        kinds.CLUSTERROLES: ClusterRoleStrategy(kinds.CLUSTERROLES),
        kinds.ROLEBINDINGS: RoleBindingStrategy(kinds.ROLEBINDINGS),
        kinds.CLUSTERROLEBINDINGS: ClusterRoleBindingStrategy(kinds.CLUSTERROLEBINDINGS),
        kinds.INGRESSES: IngressStrategy(kinds.INGRESSES),
        kinds.INGRESSCLASSES: IngressClassStrategy(kinds.INGRESSCLASSES),
        kinds.NETWORKPOLICIES: NetworkPolicyStrategy(kinds.NETWORKPOLICIES),
        kinds.CERTIFICATESIGNINGREQUESTS: CertificateSigningRequestStrategy(kinds.CERTIFICATESIGNINGREQUESTS),
        kinds.CSISTORAGECAPACITIES: CSIStorageCapacityStrategy(kinds.CSISTORAGECAPACITIES),
    }


def default_conversions() -> Conversions:
    """The built-in kinds served from another kind's storage: events.k8s.io/v1 Events over core/v1's."""
    return Conversions([served_version()])


__all__ = ["Registry", "Strategy", "WatchEvent", "default_conversions", "default_strategies"]
