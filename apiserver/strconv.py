"""Go's strconv in small: integers parsed and strings quoted exactly as kube-apiserver's Go code does.

Query parameters reach kube-apiserver as strings and are parsed with strconv.ParseInt / ParseUint
(ASCII digits only, an optional sign for ParseInt, 64-bit range), and a refusal quotes the input with
strconv.Quote. Python's int() accepts what Go refuses (`²`, `٣`, `1_000`, surrounding spaces) and
refuses, with a ValueError of its own, numbers of more than 4,300 digits; a parameter parsed with it
either means something kube would refuse or ends in a 500. These functions give Go's answer, and
Go's words, for every input. Pure: no I/O.
"""

from __future__ import annotations

SYNTAX = "invalid syntax"
RANGE = "value out of range"

_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


class NumError(ValueError):
    """strconv.NumError: `strconv.ParseInt: parsing "x": invalid syntax`."""

    def __init__(self, func: str, num: str, err: str) -> None:
        super().__init__(f"strconv.{func}: parsing {quote(num)}: {err}")
        self.func = func
        self.num = num
        self.err = err


def quote(text: str) -> str:
    """strconv.Quote (what `%q` prints): double quotes, printable characters as they are (unicode.IsPrint:
    letters, marks, numbers, punctuation, symbols and the ASCII space, the set str.isprintable() keeps),
    Go's escapes for the rest."""
    out = ['"']
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        else:
            code = ord(ch)
            if code < 0x20 or code == 0x7F:
                out.append(f"\\x{code:02x}")
            elif 0xD800 <= code <= 0xDFFF:
                out.append("\\ufffd")  # a lone surrogate is no rune: Go sees utf8.RuneError
            elif code < 0x10000:
                out.append(f"\\u{code:04x}")
            else:
                out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def parse_uint(text: str, bits: int = 64) -> int:
    """strconv.ParseUint(text, 10, bits): ASCII digits only, no sign, no underscores. As Go, the digits
    are read left to right and the first problem met decides the error: `99999999999999999999x` is out
    of range, `x99999999999999999999` is invalid syntax (so at most bits/3 + 1 characters are read)."""
    if not text:
        raise NumError("ParseUint", text, SYNTAX)
    limit = (1 << bits) - 1
    value = 0
    for ch in text:
        if not "0" <= ch <= "9":
            raise NumError("ParseUint", text, SYNTAX)
        value = value * 10 + (ord(ch) - 48)
        if value > limit:
            raise NumError("ParseUint", text, RANGE)
    return value


def parse_int(text: str, bits: int = 64) -> int:
    """strconv.ParseInt(text, 10, bits): an optional `+` or `-`, then ParseUint's digits, in range."""
    if not text:
        raise NumError("ParseInt", text, SYNTAX)
    body, negative = text, False
    if text[0] in "+-":
        body, negative = text[1:], text[0] == "-"
    try:
        magnitude = parse_uint(body, bits)
    except NumError as exc:
        if exc.err != RANGE:
            raise NumError("ParseInt", text, exc.err) from None
        magnitude = 1 << bits  # out of range whatever the sign
    cutoff = 1 << (bits - 1)
    if (not negative and magnitude >= cutoff) or (negative and magnitude > cutoff):
        raise NumError("ParseInt", text, RANGE)
    return -magnitude if negative else magnitude


def parse_bool_param(value: str) -> bool:
    """runtime.Convert_Slice_string_To_bool, how kube reads a boolean query parameter: only "0" and
    "false" in any case (strings.EqualFold, which also folds `ſ` to `s` and the Kelvin sign to `k`, as
    casefold() does) are false; anything else, the empty string included, is true."""
    return not (value == "0" or value.casefold() == "false")
