"""kubelab's shared library.

Everything the components have in common lives here: the API object models, quantities, label and
field selectors, the resource catalogue (group, version, plural, kind), the HTTP client with
list+watch informers and a work queue, the private-etcd launcher and child processes. It owns no
behaviour of its own: the API server, scheduler, controllers, kubelet stub and proxy agent import it,
never each other; the launcher package assembles them.
"""

import os

__version__ = "0.1.0"

# gRPC core, as grpcio builds it, installs fork handlers that reset its epoll poller in a forked child,
# while grpcio's Python layer has fork support off (grpc/grpc#41455 calls that mixed state a source of
# problems). kubelab forks children from processes whose etcd client polls (processes.spawn's preexec_fn
# sets PR_SET_PDEATHSIG, so Python forks rather than vforks), and a child aborted in that handler before
# it could exec ("Check failed: next_worker->state == KICKED", exit -6: a `kubelab up --apiservers 3`
# whose second API server never started). Every kubelab child execs at once and uses no inherited gRPC
# state, so fork support is off in both layers, in every kubelab process (set before any channel exists;
# an operator's explicit setting wins).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
