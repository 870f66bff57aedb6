"""The query parameters of LIST, WATCH and DELETE, decoded and refused as kube-apiserver does them.

Numbers are Go's (strconv: ASCII digits, int64, uint64 for a resourceVersion): `²`, Arabic-Indic
digits, 5,000 digits, `1_000`, spaces, `0x10` are 400 with strconv's words, never the 500 Python's
int() made of them. LIST validates its options (ValidateListOptions, 422 `ListOptions.meta.k8s.io ""
is invalid`), its continue token (400 `invalid continue token`) and its resourceVersion (400 `invalid
resource version`), which it used to ignore. Every refused request changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from apitools import CORE, TABLE_ACCEPT, assert_status, create, unique_name

from apiserver import continuetoken

HUGE = "9" * 5000


@pytest.fixture(scope="module")
def ns(apiserver: str) -> Iterator[str]:
    name = unique_name("params")
    with httpx.Client(base_url=apiserver, timeout=30) as api:
        create(api, f"{CORE}/namespaces", {"metadata": {"name": name}})
        for i in range(3):
            create(api, f"{CORE}/namespaces/{name}/configmaps", {"metadata": {"name": f"cm-{i}"}})
        yield name


def cms(ns: str) -> str:
    return f"{CORE}/namespaces/{ns}/configmaps"


NUMBERS = [  # (value, what strconv says after `parsing "<value>": `)
    pytest.param("²", "invalid syntax", id="superscript two"),
    pytest.param("٣", "invalid syntax", id="arabic-indic three"),
    pytest.param("1_000", "invalid syntax", id="underscore"),
    pytest.param(" 1", "invalid syntax", id="leading space"),
    pytest.param("0x10", "invalid syntax", id="hex"),
    pytest.param("1.5", "invalid syntax", id="fraction"),
    pytest.param("", "invalid syntax", id="empty"),
    pytest.param("+", "invalid syntax", id="sign alone"),
    pytest.param(HUGE, "value out of range", id="5000 digits"),
    pytest.param("9223372036854775808", "value out of range", id="2^63"),
    pytest.param("9" * 20 + "x", "value out of range", id="out of range before the bad character"),
]


@pytest.mark.parametrize(("value", "problem"), NUMBERS)
@pytest.mark.parametrize("parameter", ["timeoutSeconds", "limit"])
@pytest.mark.parametrize("watch", [False, True], ids=["list", "watch"])
def test_a_bad_number_is_strconvs_400(api: httpx.Client, ns: str, parameter: str, value: str, problem: str,
                                      watch: bool) -> None:
    params = {parameter: value, **({"watch": "true"} if watch else {})}
    assert_status(api.get(cms(ns), params=params), 400, "BadRequest",
                  f'strconv.ParseInt: parsing "{value}": {problem}')


@pytest.mark.parametrize(("value", "problem"), [
    *NUMBERS[:6], NUMBERS[8],
    pytest.param("-1", "invalid syntax", id="negative (ParseUint takes no sign)"),
    pytest.param("18446744073709551616", "value out of range", id="2^64"),
])
def test_a_bad_resource_version_is_the_versioners_400(api: httpx.Client, ns: str, value: str, problem: str) -> None:
    detail = f'resourceVersion: Invalid value: "{value}": strconv.ParseUint: parsing "{value}": {problem}'
    # LIST: the etcd3 store's words; WATCH: the versioner's alone (kube answers those with a 500).
    assert_status(api.get(cms(ns), params={"resourceVersion": value}), 400, "BadRequest",
                  f"invalid resource version: {detail}")
    assert_status(api.get(cms(ns), params={"resourceVersion": value, "watch": "true"}), 400, "BadRequest", detail)


def test_good_numbers_still_work(api: httpx.Client, ns: str) -> None:
    # Go accepts a sign and leading zeros; 2^64-1 is a valid resourceVersion (one etcd has not reached).
    assert api.get(cms(ns), params={"limit": "+0002"}).json()["metadata"]["continue"]
    resp = api.get(cms(ns), params={"watch": "true", "timeoutSeconds": "-1"})
    assert (resp.status_code, resp.text) == (200, ""), resp.text  # an expired timeout: an empty watch
    body = assert_status(api.get(cms(ns), params={"resourceVersion": "18446744073709551615", "limit": "1"}), 504,
                         "Timeout")
    assert body["message"].startswith("Timeout: Too large resource version: 18446744073709551615, current: ")
    assert body["details"]["causes"] == [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]
    # The watch cache's wait says when to try again (retryAfterSeconds 1), in the header too.
    waited = api.get(cms(ns), params={"resourceVersion": "18446744073709551615"})
    assert (waited.status_code, waited.json()["details"].get("retryAfterSeconds"), waited.headers.get("retry-after")) \
        == (504, 1, "1")
    watched = api.get(cms(ns), params={"watch": "true", "resourceVersion": "18446744073709551615"})
    assert watched.status_code == 200 and watched.json()["type"] == "ERROR", watched.text
    assert watched.json()["object"]["code"] == 504, watched.text


@pytest.mark.parametrize(("params", "message"), [
    pytest.param({"resourceVersionMatch": "NotOlderThan"},
                 "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is "
                 "provided", id="match without a resourceVersion"),
    pytest.param({"resourceVersionMatch": "Exact", "resourceVersion": "0"},
                 'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                 id="exact at 0"),
    pytest.param({"resourceVersionMatch": "Newest", "resourceVersion": "1"},
                 'resourceVersionMatch: Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""',
                 id="unknown match"),
    pytest.param({"resourceVersionMatch": "Exact", "resourceVersion": "5", "continue": "x"},
                 "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided",
                 id="match with continue"),
    pytest.param({"sendInitialEvents": "true"},
                 "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list", id="initial events on a list"),
    pytest.param({"watch": "1", "resourceVersionMatch": "NotOlderThan"},
                 "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless "
                 "sendInitialEvents is provided", id="watch with a match"),
    pytest.param({"watch": "true", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan"},
                 "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList "
                 "feature gate is enabled", id="watch-list"),
])
def test_list_options_are_validated_as_kube_validates_them(api: httpx.Client, ns: str, params: dict[str, str],
                                                           message: str) -> None:
    body = assert_status(api.get(cms(ns), params=params), 422, "Invalid", f'ListOptions.meta.k8s.io "" is invalid: '
                                                                          f"{message}")
    assert body["details"]["kind"] == "ListOptions" and body["details"]["group"] == "meta.k8s.io"


def token(doc: Any) -> str:
    return continuetoken._b64encode(doc if isinstance(doc, bytes) else continuetoken._go_json(doc))


@pytest.mark.parametrize(("value", "message"), [
    pytest.param("!!", "continue key is not valid: illegal base64 data at input byte 0", id="not base64"),
    pytest.param("abcde", "continue key is not valid: illegal base64 data at input byte 4", id="a lone last character"),
    pytest.param(token(b"[1]"), "continue key is not valid: json: cannot unmarshal array into Go value of type "
                                "storage.continueToken", id="not an object"),
    pytest.param(token(b"{"), "continue key is not valid: unexpected end of JSON input", id="cut short"),
    pytest.param(token({"v": "meta.k8s.io/v2", "rv": 5, "start": "a"}),
                 "continue key is not valid: server does not recognize this encoded version meta.k8s.io/v2",
                 id="other version"),
    pytest.param(token({"v": "meta.k8s.io/v1", "rv": 0, "start": "a"}),
                 "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
                 id="no revision"),
    pytest.param(token({"v": "meta.k8s.io/v1", "rv": 5, "start": ""}),
                 "continue key is not valid: encoded start key empty (version meta.k8s.io/v1)", id="no start"),
    pytest.param(token({"v": "meta.k8s.io/v1", "rv": "5", "start": "a"}),
                 "continue key is not valid: json: cannot unmarshal string into Go struct field continueToken.rv of "
                 "type int64", id="revision a string"),
    pytest.param(token({"v": "meta.k8s.io/v1", "rv": 5, "start": "../../secrets/kube-system/x"}),
                 "continue key is not valid: ../../secrets/kube-system/x", id="climbing out of the prefix"),
    pytest.param(token({"v": "meta.k8s.io/v1", "rv": 5, "start": "a//b"}),
                 "continue key is not valid: a//b", id="not a clean path"),
])
def test_a_bad_continue_token_is_a_400(api: httpx.Client, ns: str, value: str, message: str) -> None:
    assert_status(api.get(cms(ns), params={"limit": "1", "continue": value}), 400, "BadRequest",
                  f"invalid continue token: {message}")


def test_continue_with_a_resource_version_is_a_400(api: httpx.Client, ns: str) -> None:
    first = api.get(cms(ns), params={"limit": "1"}).json()["metadata"]
    assert_status(api.get(cms(ns), params={"limit": "1", "continue": first["continue"],
                                           "resourceVersion": first["resourceVersion"]}),
                  400, "BadRequest", "specifying resource version is not allowed when using continue")


def test_include_object_is_validated_for_tables(api: httpx.Client, ns: str) -> None:
    assert_status(api.get(cms(ns), params={"includeObject": "Everything"}, headers={"Accept": TABLE_ACCEPT}), 400,
                  "BadRequest", "Unable to convert to Table as requested: includeObject: Invalid value: "
                                "\"Everything\": must be 'Metadata', 'Object', 'None', or empty")


@pytest.mark.parametrize(("params", "code", "message"), [
    pytest.param({"gracePeriodSeconds": "²"}, 400, 'strconv.ParseInt: parsing "²": invalid syntax', id="grace ²"),
    pytest.param({"gracePeriodSeconds": HUGE}, 400, f'strconv.ParseInt: parsing "{HUGE}": value out of range',
                 id="grace 5000 digits"),
    pytest.param({"propagationPolicy": "Sometimes"}, 422, 'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: '
                 'Unsupported value: "Sometimes": supported values: "Foreground", "Background", "Orphan", "nil"',
                 id="unknown policy"),
    pytest.param({"propagationPolicy": "Orphan", "orphanDependents": "true"}, 422,
                 'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Invalid value: "Orphan": '
                 "orphanDependents and deletionPropagation cannot be both set", id="both policies"),
])
def test_bad_delete_parameters_delete_nothing(api: httpx.Client, ns: str, params: dict[str, str], code: int,
                                              message: str) -> None:
    before = api.get(f"{cms(ns)}/cm-0").json()
    assert_status(api.delete(f"{cms(ns)}/cm-0", params=params), code, "BadRequest" if code == 400 else "Invalid",
                  message)
    assert api.get(f"{cms(ns)}/cm-0").json() == before


def test_the_longest_grace_period_go_accepts_is_not_a_500(api: httpx.Client, ns: str) -> None:
    # A running pod gets deletionTimestamp = now + grace: 2^63-1 seconds overflowed Python's datetime.
    name = unique_name("graceful")
    create(api, f"{CORE}/namespaces/{ns}/pods", {"metadata": {"name": name}, "spec": {
        "nodeName": "nowhere", "containers": [{"name": "c", "image": "nginx"}]}})
    resp = api.delete(f"{CORE}/namespaces/{ns}/pods/{name}", params={"gracePeriodSeconds": str(2**63 - 1)})
    assert resp.status_code == 200, resp.text
    meta = resp.json()["metadata"]
    assert meta["deletionGracePeriodSeconds"] == 2**63 - 1 and meta["deletionTimestamp"]
    assert api.delete(f"{CORE}/namespaces/{ns}/pods/{name}", params={"gracePeriodSeconds": "0"}).status_code == 200
