"""kubelab's validators against Go's own answers, and properties that hold for any string.

The fixture (tests/unit/fixtures/validation_go_corpus.json) holds a few thousand strings — hand-picked
traps (trailing and leading newlines, CR, NUL, non-ASCII digits, the Kelvin sign, full-width and
zero-width characters, lengths around 15, 63 and 253 bytes, multi-byte characters at the limits) and
hypothesis draws — with what Go's regexp, len, strings.ToLower, net.ParseIP, net.ParseCIDR and
strconv.ParseInt make of each, as scripts/validation_oracle.go computed them. Every check here must
agree with Go on every string: not one disagreement is allowed. Regenerating the fixture needs Go; see
scripts/gen_validation_corpus.py.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubelab import validation
from kubelab.selectors import parse_int64

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "validation_go_corpus.json").read_text())


def _parses(parse: Callable[[str], object]) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        try:
            parse(value)
        except ValueError:
            return False
        return True
    return check


MATCHES: dict[str, Callable[[str], bool]] = {
    "configMapKey": validation.CONFIG_MAP_KEY.matches,
    "dns1035Label": validation.DNS1035_LABEL.matches,
    "dns1123Label": validation.DNS1123_LABEL.matches,
    "dns1123Subdomain": validation.DNS1123_SUBDOMAIN.matches,
    "labelValue": validation.LABEL_VALUE.matches,
    "portNameCharset": validation.IANA_SVC_NAME.matches,
    "portNameOneLetter": validation.ONE_LETTER.found_in,
    "qualifiedName": validation.QUALIFIED_NAME.matches,
}
PARSES: dict[str, Callable[[str], bool]] = {
    "cidr": _parses(validation.parse_cidr),
    "int64": lambda value: parse_int64(value) is not None,
    "ip": _parses(validation.parse_ip),
}
ERRORS: dict[str, Callable[[str], list[str]]] = {
    "annotationKey": lambda value: validation.qualified_name_errors(validation.go_lower(value)),
    "configMapKey": validation.config_map_key_errors,
    "dns1035Label": validation.dns1035_label_errors,
    "dns1123Label": validation.dns1123_label_errors,
    "dns1123Subdomain": validation.dns1123_subdomain_errors,
    "labelValue": validation.label_value_errors,
    "portName": validation.port_name_errors,
    "qualifiedName": validation.qualified_name_errors,
}
# The patterns the oracle compiled are the ones kubelab compiles (kube anchors all but the letter rule).
FORMATS = {"configMapKey": validation.CONFIG_MAP_KEY_FMT, "dns1035Label": validation.DNS1035_LABEL_FMT,
           "dns1123Label": validation.DNS1123_LABEL_FMT, "dns1123Subdomain": validation.DNS1123_SUBDOMAIN_FMT,
           "labelValue": validation.LABEL_VALUE_FMT, "portNameCharset": validation.IANA_SVC_NAME_FMT,
           "qualifiedName": validation.QUALIFIED_NAME_FMT}


def _cases() -> list[tuple[str, dict[str, bool], dict[str, bool], dict[str, list[str]]]]:
    messages = FIXTURE["messages"]
    out = []
    for value, _, matched, parsed, errors in FIXTURE["cases"]:
        out.append((value, {n: b == "1" for n, b in zip(FIXTURE["matchNames"], matched, strict=True)},
                    {n: b == "1" for n, b in zip(FIXTURE["parseNames"], parsed, strict=True)},
                    {n: [messages[i] for i in idx] for n, idx in zip(FIXTURE["errorNames"], errors, strict=True)}))
    return out


CASES = _cases()


def test_the_corpus_is_big_and_hostile() -> None:
    values = [c[0] for c in CASES]
    assert len(values) >= 3000
    for needle in ("evil\n", "\nevil", "x\n", "p\n", "a" * 64, "\u212a", "²"):
        assert needle in values
    assert sum(1 for v in values if v.endswith("\n")) >= 50
    assert set(MATCHES) == set(FIXTURE["matchNames"]) and set(ERRORS) == set(FIXTURE["errorNames"])
    assert set(PARSES) == set(FIXTURE["parseNames"])


def test_the_oracle_compiled_kubes_patterns_as_kubelab_does() -> None:
    for name, fmt in FORMATS.items():
        assert FIXTURE["patterns"][name] == f"^{fmt}$"
    assert FIXTURE["patterns"]["portNameOneLetter"] == validation.ONE_LETTER.fmt


def _disagreements(kind: str, name: str) -> list[tuple[str, Any, Any]]:
    ours: Callable[[str], Any] = {"matches": MATCHES, "parses": PARSES, "errors": ERRORS}[kind][name]
    index = {"matches": 1, "parses": 2, "errors": 3}[kind]
    return [(value, want[name], ours(value)) for value, *rest in CASES
            for want in [rest[index - 1]] if ours(value) != want[name]]


@pytest.mark.parametrize("name", sorted(MATCHES))
def test_patterns_match_as_gos_regexp_does(name: str) -> None:
    assert _disagreements("matches", name) == []


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_validators_give_gos_messages(name: str) -> None:
    """The whole problem list, in order: byte lengths, prefix and name parts, as apimachinery words them."""
    assert _disagreements("errors", name) == []


@pytest.mark.parametrize("name", sorted(PARSES))
def test_parsers_take_what_go_takes(name: str) -> None:
    assert _disagreements("parses", name) == []


def _newer_unicode_only(value: str, go_quoted: str) -> bool:
    """Whether `value` quotes differently only for characters this Python's Unicode tables know and the
    oracle's Go's older ones do not (Go 1.19 has Unicode 13; Python 3.11 has 14): Go escapes what it
    takes for unassigned. Re-quoted with exactly those characters escaped, the two agree."""
    newer = {c for c in value if c.isprintable() and (f"\\U{ord(c):08x}" in go_quoted or f"\\u{ord(c):04x}" in go_quoted)}
    if not newer or unicodedata.unidata_version == "13.0.0":
        return False
    requoted = validation.go_quote(value)
    for c in newer:
        requoted = requoted.replace(c, f"\\U{ord(c):08x}" if ord(c) >= 0x10000 else f"\\u{ord(c):04x}")
    return requoted == go_quoted


def test_bad_values_are_quoted_as_go_quotes_them() -> None:
    """A 422 shows the bad value as field.Error does (%q): `Invalid value: "evil\\n"`, `"a\\u200bb"`."""
    differ = [(value, quoted) for value, quoted, *_ in FIXTURE["cases"] if validation.go_repr(value) != quoted]
    assert [d for d in differ if not _newer_unicode_only(*d)] == []
    assert len(differ) <= 5  # drawn characters new in Unicode 14: rare


# --- properties --------------------------------------------------------------------------------------

NAME_CHECKS = [validation.dns1123_label_errors, validation.dns1123_subdomain_errors, validation.dns1035_label_errors,
               validation.qualified_name_errors, validation.port_name_errors, validation.config_map_key_errors]
SAFE = re.compile(r"[-A-Za-z0-9_./]*", re.ASCII)
valid_names = st.one_of(st.from_regex(r"[a-z]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True),
                        st.from_regex(r"[a-z0-9]{1,10}(\.[a-z0-9]{1,10}){0,3}", fullmatch=True))
line_ends = st.sampled_from(["\n", "\r", "\r\n", "\x00", "\u2028", "\x85", " ", "\t"])


@settings(max_examples=300, derandomize=True, database=None)
@given(name=valid_names, end=line_ends, where=st.sampled_from(["end", "start", "inside"]))
def test_no_validator_takes_a_line_end_or_control_anywhere(name: str, end: str, where: str) -> None:
    hostile = {"end": name + end, "start": end + name, "inside": name[:1] + end + name[1:]}[where]
    for check in NAME_CHECKS:
        assert check(hostile), (check.__name__, hostile)
    assert not validation.is_label_value(hostile)
    assert not validation.is_dns1123_label(hostile) and not validation.is_dns1035_label(hostile)


@settings(max_examples=500, derandomize=True, database=None)
@given(value=st.text(max_size=30))
def test_whatever_a_validator_takes_is_plain_ascii(value: str) -> None:
    """Anything any name check accepts is made of [-A-Za-z0-9_./] alone: no space, control character,
    line end or non-ASCII character can reach a name, a label or an iptables comment."""
    accepted = [c.__name__ for c in NAME_CHECKS if not c(value)] + \
        (["label value"] if validation.is_label_value(value) else [])
    if accepted:
        assert SAFE.fullmatch(value), (value, accepted)


@settings(max_examples=300, derandomize=True, database=None)
@given(value=st.text(alphabet=st.characters(categories=["Nd", "No"]), min_size=1, max_size=5))
def test_only_ascii_digits_are_digits(value: str) -> None:
    assert validation.is_ascii_digits(value) == all(c in "0123456789" for c in value)
    assert (parse_int64(value) is not None) == validation.is_ascii_digits(value)


@pytest.mark.parametrize("pattern", ["^[a-z]+$", "[a-z]+$", "^[a-z]+", r"\A[a-z]+\Z"])
def test_a_pattern_with_anchors_is_refused(pattern: str) -> None:
    """GoRegexp anchors itself; an anchor in the pattern would bring Python's `$` back."""
    with pytest.raises(ValueError, match="without anchors"):
        validation.GoRegexp(pattern)
