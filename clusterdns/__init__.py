"""kubelab's cluster DNS: `<service>.<namespace>.svc.cluster.local` for every pod, CoreDNS-style.

It owns the DNS server (UDP and TCP on port 53, answers built and parsed by dnspython), the zone it
answers from (Services, EndpointSlices and Namespaces, read through informers like any controller),
and the `kube-dns` Service at 10.96.0.10 in kube-system with the Endpoints and EndpointSlice that
point it at the server. It leaves to others: pods' resolv.conf (the kubelet stub writes it, pointing
at 10.96.0.10), the DNAT from 10.96.0.10 to the server (the proxy agents' kube-proxy rules), and the
network namespace the server listens in (`kubelab up` creates `<prefix>-dns` on the lab network).
Nothing is forwarded upstream: names outside the cluster domain are REFUSED.

Modules: `zone.py` (the index, pure), `answers.py` (query -> response, pure), `server.py` (sockets),
`registration.py` (the kube-dns objects), `component.py` (`run`: informers + server).
"""

from .component import DnsOptions, run

__all__ = ["DnsOptions", "run"]
