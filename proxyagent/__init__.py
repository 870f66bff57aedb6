"""kubelab's proxy agent: kube-proxy's iptables mode, rule for rule, and its nftables mode (`nftables/`,
`nftproxier.py`: the same events and sync decisions, one `nft -f` transaction per sync).

It owns turning Services and EndpointSlices into iptables rules: the pure rendering (`render.py`,
`servicerules.py`, `serviceports.py`, `hashing.py`, `canonical.py`), kube-proxy's model of the
objects and what changed (`changes.py`), when to sync (`runner.py`, the BoundedFrequencyRunner) and
how (`proxier.py`: full or partial, stale chains, failures, the iptables canary), applying a payload
with one `iptables-restore` in a node's network namespace (`apply.py`), kube-proxy's metrics
(`metrics.py`, served by `metricserver.py`), the health-check NodePorts of eTP=Local LoadBalancer
Services (`healthcheck.py`), and the informers feeding it all (`agent.py`; shared by the agents of one
process, `sharedinformers.py`; the ServiceCIDRs through `servicecidrs.py`). Pods,
routes and namespaces are the kubelet stub's.
"""

from .agent import ProxyAgent
from .metrics import ProxyMetrics
from .nftproxier import NftProxier
from .proxier import Proxier
from .render import ProxyConfig, render
from .sharedinformers import SharedProxyInformers

__all__ = ["NftProxier", "Proxier", "ProxyAgent", "ProxyConfig", "ProxyMetrics", "SharedProxyInformers", "render"]
