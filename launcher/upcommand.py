"""`kubelab up`: its flags turned into runner.UpOptions, the cluster run until Ctrl-C (runner.py), and the
message that tells the user what to type next."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubelab.gctune import tune_for_long_running

from . import defaults
from .flagvalues import optional_path, server_list, serving_options, unreadable_etcd_files, warn_if_open

if TYPE_CHECKING:  # runner.py (and its PKI and etcd modules) is imported when `up` runs, not by every command
    from .runner import UpOptions


def up_options(args: argparse.Namespace) -> UpOptions:
    """`kubelab up`'s flags as runner.UpOptions (the dataplane: netns as root, render otherwise)."""
    from .runner import UpOptions

    dataplane = args.dataplane or ("netns" if os.geteuid() == 0 else "render")
    return UpOptions(nodes=args.nodes, listen=args.listen, etcd_servers=server_list(args.etcd_servers),
                     data_dir=Path(args.data_dir), dataplane=dataplane, min_sync_period=args.min_sync_period,
                     delta_sync=args.delta_sync, proxy_mode=args.proxy_mode, node_cpu=args.node_cpu,
                     node_memory=args.node_memory, node_max_pods=args.node_max_pods,
                     node_monitor_grace_period=args.node_monitor_grace_period, lb_pool=args.lb_pool or None,
                     event_ttl=args.event_ttl, serving=serving_options(args),
                     token_auth_file=Path(args.token_auth_file) if args.token_auth_file else None,
                     authorization_modes=args.authorization_mode, etcd_cafile=optional_path(args.etcd_cafile),
                     etcd_certfile=optional_path(args.etcd_certfile), etcd_keyfile=optional_path(args.etcd_keyfile),
                     apiservers=args.apiservers, etcd_members=args.etcd_members,
                     one_process=args.one_process)


def cmd_up(args: argparse.Namespace) -> int:
    from .runner import exit_now, run_until_interrupted, up

    options = up_options(args)
    dataplane = options.dataplane
    if unreadable_etcd_files(args, "up"):
        return 2
    warn_if_open(args.listen, args.token_auth_file)
    data_dir = Path(args.data_dir)

    def ready(state: dict[str, Any]) -> None:
        kubeconfig_path = state["kubeconfig"]
        # The command as the user typed it (`.venv/bin/kubelab` from `make up`), and --data-dir only if needed.
        kubelab = sys.argv[0] if os.path.basename(sys.argv[0]) == "kubelab" else "kubelab"
        at = "" if data_dir == Path(defaults.DATA_DIR) else f" --data-dir {data_dir}"
        example = Path("examples/clusterip-svc.yaml")
        if example.exists():  # run from the repository, as the README's tour does
            target = "$(kubectl get svc clusterip-svc -o jsonpath='{.spec.clusterIP}'):5555"
            first = (f"  kubectl apply -f {example}      # a ClusterIP Service and three pods\n"
                     "  kubectl get pods,endpoints -o wide\n"
                     f"  {kubelab} iptables{at} -t nat node-1 | grep clusterip-svc      # node-1's proxy rules\n")
        else:
            target = "$(kubectl get svc web -o jsonpath='{.spec.clusterIP}'):5555"
            first = ("  kubectl create deployment web --image=nginx --replicas=3 --port=8080\n"
                     "  kubectl expose deployment web --port=5555 --target-port=8080\n"
                     f"  {kubelab} iptables{at} -t nat node-1 | grep default/web      # node-1's proxy rules\n")
        print(f"\nkubelab is up in {state.get('startup', '?')}: {args.nodes} nodes, dataplane {dataplane}, "
              f"API at {state['server']}\n"
              f"  kubeconfig: {kubeconfig_path}\n"
              f"  export KUBECONFIG={kubeconfig_path}\n"
              "Next, in another terminal:\n"
              "  kubectl get nodes -o wide\n" + first
              + (f"  {kubelab} exec{at} node-1 -- curl -s http://{target}      # real packets\n"
                 if dataplane == "netns" else "")
              + f"  {kubelab} status{at}\n"
              + (f"Token authentication is on ({args.token_auth_file}): the API serves HTTPS with a lab CA "
                 f"({state.get('ca')}), and the kubeconfig holds that CA and the admin's token.\n"
                 if args.token_auth_file else "")
              + "Ctrl-C stops everything and removes what kubelab created.\n", flush=True)

    from kubelab.tokenfile import TokenFileError

    tune_for_long_running()
    try:
        code = run_until_interrupted(lambda: up(options, ready=ready))
    except (PermissionError, RuntimeError, FileNotFoundError, TokenFileError) as exc:
        print(f"kubelab up: {exc}", file=sys.stderr)
        code = 1
    exit_now(code)  # everything `up` made is gone by now
