"""The API server's own defaults for the settings `kubelab apiserver` and `kubelab up` take as flags: what
app.Config (and the strategies and authorizers under it) use when nothing is said. They are facts of the
API server, so they are written here, in the component, as kube writes kube-apiserver's in its options
package (NewServerRunOptions); the launcher's flags read them (launcher/defaults.py) instead of restating
them. This module imports nothing, so reading it costs a command nothing at start-up."""

from __future__ import annotations

# --event-ttl: an event is deleted an hour after its last write (kube-apiserver's 1h), in whole seconds
# (etcd leases are).
EVENT_TTL = 3600

# --authorization-mode, used when a token file is configured: Node,RBAC, as kubeadm sets it. kube-apiserver's
# own default is AlwaysAllow; kubelab's API server with tokens has always defaulted to what clusters run.
AUTHORIZATION_MODES = ("Node", "RBAC")

# --endpoint-reconciler-type: "lease" (kube's default: every API server is an endpoint of the kubernetes
# Service while its master lease lives) or "none" (this server leaves the Service's endpoints alone).
ENDPOINT_RECONCILER_TYPE = "lease"
ENDPOINT_RECONCILER_TYPES = ("lease", "none")
