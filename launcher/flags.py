"""The flags several commands share and the argparse types that check flag values at parse time (a bad value
is argparse's usage error, exit code 2, never a traceback later). Boolean and duration flags parse as kube's
components parse them (Go's strconv.ParseBool, Go durations)."""

from __future__ import annotations

import argparse

from kubelab import addressing

from . import defaults

AUTHORIZATION_MODE_HELP = ("with --token-auth-file, kube-apiserver's authorizers in order, comma-separated: Node, RBAC, "
                           f"AlwaysAllow, AlwaysDeny (default {defaults.AUTHORIZATION_MODE}, as kubeadm sets it; "
                           "AlwaysAllow makes every authenticated user a cluster-admin)")


def authorization_modes(text: str) -> tuple[str, ...]:
    from apiserver.authz import parse_modes

    try:
        return parse_modes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def etcd_tls_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--etcd-cafile", metavar="FILE", help="SSL Certificate Authority file used to secure etcd "
                                                         "communication (https --etcd-servers)")
    p.add_argument("--etcd-certfile", metavar="FILE", help="SSL certification file used to secure etcd communication")
    p.add_argument("--etcd-keyfile", metavar="FILE", help="SSL key file used to secure etcd communication")


# The API server's flags that `kubelab up` and `kubelab apiserver` both take: each defined once here (name,
# type, default, metavar); the two commands explain some of them in their own words, so the help is given.

