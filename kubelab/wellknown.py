"""Kubernetes' well-known label names, in one place: what every package reads or writes on objects
another component owns (k8s.io/api core/v1 and discovery/v1 well_known_labels.go, the apps controllers'
hash labels). A name a single component alone uses stays with that component."""

from __future__ import annotations

# discovery/v1: the Service an EndpointSlice belongs to, and who manages it.
SERVICE_NAME = "kubernetes.io/service-name"
ENDPOINTSLICE_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
# core/v1: a Service without a ClusterIP, and one a different proxy implements.
HEADLESS = "service.kubernetes.io/headless"
SERVICE_PROXY_NAME = "service.kubernetes.io/service-proxy-name"
# core/v1: what every Node and Namespace is labelled with.
HOSTNAME = "kubernetes.io/hostname"
OS = "kubernetes.io/os"
ARCH = "kubernetes.io/arch"
NAMESPACE_NAME = "kubernetes.io/metadata.name"
# apps/v1: the template a ReplicaSet's pods (Deployment) or a revision's pods (StatefulSet, DaemonSet) came from.
POD_TEMPLATE_HASH = "pod-template-hash"
CONTROLLER_REVISION_HASH = "controller-revision-hash"
