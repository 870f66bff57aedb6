"""What the ServiceCIDR objects say the Service ranges are: kube-proxy's ServiceCIDRConfig
(pkg/proxy/config/config.go) between a networking.k8s.io/v1 ServiceCIDR informer and a proxier.

Every event gives the proxier the complete list of ranges (OnServiceCIDRsChanged(cidrs)); the nftables
proxier writes them into the drop rule for unallocated ClusterIPs (`cluster-ips-check`), the iptables
proxier ignores them, as upstream's does.

One difference, on purpose: upstream keeps a plain set of CIDR strings that an old object's CIDRs are
removed from and a new object's added to, so deleting one of two ServiceCIDRs that hold the same range
drops the range although the other still holds it. Here the list is the union over the objects that
exist now, which is what upstream's set holds whenever no two objects share a range.
"""

from __future__ import annotations

from collections.abc import Callable

from kubelab.models import ServiceCIDR

CidrsHandler = Callable[[tuple[str, ...]], None]


class ServiceCIDRTracker:
    """Follows ServiceCIDR events (an informer handler) and tells `handler` every range, sorted and
    without duplicates, after each change. Nothing is told before `mark_synced()` (the informer's
    first list is complete), so that a proxier never sees half a list; then it is told once even when
    the list is empty (no ServiceCIDR: no drop rule, as upstream with an empty list)."""

    def __init__(self, handler: CidrsHandler) -> None:
        self._handler = handler
        self._by_object: dict[str, tuple[str, ...]] = {}
        self._synced = False

    @property
    def cidrs(self) -> tuple[str, ...]:
        return tuple(sorted({cidr for cidrs in self._by_object.values() for cidr in cidrs}))

    def on_event(self, event: str, old: ServiceCIDR | None, new: ServiceCIDR | None) -> None:
        before = self.cidrs
        if event == "DELETED" or new is None:
            if old is not None:
                self._by_object.pop(old.key, None)
        else:
            self._by_object[new.key] = tuple(new.spec.cidrs or ()) if new.spec is not None else ()
        if self._synced and self.cidrs != before:
            self._handler(self.cidrs)

    def mark_synced(self) -> None:
        if not self._synced:
            self._synced = True
            self._handler(self.cidrs)
