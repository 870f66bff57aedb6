"""`kubelab up --apiservers N`'s further API servers: their ports and command lines (launcher/apiservers.py),
and the argparse refusals of --apiservers/--etcd-members."""

from __future__ import annotations

import dataclasses

import pytest

from apiserver.serving import ServingOptions
from launcher import apiservers
from launcher.build import ApiServerOptions
from launcher.cli import build_parser
from launcher.components import apiserver_options


def test_ports_follow_the_first() -> None:
    assert apiservers.ports_after(8080, 1) == []
    assert apiservers.ports_after(8080, 3) == [8081, 8082]


def test_argv_carries_the_first_servers_settings() -> None:
    options = ApiServerOptions(("https://127.0.0.1:1", "https://127.0.0.1:2"), listen="127.0.0.1:8080",
                               advertise_address="127.0.0.1", authorization_modes=("Node", "RBAC"), event_ttl=3600,
                               service_account_signing_key_file="/d/sa.key", token_auth_file="/d/tokens.csv",
                               tls_cert_file="/d/apiserver.crt", tls_private_key_file="/d/apiserver.key",
                               etcd_cafile="/d/ca.crt", etcd_certfile="/d/etcd-client.crt",
                               etcd_keyfile="/d/etcd-client.key", kubelet_client_certificate="/d/k.crt",
                               kubelet_client_key="/d/k.key", kubelet_certificate_authority="/d/ca.crt")
    argv = apiservers.argv(options, 2, 8081, "host")
    pairs = dict(zip(argv[4::2], argv[5::2], strict=False))
    assert argv[2:4] == ["kubelab", "apiserver"]
    assert pairs["--etcd-servers"] == "https://127.0.0.1:1,https://127.0.0.1:2"
    assert pairs["--listen"] == "127.0.0.1:8081"
    assert pairs["--identity-hostname"] == "host-apiserver-2"
    assert pairs["--endpoint-reconciler-type"] == "lease"
    assert pairs["--token-auth-file"] == "/d/tokens.csv" and pairs["--etcd-keyfile"] == "/d/etcd-client.key"
    assert pairs["--kubelet-client-certificate"] == "/d/k.crt"
    build_parser().parse_args(argv[3:])  # every flag is one `kubelab apiserver` takes


def test_argv_is_what_kubelab_apiserver_reads_back() -> None:
    """One description of the API server's settings: every setting that has a flag, written by argv and
    parsed by `kubelab apiserver`'s own flags, comes back as it was (a flag added to one side only fails here)."""
    options = ApiServerOptions(
        ("https://127.0.0.1:1", "https://127.0.0.1:2"), listen="0.0.0.0:8081", advertise_address="10.0.0.5",
        tls_cert_file="/d/apiserver.crt", tls_private_key_file="/d/apiserver.key", token_auth_file="/d/tokens.csv",
        authorization_modes=("RBAC", "AlwaysAllow"), event_ttl=90, service_account_signing_key_file="/d/sa.key",
        disable_admission_plugins=("ServiceAccount",),
        serving=ServingOptions(request_timeout=30.0, max_requests_inflight=7, max_mutating_requests_inflight=0),
        etcd_cafile="/d/ca.crt", etcd_certfile="/d/etcd.crt", etcd_keyfile="/d/etcd.key",
        kubelet_client_certificate="/d/k.crt", kubelet_client_key="/d/k.key", kubelet_certificate_authority="/d/kca.crt",
        endpoint_reconciler_type="none", identity_hostname="host-apiserver-3")
    unset = {f.name for f in dataclasses.fields(ApiServerOptions)} - {"advertise_port", "kubelet_netns", "kubelet_address"}
    assert all(getattr(options, name) != getattr(ApiServerOptions(()), name) for name in unset - {"etcd_servers"})
    read_back = apiserver_options(build_parser().parse_args(apiservers.argv(options, 3, 8081, "host")[3:]))
    assert read_back == options
    assert apiserver_options(build_parser().parse_args(["apiserver", "--etcd-servers", "http://e:2379"])) == \
        ApiServerOptions(("http://e:2379",))
    with pytest.raises(ValueError):
        apiservers.argv(dataclasses.replace(options, kubelet_address="127.0.0.1"), 2, 8081, "host")


@pytest.mark.parametrize("value", ["0", "-1", "x", "1.5", ""])
def test_counts_must_be_positive(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    for flag in ("--apiservers", "--etcd-members"):
        with pytest.raises(SystemExit) as exc:
            build_parser().parse_args(["up", flag, value])
        assert exc.value.code == 2
        assert "not a positive integer" in capsys.readouterr().err


def test_defaults_stay_one_and_one() -> None:
    args = build_parser().parse_args(["up"])
    assert (args.apiservers, args.etcd_members) == (1, 1)
