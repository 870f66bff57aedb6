"""kubelab's kubelet stub: a node that registers itself, keeps it alive and runs the pods bound to it.

It owns the Node object's status and heartbeat (`node.py`), pod IPs from the node's podCIDR
(`ipam.py`), the pod lifecycle and status (`pods.py`) and the dataplane a pod runs in
(`dataplane.py`): either nothing at all (render mode, pods are bookkeeping), or, in netns mode, a
network namespace per node and per pod with veths, routes and a built-in HTTP server per pod
(`netns.py`, `podprocess.py`, `podserver.py`). iptables are the proxy agent's, not its.

This file imports nothing: every pod server process starts with `python -m kubeletstub.podserver`,
and should not pay for the kubelet's imports. Use `kubeletstub.kubelet.run` and `kubeletstub.node.NodeConfig`.
"""
