"""kubelab's kubelet stub: a node that registers itself, keeps it alive and runs the pods bound to it.

It owns the Node object's status, heartbeat and stats (`node.py`, `stats.py`), pod IPs from the node's
podCIDR (`ipam.py`), the pod lifecycle and status (`pods.py`, `podstatus.py`), probes (`prober.py`,
`probe.py`), its containers (`containers.py` decides what to start and restart, with the environment of
`envvars.py`, the volumes of `volumes.py` and the files of `etchosts.py` and `containerfiles.py`;
`runtime.py`, `runtimetypes.py` and `containerinit.py` run them, `containerio.py`, `containerexec.py`,
`attach.py` and `portforward.py` stream to them, `containerlogs.py` and `crilog.py` keep their logs) and
its API (`server.py`, `streaming/`). A pod runs in the dataplane of `dataplane.py`: in render mode no
network (commands run as plain processes), in netns mode a network namespace per node and per pod with
veths and routes (`netns.py`, with `netnames.py`, `netlinkops.py` and `netnsstate.py`), each container in
its own UTS, mount and PID namespaces, and the built-in HTTP server for containers without a command
(`podprocess.py`, `podserver.py`, forked by `podzygote.py`). iptables are the proxy agent's, not its.

This file imports nothing: the pod servers' zygote starts with `python -m kubeletstub.podserver --zygote`
(`podzygote.py`), and every container with `python -m kubeletstub.containerinit`; neither should pay for the kubelet's imports. Use `kubeletstub.kubelet.run` and `kubeletstub.node.NodeConfig`.
"""
