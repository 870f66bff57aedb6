"""The restart back-off of `kubelab up`'s children (launcher/supervision.RestartBackoff): the
kubelet's for a crashing container (first restart at once, then 10 s doubling to 300 s, forgotten 10
minutes after the last start), and the child's command line with the socket it is handed."""

from __future__ import annotations

import pytest

from launcher import apiservers, supervision
from launcher.build import ApiServerOptions
from launcher.cli import build_parser


def waits(exits: list[float]) -> list[float]:
    backoff = supervision.RestartBackoff()
    return [backoff.delay(at) for at in exits]


@pytest.mark.parametrize(("exits", "expected"), [
    pytest.param([100.0], [0.0], id="the first exit restarts at once"),
    pytest.param([100.0, 101.0, 112.0, 133.0], [0.0, 10.0, 20.0, 40.0], id="then 10 s doubling"),
    pytest.param([float(t) for t in range(0, 7000, 700)], [0.0] * 10,
                 id="each exit more than 10 min after the last start is a first one"),
    pytest.param([0.0, 1.0, 12.0, 33.0, 74.0, 155.0, 316.0, 617.0, 918.0],
                 [0.0, 10.0, 20.0, 40.0, 80.0, 160.0, 300.0, 300.0, 300.0], id="capped at 300 s"),
    pytest.param([0.0, 1.0, 611.0], [0.0, 10.0, 20.0], id="600 s after its last start (at 11) is not yet 10 min"),
    pytest.param([0.0, 1.0, 612.0, 613.0], [0.0, 10.0, 0.0, 10.0],
                 id="reset once it ran more than 10 min since its last start, then 10 s again"),
])
def test_restart_waits_are_the_kubelets(exits: list[float], expected: list[float]) -> None:
    assert waits(exits) == expected


def test_argv_hands_the_socket_over_and_kubelab_apiserver_takes_it() -> None:
    argv = apiservers.argv(ApiServerOptions(("http://127.0.0.1:2379",), listen="127.0.0.1:8080"), 2, 8081, "host",
                           listen_fd=7)
    args = build_parser().parse_args(argv[3:])
    assert (args.listen, args.listen_fd) == ("127.0.0.1:8081", 7)
    assert "--listen-fd" not in apiservers.argv(ApiServerOptions(("http://e:2379",)), 2, 8081, "host")


@pytest.mark.parametrize("value", ["0", "2", "-1", "x", ""])
def test_listen_fd_must_name_an_inherited_descriptor(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["apiserver", "--etcd-servers", "http://e:2379", "--listen-fd", value])
    assert "--listen-fd" in capsys.readouterr().err
