"""Panic recovery: no exception leaves the API server's application, as kube-apiserver's WithPanicRecovery
filter lets no panic leave its handler chain.

Any exception that escapes a handler (or the authentication, the request guard, a response's body) is
logged here once with its traceback and answered with a 500 Status of kube's NewInternalError shape
(reason InternalError, message "Internal error occurred: ...", the error in details.causes). Kube's filter
writes a plain-text 500 ("This request caused apiserver to panic"); kubelab answers a Status instead, as
every other error it gives, so that kubectl and client libraries show the reason. A StatusError or a
storage error that gets this far is answered with its own Status (a 503 for etcd out of reach, not a 500).
Without this, uvicorn answered a plain-text `Internal Server Error`.

This is the outermost layer of `create_app`'s application, so it covers every route and both fronts:
uvicorn's sockets and the in-process ASGI transport (kubelab/client/asgi.py) that `kubelab up`'s
components use.

What it cannot turn into a Status:
* an exception after the response started (a watch's stream, a body half sent): the status line is gone.
  It is logged here and the response left unfinished, so the client sees a cut-off answer (uvicorn closes
  the connection), as kube aborts the connection of a handler that panics mid-response. Watches end with
  an ERROR event carrying a Status before that (routers/resources.py).
* the request's own cancellation (the server stopping, the client gone): that is no error and goes on up.
"""

from __future__ import annotations

import asyncio
import logging
import sys

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import codecs, errors
from .storage import cancelled_from_outside

log = logging.getLogger(__name__)


class PanicRecovery:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = completed = False

        async def tracking_send(message: Message) -> None:
            nonlocal started, completed
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                completed = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except asyncio.CancelledError:
            if cancelled_from_outside():
                raise
            if not started:
                log.exception("%s %s was cancelled inside the server", scope.get("method"), scope.get("path"))
                answer = codecs.status_response(errors.internal("the request was cancelled inside the server"))
                await answer(scope, receive, send)
            elif not completed:
                _cut_off(scope, sys.exc_info()[1])
        except Exception as exc:  # noqa: BLE001 - the point of this layer: every failure gets its Status
            if not started:
                # Logs an unexpected exception once, with its traceback; a Status or storage error is expected.
                await codecs.error_response(Request(scope), exc)(scope, receive, send)
            elif not completed:
                _cut_off(scope, exc)
            # Else it was answered already: Starlette's error middleware re-raises an exception after the
            # app's own handler answered it (codecs.error_response logged it), for the server to log again.


def _cut_off(scope: Scope, exc: BaseException | None) -> None:
    log.error("%s %s failed after its response started; the response is cut off", scope.get("method"),
              scope.get("path"), exc_info=exc)
