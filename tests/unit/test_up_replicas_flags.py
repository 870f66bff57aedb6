"""`kubelab up --apiservers N`'s further API servers: their ports and command lines (launcher/apiservers.py),
and the argparse refusals of --apiservers/--etcd-members."""

from __future__ import annotations

import pytest

from launcher import apiservers
from launcher.cli import build_parser


def test_ports_follow_the_first() -> None:
    assert apiservers.ports_after(8080, 1) == []
    assert apiservers.ports_after(8080, 3) == [8081, 8082]


def test_argv_carries_the_first_servers_settings() -> None:
    flags = apiservers.Flags(("https://127.0.0.1:1", "https://127.0.0.1:2"), host="127.0.0.1",
                             advertise_address="127.0.0.1", authorization_modes=("Node", "RBAC"), event_ttl=3600,
                             service_account_key_file="/d/sa.key", token_auth_file="/d/tokens.csv",
                             tls_cert_file="/d/apiserver.crt", tls_key_file="/d/apiserver.key", ca_file="/d/ca.crt",
                             etcd_tls=("/d/ca.crt", "/d/etcd-client.crt", "/d/etcd-client.key"),
                             kubelet_client_tls=("/d/k.crt", "/d/k.key", "/d/ca.crt"))
    argv = apiservers.argv(flags, 2, 8081, "host")
    pairs = dict(zip(argv[4::2], argv[5::2], strict=False))
    assert argv[2:4] == ["kubelab", "apiserver"]
    assert pairs["--etcd-servers"] == "https://127.0.0.1:1,https://127.0.0.1:2"
    assert pairs["--listen"] == "127.0.0.1:8081"
    assert pairs["--identity-hostname"] == "host-apiserver-2"
    assert pairs["--endpoint-reconciler-type"] == "lease"
    assert pairs["--token-auth-file"] == "/d/tokens.csv" and pairs["--etcd-keyfile"] == "/d/etcd-client.key"
    assert pairs["--kubelet-client-certificate"] == "/d/k.crt"
    build_parser().parse_args(argv[3:])  # every flag is one `kubelab apiserver` takes


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
