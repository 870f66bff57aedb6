"""The render dataplane's in-memory kernel (proxyagent/apply.py RecordingApplier) refuses a restore that
jumps to a chain that does not exist, as iptables-restore does; it must check a 10k-Service payload (~40,000
jumps, ~30,000 chains) in one pass over the chains, not one per jump (that was minutes per sync, so
`kubelab up --dataplane render` never came up at 10k Services)."""

from __future__ import annotations

from proxyagent.apply import _missing_chain


class CountingChains(dict[str, list[str]]):
    """A table of the kernel's state that counts how often its chain names are walked."""

    walks = 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        CountingChains.walks += 1
        return super().__iter__()


def payload(services: int) -> str:
    lines = ["*nat", ":KUBE-SERVICES - [0:0]"]
    for i in range(services):
        lines += [f":KUBE-SVC-{i:06d} - [0:0]",
                  (f'-A KUBE-SERVICES -d 10.96.0.{i % 250}/32 -p tcp -m comment --comment "default/s{i} cluster IP" '
                  f"-j KUBE-SVC-{i:06d}"),
                  f"-A KUBE-SVC-{i:06d} -j KUBE-MARK-MASQ"]
    return "\n".join([*lines, "COMMIT", ""])


def test_every_jump_is_checked_against_the_chains_walked_once() -> None:
    state = {"nat": CountingChains({"KUBE-MARK-MASQ": [], "KUBE-POSTROUTING": []})}
    CountingChains.walks = 0
    assert _missing_chain(payload(500), state) is None
    assert CountingChains.walks <= 1  # per table, not per jump (1,000 jumps here)


def test_a_jump_to_a_missing_chain_is_still_refused_with_its_line() -> None:
    text = payload(3).replace("-j KUBE-MARK-MASQ", "-j KUBE-MARK-DROP", 1)
    assert _missing_chain(text, {"nat": {"KUBE-MARK-MASQ": []}}) == (
        "Chain 'KUBE-MARK-DROP' does not exist\nError occurred at line: 5")
    # A chain deleted in the same payload is gone for the jumps after it too.
    deleted = payload(2) + "*nat\n-X KUBE-SVC-000001\n-A KUBE-SERVICES -j KUBE-SVC-000001\nCOMMIT\n"
    assert _missing_chain(deleted, {"nat": {"KUBE-MARK-MASQ": []}}) is not None
