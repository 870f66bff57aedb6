"""Make tests/unit/fixtures/validation_go_corpus.json: hostile strings and Go's verdict on each.

kubelab's validators must answer as kube's Go code does. This draws a corpus of strings (hand-picked
traps, valid names mutated with them, and strings hypothesis draws from kube's own patterns and from
wide alphabets), asks scripts/validation_oracle.go what Go's regexp, len, net.ParseIP, net.ParseCIDR
and strconv.ParseInt say about each, and writes the answers as a fixture.
tests/unit/test_validation_go.py compares kubelab with that fixture; the tests need no Go.

Regenerate (needs Go; Debian: `apt-get install golang-go`), from the repository root:

    .venv/bin/python scripts/gen_validation_corpus.py

The draw is derandomized, so the same hypothesis version gives the same corpus; commit the fixture
with the change that made you regenerate it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[1]
ORACLE = REPO / "scripts" / "validation_oracle.go"
FIXTURE = REPO / "tests" / "unit" / "fixtures" / "validation_go_corpus.json"

# Characters Python and Go read differently, or that must never get through: line ends and controls,
# non-ASCII digits ('²' is a digit to str.isdigit, '١' to \d and int()), letters that fold or lower to
# ASCII (Kelvin sign, 'İ'), full-width and look-alike letters, zero-width and direction marks, a
# combining accent, a lone surrogate (Go's JSON decoder reads it as U+FFFD).
TRAPS = ["\n", "\r", "\r\n", "\x00", "\t", "\x0b", "\x0c", " ", "\x7f", "\x85", "\u2028", "\u2029", "²", "١", "٣",
         "０", "９", "Ｋ", "\u212a", "\u0130", "ı", "ſ", "ｗｅｂ", "ß", "é", "е", "\u200b", "\u200d", "\ufeff",
         "\u202e", "\u0301", "\ud800", "\U0001f600", "$", "^", "/", ".", "..", "-", "_", "%", ":", "\\", '"', "'"]
SEEDS = ["web", "my-name", "a", "123-abc", "example.com", "a.b.c", "MyValue", "my_value", "12345", "http", "p",
         "key.name", "KEY_NAME", "example.com/MyName", "app.kubernetes.io/name", "10.0.0.1", "fd00::1",
         "10.0.0.0/24", "42", "-42", "kubernetes"]
LONG = [c * n for c in ("a", "1", "-", ".") for n in (15, 16, 62, 63, 64, 252, 253, 254)]
LONG += ["a" * 62 + "é", "a" * 61 + "é", "é" * 32, "é" * 31, "a" * 14 + "é", "p" * 15 + "\n",
         ("a" * 63 + ".") * 3 + "a" * 61, ("a" * 63 + ".") * 3 + "a" * 62, "a/" + "b" * 63, "a/" + "b" * 64,
         "a" * 253 + "/b", "a" * 254 + "/b"]
HAND = ["", " ", "a b", "A", "aB", "-a", "a-", "a--b", "a..b", ".a", "a.", "a/b", "a/b/c", "/a", "a/", "/", "//",
        "EXAMPLE.com/x", "example.com/", "-.a", "a.-b", "0", "00", "+5", "-0", "+-5", "9223372036854775807",
        "9223372036854775808", "-9223372036854775808", "-9223372036854775809", "1_0", "0x10", "1e3", ".", "..",
        "..a", ".a", "a..", "010.1.1.1", "1.2.3.4", "1.2.3.4\n", "::ffff:1.2.3.4", "fe80::1%eth0",
        "fe80::1%a\nb", "::1", "1::2::3", "1.2.3", "256.1.1.1", "10.0.0.0/8", "10.0.0.1/33", "10.0.0.0/08",
        "fe80::%1/64", "10.0.0.0/ 8", "1.2.3.4/32\n", "evil\n", "\nevil", "evil\r", "ns\n", "x\n", "p\n"]


def hand_picked() -> list[str]:
    picked = HAND + LONG + TRAPS
    for seed in SEEDS:
        for trap in TRAPS:
            picked += [seed + trap, trap + seed, seed[:1] + trap + seed[1:]]
    return picked


def drawn() -> list[str]:
    """Strings hypothesis draws: kube's patterns unanchored (junk, newlines included, around a match),
    and text from wide alphabets."""
    found: list[str] = []
    formats = ["[a-z0-9]([-a-z0-9]*[a-z0-9])?", "[a-z]([-a-z0-9]*[a-z0-9])?",
               "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", "[-a-z0-9]+", "[-._a-zA-Z0-9]+",
               r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", r"^[a-z]+$", r"\A[0-9]+$"]
    strategies = [st.from_regex(f, fullmatch=True) for f in formats[:6]]
    strategies += [st.from_regex(f) for f in formats]
    strategies += [st.text(max_size=20), st.text(alphabet="abcXYZ019-._/\n\r ²Ｋ\u212a\u0130é", max_size=20),
                   st.text(alphabet=st.characters(codec="ascii"), max_size=70),
                   st.builds(lambda a, b: a + "/" + b, st.from_regex(formats[5], fullmatch=True),
                             st.from_regex(formats[2], fullmatch=True))]

    @settings(max_examples=2500, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.one_of(strategies))
    def collect(value: str) -> None:
        found.append(value)

    collect()
    return found


def main() -> int:
    go = shutil.which("go")
    if go is None:
        print("needs Go (Debian: apt-get install golang-go)", file=sys.stderr)
        return 2
    corpus = list(dict.fromkeys(hand_picked() + drawn()))
    done = subprocess.run([go, "run", str(ORACLE)], input=json.dumps(corpus), capture_output=True, text=True,
                          check=True)
    answer = json.loads(done.stdout)
    # Compact, as the file is committed: per string, how Go quotes it (%q), one '0'/'1' per pattern and per
    # parser (in the order
    # of "matchNames" and "parseNames") and, per validator (in the order of "errorNames"), the indexes of
    # its messages in "messages".
    first = answer["verdicts"][0] if answer["verdicts"] else {"matches": {}, "errors": {}, "parses": {}}
    match_names, error_names, parse_names = sorted(first["matches"]), sorted(first["errors"]), sorted(first["parses"])
    messages: dict[str, int] = {}
    cases = []
    for value, verdict in zip(corpus, answer["verdicts"], strict=True):
        cases.append([value, verdict["quoted"], "".join("1" if verdict["matches"][n] else "0" for n in match_names),
                      "".join("1" if verdict["parses"][n] else "0" for n in parse_names),
                      [[messages.setdefault(m, len(messages)) for m in verdict["errors"][n]] for n in error_names]])
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    fixture = {"about": "Go's verdicts on hostile strings: made by scripts/gen_validation_corpus.py, read by "
                        "tests/unit/test_validation_go.py", "go": answer["go"], "patterns": answer["patterns"],
               "matchNames": match_names, "parseNames": parse_names, "errorNames": error_names,
               "messages": list(messages), "cases": cases}
    FIXTURE.write_text(json.dumps(fixture, ensure_ascii=True, separators=(",", ":")) + "\n")
    print(f"{len(cases)} strings, {len(messages)} distinct messages, Go {answer['go']} -> "
          f"{FIXTURE.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
