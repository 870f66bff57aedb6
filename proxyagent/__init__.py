"""kubelab's proxy agent: kube-proxy's iptables mode, rule for rule.

It owns turning Services and EndpointSlices into iptables rules: the pure rendering (`render.py`,
`serviceports.py`, `hashing.py`, `canonical.py`), the sync loop that coalesces changes and decides
between full and partial syncs (`agent.py`), and applying a payload with one `iptables-restore` in a
node's network namespace (`apply.py`). Pods, routes and namespaces are the kubelet stub's.
"""

from .agent import ProxyAgent, run
from .render import ProxyConfig, render

__all__ = ["ProxyAgent", "ProxyConfig", "render", "run"]
