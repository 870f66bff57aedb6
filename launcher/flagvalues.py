"""What the component commands and `kubelab up` make of their parsed flags: server lists, the API server's
serving options, the bearer token a component presents, and the checks that refuse unreadable files in
one line before anything starts."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any


def server_list(text: str | None) -> list[str]:
    return [s.strip() for s in (text or "").split(",") if s.strip()]


def optional_path(text: str | None) -> Path | None:
    return Path(text) if text else None


def unreadable_etcd_files(args: argparse.Namespace, command: str) -> bool:
    """--etcd-cafile/--etcd-certfile/--etcd-keyfile that cannot be read: said in one line each. The
    certificate and its key go together."""
    if bool(args.etcd_certfile) != bool(args.etcd_keyfile):
        print(f"kubelab {command}: --etcd-certfile and --etcd-keyfile go together", file=sys.stderr)
        return True
    unreadable = [p for p in (args.etcd_cafile, args.etcd_certfile, args.etcd_keyfile) if p and not os.access(p, os.R_OK)]
    for path in unreadable:
        print(f"kubelab {command}: cannot read {path}", file=sys.stderr)
    return bool(unreadable)


def serving_options(args: argparse.Namespace) -> Any:
    from apiserver.serving import ServingOptions

    return ServingOptions(request_timeout=args.request_timeout, max_requests_inflight=args.max_requests_inflight,
                          max_mutating_requests_inflight=args.max_mutating_requests_inflight)


def bearer_token(args: argparse.Namespace) -> str | None:
    """The bearer token a component sends: --token, or the content of --token-file."""
    from kubelab.tokenfile import read_token

    if getattr(args, "token_file", None):
        return read_token(args.token_file)
    return getattr(args, "token", None) or None


def warn_if_open(listen: str, token_auth_file: str | None) -> None:
    """The API binds to loopback unless told otherwise; told otherwise without tokens, say what it means."""
    from .runner import split_listen

    host, _ = split_listen(listen)
    if not token_auth_file and host not in ("127.0.0.1", "localhost", "::1"):
        logging.getLogger("kubelab").warning(
            "the API server listens on %s without authentication: whoever reaches it is cluster-admin "
            "(give it --token-auth-file)", host)
