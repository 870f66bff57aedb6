"""Label and field selectors as apimachinery parses and matches them (labels.Parse, fields.ParseSelector,
metav1.LabelSelectorAsSelector). Error texts are apimachinery's, since kube-apiserver returns them in
the 400 a bad `?labelSelector=` or `?fieldSelector=` gets."""

from __future__ import annotations

import pytest

from kubelab.models import LabelSelector
from kubelab.selectors import (
    SelectorError,
    parse_field_selector,
    parse_label_selector,
    selector_from_label_selector,
    selector_from_map,
)

LABEL_VALUE_RULE = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
                    "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
NAME_PART_RULE = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
                  "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                  "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")

WEB = {"app": "web", "tier": "front", "replicas": "3"}


@pytest.mark.parametrize(("text", "parsed"), [
    pytest.param("a=b", [("a", "=", ("b",))], id="equals"),
    pytest.param("a==b", [("a", "==", ("b",))], id="double equals"),
    pytest.param("a!=b", [("a", "!=", ("b",))], id="not equals"),
    pytest.param("a in (x,y)", [("a", "in", ("x", "y"))], id="in"),
    pytest.param("a in (y,x,y)", [("a", "in", ("x", "y"))], id="in values are a sorted set"),
    pytest.param("a notin (x)", [("a", "notin", ("x",))], id="notin"),
    pytest.param("a", [("a", "exists", ())], id="exists"),
    pytest.param("!a", [("a", "!", ())], id="does not exist"),
    pytest.param("a>1", [("a", "gt", ("1",))], id="greater than"),
    pytest.param("a<10", [("a", "lt", ("10",))], id="less than"),
    pytest.param("a=", [("a", "=", ("",))], id="empty value after ="),
    pytest.param("a in ()", [("a", "in", ("",))], id="empty parentheses hold the empty value"),
    pytest.param("a in (x,,y)", [("a", "in", ("", "x", "y"))], id="empty place in a list is the empty value"),
    pytest.param("a in (x,)", [("a", "in", ("", "x"))], id="trailing comma in a list is the empty value"),
    pytest.param("in in (in,notin)", [("in", "in", ("in", "notin"))], id="keywords as key and values"),
    pytest.param(" a = b , c in ( x , y ) ", [("a", "=", ("b",)), ("c", "in", ("x", "y"))], id="whitespace"),
    pytest.param("z=1,!y,a in (b),m", [("a", "in", ("b",)), ("m", "exists", ()), ("y", "!", ()), ("z", "=", ("1",))],
                 id="combination, sorted by key"),
    pytest.param("example.com/app=web", [("example.com/app", "=", ("web",))], id="prefixed key"),
    pytest.param("", [], id="empty selects everything"),
    pytest.param("   ", [], id="only whitespace selects everything"),
])
def test_parse_label_selector(text: str, parsed: list[tuple[str, str, tuple[str, ...]]]) -> None:
    selector = parse_label_selector(text)
    assert [(r.key, r.operator, r.values) for r in selector.requirements] == parsed


@pytest.mark.parametrize(("text", "canonical"), [
    pytest.param("b=1,a in (y,x)", "a in (x,y),b=1", id="sorted by key, values sorted"),
    pytest.param("f>3,!c,d notin (e),a==b", "a==b,!c,d notin (e),f>3", id="every operator"),
])
def test_label_selector_string(text: str, canonical: str) -> None:
    assert str(parse_label_selector(text)) == canonical


