"""`kubelab proxy render`: manifests in, kube-proxy's iptables-restore payload out (the CLI
contract). Pure: no root, no cluster. Payloads are compared whole, in kube-proxy's canonical order.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from proxyobjects import ep, port, service_dict, slice_dict

from launcher.cli import main
from proxyagent.canonical import canonical_sort, check_consistency
from proxyagent.nftables import apply_transaction

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "examples" / "seed-rules.yaml"


def golden(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["proxy", "render", *args])
    out, err = capsys.readouterr()
    return code, out, err


# The seed's Service and three endpoints, on node-1 with the lab's pod CIDR: the rules the first
# article shows, in canonical order.
SEED_GOLDEN = golden("""
    *filter
    :KUBE-NODEPORTS - [0:0]
    :KUBE-SERVICES - [0:0]
    :KUBE-EXTERNAL-SERVICES - [0:0]
    :KUBE-FIREWALL - [0:0]
    :KUBE-FORWARD - [0:0]
    :KUBE-PROXY-FIREWALL - [0:0]
    -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
    -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
    -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
    -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
    COMMIT
    *nat
    :KUBE-NODEPORTS - [0:0]
    :KUBE-SERVICES - [0:0]
    :KUBE-MARK-MASQ - [0:0]
    :KUBE-POSTROUTING - [0:0]
    :KUBE-SEP-6KQQ2UDBB66ZDPVB - [0:0]
    :KUBE-SEP-LBPDPRON455IOEAA - [0:0]
    :KUBE-SEP-OYURAKJ4R7SNIIE4 - [0:0]
    :KUBE-SVC-M6YY5X4D5LM4YLQC - [0:0]
    -A KUBE-SERVICES -m comment --comment "default/clusterip-svc cluster IP" -m tcp -p tcp -d 10.96.100.100 --dport 5555 -j KUBE-SVC-M6YY5X4D5LM4YLQC
    -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
    -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
    -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
    -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
    -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
    -A KUBE-SEP-6KQQ2UDBB66ZDPVB -m comment --comment default/clusterip-svc -s 10.244.1.3 -j KUBE-MARK-MASQ
    -A KUBE-SEP-6KQQ2UDBB66ZDPVB -m comment --comment default/clusterip-svc -m tcp -p tcp -j DNAT --to-destination 10.244.1.3:5000
    -A KUBE-SEP-LBPDPRON455IOEAA -m comment --comment default/clusterip-svc -s 10.244.2.3 -j KUBE-MARK-MASQ
    -A KUBE-SEP-LBPDPRON455IOEAA -m comment --comment default/clusterip-svc -m tcp -p tcp -j DNAT --to-destination 10.244.2.3:5000
    -A KUBE-SEP-OYURAKJ4R7SNIIE4 -m comment --comment default/clusterip-svc -s 10.244.1.4 -j KUBE-MARK-MASQ
    -A KUBE-SEP-OYURAKJ4R7SNIIE4 -m comment --comment default/clusterip-svc -m tcp -p tcp -j DNAT --to-destination 10.244.1.4:5000
    -A KUBE-SVC-M6YY5X4D5LM4YLQC -m comment --comment "default/clusterip-svc cluster IP" -m tcp -p tcp -d 10.96.100.100 --dport 5555 ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ
    -A KUBE-SVC-M6YY5X4D5LM4YLQC -m comment --comment "default/clusterip-svc -> 10.244.1.3:5000" -m statistic --mode random --probability 0.3333333333 -j KUBE-SEP-6KQQ2UDBB66ZDPVB
    -A KUBE-SVC-M6YY5X4D5LM4YLQC -m comment --comment "default/clusterip-svc -> 10.244.1.4:5000" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-OYURAKJ4R7SNIIE4
    -A KUBE-SVC-M6YY5X4D5LM4YLQC -m comment --comment "default/clusterip-svc -> 10.244.2.3:5000" -j KUBE-SEP-LBPDPRON455IOEAA
    COMMIT
    """)


def test_seed_file_gives_the_articles_rules(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "-f", str(SEED), "--node-name", "node-1", "--cluster-cidr", "10.244.0.0/16")

    assert (code, err) == (0, "")
    assert canonical_sort(out) == SEED_GOLDEN
    assert check_consistency(out) == []
    # Raw write order is kube-proxy's: filter first, the NodePorts jump last in nat.
    assert out.startswith("*filter\n:KUBE-SERVICES - [0:0]\n")
    assert out.endswith('-m addrtype --dst-type LOCAL -j KUBE-NODEPORTS\nCOMMIT\n')


def test_the_real_command_line_reads_stdin() -> None:
    done = subprocess.run([sys.executable, "-m", "kubelab", "proxy", "render", "-f", "-", "--node-name", "node-1",
                           "--cluster-cidr", "10.244.0.0/16", "--sort"],
                          input=SEED.read_text(), capture_output=True, text=True, cwd=ROOT, timeout=60,
                          check=False)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == SEED_GOLDEN


# One NodePort Service with eTP Local on two nodes' endpoints, plus things render must ignore.
WEB = service_dict("shop", "web", cluster_ip="10.96.0.50", svc_type="NodePort", externalTrafficPolicy="Local",
                   ports=[port("http", 80, nodePort=30080, targetPort=8080)])
WEB_SLICE = slice_dict("shop", "web", [ep("10.244.1.7", "node-1"), ep("10.244.2.7", "node-2")],
                       [port("http", 8080)])
CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "shop"}, "data": {}}
ARGS = ("--node-name", "node-1", "--cluster-cidr", "10.244.0.0/16", "--sort")

WEB_ON_NODE_1 = golden("""
    *filter
    :KUBE-NODEPORTS - [0:0]
    :KUBE-SERVICES - [0:0]
    :KUBE-EXTERNAL-SERVICES - [0:0]
    :KUBE-FIREWALL - [0:0]
    :KUBE-FORWARD - [0:0]
    :KUBE-PROXY-FIREWALL - [0:0]
    -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
    -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
    -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
    -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
    COMMIT
    *nat
    :KUBE-NODEPORTS - [0:0]
    :KUBE-SERVICES - [0:0]
    :KUBE-EXT-{h} - [0:0]
    :KUBE-MARK-MASQ - [0:0]
    :KUBE-POSTROUTING - [0:0]
    :KUBE-SEP-{remote} - [0:0]
    :KUBE-SEP-{local} - [0:0]
    :KUBE-SVC-{h} - [0:0]
    :KUBE-SVL-{h} - [0:0]
    -A KUBE-NODEPORTS -m comment --comment shop/web:http -m tcp -p tcp --dport 30080 -j KUBE-EXT-{h}
    -A KUBE-SERVICES -m comment --comment "shop/web:http cluster IP" -m tcp -p tcp -d 10.96.0.50 --dport 80 -j KUBE-SVC-{h}
    -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
    -A KUBE-EXT-{h} -m comment --comment "pod traffic for shop/web:http external destinations" -s 10.244.0.0/16 -j KUBE-SVC-{h}
    -A KUBE-EXT-{h} -m comment --comment "masquerade LOCAL traffic for shop/web:http external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ
    -A KUBE-EXT-{h} -m comment --comment "route LOCAL traffic for shop/web:http external destinations" -m addrtype --src-type LOCAL -j KUBE-SVC-{h}
    -A KUBE-EXT-{h} -j KUBE-SVL-{h}
    -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
    -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
    -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
    -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
    -A KUBE-SEP-{remote} -m comment --comment shop/web:http -s 10.244.2.7 -j KUBE-MARK-MASQ
    -A KUBE-SEP-{remote} -m comment --comment shop/web:http -m tcp -p tcp -j DNAT --to-destination 10.244.2.7:8080
    -A KUBE-SEP-{local} -m comment --comment shop/web:http -s 10.244.1.7 -j KUBE-MARK-MASQ
    -A KUBE-SEP-{local} -m comment --comment shop/web:http -m tcp -p tcp -j DNAT --to-destination 10.244.1.7:8080
    -A KUBE-SVC-{h} -m comment --comment "shop/web:http cluster IP" -m tcp -p tcp -d 10.96.0.50 --dport 80 ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ
    -A KUBE-SVC-{h} -m comment --comment "shop/web:http -> 10.244.1.7:8080" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-{local}
    -A KUBE-SVC-{h} -m comment --comment "shop/web:http -> 10.244.2.7:8080" -j KUBE-SEP-{remote}
    -A KUBE-SVL-{h} -m comment --comment "shop/web:http -> 10.244.1.7:8080" -j KUBE-SEP-{local}
    COMMIT
    """)
# (The remote endpoint's chain name sorts first.)
WEB_HASHES = {"h": "67NZLRHBNDSAWJRO", "local": "UGQTAJUJOQJVZIEC", "remote": "DYSIX5QMVXZZP7LU"}


def web_golden() -> str:
    text = WEB_ON_NODE_1
    for key, value in WEB_HASHES.items():
        text = text.replace("{" + key + "}", value)
    return text


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("fmt", ["multi-document YAML", "List", "JSON List", "JSON array"])
def test_input_formats_give_the_same_payload(fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = [WEB, CONFIGMAP, WEB_SLICE]
    if fmt == "multi-document YAML":
        text = "---\n".join(yaml.safe_dump(o) for o in objects)
    elif fmt == "List":
        text = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": objects})
    elif fmt == "JSON List":
        # As `kubectl get -o json` prints it; tab indentation is valid JSON but not valid YAML.
        text = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent="\t")
    else:
        text = json.dumps(objects)

    code, out, err = run_cli(capsys, "-f", write(tmp_path, "in", text), *ARGS)

    assert (code, err) == (0, "")
    assert out == web_golden()


def test_node_name_decides_which_endpoints_are_local(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "web.yaml", yaml.safe_dump_all([WEB, WEB_SLICE]))

    _, on_node_2, _ = run_cli(capsys, "-f", path, "--node-name", "node-2", "--cluster-cidr", "10.244.0.0/16")
    _, on_node_3, _ = run_cli(capsys, "-f", path, "--node-name", "node-3", "--cluster-cidr", "10.244.0.0/16")

    # node-2's Local chain goes to its own endpoint only.
    svl_rules = [line for line in on_node_2.splitlines() if line.startswith(f"-A KUBE-SVL-{WEB_HASHES['h']} ")]
    assert svl_rules == [(f'-A KUBE-SVL-{WEB_HASHES["h"]} -m comment --comment "shop/web:http -> 10.244.2.7:8080" '
                          f"-j KUBE-SEP-{WEB_HASHES['remote']}")]
    # node-3 has none: no SVL chain, and external traffic to the NodePort is dropped in filter.
    assert f"KUBE-SVL-{WEB_HASHES['h']}" not in on_node_3
    assert ('-A KUBE-EXTERNAL-SERVICES -m comment --comment "shop/web:http has no local endpoints" '
            "-m addrtype --dst-type LOCAL -m tcp -p tcp --dport 30080 -j DROP") in on_node_3.splitlines()
    assert f"-A KUBE-EXT-{WEB_HASHES['h']} -j KUBE-SVL-{WEB_HASHES['h']}" not in on_node_3


def test_masquerade_all_and_cluster_cidr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "seed.yaml", SEED.read_text())
    masq = ('-A KUBE-SVC-M6YY5X4D5LM4YLQC -m comment --comment "default/clusterip-svc cluster IP" -m tcp -p tcp '
            "-d 10.96.100.100 --dport 5555")

    _, with_cidr, _ = run_cli(capsys, "-f", path, "--cluster-cidr", "10.244.0.0/16")
    _, dual_stack_cidrs, _ = run_cli(capsys, "-f", path, "--cluster-cidr", "fd00:10:244::/56,10.244.0.0/16")
    _, masquerade_all, _ = run_cli(capsys, "-f", path, "--masquerade-all", "--cluster-cidr", "10.244.0.0/16")
    _, neither, _ = run_cli(capsys, "-f", path)

    assert f"{masq} ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ\n" in with_cidr
    assert dual_stack_cidrs == with_cidr  # the IPv4 proxier takes the IPv4 CIDR
    # --masquerade-all: every packet to the cluster IP is marked, whatever its source.
    assert f"{masq} -j KUBE-MARK-MASQ\n" in masquerade_all
    assert "! -s 10.244.0.0/16" not in masquerade_all
    # No CIDR: kube-proxy's no-op local detector writes no masquerade rule at all.
    assert masq not in neither
    assert neither.count("\n") == with_cidr.count("\n") - 1


def test_kube_proxy_flags_that_change_the_payload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "web.yaml", yaml.safe_dump_all([WEB, WEB_SLICE]))

    _, out, _ = run_cli(capsys, "-f", path, "--node-name", "node-1", "--masquerade-bit", "0",
                        "--iptables-localhost-nodeports=false", "--random-fully=false", "--nodeport-addresses",
                        "10.240.0.0/24", "--node-ip", "10.240.0.11", "--conntrack-tcp-be-liberal")

    lines = out.splitlines()
    assert "-A KUBE-MARK-MASQ -j MARK --or-mark 0x00000001" in lines
    assert ('-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE'
            in lines)
    assert ":KUBE-FIREWALL - [0:0]" not in lines
    assert not any("--ctstate INVALID" in line for line in lines)
    assert lines[-2] == ('-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be '
                         'the last rule in this chain" -d 10.240.0.11 -j KUBE-NODEPORTS')


def test_partial_sync_with_existing_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifests = write(tmp_path, "web.yaml", yaml.safe_dump_all([WEB, WEB_SLICE]))
    saved = write(tmp_path, "saved", "# iptables-save\n*filter\n:KUBE-SVC-STALESTALESTALE - [0:0]\nCOMMIT\n*nat\n"
                  ":PREROUTING ACCEPT [0:0]\n:KUBE-SVC-GONEGONEGONEGONE - [0:0]\n"
                  f":KUBE-SVC-{WEB_HASHES['h']} - [0:0]\n:DOCKER - [0:0]\nCOMMIT\n")

    _, out, _ = run_cli(capsys, "-f", manifests, "--node-name", "node-1", "--changed", "other/svc",
                        "--existing-rules", saved)

    chains = [line for line in out.split("*nat\n")[1].splitlines() if line.startswith(":")]
    # Nothing of shop/web's own chains is written (it did not change); the stale nat chain is
    # flushed and deleted; the filter table's chain of that name and foreign chains are left alone.
    assert chains == [":KUBE-SERVICES - [0:0]", ":KUBE-NODEPORTS - [0:0]", ":KUBE-POSTROUTING - [0:0]",
                      ":KUBE-MARK-MASQ - [0:0]", ":KUBE-SVC-GONEGONEGONEGONE - [0:0]"]
    assert "-X KUBE-SVC-GONEGONEGONEGONE\n" in out
    assert "STALE" not in out and "DOCKER" not in out


@pytest.mark.parametrize(("content", "message"), [
    pytest.param(None, "No such file", id="missing file"),
    pytest.param("kind: [unclosed", "not valid YAML or JSON", id="bad YAML"),
    pytest.param("- just\n- a list\n", "expected an object", id="not objects"),
    pytest.param(yaml.safe_dump({**WEB, "spec": {**WEB["spec"], "ports": "eighty"}}), "Service web", id="bad Service"),
])
def test_bad_input_is_an_error_not_a_payload(content: str | None, message: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "in.yaml"
    if content is not None:
        path.write_text(content)

    code, out, err = run_cli(capsys, "-f", str(path))

    assert code == 1
    assert out == ""
    assert err.startswith("kubelab proxy render: ") and message in err


# --- --proxy-mode nftables ---------------------------------------------------------------------------

# The seed in nftables mode on node-1 (172.31.0.11): the same three endpoints as one numgen verdict
# map (a third each, where iptables needs probabilities 1/3, 1/2, rest), NodePorts on the node IP
# only (kube-proxy's nftables default --nodeport-addresses=primary), and the lab's ServiceCIDR.
# The unnamed port leaves the chain name's last part empty ("tcp/"), as servicePortChainNameBase does.
SEED_NFT_SERVICE = golden("""
    add chain ip kube-proxy service-VQUKRDEP-default/clusterip-svc/tcp/
    add rule ip kube-proxy service-VQUKRDEP-default/clusterip-svc/tcp/ ip daddr 10.96.100.100 tcp dport 5555 ip saddr != 10.244.0.0/16 jump mark-for-masquerade
    add rule ip kube-proxy service-VQUKRDEP-default/clusterip-svc/tcp/ numgen random mod 3 vmap { 0 : goto endpoint-R4FXHFUK-default/clusterip-svc/tcp/__10.244.1.3/5000 , 1 : goto endpoint-VPDSY2YU-default/clusterip-svc/tcp/__10.244.1.4/5000 , 2 : goto endpoint-3GFRVUUE-default/clusterip-svc/tcp/__10.244.2.3/5000 }
    """)

SERVICE_CIDR = textwrap.dedent("""
    ---
    apiVersion: networking.k8s.io/v1
    kind: ServiceCIDR
    metadata: {name: kubernetes}
    spec: {cidrs: [10.96.0.0/12]}
    """)


def test_seed_in_nftables_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "seed.yaml"
    manifest.write_text(SEED.read_text() + SERVICE_CIDR)
    code, out, err = run_cli(capsys, "-f", str(manifest), "--proxy-mode", "nftables", "--node-name", "node-1",
                             "--node-ip", "172.31.0.11", "--cluster-cidr", "10.244.0.0/16", "--sort")
    assert (code, err) == (0, "")
    assert SEED_NFT_SERVICE in out
    assert "add element ip kube-proxy nodeport-ips { 172.31.0.11 }\n" in out
    assert 'ip daddr { 10.96.0.0/12 } drop comment "Drop traffic to unallocated ClusterIPs"' in out
    assert "add element ip kube-proxy service-ips { 10.96.100.100 . tcp . 5555 : goto " \
           "service-VQUKRDEP-default/clusterip-svc/tcp/ }\n" in out

    # Unsorted: the transaction itself, in write order, every object before its first use.
    code, raw, err = run_cli(capsys, "-f", str(manifest), "--proxy-mode", "nftables", "--node-name", "node-1",
                             "--node-ip", "172.31.0.11", "--cluster-cidr", "10.244.0.0/16")
    assert (code, err) == (0, "")
    assert raw.startswith('add table ip kube-proxy { comment "rules for kube-proxy" ; }\n')
    assert all(line.split(" ", 2)[0] in ("add", "flush", "delete") for line in raw.splitlines())
    assert apply_transaction(None, raw).dump() == out


def test_without_a_service_cidr_nothing_is_dropped_as_unallocated(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "-f", str(SEED), "--proxy-mode", "nftables")
    assert code == 0
    assert "unallocated" not in out and "cluster-ips-check ip daddr @cluster-ips reject" in out


def test_proxy_mode_defaults_to_iptables(capsys: pytest.CaptureFixture[str]) -> None:
    outs = [run_cli(capsys, "-f", str(SEED), *mode)[1] for mode in ((), ("--proxy-mode", "iptables"))]
    assert outs[0] == outs[1] and outs[0].startswith("*filter\n")


@pytest.mark.parametrize("flag", [("--changed", "default/clusterip-svc"), ("--existing-rules", "/dev/null")])
def test_iptables_partial_sync_flags_are_refused_in_nftables_mode(flag: tuple[str, str],
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "-f", str(SEED), "--proxy-mode", "nftables", *flag)
    assert (code, out) == (1, "")
    assert err.startswith("kubelab proxy render: --changed and --existing-rules are iptables-mode flags")


def test_bad_service_cidr_document_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(SERVICE_CIDR.replace("[10.96.0.0/12]", "10.96.0.0/12"))
    code, out, err = run_cli(capsys, "-f", str(manifest), "--proxy-mode", "nftables")
    assert (code, out, err) == (1, "", ("kubelab proxy render: ServiceCIDR kubernetes: spec.cidrs must be a list "
                                       "of strings\n"))


def test_unknown_proxy_mode_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        run_cli(capsys, "-f", str(SEED), "--proxy-mode", "ipvs")
    assert exit_.value.code == 2
    assert "invalid choice: 'ipvs'" in capsys.readouterr().err


def test_an_object_nft_would_choke_on_leaves_the_other_services_rules(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A port name that would end the transaction's rule and start another ("p }\\nflush ruleset") is
    left out, with a word on stderr; the seed's Service is programmed as usual, and the transaction
    is still one nft accepts (every line an add/flush/delete of table ip kube-proxy)."""
    evil = service_dict("default", "evil", cluster_ip="10.96.100.200", ports=[port("p }\nflush ruleset", 80)])
    cidr = SERVICE_CIDR.replace("[10.96.0.0/12]", '["10.96.0.0/12 } drop ; flush ruleset ; add rule ip x y {"]')
    manifest = tmp_path / "hostile.yaml"
    manifest.write_text(SEED.read_text() + "---\n" + yaml.safe_dump(evil) + cidr)
    code, out, err = run_cli(capsys, "-f", str(manifest), "--proxy-mode", "nftables", "--node-name", "node-1",
                             "--cluster-cidr", "10.244.0.0/16")
    assert code == 0
    assert err.startswith("kubelab proxy render: left out Service default/evil: ")
    assert "flush ruleset" not in out and "10.96.100.200" not in out and "unallocated" not in out
    assert "numgen random mod 3 vmap" in out
    assert all(line.split(" ")[0] in ("add", "flush", "delete") and line.split(" ")[2:4] == ["ip", "kube-proxy"]
               for line in out.splitlines())
    apply_transaction(None, out)


def test_iptables_mode_leaves_out_what_the_api_server_would_refuse(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                                   ) -> None:
    """The same screening in iptables mode: a port name with a newline would have ended the restore line
    and injected one of its own (`-A KUBE-SERVICES -j ACCEPT`); the Service is left out, the seed's rules
    are written as usual."""
    evil = service_dict("default", "evil", cluster_ip="10.96.100.200",
                        ports=[port("p\n-A KUBE-SERVICES -j ACCEPT", 80)])
    manifest = tmp_path / "hostile.yaml"
    manifest.write_text(SEED.read_text() + "---\n" + yaml.safe_dump(evil))
    code, out, err = run_cli(capsys, "-f", str(manifest), "--node-name", "node-1", "--cluster-cidr", "10.244.0.0/16")
    assert code == 0
    assert err.startswith("kubelab proxy render: left out Service default/evil: ")
    assert "-A KUBE-SERVICES -j ACCEPT" not in out and "10.96.100.200" not in out
    assert "--probability 0.3333333333 " in out

