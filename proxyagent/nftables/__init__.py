"""kube-proxy's nftables mode (pkg/proxy/nftables, GA in Kubernetes 1.33), beside the iptables one.

It owns the pure side of that mode: the chain, set and map names (`names.py`), the transaction
kube-proxy's nftables proxier sends for a set of Services, EndpointSlices and ServiceCIDRs
(`render.py`: `nft -f` input, one transaction per sync), and a model of what a transaction leaves in
the `ip kube-proxy` / `ip6 kube-proxy` table (`table.py`), which is how upstream's tests compare
transactions. It reuses the iptables mode's model of Services and endpoints (`serviceports.py`:
the same ServicePort/Endpoint view and CategorizeEndpoints feed both proxiers upstream). Running
`nft` in a node's namespace is `apply.py`'s; deciding when to sync is the agent's (nftproxier.py).
"""

from .render import NftConfig, NftRuleset, render_nft
from .table import NftTable, TableError, apply_transaction

__all__ = ["NftConfig", "NftRuleset", "NftTable", "TableError", "apply_transaction", "render_nft"]
