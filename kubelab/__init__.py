"""kubelab's shared core.

Everything the components have in common lives here: the API object models, quantities, label and
field selectors, the resource catalogue (group, version, plural, kind), the HTTP client with
list+watch informers and a work queue, the CLI, the one-process runner and the private-etcd
launcher. It owns no behaviour of its own: the API server, scheduler, controllers, kubelet stub and
proxy agent import it, never each other.
"""

__version__ = "0.1.0"
