"""One translation of storage failures into Statuses (errors.from_storage), whoever meets them: the registry
re-raises with it, the last-resort handler answers with it. A timed-out etcd is kube-apiserver's 504 Timeout
(the write may still land), an unreachable one 503, an oversized write 413; none is a 500."""

from __future__ import annotations

import pytest

from apiserver import errors
from apiserver.storage import RequestTooLarge, StorageError, Timeout, Unavailable


@pytest.mark.parametrize(("exc", "code", "reason", "message"), [
    (Unavailable("connection refused"), 503, "ServiceUnavailable", "etcd is unavailable: connection refused"),
    (Timeout("etcdserver: request timed out"), 504, "Timeout",
     "Timeout: request did not complete within the allotted timeout (etcdserver: request timed out)"),
    (RequestTooLarge("etcdserver: request is too large"), 413, "RequestEntityTooLarge",
     "Request entity too large: etcdserver: request is too large"),
    (StorageError("anything else"), 503, "ServiceUnavailable", "etcd is unavailable: anything else"),
])
def test_storage_failures_have_one_status(exc: StorageError, code: int, reason: str, message: str) -> None:
    status = errors.from_storage(exc)
    assert (status.code, status.reason, status.message) == (code, reason, message)
