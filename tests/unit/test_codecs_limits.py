"""What a request body may become: nesting read from JSON text, YAML alias expansion bounded by bytes.

* codecs.json_depth reads the depth of a JSON text from its brackets outside strings, in C-speed steps,
  instead of walking the decoded value; on random JSON (strings full of brackets, quotes and
  backslashes) it must agree with a walk of the value.
* A YAML body whose aliases would add more than MAX_ALIAS_EXPANSION_BYTES is refused before anything is
  expanded, with kube's words; so is one whose aliases add too many nodes. Anchors reused within the
  limits decode as before.
"""

from __future__ import annotations

import os
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apiserver import codecs
from apiserver.errors import StatusError

EXAMPLES = int(os.environ.get("KUBELAB_FUZZ_EXAMPLES", "500"))


def walked_depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((walked_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((walked_depth(v) for v in value), default=0)
    return 0


TRICKY_TEXT = st.text(alphabet=st.sampled_from(list('[]{}"\\ab/\n\u00e9')), max_size=8)
JSON = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), TRICKY_TEXT),
                    lambda inner: st.one_of(st.lists(inner, max_size=4),
                                            st.dictionaries(TRICKY_TEXT, inner, max_size=4)),
                    max_leaves=40)


@settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(JSON)
def test_json_depth_read_from_the_text_equals_a_walk_of_the_value(value: Any) -> None:
    raw = orjson.dumps(value)
    assert codecs.json_depth(raw) == walked_depth(value)
    # The same value as Go or Python writes it, with spaces and escapes orjson leaves out.
    import json
    assert codecs.json_depth(json.dumps(value, ensure_ascii=True, indent=1).encode()) == walked_depth(value)


def test_json_deeper_than_the_limit_is_a_bad_request() -> None:
    deep = b"[" * 129 + b"]" * 129
    with pytest.raises(StatusError) as err:
        codecs.decode("application/json", deep)
    assert err.value.code == 400
    assert err.value.message == "couldn't get version/kind; json parse error: exceeded max depth of 128"
    # Brackets inside strings do not count.
    assert codecs.decode("application/json", b'{"a":"' + b"[" * 1000 + b'"}') == {"a": "[" * 1000}
    assert codecs.decode("application/json", b"[" * 128 + b"]" * 128) is not None


def yaml_error(text: str) -> str:
    with pytest.raises(StatusError) as err:
        codecs.decode("application/yaml", text.encode())
    assert err.value.code == 400
    return err.value.message


def test_a_few_aliases_of_a_huge_scalar_are_refused_by_bytes() -> None:
    scalar = "a" * 65536
    # 50 aliases of 64 KiB add 3.2 MB: over the 3 MiB that aliases may add (and well under the node count).
    text = f"x: &s {scalar}\nitems: [{', '.join(['*s'] * 50)}]\n"
    assert yaml_error(text) == "error converting YAML to JSON: yaml: document contains excessive aliasing"
    # 45 add 2.9 MB: allowed, and every alias decodes to the scalar.
    text = f"x: &s {scalar}\nitems: [{', '.join(['*s'] * 45)}]\n"
    assert codecs.decode("application/yaml", text.encode())["items"] == [scalar] * 45


def test_aliases_of_aliases_are_refused_by_count() -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]
    assert yaml_error("\n".join(lines)) == "error converting YAML to JSON: yaml: document contains excessive aliasing"


def test_a_recursive_alias_is_refused() -> None:
    assert "recursive alias" in yaml_error("metadata: &m {name: loop, labels: *m}\n")


def test_yaml_is_read_with_libyaml_when_there_is_one() -> None:
    """The pure-Python reader took 17 s for a 1.3 MiB ConfigMap; PyYAML's wheels carry libyaml."""
    assert yaml.__with_libyaml__
    assert issubclass(codecs._SafeLoader, yaml.CSafeLoader)
    # sigs.k8s.io/yaml's habits still hold with the C reader: timestamps stay text, keys become strings.
    doc = codecs.decode("application/yaml", b"t: 2024-01-01T00:00:00Z\n1: one\nenabled: yes\n")
    assert doc == {"t": "2024-01-01T00:00:00Z", "1": "one", "enabled": True}  # yes: YAML 1.1, as go-yaml v2
