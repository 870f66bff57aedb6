"""Go's number parsing and quoting (apiserver/strconv.py) and kube's continue token
(apiserver/continuetoken.py), table by table: Go's answers for the inputs Python's int() reads
differently, and tokens that are byte for byte what k8s.io/apiserver/pkg/storage/continue.go makes."""

from __future__ import annotations

import base64

import pytest

from apiserver import continuetoken, strconv


@pytest.mark.parametrize(("text", "value"), [
    pytest.param("0", 0, id="zero"),
    pytest.param("+7", 7, id="plus"),
    pytest.param("-0010", -10, id="minus and leading zeros"),
    pytest.param("9223372036854775807", 2**63 - 1, id="max"),
    pytest.param("-9223372036854775808", -(2**63), id="min"),
])
def test_parse_int_accepts_what_go_accepts(text: str, value: int) -> None:
    assert strconv.parse_int(text) == value


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("²", 'strconv.ParseInt: parsing "²": invalid syntax', id="superscript"),
    pytest.param("١٢", 'strconv.ParseInt: parsing "١٢": invalid syntax', id="arabic-indic"),
    pytest.param("1_0", 'strconv.ParseInt: parsing "1_0": invalid syntax', id="underscore"),
    pytest.param(" 1", 'strconv.ParseInt: parsing " 1": invalid syntax', id="space"),
    pytest.param("", 'strconv.ParseInt: parsing "": invalid syntax', id="empty"),
    pytest.param("-", 'strconv.ParseInt: parsing "-": invalid syntax', id="sign only"),
    pytest.param("9223372036854775808", 'strconv.ParseInt: parsing "9223372036854775808": value out of range',
                 id="2^63"),
    pytest.param("-9223372036854775809", 'strconv.ParseInt: parsing "-9223372036854775809": value out of range',
                 id="below min"),
    pytest.param("99999999999999999999z", 'strconv.ParseInt: parsing "99999999999999999999z": value out of range',
                 id="range found before the bad character"),
    pytest.param("1\n", 'strconv.ParseInt: parsing "1\\n": invalid syntax', id="newline quoted"),
    pytest.param("a\u200bb", 'strconv.ParseInt: parsing "a\\u200bb": invalid syntax', id="zero-width space quoted"),
    pytest.param("\x00", 'strconv.ParseInt: parsing "\\x00": invalid syntax', id="NUL quoted"),
])
def test_parse_int_refuses_in_gos_words(text: str, message: str) -> None:
    with pytest.raises(strconv.NumError) as caught:
        strconv.parse_int(text)
    assert str(caught.value) == message


def test_parse_uint_takes_no_sign_and_the_whole_uint64() -> None:
    assert strconv.parse_uint("18446744073709551615") == 2**64 - 1
    for text, problem in (("+1", "invalid syntax"), ("18446744073709551616", "value out of range")):
        with pytest.raises(strconv.NumError) as caught:
            strconv.parse_uint(text)
        assert str(caught.value) == f'strconv.ParseUint: parsing "{text}": {problem}'


def test_a_huge_number_is_refused_after_reading_a_few_digits() -> None:
    with pytest.raises(strconv.NumError) as caught:
        strconv.parse_int("9" * 100_000)  # int() would refuse it only past 4,300 digits, with its own error
    assert caught.value.err == strconv.RANGE


@pytest.mark.parametrize(("value", "expected"), [("0", False), ("false", False), ("FALSE", False), ("fal\u017fe", False),
                                                 ("", True), ("true", True), ("no", True), ("1", True)])
def test_bool_parameters_are_true_unless_false_or_zero(value: str, expected: bool) -> None:
    assert strconv.parse_bool_param(value) is expected


def test_a_token_is_kubes_format() -> None:
    token = continuetoken.encode("/registry/pods/default/web-2\x00", "/registry/pods/default/", 1234)
    assert "=" not in token and "+" not in token and "/" not in token
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    assert raw == b'{"v":"meta.k8s.io/v1","rv":1234,"start":"web-2\\u0000"}'
    assert continuetoken.decode(token, "/registry/pods/default/") == ("/registry/pods/default/web-2\x00", 1234)


def test_a_token_never_leaves_its_prefix() -> None:
    for start in ("../x", "a/../../x", "./a", "a/", "//a"):
        token = continuetoken._b64encode(continuetoken._go_json({"v": "meta.k8s.io/v1", "rv": 3, "start": start}))
        with pytest.raises(continuetoken.InvalidContinue):
            continuetoken.decode(token, "/registry/pods/default/")
    # A rooted start is taken relative to the prefix, as path.Clean leaves it.
    token = continuetoken._b64encode(continuetoken._go_json({"v": "meta.k8s.io/v1", "rv": 3, "start": "/a"}))
    assert continuetoken.decode(token, "/registry/pods/default/") == ("/registry/pods/default/a", 3)
