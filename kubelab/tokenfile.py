"""Static bearer tokens: kube-apiserver's --token-auth-file, read and written.

The file is CSV, one user per record: `token,user,uid` and an optional fourth column of groups, quoted
when there are several: `31ada4fd-adec,alice,1001,"group1,group2"`. As in kube-apiserver
(k8s.io/apiserver/pkg/authentication/token/tokenfile): records with fewer than three columns make the
whole file invalid; columns past the fourth are ignored; a record with an empty token is skipped; when
a token appears twice, the later record wins; blank lines are skipped. There is no comment syntax
upstream (Go's csv reader is used without one), so neither is there here: a line starting with `#` is
a record like any other, and is refused if it has fewer than three columns.

The API server reads the file (`apiserver/auth.py`); `kubelab up --token-auth-file` also writes tokens
for its own components into it (`ensure_component_tokens`).
"""

from __future__ import annotations

import csv
import io
import logging
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

NODE_USER_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"
MASTERS_GROUP = "system:masters"
ADMIN_USER = "kubelab-admin"
SCHEDULER_USER = "system:kube-scheduler"
CONTROLLERS_USER = "system:kube-controller-manager"
DNS_USER = "system:kube-dns"
# kube-proxy's user (user.KubeProxy), bound to system:node-proxier by kube's bootstrap policy; kube-up's
# known_tokens.csv gives kube-proxy a token for it, as `kubelab up` does its shared proxy informers.
PROXY_USER = "system:kube-proxy"


class TokenFileError(ValueError):
    """The token file cannot be used (kube-apiserver refuses to start on the same files)."""


@dataclass(frozen=True)
class UserInfo:
    """Who a request comes from (user.DefaultInfo)."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    # user.Info's Extra, as (key, values) pairs: only impersonation sets it (Impersonate-Extra-<key>).
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass
class TokenRecord:
    token: str
    user: UserInfo


def parse(text: str, path: str = "token file") -> dict[str, UserInfo]:
    """token -> user, as tokenfile.NewCSV reads the file. Raises TokenFileError. Pure."""
    tokens: dict[str, UserInfo] = {}
    for number, record in enumerate(_records(text, path), start=1):
        if not record.token:
            log.warning("empty token has been found in token file '%s', record number '%d'", path, number)
            continue
        if record.token in tokens:
            log.warning("duplicate token has been found in token file '%s', record number '%d'", path, number)
        tokens[record.token] = record.user
    return tokens


def _records(text: str, path: str) -> list[TokenRecord]:
    records = []
    try:
        rows = list(csv.reader(io.StringIO(text), strict=True))
    except csv.Error as exc:
        raise TokenFileError(f"token file '{path}': {exc}") from exc
    for row in rows:
        if not row:  # a blank line (Go's csv reader skips them too)
            continue
        if len(row) < 3:
            raise TokenFileError(f"token file '{path}' must have at least 3 columns (token, user name, user uid), "
                                 f"found {len(row)}")
        # strings.Split(record[3], ","): upstream keeps an empty group name; it can match nothing, so
        # it is dropped here.
        groups = tuple(g for g in row[3].split(",") if g) if len(row) >= 4 else ()
        records.append(TokenRecord(row[0], UserInfo(row[1], row[2], groups)))
    return records


def load(path: str | os.PathLike[str]) -> dict[str, UserInfo]:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise TokenFileError(f"cannot read token file '{path}': {exc.strerror or exc}") from exc
    return parse(text, str(path))


def read_token(path: str | os.PathLike[str]) -> str:
    """A bearer token kept in a file of its own (`--token-file`): its content, surrounding space stripped."""
    try:
        token = Path(path).read_text().strip()
    except OSError as exc:
        raise TokenFileError(f"cannot read token file '{path}': {exc.strerror or exc}") from exc
    if not token or any(c.isspace() for c in token):
        raise TokenFileError(f"token file '{path}' must hold one token and nothing else")
    return token


def make_private(path: Path) -> None:
    """chmod 0600 a token file that its group or others may read or write, and say so in one line."""
    mode = path.stat().st_mode & 0o777
    if not mode & 0o077:
        return
    try:
        path.chmod(0o600)
    except OSError as exc:  # not its owner: say what is wrong, and go on as kube-apiserver would
        log.warning("token file %s is mode %04o, readable by others, and cannot be made 0600: %s", path, mode,
                    exc.strerror or exc)
        return
    log.warning("token file %s was mode %04o: made it 0600, as it holds bearer tokens", path, mode)


# --- kubelab up's own components -------------------------------------------------------------------

def node_user(node: str) -> UserInfo:
    return UserInfo(NODE_USER_PREFIX + node, NODE_USER_PREFIX + node, (NODES_GROUP,))


@dataclass
class ComponentTokens:
    """The tokens `kubelab up` gives its components and writes into the kubeconfig."""

    admin: str
    scheduler: str
    controllers: str
    dns: str
    proxy: str  # system:kube-proxy's: the Service/EndpointSlice/ServiceCIDR informers every node's agent shares
    nodes: dict[str, str] = field(default_factory=dict)

    def for_component(self, agent: str) -> str:
        """The token of one of `kubelab up`'s API clients, by its agent name (`kubelet-node-1`, ...)."""
        for prefix in ("kubelet-", "proxy-"):
            if agent.startswith(prefix) and agent[len(prefix):] in self.nodes:
                return self.nodes[agent[len(prefix):]]
        return {"scheduler": self.scheduler, "controllers": self.controllers, "dns": self.dns,
                "proxy": self.proxy}.get(agent, self.admin)


