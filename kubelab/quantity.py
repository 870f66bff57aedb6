"""Resource quantities (`100m`, `512Mi`, `1.5`, `2e3`) as Kubernetes parses them.

Kubernetes rounds up when it turns a quantity into an integer: `MilliValue()` of `0.0001` cpu is 1,
and `Value()` of `1.5m` memory is 1 byte. The scheduler counts cpu in millicores and everything else
in whole base units, so those are the two conversions offered here.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
            "P": Decimal("1e15"), "E": Decimal("1e18")}
_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$")


class QuantityError(ValueError):
    """Raised for text that is not a quantity; the message is kube-apiserver's."""


def parse(text: str) -> Decimal:
    """The exact value of a quantity in base units (cores, bytes)."""
    match = _QUANTITY.match(text.strip()) if isinstance(text, str) else None
    if not match:
        raise QuantityError("quantities must match the regular expression "
                            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
    number, suffix = match.group(1), match.group(2) or ""
    try:
        value = Decimal(number)
    except InvalidOperation as exc:  # pragma: no cover - the regex already filtered
        raise QuantityError(str(exc)) from exc
    if suffix in _BINARY:
        return value * _BINARY[suffix]
    if suffix in _DECIMAL:
        return value * _DECIMAL[suffix]
    return value * (Decimal(10) ** int(suffix[1:]))


def is_valid(text: str) -> bool:
    try:
        parse(text)
    except QuantityError:
        return False
    return True


def milli_value(text: str) -> int:
    """Millicores (or milli-units), rounded up like resource.Quantity.MilliValue()."""
    return int((parse(text) * 1000).to_integral_value(rounding=ROUND_CEILING))


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
