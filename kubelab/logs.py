"""Log lines prefixed by component, so the output of `kubelab up` reads as several programs' logs:

    12:00:01 apiserver    storage http://127.0.0.1:40123 ready
    12:00:02 scheduler    assigned default/api-1 to node-1
    12:00:02 kubelet      node-1: pod default/api-1 running at 10.244.1.2
"""

from __future__ import annotations

import logging

# Logger name prefix -> the component a reader knows it as.
COMPONENTS = (
    ("apiserver", "apiserver"), ("scheduler", "scheduler"), ("controllers", "controllers"),
    ("kubeletstub", "kubelet"), ("proxyagent", "proxy"), ("clusterdns", "dns"), ("kubelab.client", "client"),
    ("kubelab", "kubelab"),
)
OURS = tuple(prefix for prefix, _ in COMPONENTS)
NOISY = ("httpx", "httpcore", "uvicorn.error", "uvicorn.access", "aetcd", "pyroute2", "grpc", "asyncio")


class ComponentFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith("kubelab.component."):
            record.component = record.name.removeprefix("kubelab.component.")
            return True
        for prefix, component in COMPONENTS:
            if record.name == prefix or record.name.startswith(prefix + "."):
                record.component = component
                break
        else:
            record.component = record.name.split(".", 1)[0]
        return True


def setup(verbose: bool = False) -> None:
    handler = logging.StreamHandler()
    handler.addFilter(ComponentFilter())
    handler.setFormatter(logging.Formatter("%(asctime)s %(component)-11s %(message)s", datefmt="%H:%M:%S"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    for ours in OURS:
        logging.getLogger(ours).setLevel(logging.DEBUG if verbose else logging.INFO)
    for noisy in NOISY:
        logging.getLogger(noisy).setLevel(logging.WARNING)
