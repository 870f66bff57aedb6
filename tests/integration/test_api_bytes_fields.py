"""Secret `data` and ConfigMap `binaryData` are map[string][]byte in kube's Go types: kube-apiserver
decodes their base64 as Go's encoding/json does (line breaks skipped, as in a YAML `|` block), stores
and returns it canonical (one line, padded), and answers what does not decode with the decoder's words
(`Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 4`). kubelab
refused a Secret with line breaks, and stored any ConfigMap binaryData (`!!!notbase64`) unchecked."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from apitools import CORE, assert_status, create, unique_name
from kubectltools import Kubectl

PAYLOAD = bytes(range(256)) * 2  # 512 bytes: base64 wraps over several 76-character lines
WRAPPED = base64.encodebytes(PAYLOAD).decode()  # what `base64` (and a YAML `|` block) holds
CANONICAL = base64.b64encode(PAYLOAD).decode()


def _secret(name: str, values: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": values}


def _config_map(name: str, values: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "binaryData": values}


KINDS = [pytest.param("secrets", _secret, "data", "Secret", id="Secret data"),
         pytest.param("configmaps", _config_map, "binaryData", "ConfigMap", id="ConfigMap binaryData")]


@pytest.mark.parametrize(("plural", "make", "field", "kind"), KINDS)
def test_line_breaks_are_skipped_and_the_base64_returned_canonical(
        api: httpx.Client, plural: str, make: Callable[[str, dict[str, str]], dict[str, Any]], field: str,
        kind: str) -> None:
    name = unique_name("bytes")
    values = {"wrapped": WRAPPED, "crlf": "YW\r\nRt\naW4=\n", "split-padding": "YQ=\n=", "loose-bits": "YR=="}
    created = create(api, f"{CORE}/namespaces/default/{plural}", make(name, values))
    expected = {"wrapped": CANONICAL, "crlf": "YWRtaW4=", "split-padding": "YQ==", "loose-bits": "YQ=="}
    assert created[field] == expected
    read = api.get(f"{CORE}/namespaces/default/{plural}/{name}")
    assert read.json()[field] == expected
    assert f'"wrapped":"{CANONICAL}"'.encode() in read.content
    # A merge patch goes through the same decoding.
    patched = api.patch(f"{CORE}/namespaces/default/{plural}/{name}", json={field: {"more": "aGk=\n"}},
                        headers={"content-type": "application/merge-patch+json"})
    assert patched.status_code == 200, patched.text
    assert patched.json()[field]["more"] == "aGk="
    api.delete(f"{CORE}/namespaces/default/{plural}/{name}")


# (value, Go's CorruptInputError offset): base64.StdEncoding.Decode as encoding/json calls it.
BAD = [("!!!notbase64", 0), ("admin", 4), ("My-pass-123", 2), ("YQ", 0), ("YQ=", 3), ("YQ===", 4),
       ("YWI=x", 4), ("=", 0), ("YW Rt", 2), ("aGk=\naGk=", 5), ("é", 0)]


@pytest.mark.parametrize(("plural", "make", "field", "kind"), KINDS)
@pytest.mark.parametrize(("value", "offset"), BAD)
def test_what_does_not_decode_is_kubes_decode_error(
        api: httpx.Client, plural: str, make: Callable[[str, dict[str, str]], dict[str, Any]], field: str,
        kind: str, value: str, offset: int) -> None:
    name = unique_name("bytes")
    resp = api.post(f"{CORE}/namespaces/default/{plural}", json=make(name, {"ok": "aGk=", "bad": value}))
    assert_status(resp, 400, "BadRequest", f'{kind} in version "v1" cannot be handled as a {kind}: '
                                           f"illegal base64 data at input byte {offset}")
    assert api.get(f"{CORE}/namespaces/default/{plural}/{name}").status_code == 404


def test_kubectl_applies_a_secret_written_as_a_yaml_block(kubectl: Kubectl, api: httpx.Client,
                                                          tmp_path: Path) -> None:
    name = unique_name("block")
    block = "".join(f"    {line}\n" for line in WRAPPED.splitlines())
    manifest = tmp_path / "secret.yaml"
    manifest.write_text(f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: default\n"
                        f"data:\n  blob: |\n{block}")
    assert kubectl.ok("apply", "-f", str(manifest)) == f"secret/{name} created\n"
    assert api.get(f"{CORE}/namespaces/default/secrets/{name}").json()["data"]["blob"] == CANONICAL
    # kubectl decodes what it reads back: the bytes are the ones encoded.
    out = kubectl.ok("get", "secret", name, "-n", "default", "-o", "jsonpath={.data.blob}")
    assert base64.b64decode(out) == PAYLOAD
    kubectl.ok("delete", "secret", name, "-n", "default")
