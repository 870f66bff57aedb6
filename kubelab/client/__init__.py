"""The only code in kubelab that speaks HTTP to the API server: a typed client, list+watch informers
and a de-duplicating, rate-limited work queue (client-go's shapes, asyncio's idioms)."""

from .errors import AlreadyExists, ApiError, Conflict, Expired, NotFound, TransportError
from .http import ApiClient, WatchEvent
from .informer import Informer
from .workqueue import WorkQueue

__all__ = ["AlreadyExists", "ApiClient", "ApiError", "Conflict", "Expired", "Informer", "NotFound", "TransportError", "WatchEvent",
           "WorkQueue"]
