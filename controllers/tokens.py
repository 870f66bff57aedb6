"""The token controller: fills legacy service account token Secrets, and deletes those whose account is gone.

kube-controller-manager's tokens-controller (pkg/controller/serviceaccount/tokens_controller.go). Since
Kubernetes 1.24 no Secret is made for an account on its own; a user who wants a long-lived token creates
a Secret of type `kubernetes.io/service-account-token` annotated `kubernetes.io/service-account.name:
NAME`, and the controller fills it: `token` (a legacy JWT signed with the service account key,
kubelab.satokenkey), `ca.crt` (the root CA, --root-ca-file) and `namespace`, and records the account's
uid in the `kubernetes.io/service-account.uid` annotation. A Secret naming an account that does not exist
(or that was deleted and made again: another uid) is deleted, and so are an account's token Secrets when
the account is deleted. The API server accepts such a token while the Secret holds it and the account is
the same one (apiserver/auth.py).

Pure decisions (`needed_update`, `references_gone_account`) and one work queue keyed namespace/name of
Secrets; the accounts' informer only wakes the Secrets that name a deleted account.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec

from kubelab import kinds, satokenkey
from kubelab.client import ApiClient, Conflict, Informer, NotFound, WorkQueue
from kubelab.models import Secret, ServiceAccount

from .queuecontroller import QueueController

log = logging.getLogger(__name__)

TOKEN_TYPE = "kubernetes.io/service-account-token"
NAME_ANNOTATION = "kubernetes.io/service-account.name"
UID_ANNOTATION = "kubernetes.io/service-account.uid"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def references_gone_account(secret: dict[str, Any], account: dict[str, Any] | None) -> bool:
    """Whether the Secret names an account that is not there, or (by the uid annotation) another one."""
    if account is None:
        return True
    uid = ((secret.get("metadata") or {}).get("annotations") or {}).get(UID_ANNOTATION)
    return bool(uid) and uid != (account.get("metadata") or {}).get("uid")


def needed_update(secret: dict[str, Any], account: dict[str, Any], *, key: ec.EllipticCurvePrivateKey,
                  root_ca: str | None) -> dict[str, Any] | None:
    """generateTokenIfNeeded: the Secret with what it lacks (its token, ca.crt when a root CA is known and
    it differs, its namespace, the account's uid annotation), or None when it lacks nothing. A token
    already there is kept (the controller never re-signs a Secret's token)."""
    meta = secret.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    data = dict(secret.get("data") or {})
    annotations = dict(meta.get("annotations") or {})
    account_meta = account.get("metadata") or {}
    changed = False
    if root_ca is not None and data.get("ca.crt") != _b64(root_ca):
        data["ca.crt"] = _b64(root_ca)
        changed = True
    if data.get("namespace") != _b64(namespace):
        data["namespace"] = _b64(namespace)
        changed = True
    if not data.get("token"):
        claims = satokenkey.legacy_claims(namespace, account=str(account_meta.get("name") or ""),
                                          account_uid=str(account_meta.get("uid") or ""), secret=name)
        data["token"] = _b64(satokenkey.sign(key, claims))
        annotations[NAME_ANNOTATION] = str(account_meta.get("name") or "")
        annotations[UID_ANNOTATION] = str(account_meta.get("uid") or "")
        changed = True
    if not changed:
        return None
    return {**secret, "metadata": {**meta, "annotations": annotations}, "data": data}


class TokensController(QueueController):
    name = "tokens-controller"
    max_workers = 1

    def __init__(self, api: ApiClient, secrets: Informer[Secret], accounts: Informer[ServiceAccount], *,
                 key: ec.EllipticCurvePrivateKey, root_ca: str | None = None) -> None:
        self.api = api
        self.secrets = secrets
        self.accounts = accounts
        self.key = key
        self.root_ca = root_ca
        self.queue = WorkQueue(self.name)
        secrets.add_handler(self._on_secret)
        accounts.add_handler(self._on_account)

    def _on_secret(self, event: str, old: Secret | None, new: Secret | None) -> None:
        if new is not None and new.type == TOKEN_TYPE:
            self.queue.add(f"{new.metadata.namespace}/{new.metadata.name}")

    def _on_account(self, event: str, old: ServiceAccount | None, new: ServiceAccount | None) -> None:
        # serviceAccountDeleted: its token Secrets go (each is looked at again; the account is gone).
        if new is None and old is not None:
            for secret in self.secrets.items():
                annotations = secret.metadata.annotations or {}
                if (secret.type == TOKEN_TYPE and secret.metadata.namespace == old.metadata.namespace
                        and annotations.get(NAME_ANNOTATION) == old.metadata.name):
                    self.queue.add(f"{secret.metadata.namespace}/{secret.metadata.name}")

    async def _account(self, namespace: str, name: str) -> dict[str, Any] | None:
        """getServiceAccount: the cache first, then a live read (the cache may not have seen a new one)."""
        cached = self.accounts.get(f"{namespace}/{name}")
        if cached is not None:
            return cached.to_dict()
        try:
            live: dict[str, Any] = await self.api.request("GET", kinds.SERVICEACCOUNTS.path(namespace, name))
        except NotFound:
            return None
        return live

    async def reconcile(self, key: str) -> None:
        namespace, _, name = key.partition("/")
        try:
            secret: dict[str, Any] = await self.api.request("GET", kinds.SECRETS.path(namespace, name))
        except NotFound:
            return
        if secret.get("type") != TOKEN_TYPE:
            return
        account_name = ((secret.get("metadata") or {}).get("annotations") or {}).get(NAME_ANNOTATION)
        if not account_name:
            return  # the API server's validation requires it; nothing to fill
        account = await self._account(namespace, str(account_name))
        if references_gone_account(secret, account):
            uid = (secret.get("metadata") or {}).get("uid")
            try:
                await self.api.delete(kinds.SECRETS, name, namespace, uid=str(uid) if uid else None)
                log.info("tokens: deleted %s/%s (service account %s is gone)", namespace, name, account_name)
            except (NotFound, Conflict):
                pass
            return
        assert account is not None
        updated = needed_update(secret, account, key=self.key, root_ca=self.root_ca)
        if updated is None:
            return
        try:
            await self.api.request("PUT", kinds.SECRETS.path(namespace, name), body=updated)
            log.info("tokens: filled %s/%s for service account %s", namespace, name, account_name)
        except Conflict:
            self.queue.add(key)  # changed meanwhile: look again
        except NotFound:
            return

    def caches(self) -> Sequence[Informer[Any]]:
        return (self.secrets, self.accounts)

    def initial_keys(self) -> Iterable[str]:
        return [f"{secret.metadata.namespace}/{secret.metadata.name}" for secret in self.secrets.items()
                if secret.type == TOKEN_TYPE]