def ensure_component_tokens(path: Path, nodes: list[str]) -> ComponentTokens:
    """Tokens for the admin (the kubeconfig's user), the scheduler, the controllers, the DNS, the proxy
    informers every node's agent shares (system:kube-proxy) and each node, taken from `path` where it has
    them and generated (and appended to it) where it does not. The admin is
    the first user in group system:masters, else `kubelab-admin`. A missing file is created (0600); one
    that others may read is made 0600, with a line that says so: it holds the admin's bearer token."""
    text = path.read_text() if path.exists() else ""
    if path.exists():
        make_private(path)
    records = [r for r in _records(text, str(path)) if r.token]
    parse(text, str(path))  # the same checks the API server will make
    by_user: dict[str, str] = {}
    for record in records:
        by_user.setdefault(record.user.name, record.token)
    admin = next((r.token for r in records if MASTERS_GROUP in r.user.groups), None) or by_user.get(ADMIN_USER)
    added: list[TokenRecord] = []

    def token_for(user: UserInfo) -> str:
        token = by_user.get(user.name)
        if token is None:
            token = by_user[user.name] = secrets.token_urlsafe(32)
            added.append(TokenRecord(token, user))
        return token

    if admin is None:
        admin = token_for(UserInfo(ADMIN_USER, ADMIN_USER, (MASTERS_GROUP,)))
    tokens = ComponentTokens(admin=admin, scheduler=token_for(UserInfo(SCHEDULER_USER, SCHEDULER_USER)),
                             controllers=token_for(UserInfo(CONTROLLERS_USER, CONTROLLERS_USER)),
                             dns=token_for(UserInfo(DNS_USER, DNS_USER)),
                             proxy=token_for(UserInfo(PROXY_USER, PROXY_USER)),
                             nodes={node: token_for(node_user(node)) for node in nodes})
    if added:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        for record in added:
            row = [record.token, record.user.name, record.user.uid]
            if record.user.groups:
                row.append(",".join(record.user.groups))
            writer.writerow(row)
        prefix = "" if not text or text.endswith("\n") else "\n"
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a") as handle:
            handle.write(prefix + out.getvalue())
    return tokens
