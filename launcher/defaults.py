"""The defaults of the `kubelab` commands, each written once: the flag parsers (launcher/parsers.py), the
option objects of `kubelab up` (runner.UpOptions) and of each component (launcher/build.py) all read them
here, so `kubelab up` and the per-component commands cannot drift apart. Where kube has the same flag, its
default is kube's."""

from __future__ import annotations

from apiserver import defaults as apiserver_defaults
from kubelab import addressing

DATA_DIR = ".kubelab"  # where `kubelab up` keeps its state, and where the tools look for it
LISTEN = "127.0.0.1:8080"  # the API server's address: loopback unless told otherwise
SERVER = "http://127.0.0.1:8080"  # what a component process talks to by default
NODES = 3

# Each node's capacity and allocatable (kubelet reports the machine's; these nodes have none of their own).
NODE_CPU = "4"
NODE_MEMORY = "8Gi"
NODE_MAX_PODS = 110  # kubelet's --max-pods

MIN_SYNC_PERIOD = 1.0  # kube-proxy's --min-sync-period (1s)
SYNC_PERIOD = 30.0  # kube-proxy's --sync-period (30s)
PROXY_MODE = "iptables"  # kube-proxy's --proxy-mode default on Linux
PROXY_MODES = ("iptables", "nftables")
PROXY_METRICS_BIND_ADDRESS = "127.0.0.1:10249"  # kube-proxy's --metrics-bind-address
# `kubelab up`: the niceness of its nodes' rule writing (iptables-restore, iptables-save, nft and the threads
# that start them). Every node's kube-proxy would have a machine of its own; here fifty of them share two
# cores with the API server, the scheduler and the kubelets, and at nice 0 their syncs starved the control
# plane that produces the endpoints they wait for (BENCHMARKS.md, issue P). The rules are the same.
UP_RULES_NICE = 19

NODE_MONITOR_GRACE_PERIOD = 50.0  # kube-controller-manager's --node-monitor-grace-period (50s)
TERMINATED_POD_GC_THRESHOLD = 12500  # kube-controller-manager's --terminated-pod-gc-threshold
LB_POOL = addressing.LB_POOL

SCORING = "LeastAllocated"  # kube-scheduler's NodeResourcesFit scoring strategy
SCORING_STRATEGIES = ("LeastAllocated", "MostAllocated")

# The API server's settings are the API server's facts (apiserver/defaults.py says why): read, not restated.
AUTHORIZATION_MODES = apiserver_defaults.AUTHORIZATION_MODES  # as kubeadm sets kube-apiserver's --authorization-mode
AUTHORIZATION_MODE = ",".join(AUTHORIZATION_MODES)  # the same, as the flag spells it
EVENT_TTL_SECONDS = apiserver_defaults.EVENT_TTL  # kube-apiserver's --event-ttl (1h)
ENDPOINT_RECONCILER_TYPE = apiserver_defaults.ENDPOINT_RECONCILER_TYPE
ENDPOINT_RECONCILER_TYPES = apiserver_defaults.ENDPOINT_RECONCILER_TYPES
