"""The Service, EndpointSlice and ServiceCIDR informers shared by every proxy agent of one process.

`kubelab up` runs a proxy agent per node in one process; each used to list, watch and decode every
Service and EndpointSlice for itself, so with N nodes one Service change was N watch events, N JSON
parses and N model validations of the same object. Here one informer per kind (one watch, one decode)
feeds them all, as client-go's SharedInformerFactory shares one reflector among a binary's controllers
(upstream kube-proxies are processes of their own and cannot share; the rules they write are the same).
What each kube-proxy keeps for itself stays per agent: its Proxier is a handler of its own on the
shared informers and tracks the changes its last sync has not applied (ServiceChangeTracker,
EndpointsChangeTracker), so one node's slow or failed sync holds back no other node. An agent that
joins after the informers synced (a node added or resumed later) is told every cached object as ADDED
first, as sharedIndexInformer.AddEventHandler does for a late handler; one that stops is unsubscribed.
"""

from __future__ import annotations

import asyncio

from kubelab import kinds
from kubelab.client import ApiClient, Informer
from kubelab.models import EndpointSlice, Service, ServiceCIDR


class SharedProxyInformers:
    """One Service, one EndpointSlice and one ServiceCIDR informer (networking.k8s.io/v1, which
    kube-proxy watches for its nftables mode's drop rule); `run()` must be running for agents using
    them to sync."""

    def __init__(self, api: ApiClient) -> None:
        self.services: Informer[Service] = Informer(api, kinds.SERVICES, name="proxy-shared-services")
        self.slices: Informer[EndpointSlice] = Informer(api, kinds.ENDPOINTSLICES, name="proxy-shared-slices")
        self.service_cidrs: Informer[ServiceCIDR] = Informer(api, kinds.SERVICECIDRS, name="proxy-shared-servicecidrs")

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.services.run(), name=f"{self.services.name}-informer")
            tg.create_task(self.slices.run(), name=f"{self.slices.name}-informer")
            tg.create_task(self.service_cidrs.run(), name=f"{self.service_cidrs.name}-informer")
