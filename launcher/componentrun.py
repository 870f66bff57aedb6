"""Running one component as a process of its own: its API client (and, for the scheduler and the
controllers, a leader elector with a client of its own and the write fence), its /metrics listener, and
the event loop it runs on until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kubelab.gctune import tune_for_long_running

from .flagvalues import bearer_token


def run_client_component(args: argparse.Namespace, make: Any, *, lease: str | None = None) -> int:
    """Run `make(api)` against --server; with a `lease` name (the scheduler, the controllers), `make(api,
    elector)`, the elector None under --leader-elect=false."""
    from kubelab.client import ApiClient
    from kubelab.tokenfile import TokenFileError

    from .runner import run_until_interrupted

    try:
        token = bearer_token(args)
    except TokenFileError as exc:
        print(f"kubelab {args.command}: {exc}", file=sys.stderr)
        return 2
    ca_file = getattr(args, "certificate_authority", None)
    if ca_file:
        import ssl

        try:
            ssl.create_default_context(cafile=ca_file)
        except (OSError, ssl.SSLError) as exc:
            print(f"kubelab {args.command}: --certificate-authority {ca_file}: {exc}", file=sys.stderr)
            return 2
    if lease is not None and args.leader_elect:
        from kubelab.leaderelection import config_errors

        problems = config_errors(args.leader_elect_lease_duration, args.leader_elect_renew_deadline,
                                 args.leader_elect_retry_period)
        if problems:
            print(f"kubelab {args.command}: --leader-elect-*: {'; '.join(problems)}", file=sys.stderr)
            return 2

    tune_for_long_running()

    async def main() -> None:
        # A node's user agent names the node, so `kubelab trace` tells its watch deliveries apart.
        agent = f"kubelab-{args.command}" + (f"-{args.name}" if args.command == "node" else "")
        elector = None
        closing = []
        if lease is not None and args.leader_elect:
            from kubelab import leaderelection as le

            # The Lease gets a client of its own, as kube's components give leader election its own REST
            # config ("leader-election" in its user agent, a timeout of half the renew deadline): the
            # component's client has the elector's check as its write fence, which the Lease's own
            # writes must not pass through, and a Lease write stuck behind the component's requests
            # would cost the lease.
            election_api = ApiClient(args.server, token=token, user_agent=f"{agent}/leader-election",
                                     ca_file=ca_file, timeout=args.leader_elect_renew_deadline / 2)
            closing.append(election_api)
            elector = le.LeaderElector(election_api, le.Config(
                args.leader_elect_resource_namespace, args.leader_elect_resource_name, le.new_identity(),
                lease_duration=args.leader_elect_lease_duration, renew_deadline=args.leader_elect_renew_deadline,
                retry_period=args.leader_elect_retry_period))
        api = ApiClient(args.server, token=token, user_agent=agent, fast_requests=args.command == "scheduler",
                        ca_file=ca_file, write_fence=elector.check if elector is not None else None)
        closing.append(api)
        try:
            await (make(api, elector) if lease is not None else make(api))
        finally:
            for client in closing:
                await client.close()

    # The scheduler and the controllers only talk to the API: uvloop's loop costs them less per request
    # and per watch event (scheduler CPU per scheduled pod at 5000 nodes: 0.67 -> 0.59 ms).
    return run_until_interrupted(main, fast_loop=args.command in ("scheduler", "controllers"))


async def lead_or_run(elector: Any, lead: Any) -> None:
    """`lead()` whenever this replica holds the Lease (a fresh call each term), or at once without election."""
    if elector is None:
        await lead()
    else:
        await elector.campaign(lead)


def metrics_server(args: argparse.Namespace, *, registry: Any = None, exposition: Any = None) -> Any:
    """The component's --metrics-bind-address listener (None when empty)."""
    from kubelab.metricsserver import MetricsServer, split_bind_address

    if not args.metrics_bind_address:
        return None
    host, port = split_bind_address(args.metrics_bind_address)
    return MetricsServer(host, port, registry=registry, exposition=exposition, name=args.command)


def check_bind_address(args: argparse.Namespace) -> bool:
    from kubelab.metricsserver import split_bind_address

    try:
        if args.metrics_bind_address:
            split_bind_address(args.metrics_bind_address)
    except ValueError as exc:
        print(f"kubelab {args.command}: --metrics-bind-address: {exc}", file=sys.stderr)
        return False
    return True
