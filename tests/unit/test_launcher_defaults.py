"""One default per fact across the launcher: the flags of `kubelab up` give exactly runner.UpOptions' defaults,
the per-component commands give build.py's option defaults, and those agree with what each component takes
when nothing is said (kube's defaults, written in the component). A default changed in one place only fails
here instead of making `kubelab up` and `kubelab node|controllers|apiserver` quietly differ."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

import controllers
from apiserver import authz
from apiserver.app import Config
from apiserver.registry.events import DEFAULT_EVENT_TTL
from apiserver.serving import ServingOptions
from kubeletstub.node import NodeConfig
from launcher import defaults
from launcher.build import (
    ApiServerOptions,
    ControllersOptions,
    NodeOptions,
    SchedulerOptions,
    build_apiserver_config,
)
from launcher.cli import build_parser
from launcher.components import apiserver_options
from launcher.runner import UpOptions
from launcher.upcommand import up_options
from proxyagent import ProxyAgent
from scheduler import Scheduler


def parse(*argv: str) -> Any:
    return build_parser().parse_args(list(argv))


def default_of(func: Any, name: str) -> Any:
    return inspect.signature(func).parameters[name].default


def test_the_up_flags_give_up_options_defaults() -> None:
    given = up_options(parse("up", "--dataplane", "render"))
    expected = UpOptions(dataplane="render", serving=ServingOptions())
    assert dataclasses.asdict(given) == dataclasses.asdict(expected)


def test_node_flags_give_node_options_defaults_and_the_components_own() -> None:
    args = parse("node", "--name", "n1")
    options = NodeOptions(name="n1", ip="10.240.0.11", pod_cidr="10.244.1.0/24", data_dir=Path("."))
    assert (args.cpu, args.memory, args.max_pods) == (options.cpu, options.memory, options.max_pods)
    assert (args.min_sync_period, args.sync_period, args.proxy_mode, args.cluster_cidr) == (
        options.min_sync_period, options.sync_period, options.proxy_mode, options.cluster_cidr)
    assert (args.iptables_backend, args.delta_sync) == (options.iptables_backend, options.delta_sync)
    node = NodeConfig(name="n1", ip="10.240.0.11", pod_cidr="10.244.1.0/24")
    assert (options.cpu, options.memory, options.max_pods) == (node.cpu, node.memory, node.max_pods)
    assert options.min_sync_period == default_of(ProxyAgent, "min_sync_period")
    assert options.sync_period == default_of(ProxyAgent, "sync_period")
    assert options.proxy_mode == default_of(ProxyAgent, "proxy_mode")


def test_up_and_node_give_nodes_the_same_capacity() -> None:
    up, node = UpOptions(), parse("node", "--name", "n1")
    assert (up.node_cpu, up.node_memory, up.node_max_pods) == (node.cpu, node.memory, node.max_pods)
    assert (up.min_sync_period, up.proxy_mode) == (node.min_sync_period, node.proxy_mode)


def test_controller_flags_give_controllers_options_defaults_and_the_managers_own() -> None:
    args = parse("controllers")
    options = ControllersOptions()
    assert (args.node_monitor_grace_period, args.lb_pool, args.terminated_pod_gc_threshold) == (
        options.node_monitor_grace_period, options.lb_pool, options.terminated_pod_gc_threshold)
    for name in ("node_monitor_grace_period", "lb_pool", "terminated_pod_gc_threshold"):
        assert getattr(options, name) == default_of(controllers.run, name), name
    assert UpOptions().node_monitor_grace_period == options.node_monitor_grace_period
    assert UpOptions().lb_pool == options.lb_pool


def test_scheduler_flags_give_scheduler_options_default() -> None:
    assert parse("scheduler").scoring == SchedulerOptions().scoring == default_of(Scheduler, "strategy")


def test_apiserver_flags_give_the_api_servers_own_defaults() -> None:
    for command in (parse("apiserver", "--etcd-servers", "http://127.0.0.1:2379"), parse("up")):
        assert command.authorization_mode == authz.DEFAULT_MODES
        assert command.event_ttl == DEFAULT_EVENT_TTL == defaults.EVENT_TTL_SECONDS
    assert UpOptions().authorization_modes == authz.DEFAULT_MODES
    assert UpOptions().event_ttl == DEFAULT_EVENT_TTL


def test_apiserver_flags_build_the_config_the_api_server_has_by_default() -> None:
    """`kubelab apiserver` with nothing but its etcd builds exactly the Config the API server has when
    nothing is said (apiserver/defaults.py and Config's own defaults): no setting defaulted twice differently."""
    options = apiserver_options(parse("apiserver", "--etcd-servers", "http://127.0.0.1:2379"))
    assert options == ApiServerOptions(("http://127.0.0.1:2379",))
    assert build_apiserver_config(options) == Config(["http://127.0.0.1:2379"])