def add_listen_flag(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--listen", type=host_port, default=defaults.LISTEN, help=help)


def add_token_auth_file_flag(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--token-auth-file", metavar="FILE", help=help)


def add_authorization_mode_flag(p: argparse.ArgumentParser) -> None:
    # The default is the parsed value itself (argparse converts only string defaults).
    p.add_argument("--authorization-mode", type=authorization_modes, default=defaults.AUTHORIZATION_MODES,
                   metavar="MODES", help=AUTHORIZATION_MODE_HELP)


def add_event_ttl_flag(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--event-ttl", type=event_ttl, default=defaults.EVENT_TTL_SECONDS, metavar="DURATION", help=help)


def add_serving_flags(p: argparse.ArgumentParser) -> None:
    """kube-apiserver's flags for the limits that keep one client from taking the server (apiserver/serving.py, flowcontrol.py)."""
    p.add_argument("--request-timeout", type=duration_seconds, default="1m0s", metavar="DURATION",
                   help="answer a request that is not a watch with 504 Timeout after this long (default 1m0s)")
    p.add_argument("--max-requests-inflight", type=non_negative, default=400, metavar="N",
                   help="at most N reads (get, list) at once, then 429 with Retry-After: 1; watches do not count "
                        "(default 400; 0: no limit)")
    p.add_argument("--max-mutating-requests-inflight", type=non_negative, default=200, metavar="N",
                   help="at most N writes at once, then 429 with Retry-After: 1 (default 200; 0: no limit)")


def duration_seconds(text: str) -> float:
    """A positive Go duration (`1m0s`, `90s`), in seconds."""
    from kubelab.timeutil import parse_duration

    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text}")
    return seconds


def non_negative(text: str) -> int:
    from kubelab.validation import is_ascii_digits

    if not is_ascii_digits(text):
        raise argparse.ArgumentTypeError(f"not a non-negative integer: {text!r}")
    return int(text)


def positive(text: str) -> int:
    from kubelab.validation import is_ascii_digits

    if not is_ascii_digits(text) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a positive integer: {text!r}")
    return int(text)


def descriptor(text: str) -> int:
    """--listen-fd: an inherited file descriptor's number; 0-2 are the standard streams, never a socket here."""
    from kubelab.validation import is_ascii_digits

    if not is_ascii_digits(text) or int(text) < 3:
        raise argparse.ArgumentTypeError(f"not a file descriptor of an inherited socket (3 or more): {text!r}")
    return int(text)


def event_ttl(text: str) -> int:
    """--event-ttl: a duration, kept as whole seconds (etcd leases are), at least one."""
    return max(1, round(duration_seconds(text)))


def host_port(text: str) -> str:
    """argparse type of --listen: refused at parse time with argparse's usage error, not a traceback later."""
    try:
        addressing.split_host_port(text, default_host="")
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT (a port 0-65535)") from None
    return text


def token_args(p: argparse.ArgumentParser) -> None:
    who = p.add_mutually_exclusive_group()
    who.add_argument("--token", help="bearer token to present to the API server (one of its --token-auth-file)")
    who.add_argument("--token-file", metavar="PATH", help="read the bearer token from this file")
    p.add_argument("--certificate-authority", metavar="FILE",
                   help="check an https --server's certificate against this CA bundle (default: the system's)")


def flag_bool(text: str) -> bool:
    """Go's strconv.ParseBool, as kube's components take boolean flags (--flag=false)."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {text!r}")


def duration(text: str) -> float:
    """A Go duration flag (`15s`, `1m`, or bare seconds)."""
    from kubelab.timeutil import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def leader_election_args(p: argparse.ArgumentParser, lease: str) -> None:
    """kube-scheduler's and kube-controller-manager's --leader-elect-* flags (component-base's
    LeaderElectionConfiguration), with their defaults."""
    from kubelab import leaderelection as le

    p.add_argument("--leader-elect", type=flag_bool, nargs="?", const=True, default=True, metavar="BOOL",
                   help="campaign for a Lease and act only while holding it, so several replicas can run "
                        "(default true, as kube; --leader-elect=false acts at once, alone)")
    p.add_argument("--leader-elect-lease-duration", type=duration, default=le.DEFAULT_LEASE_DURATION,
                   metavar="DURATION", help="how long a standby waits, after the Lease last changed, before "
                                            "taking it over (default 15s)")
    p.add_argument("--leader-elect-renew-deadline", type=duration, default=le.DEFAULT_RENEW_DEADLINE,
                   metavar="DURATION", help="how long the leader keeps acting without a successful renewal "
                                            "(default 10s; less than the lease duration)")
    p.add_argument("--leader-elect-retry-period", type=duration, default=le.DEFAULT_RETRY_PERIOD,
                   metavar="DURATION", help="between tries to acquire or renew (default 2s)")
    p.add_argument("--leader-elect-resource-lock", choices=["leases"], default="leases",
                   help="the lock's kind (kube's only one left: leases)")
    p.add_argument("--leader-elect-resource-name", default=lease, metavar="NAME",
                   help=f"the Lease's name (default {lease})")
    p.add_argument("--leader-elect-resource-namespace", default=le.LEASE_NAMESPACE, metavar="NAMESPACE",
                   help=f"the Lease's namespace (default {le.LEASE_NAMESPACE})")


SERVER_HELP = ("API server URL, or several comma-separated: requests go to one at a time and move to the next "
               "when it cannot be reached; watches resume there from their last resourceVersion")


# --metrics-bind-address defaults (metricsserver.py): the secure ports of kube-scheduler and
# kube-controller-manager, served here as plain HTTP on loopback.
SCHEDULER_BIND_ADDRESS = "127.0.0.1:10259"


CONTROLLERS_BIND_ADDRESS = "127.0.0.1:10257"


DELTA_SYNC_HELP = ("partial syncs leave out KUBE-SERVICES, KUBE-NODEPORTS and the filter chains when their rules are "
                   "what the last sync wrote (kube-proxy always rewrites them): the same rules end up in the kernel, "
                   "and a one-Service change at 10k Services restores tens of rules, not 10k. A hand-edited shared "
                   "chain is then repaired at the next full sync, not the next partial one")


PROXY_MODE_HELP = ("the proxy agents' mode, as kube-proxy's --proxy-mode: iptables (the default, as kube-proxy's) "
                   "or nftables (one `nft -f` transaction per sync into table ip kube-proxy, verdict maps instead "
                   "of a rule per Service; see `kubelab nftables NODE`)")
