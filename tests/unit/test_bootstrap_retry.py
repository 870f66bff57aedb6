"""The API server's start retries its bootstrap when etcd times out (a loaded machine answered a bootstrap
write with "etcdserver: request timed out" and the whole `kubelab up` failed), and fails at once on anything
else."""

from __future__ import annotations

import pytest

from apiserver import app, errors


async def test_a_timed_out_bootstrap_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    async def bootstrap() -> None:
        calls.append(1)
        if len(calls) < 3:
            raise errors.unavailable("etcd is unavailable: etcdserver: request timed out")

    monkeypatch.setattr(app, "BOOTSTRAP_RETRY_SECONDS", 30.0)
    await app._bootstrap_retrying(bootstrap)
    assert len(calls) == 3


async def test_other_errors_fail_the_start_at_once() -> None:
    calls = []

    async def bootstrap() -> None:
        calls.append(1)
        raise errors.StatusError(422, "Invalid", "bad")

    with pytest.raises(errors.StatusError):
        await app._bootstrap_retrying(bootstrap)
    assert len(calls) == 1
