"""Names, label keys and values, port names and numbers, checked with apimachinery's rules
(util/validation/validation.go), and field errors rendered exactly as field.Error prints them — the
text kubectl shows after `The Service "x" is invalid:`."""

from __future__ import annotations

from typing import Any

import pytest

from kubelab import validation
from kubelab.validation import (
    DNS1035_LABEL_MSG,
    DNS1123_LABEL_MSG,
    DNS1123_SUBDOMAIN_MSG,
    LABEL_VALUE_MSG,
    QUALIFIED_NAME_MSG,
    FieldError,
    GoLiteral,
)

SUBDOMAIN_RULE = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                  "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                  "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


def test_messages_are_apimachinerys_word_for_word() -> None:
    assert DNS1123_SUBDOMAIN_MSG == SUBDOMAIN_RULE
    assert DNS1123_LABEL_MSG == (
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
        "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
    assert DNS1035_LABEL_MSG == (
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
        "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
        "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
    assert QUALIFIED_NAME_MSG == (
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
    assert LABEL_VALUE_MSG == (
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
        "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
        "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")


@pytest.mark.parametrize(("value", "problems"), [
    pytest.param("my-name", [], id="valid"),
    pytest.param("123-abc", [], id="may start with a digit"),
    pytest.param("a", [], id="one character"),
    pytest.param("a" * 63, [], id="63 characters"),
    pytest.param("a" * 64, ["must be no more than 63 characters"], id="64 characters"),
    pytest.param("My-Name", [DNS1123_LABEL_MSG], id="upper case"),
    pytest.param("-name", [DNS1123_LABEL_MSG], id="leading hyphen"),
    pytest.param("name-", [DNS1123_LABEL_MSG], id="trailing hyphen"),
    pytest.param("my.name", [DNS1123_LABEL_MSG], id="dot"),
    pytest.param("my_name", [DNS1123_LABEL_MSG], id="underscore"),
    pytest.param("", [DNS1123_LABEL_MSG], id="empty"),
    pytest.param("-" * 64, ["must be no more than 63 characters", DNS1123_LABEL_MSG], id="too long and invalid"),
])
def test_dns1123_label(value: str, problems: list[str]) -> None:
    assert validation.dns1123_label_errors(value) == problems


@pytest.mark.parametrize(("value", "problems"), [
    pytest.param("example.com", [], id="dotted"),
    pytest.param("web", [], id="single label"),
    pytest.param("a." * 126 + "a", [], id="253 characters"),
    pytest.param("a." * 126 + "ab", ["must be no more than 253 characters"], id="254 characters"),
    pytest.param("Bad_Name", [DNS1123_SUBDOMAIN_MSG], id="upper case and underscore"),
    pytest.param("a..b", [DNS1123_SUBDOMAIN_MSG], id="empty label"),
    pytest.param(".a", [DNS1123_SUBDOMAIN_MSG], id="leading dot"),
    pytest.param("a-.b", [DNS1123_SUBDOMAIN_MSG], id="label ends with hyphen"),
])
def test_dns1123_subdomain(value: str, problems: list[str]) -> None:
    assert validation.dns1123_subdomain_errors(value) == problems


@pytest.mark.parametrize(("value", "problems"), [
    pytest.param("web", [], id="valid"),
    pytest.param("abc-123", [], id="ends with a digit"),
    pytest.param("123-abc", [DNS1035_LABEL_MSG], id="starts with a digit"),
    pytest.param("web.svc", [DNS1035_LABEL_MSG], id="dot"),
    pytest.param("b" * 64, ["must be no more than 63 characters"], id="too long"),
])
def test_dns1035_label(value: str, problems: list[str]) -> None:
    assert validation.dns1035_label_errors(value) == problems


@pytest.mark.parametrize(("key", "problems"), [
    pytest.param("app", [], id="plain"),
    pytest.param("MyName", [], id="upper case allowed"),
    pytest.param("my.name_x-1", [], id="dots underscores hyphens"),
    pytest.param("example.com/app", [], id="prefixed"),
    pytest.param("kubernetes.io/service-name", [], id="kubernetes prefix"),
    pytest.param("a" * 63, [], id="63 character name"),
    pytest.param("a" * 64, ["name part must be no more than 63 characters"], id="64 character name"),
    pytest.param("-app", [QUALIFIED_NAME_MSG], id="leading hyphen"),
    pytest.param("app_", [QUALIFIED_NAME_MSG], id="trailing underscore"),
    pytest.param("", ["name part must be non-empty", QUALIFIED_NAME_MSG], id="empty is two problems"),
    pytest.param("example.com/", ["name part must be non-empty", QUALIFIED_NAME_MSG], id="empty name part"),
    pytest.param("/app", ["prefix part must be non-empty"], id="empty prefix"),
    pytest.param("Example.com/app", [f"prefix part {DNS1123_SUBDOMAIN_MSG}"], id="upper-case prefix"),
    pytest.param("Bad_Prefix/-x", [f"prefix part {DNS1123_SUBDOMAIN_MSG}", QUALIFIED_NAME_MSG],
                 id="prefix and name both reported"),
    pytest.param("a/b/c", [("a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must "
                            "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
                            "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') "
                            "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")],
                 id="two slashes"),
])
def test_label_key(key: str, problems: list[str]) -> None:
    assert validation.label_key_errors(key) == problems
    assert validation.qualified_name_errors(key) == problems


@pytest.mark.parametrize(("value", "problems"), [
    pytest.param("", [], id="empty is valid"),
    pytest.param("MyValue", [], id="upper case"),
    pytest.param("my_value", [], id="underscore"),
    pytest.param("12345", [], id="digits"),
    pytest.param("a b", [LABEL_VALUE_MSG], id="space"),
    pytest.param("-1", [LABEL_VALUE_MSG], id="leading hyphen"),
    pytest.param("v" * 64, ["must be no more than 63 characters"], id="too long"),
])
def test_label_value(value: str, problems: list[str]) -> None:
    assert validation.label_value_errors(value) == problems


@pytest.mark.parametrize(("name", "problems"), [
    pytest.param("http", [], id="valid"),
    pytest.param("http-alt", [], id="hyphen inside"),
    pytest.param("h2c", [], id="digit inside"),
    pytest.param("a" * 15, [], id="15 characters"),
    pytest.param("a" * 16, ["must be no more than 15 characters"], id="16 characters"),
    pytest.param("HTTP", ["must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                          "must contain at least one letter (a-z)"], id="upper case"),
    pytest.param("8080", ["must contain at least one letter (a-z)"], id="digits only"),
    pytest.param("a--b", ["must not contain consecutive hyphens"], id="double hyphen"),
    pytest.param("-http", ["must not begin or end with a hyphen"], id="leading hyphen"),
    pytest.param("http-", ["must not begin or end with a hyphen"], id="trailing hyphen"),
    pytest.param("--", ["must contain at least one letter (a-z)", "must not contain consecutive hyphens",
                        "must not begin or end with a hyphen"], id="only hyphens, in apimachinery's order"),
    pytest.param("", ["must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                      "must contain at least one letter (a-z)"], id="empty"),
])
def test_port_name(name: str, problems: list[str]) -> None:
    assert validation.port_name_errors(name) == problems


@pytest.mark.parametrize(("port", "problems"), [
    pytest.param(1, [], id="lowest"),
    pytest.param(65535, [], id="highest"),
    pytest.param(0, ["must be between 1 and 65535, inclusive"], id="zero"),
    pytest.param(65536, ["must be between 1 and 65535, inclusive"], id="above range"),
    pytest.param(-1, ["must be between 1 and 65535, inclusive"], id="negative"),
])
def test_port_number(port: int, problems: list[str]) -> None:
    assert validation.port_number_errors(port) == problems


@pytest.mark.parametrize(("error", "rendered"), [
    pytest.param(validation.invalid("metadata.name", "Bad_Name", DNS1123_SUBDOMAIN_MSG),
                 f'metadata.name: Invalid value: "Bad_Name": {SUBDOMAIN_RULE}', id="invalid name"),
    pytest.param(validation.invalid("spec.ports[0].port", 0, "must be between 1 and 65535, inclusive"),
                 "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive", id="invalid port"),
    pytest.param(validation.invalid("spec.x", None, "must be set"), "spec.x: Invalid value: null: must be set",
                 id="nil value prints null"),
    pytest.param(validation.invalid("spec.enabled", True, "no"), "spec.enabled: Invalid value: true: no",
                 id="bool"),
    pytest.param(validation.invalid("spec.ips", ["a", "b"], "bad"), 'spec.ips: Invalid value: []string{"a", "b"}: bad',
                 id="string list as Go prints it"),
    pytest.param(validation.invalid("spec.ports[0]", GoLiteral("core.ServicePort{Name:\"\"}"), "x"),
                 'spec.ports[0]: Invalid value: core.ServicePort{Name:""}: x', id="Go literal kept"),
    pytest.param(validation.invalid("metadata.name", 'say "hi"', "x"),
                 'metadata.name: Invalid value: "say \\"hi\\"": x', id="quotes escaped as %q does"),
    pytest.param(validation.required("spec.ports[0].port"), "spec.ports[0].port: Required value", id="required"),
    pytest.param(validation.required("metadata.name", "name or generateName is required"),
                 "metadata.name: Required value: name or generateName is required", id="required with detail"),
    pytest.param(validation.not_supported("spec.ports[0].protocol", "XYZ", ["SCTP", "TCP", "UDP"]),
                 'spec.ports[0].protocol: Unsupported value: "XYZ": supported values: "SCTP", "TCP", "UDP"',
                 id="unsupported"),
    pytest.param(validation.duplicate("spec.ports[1].name", "http"), 'spec.ports[1].name: Duplicate value: "http"',
                 id="duplicate"),
    pytest.param(validation.forbidden("spec.ports[0].nodePort", "may not be used when `type` is 'ClusterIP'"),
                 "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'", id="forbidden"),
    pytest.param(FieldError("TooLong", "metadata.annotations", None, "must have at most 262144 bytes"),
                 "metadata.annotations: Too long: must have at most 262144 bytes", id="too long"),
    pytest.param(FieldError("TooMany", "endpoints", 1001, "must have at most 1000 items"),
                 "endpoints: Too many: 1001: must have at most 1000 items", id="too many"),
])
def test_field_error_rendering(error: FieldError, rendered: str) -> None:
    assert str(error) == rendered
    assert rendered == f"{error.field}: {error.body}"


@pytest.mark.parametrize(("error", "reason"), [
    pytest.param(validation.invalid("f", 1, "x"), "FieldValueInvalid", id="invalid"),
    pytest.param(validation.required("f"), "FieldValueRequired", id="required"),
    pytest.param(validation.not_supported("f", "x", ["y"]), "FieldValueNotSupported", id="not supported"),
    pytest.param(validation.duplicate("f", "x"), "FieldValueDuplicate", id="duplicate"),
    pytest.param(validation.forbidden("f", "x"), "FieldValueForbidden", id="forbidden"),
])
def test_status_cause_reason(error: FieldError, reason: str) -> None:
    assert error.reason == reason


@pytest.mark.parametrize(("labels", "rendered"), [
    pytest.param({"app": "web"}, [], id="valid"),
    pytest.param({"-app": "web"}, [f'metadata.labels: Invalid value: "-app": {QUALIFIED_NAME_MSG}'], id="bad key"),
    # ValidateLabels reports a bad value at the map's path, not at metadata.labels[app].
    pytest.param({"app": "a b"}, [f'metadata.labels: Invalid value: "a b": {LABEL_VALUE_MSG}'], id="bad value"),
])
def test_validate_labels(labels: dict[str, str], rendered: list[str]) -> None:
    assert [str(e) for e in validation.validate_labels(labels, "metadata.labels")] == rendered


@pytest.mark.parametrize(("annotations", "rendered"), [
    pytest.param({"Example.COM/Key": "v"}, [], id="case does not matter"),
    pytest.param({"a b": "v"}, [f'metadata.annotations: Invalid value: "a b": {QUALIFIED_NAME_MSG}'],
                 id="bad key keeps its spelling"),
    pytest.param({"big": "x" * (256 * 1024)}, ["metadata.annotations: Too long: must have at most 262144 bytes"],
                 id="total size over 256 KiB"),
])
def test_validate_annotations(annotations: dict[str, Any], rendered: list[str]) -> None:
    assert [str(e) for e in validation.validate_annotations(annotations, "metadata.annotations")] == rendered