@pytest.mark.parametrize(("text", "labels", "matches"), [
    pytest.param("app=web", WEB, True, id="equal value"),
    pytest.param("app==web", WEB, True, id="double equal value"),
    pytest.param("app=api", WEB, False, id="other value"),
    pytest.param("app!=api", WEB, True, id="not equal"),
    pytest.param("missing!=x", WEB, True, id="not equal matches a missing key"),
    pytest.param("app in (api,web)", WEB, True, id="in"),
    pytest.param("missing in (x)", WEB, False, id="in needs the key"),
    pytest.param("app notin (web)", WEB, False, id="notin excluded"),
    pytest.param("missing notin (x)", WEB, True, id="notin matches a missing key"),
    pytest.param("tier", WEB, True, id="exists"),
    pytest.param("!tier", WEB, False, id="does not exist, but does"),
    pytest.param("!canary", WEB, True, id="does not exist"),
    pytest.param("replicas>2", WEB, True, id="gt"),
    pytest.param("replicas>3", WEB, False, id="gt is strict"),
    pytest.param("replicas<4", WEB, True, id="lt"),
    pytest.param("app>1", WEB, False, id="gt on a non-integer label"),
    pytest.param("missing>1", WEB, False, id="gt needs the key"),
    pytest.param("app=web,tier=back", WEB, False, id="all requirements must hold"),
    pytest.param("app=web,tier=front,!canary", WEB, True, id="all hold"),
    pytest.param("a=", {"a": ""}, True, id="empty value matches an empty label"),
    pytest.param("a in ()", {"a": ""}, True, id="empty set holds the empty value"),
    pytest.param("", {}, True, id="empty selector matches no labels"),
    pytest.param("n>1", {"n": "1_0"}, False, id="gt parses labels as Go ParseInt does, no underscores"),
])
def test_label_selector_matches(text: str, labels: dict[str, str], matches: bool) -> None:
    assert parse_label_selector(text).matches(labels) is matches


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("x=a,", "found '', expected: identifier after ','", id="trailing comma"),
    pytest.param("a,,b", "found ',', expected: identifier after ','", id="double comma"),
    pytest.param(",", "found ',', expected: !, identifier, or 'end of string'", id="leading comma"),
    pytest.param("a=b=c", "found '=', expected: ',' or 'end of string'", id="two operators"),
    pytest.param("!a=b", "found '=', expected: ',' or 'end of string'", id="operator after not"),
    pytest.param("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt",
                 id="missing operator"),
    pytest.param("a in x", "unable to parse requirement: found 'x' expected: '('", id="in without parentheses"),
    pytest.param("a in (x", "unable to parse requirement: found '', expected: ',' or ')'", id="unclosed list"),
    pytest.param("a in (x y)", "unable to parse requirement: found 'y', expected: ',' or ')'",
                 id="values without comma"),
    pytest.param("a=)", "unable to parse requirement: found ')', expected: identifier", id="parenthesis as value"),
    pytest.param("!", "unable to parse requirement: found '', expected: identifier", id="not without key"),
    pytest.param("a>x", "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, "
                        "the value must be an integer", id="gt with a word"),
    pytest.param("a>", "unable to parse requirement: values[0]: Invalid value: \"\": for 'Gt', 'Lt' operators, "
                       "the value must be an integer", id="gt without value"),
    pytest.param("a=b@c", f"unable to parse requirement: values[0][a]: Invalid value: \"b@c\": {LABEL_VALUE_RULE}",
                 id="invalid value"),
    pytest.param("a>-1", f"unable to parse requirement: values[0][a]: Invalid value: \"-1\": {LABEL_VALUE_RULE}",
                 id="negative number is not a label value"),
    pytest.param("-a=b", f"unable to parse requirement: <nil>: Invalid value: \"-a\": {NAME_PART_RULE}",
                 id="invalid key"),
    pytest.param("/a", "unable to parse requirement: <nil>: Invalid value: \"/a\": prefix part must be non-empty",
                 id="empty prefix"),
])
def test_invalid_label_selector(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as err:
        parse_label_selector(text)
    assert str(err.value) == message


def test_selector_from_map_is_equality_only() -> None:
    selector = selector_from_map({"b": "2", "a": "1"})
    assert str(selector) == "a=1,b=2"
    assert selector.matches({"a": "1", "b": "2", "c": "3"})
    assert not selector.matches({"a": "1"})
    assert selector_from_map(None).matches({"anything": "x"})


def label_selector(data: dict[str, object] | None) -> LabelSelector | None:
    return None if data is None else LabelSelector.from_dict(data)


@pytest.mark.parametrize(("data", "labels", "matches"), [
    pytest.param(None, {}, False, id="nil selects nothing"),
    pytest.param(None, WEB, False, id="nil selects nothing, even labelled"),
    pytest.param({}, WEB, True, id="empty selects everything"),
    pytest.param({"matchLabels": {"app": "web"}}, WEB, True, id="matchLabels"),
    pytest.param({"matchLabels": {"app": "api"}}, WEB, False, id="matchLabels mismatch"),
    pytest.param({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "back"]}]}, WEB, True,
                 id="In"),
    pytest.param({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]}, WEB, False,
                 id="NotIn"),
    pytest.param({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, WEB, True, id="Exists"),
    pytest.param({"matchExpressions": [{"key": "canary", "operator": "DoesNotExist"}]}, WEB, True,
                 id="DoesNotExist"),
    pytest.param({"matchLabels": {"app": "web"},
                  "matchExpressions": [{"key": "tier", "operator": "In", "values": ["back"]}]}, WEB, False,
                 id="matchLabels and matchExpressions are ANDed"),
])
def test_selector_from_label_selector(data: dict[str, object] | None, labels: dict[str, str], matches: bool) -> None:
    assert selector_from_label_selector(label_selector(data)).matches(labels) is matches


