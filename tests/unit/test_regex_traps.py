"""No production code uses the Python habits that made "evil\\n" a valid name, written down as a test.

Python and Go read the same pattern differently: `$` matches before a trailing newline in Python (RE2's
is the end of the text), `\\d`, `\\w` and `\\s` take non-ASCII characters unless re.ASCII is given, case
folding maps the Kelvin sign to 'k', and `str.isdigit()` takes '²'. kubelab validates what kube
validates, as Go does (kubelab/validation.py's GoRegexp and ASCII predicates), so none of these may
appear in the production packages: a pattern is anchored by fullmatch, never by `$`.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PRODUCTION = ["kubelab", "apiserver", "scheduler", "controllers", "proxyagent", "kubeletstub", "clusterdns"]
RE_FUNCTIONS = {"compile", "match", "fullmatch", "search", "findall", "finditer", "sub", "subn", "split"}
UNICODE_CLASSES = ("\\d", "\\w", "\\s", "\\b", "\\D", "\\W", "\\S", "\\B")
STR_PREDICATES = {"isdigit", "isdecimal", "isnumeric", "isalnum", "isalpha"}
# Where a str predicate may stay, and why. kubelab/validation.py holds the ASCII predicates themselves.
# The Content-Length checks never see a non-ASCII value: uvicorn's HTTP parser answers 400 first. The
# query-parameter parsers are being reworked to Go's strconv rules with issue J's item 4.
PREDICATE_ALLOWED = {"kubelab/validation.py", "apiserver/auth.py", "apiserver/codecs.py",
                     "apiserver/routers/resources.py", "apiserver/registry/store.py"}


def _has_dollar_anchor(pattern: str) -> bool:
    escaped = False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "$":
            return True
    return False


def _literal_text(node: ast.expr) -> str | None:
    """A pattern's literal text: a string, or the literal parts of an f-string (`f"^{FMT}$"`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return None


def _flags_text(call: ast.Call) -> str:
    parts = [ast.unparse(a) for a in call.args[1:]] + [ast.unparse(k.value) for k in call.keywords]
    return " ".join(parts)


def offences(source: str, path: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in ("IGNORECASE", "I") and ast.unparse(node.value) == "re":
            found.append(f"{path}:{node.lineno}: re.{node.attr} (case folding maps the Kelvin sign to 'k')")
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        func = node.func
        if func.attr in STR_PREDICATES and not node.args and path not in PREDICATE_ALLOWED:
            found.append(f"{path}:{node.lineno}: .{func.attr}() takes non-ASCII digits and letters")
        regex_call = func.attr in RE_FUNCTIONS and ast.unparse(func.value) == "re"
        pattern = _literal_text(node.args[0]) if regex_call and node.args else None
        if pattern is None:
            continue
        if _has_dollar_anchor(pattern):
            found.append(f"{path}:{node.lineno}: {pattern!r} anchors with $ (use fullmatch or GoRegexp)")
        if any(c in pattern for c in UNICODE_CLASSES) and "ASCII" not in _flags_text(node):
            found.append(f"{path}:{node.lineno}: {pattern!r} has a Unicode class without re.ASCII")
    return found


def test_production_code_has_none_of_pythons_regex_traps() -> None:
    found = []
    for package in PRODUCTION:
        for source in sorted((REPO / package).rglob("*.py")):
            path = str(source.relative_to(REPO))
            found += offences(source.read_text(), path)
    assert found == []


def test_the_scan_finds_each_trap() -> None:
    """The scan is not blind: each trap it looks for is found in a sample."""
    lines = ['import re', 'A = re.compile(r"^[a-z]+$")', 'B = re.match("[0-9]+$", x)', 'C = re.search(r"(\\d+)", y)',
             'D = re.compile("k", re.IGNORECASE)', 'E = port.isdigit()', 'F = re.compile(r"\\w+", re.ASCII)',
             'G = re.fullmatch(r"[a-z]+\\$", z)', 'H = re.compile(f"^{FMT}$")']
    sample = "\n".join(lines)
    found = offences(sample, "sample.py")
    assert sorted(f.split(":")[1] for f in found) == ["2", "3", "4", "5", "6", "9"], found
