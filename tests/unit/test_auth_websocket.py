"""A WebSocket upgrade goes through the same authentication and authorization as any GET: refused with
kube's 401/403 Status as the handshake's HTTP answer (ASGI's websocket.http.response), never passed on
unauthenticated. Driven through auth.AuthMiddleware with ASGI messages; the app behind it records calls."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import pytest

from apiserver.auth import AuthMiddleware, user_of
from kubelab.tokenfile import UserInfo

TOKENS = {"admin-t": UserInfo("alice", "1", ("system:masters",)),
          "sa-t": UserInfo("system:serviceaccount:ns:robot", "2", ("system:serviceaccounts",
                                                                    "system:serviceaccounts:ns"))}
EXEC = "/api/v1/namespaces/ns/pods/web/exec"


def upgrade(token: str | None) -> tuple[list[dict[str, Any]], list[Any]]:
    reached: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(user_of(scope))

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
    scope = {"type": "websocket", "path": EXEC, "query_string": b"command=ls", "headers": headers,
             "extensions": {"websocket.http.response": {}}}
    asyncio.run(AuthMiddleware(app, tokens=TOKENS, state=SimpleNamespace())(scope, receive, send))
    return sent, reached


@pytest.mark.parametrize(("token", "code", "reason"), [
    (None, 401, "Unauthorized"),
    ("wrong", 401, "Unauthorized"),
    ("sa-t", 403, "Forbidden"),  # nothing binds the service account pods/exec (RBAC)
])
def test_refused_upgrades_get_kubes_status(token: str | None, code: int, reason: str) -> None:
    sent, reached = upgrade(token)
    assert reached == []
    assert sent[0]["type"] == "websocket.http.response.start" and sent[0]["status"] == code
    body = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))
    assert (body["kind"], body["code"], body["reason"]) == ("Status", code, reason)


def test_an_allowed_upgrade_goes_on_as_its_user() -> None:
    sent, reached = upgrade("admin-t")
    assert sent == [] and [u.name for u in reached] == ["alice"]
