"""API object models (pydantic): camelCase on the wire, snake_case in Python, unknown fields kept."""

from .apps import (ConfigMap, Deployment, DeploymentCondition, DeploymentSpec, DeploymentStatus, DeploymentStrategy,
                   PodTemplateSpec, ReplicaSet, ReplicaSetSpec, ReplicaSetStatus, RollingUpdateDeployment, Scale,
                   ScaleSpec, ScaleStatus)
from .base import Model, to_wire
from .core import *  # noqa: F403
from .core import __all__ as _core_all
from .discovery import Endpoint, EndpointConditions, EndpointSlice, EndpointSlicePort, Lease, LeaseSpec
from .meta import (
    IntOrString, LabelSelector, LabelSelectorRequirement, ListMeta, ObjectMeta, OwnerReference, Status,
    StatusCause, StatusDetails, TypedObject,
)

__all__ = [
    *_core_all, "ConfigMap", "Deployment", "DeploymentCondition", "DeploymentSpec", "DeploymentStatus",
    "DeploymentStrategy", "PodTemplateSpec", "ReplicaSet", "ReplicaSetSpec", "ReplicaSetStatus",
    "RollingUpdateDeployment", "Scale", "ScaleSpec", "ScaleStatus", "Endpoint", "EndpointConditions", "EndpointSlice", "EndpointSlicePort", "IntOrString",
    "LabelSelectorRequirement", "Lease", "LeaseSpec", "Model", "OwnerReference", "Status", "StatusCause",
    "StatusDetails", "TypedObject", "to_wire",
]