@pytest.mark.parametrize(("data", "message"), [
    pytest.param({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
                 '"Gt" is not a valid label selector operator', id="Gt is for node selectors only"),
    pytest.param({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
                 "values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty",
                 id="In without values"),
    pytest.param({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
                 'values: Invalid value: []string{"x"}: values set must be empty for exists and does not exist',
                 id="Exists with values"),
    pytest.param({"matchLabels": {"a": "b c"}}, f'values[0][a]: Invalid value: "b c": {LABEL_VALUE_RULE}',
                 id="invalid matchLabels value"),
    pytest.param({"matchExpressions": [{"key": "-a", "operator": "Exists"}]},
                 f'key: Invalid value: "-a": {NAME_PART_RULE}', id="invalid key"),
])
def test_invalid_label_selector_object(data: dict[str, object], message: str) -> None:
    with pytest.raises(SelectorError) as err:
        selector_from_label_selector(label_selector(data))
    assert str(err.value) == message


POD_FIELDS = {"metadata.name": "web-1", "spec.nodeName": "n1", "status.phase": "Running", "metadata.namespace": "a,b"}


@pytest.mark.parametrize(("text", "parsed"), [
    pytest.param("spec.nodeName=n1", [("spec.nodeName", "=", "n1")], id="equals"),
    pytest.param("spec.nodeName==n1", [("spec.nodeName", "=", "n1")], id="double equals"),
    pytest.param("status.phase!=Failed", [("status.phase", "!=", "Failed")], id="not equals"),
    pytest.param("status.phase!=Succeeded,status.phase!=Failed",
                 [("status.phase", "!=", "Failed"), ("status.phase", "!=", "Succeeded")],
                 id="the scheduler's informer selector"),
    pytest.param("a=x\\,y", [("a", "=", "x,y")], id="escaped comma"),
    pytest.param("a=x\\=y", [("a", "=", "x=y")], id="escaped equals"),
    pytest.param("a=x\\\\y", [("a", "=", "x\\y")], id="escaped backslash"),
    pytest.param("a=", [("a", "=", "")], id="empty value"),
    pytest.param(",a=b,", [("a", "=", "b")], id="empty terms are skipped"),
    pytest.param("a = b", [("a ", "=", " b")], id="nothing is trimmed"),
    pytest.param("", [], id="empty selects everything"),
])
def test_parse_field_selector(text: str, parsed: list[tuple[str, str, str]]) -> None:
    assert [(r.field, r.operator, r.value) for r in parse_field_selector(text).requirements] == parsed


@pytest.mark.parametrize(("text", "matches"), [
    pytest.param("spec.nodeName=n1", True, id="equal"),
    pytest.param("spec.nodeName=n2", False, id="other node"),
    pytest.param("status.phase!=Succeeded,status.phase!=Failed", True, id="running is not terminal"),
    pytest.param("metadata.namespace=a\\,b", True, id="escaped comma in the value"),
    pytest.param("spec.hostname=", True, id="a missing field reads as empty"),
])
def test_field_selector_matches(text: str, matches: bool) -> None:
    assert parse_field_selector(text).matches(POD_FIELDS) is matches


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("spec.nodeName", "invalid selector: 'spec.nodeName'; can't understand 'spec.nodeName'",
                 id="no operator"),
    pytest.param("a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'", id="second term without operator"),
    # The first operator wins, so the rest of the term is a value with a bare '='; UnescapedRune prints the
    # rune with %v, i.e. its code point.
    pytest.param("a=b=c", "invalid field selector: unescaped character in value: 61", id="second equals"),
    pytest.param("a=b!=c", "invalid field selector: unescaped character in value: 61", id="first operator wins"),
    pytest.param("a\\=b=c", "invalid field selector: unescaped character in value: 61",
                 id="no escapes in the field name"),
    pytest.param("a=b\\x", "invalid field selector: invalid escape sequence: \\x", id="unknown escape"),
    pytest.param("a=b\\", "invalid field selector: invalid escape sequence: \\", id="trailing backslash"),
    pytest.param("   ", "invalid selector: '   '; can't understand '   '", id="only whitespace"),
])
def test_invalid_field_selector(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as err:
        parse_field_selector(text)
    assert str(err.value) == message
