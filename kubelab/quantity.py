"""Resource quantities (`100m`, `512Mi`, `1.5`, `2e3`) as Kubernetes parses them.

Kubernetes rounds up when it turns a quantity into an integer: `MilliValue()` of `0.0001` cpu is 1,
and `Value()` of `1.5m` memory is 1 byte. The scheduler counts cpu in millicores and everything else
in whole base units, so those are the two conversions offered here.
"""

from __future__ import annotations

import functools
from decimal import ROUND_CEILING, ROUND_UP, Context, Decimal

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DIGITS = frozenset("0123456789")
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_NANO = Decimal("1e-9")
# inf.Dec is arbitrary precision; 80 digits keeps every int64-sized quantity (and far more) exact.
_EXACT = Context(prec=80)

# resource.ErrFormatWrong and resource.ErrSuffix, word for word.
FORMAT_WRONG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
SUFFIX_WRONG = "unable to parse quantity's suffix"


class QuantityError(ValueError):
    """Raised for text that is not a quantity; the message is kube-apiserver's."""


def _split(text: str) -> tuple[str, str]:
    """resource.parseQuantityString: (signed number, suffix), scanning exactly as apimachinery does.

    The scanner is more lenient than the regular expression in its error message: `1.`, `.5` and `1.G`
    parse, and so do a lone `.`, `+` or `-` (all zero), while any space is an error (nothing is trimmed).
    """
    pos, end = 0, len(text)
    if pos < end and text[0] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end and text[pos] == ".":
        pos += 1
        while pos < end and text[pos] in _DIGITS:
            pos += 1
    number = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(FORMAT_WRONG)
    return number, text[suffix_start:]


def _scale(suffix: str) -> tuple[int, int]:
    """suffixer.interpret: (base, exponent) for `Ki`, `m`, `e3`/`E3`; `E` alone is exa, not an exponent."""
    if suffix in _DECIMAL:
        return 10, _DECIMAL[suffix]
    if suffix in _BINARY:
        return 2, _BINARY[suffix].bit_length() - 1
    if len(suffix) > 1 and suffix[0] in "eE":
        exponent = suffix[1:]
        digits = exponent[1:] if exponent[0] in "+-" else exponent
        if digits and set(digits) <= _DIGITS:
            return 10, int(exponent)
    raise QuantityError(SUFFIX_WRONG)


def parse(text: str) -> Decimal:
    """The exact value of a quantity in base units (cores, bytes), as resource.ParseQuantity stores it."""
    if not isinstance(text, str) or not text:
        raise QuantityError(FORMAT_WRONG)
    return _parse(text)


@functools.lru_cache(maxsize=4096)  # a pod's few quantities are parsed several times per request
def _parse(text: str) -> Decimal:
    number, suffix = _split(text)
    base, exponent = _scale(suffix)
    negative = number.startswith("-")
    digits = number.lstrip("+-")
    magnitude = Decimal(digits) if digits not in ("", ".") else Decimal(0)
    try:
        value = _EXACT.multiply(magnitude, _EXACT.power(base, exponent))
    except ArithmeticError as exc:  # an exponent beyond any real quantity
        raise QuantityError("unable to parse numeric part of quantity") from exc
    # ParseQuantity rounds anything finer than a nano-unit up, away from zero: 0.1n is 1n.
    if value and value.as_tuple().exponent < -9:  # type: ignore[operator]
        value = value.quantize(_NANO, rounding=ROUND_UP, context=_EXACT)
    return _EXACT.minus(value) if negative else value


def is_valid(text: str) -> bool:
    try:
        parse(text)
    except QuantityError:
        return False
    return True


def milli_value(text: str) -> int:
    """Millicores (or milli-units), rounded up like resource.Quantity.MilliValue()."""
    return int(parse(text).scaleb(3, _EXACT).to_integral_value(rounding=ROUND_CEILING))


def value(text: str) -> int:
    """Whole base units (bytes, pods), rounded up like resource.Quantity.Value()."""
    return int(parse(text).to_integral_value(rounding=ROUND_CEILING))


def format_milli_cpu(millis: int) -> str:
    """`1500` -> `1500m`, `2000` -> `2`: the canonical form kube prints for cpu."""
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def format_bytes(n: int) -> str:
    """The largest binary suffix that divides exactly: 1073741824 -> `1Gi`."""
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        if n and n % _BINARY[suffix] == 0:
            return f"{n // _BINARY[suffix]}{suffix}"
    return str(n)
