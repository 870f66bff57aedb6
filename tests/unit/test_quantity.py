"""Resource quantities as resource.ParseQuantity reads them, and the rounding of MilliValue()/Value().

Expected values follow apimachinery's quantity.go: decimal suffixes (`m`, `k`, `M`...) are powers of
ten, binary ones (`Ki`, `Mi`...) powers of two, `e3`/`E3` an exponent while `E` alone is exa; anything
finer than a nano-unit is rounded up at parse time, and both integer conversions round up.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from kubelab import quantity
from kubelab.quantity import FORMAT_WRONG, SUFFIX_WRONG, QuantityError


@pytest.mark.parametrize(("text", "exact"), [
    pytest.param("100m", Decimal("0.1"), id="millicores"),
    pytest.param("0.5", Decimal("0.5"), id="half a core"),
    pytest.param("1", Decimal(1), id="plain integer"),
    pytest.param("1.5Gi", Decimal(1610612736), id="fractional binary"),
    pytest.param("512Mi", Decimal(536870912), id="mebibytes"),
    pytest.param("2e3", Decimal(2000), id="lower-case exponent"),
    pytest.param("2E3", Decimal(2000), id="upper-case exponent"),
    pytest.param("1e+3", Decimal(1000), id="signed exponent"),
    pytest.param("1k", Decimal(1000), id="k is decimal"),
    pytest.param("1Ki", Decimal(1024), id="Ki is binary"),
    pytest.param("1M", Decimal(1000000), id="M is mega"),
    pytest.param("1E", Decimal(10**18), id="E alone is exa, not an exponent"),
    pytest.param("1Ei", Decimal(2**60), id="exbibyte"),
    pytest.param("250u", Decimal("0.00025"), id="micro"),
    pytest.param("+1", Decimal(1), id="leading plus"),
    pytest.param("-1.5", Decimal("-1.5"), id="negative"),
    pytest.param(".5", Decimal("0.5"), id="no integer part"),
    pytest.param("1.", Decimal(1), id="trailing dot"),
    pytest.param("1.G", Decimal(10**9), id="trailing dot before suffix, allowed by the scanner"),
    pytest.param("0.1n", Decimal("1e-9"), id="below a nano-unit rounds up to 1n"),
    pytest.param("1e-10", Decimal("1e-9"), id="tiny exponent rounds up to 1n"),
    pytest.param("123456789012345678901234567890", Decimal(123456789012345678901234567890),
                 id="more digits than a float holds stays exact"),
    # The scanner in parseQuantityString accepts these as zero; kube-apiserver stores them as "0".
    pytest.param(".", Decimal(0), id="kube quirk: a lone dot is zero"),
    pytest.param("+", Decimal(0), id="kube quirk: a lone sign is zero"),
    pytest.param("Mi", Decimal(0), id="kube quirk: a bare suffix is zero"),
])
def test_parse(text: str, exact: Decimal) -> None:
    assert quantity.parse(text) == exact
    assert quantity.is_valid(text)


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("", FORMAT_WRONG, id="empty"),
    pytest.param("abc", FORMAT_WRONG, id="letters only"),
    pytest.param("1K", SUFFIX_WRONG, id="upper-case K is not a suffix"),
    pytest.param("1ki", SUFFIX_WRONG, id="lower-case ki"),
    pytest.param("1e", SUFFIX_WRONG, id="exponent without digits"),
    pytest.param("1m3", SUFFIX_WRONG, id="suffix followed by digits"),
    pytest.param("--1", SUFFIX_WRONG, id="two signs"),
    pytest.param("1.5.5", FORMAT_WRONG, id="two dots"),
    pytest.param(" 1", FORMAT_WRONG, id="leading space is not trimmed"),
    pytest.param("1 ", FORMAT_WRONG, id="trailing space is not trimmed"),
    pytest.param("1 Gi", FORMAT_WRONG, id="space before the suffix"),
    pytest.param("1Gi1", SUFFIX_WRONG, id="digits after a binary suffix"),
    pytest.param("0x10", FORMAT_WRONG, id="hexadecimal"),
])
def test_invalid(text: str, message: str) -> None:
    with pytest.raises(QuantityError) as err:
        quantity.parse(text)
    assert str(err.value) == message
    assert not quantity.is_valid(text)


def test_format_error_quotes_kubes_regular_expression() -> None:
    assert FORMAT_WRONG == ("quantities must match the regular expression "
                            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")


@pytest.mark.parametrize(("text", "millis"), [
    pytest.param("100m", 100, id="millicores"),
    pytest.param("1", 1000, id="one core"),
    pytest.param("0.5", 500, id="half a core"),
    pytest.param("2e3", 2000000, id="exponent"),
    pytest.param("0.0001", 1, id="a tenth of a millicore rounds up"),
    pytest.param("1.0001", 1001, id="fraction of a millicore rounds up"),
    pytest.param("1.5m", 2, id="one and a half millicores rounds up"),
    pytest.param("250u", 1, id="micro rounds up to one milli"),
    pytest.param("1n", 1, id="nano rounds up to one milli"),
    pytest.param("0", 0, id="zero stays zero"),
])
def test_milli_value_rounds_up(text: str, millis: int) -> None:
    assert quantity.milli_value(text) == millis


@pytest.mark.parametrize(("text", "units"), [
    pytest.param("1Gi", 1073741824, id="gibibyte"),
    pytest.param("1G", 1000000000, id="gigabyte"),
    pytest.param("1.5m", 1, id="a fraction of a byte rounds up to 1"),
    pytest.param("100m", 1, id="a tenth rounds up to 1"),
    pytest.param("1.5", 2, id="one and a half rounds up to 2"),
    pytest.param("2.0", 2, id="exact stays"),
    pytest.param("110", 110, id="pods"),
    pytest.param("0.5Ki", 512, id="half a kibibyte"),
])
def test_value_rounds_up(text: str, units: int) -> None:
    assert quantity.value(text) == units


@pytest.mark.parametrize(("millis", "text"), [
    pytest.param(1500, "1500m", id="fraction"),
    pytest.param(2000, "2", id="whole cores"),
    pytest.param(0, "0", id="zero"),
])
def test_format_milli_cpu(millis: int, text: str) -> None:
    assert quantity.format_milli_cpu(millis) == text


@pytest.mark.parametrize(("n", "text"), [
    pytest.param(1073741824, "1Gi", id="gibibyte"),
    pytest.param(1536 * 1024, "1536Ki", id="not a whole mebibyte"),
    pytest.param(1000, "1000", id="not binary"),
    pytest.param(0, "0", id="zero"),
])
def test_format_bytes(n: int, text: str) -> None:
    assert quantity.format_bytes(n) == text
