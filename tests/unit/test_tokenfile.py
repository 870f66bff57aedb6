"""The static token file, read as kube-apiserver reads it (tokenfile_test.go's cases and a few more),
and the tokens `kubelab up --token-auth-file` adds for its own components."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from kubelab.tokenfile import (
    ADMIN_USER,
    TokenFileError,
    UserInfo,
    ensure_component_tokens,
    load,
    parse,
    read_token,
)

UPSTREAM = '''
token1,user1,uid1
token2,user2,uid2
token3,user3,uid3,"group1,group2"
token4,user4,uid4,"group2"
token5,user5,uid5,group5
token6,user6,uid6,group5,otherdata
token7,user7,uid7,"group1,group2",otherdata
'''


@pytest.mark.parametrize(("token", "user"), [
    pytest.param("token1", UserInfo("user1", "uid1"), id="three columns"),
    pytest.param("token3", UserInfo("user3", "uid3", ("group1", "group2")), id="quoted groups"),
    pytest.param("token4", UserInfo("user4", "uid4", ("group2",)), id="one quoted group"),
    pytest.param("token5", UserInfo("user5", "uid5", ("group5",)), id="unquoted group"),
    pytest.param("token6", UserInfo("user6", "uid6", ("group5",)), id="extra column ignored"),
    pytest.param("token7", UserInfo("user7", "uid7", ("group1", "group2")), id="quoted groups, extra column"),
])
def test_upstream_records(token: str, user: UserInfo) -> None:
    assert parse(UPSTREAM)[token] == user


def test_unknown_token_is_nobody() -> None:
    assert "token8" not in parse(UPSTREAM)


@pytest.mark.parametrize("text", [
    pytest.param("token1,user1,uid1\ntoken3,user3\ntoken4\n", id="short records among good ones"),
    pytest.param("token4\n", id="one column"),
    pytest.param("# tokens for the lab\ntoken1,user1,uid1\n", id="no comment syntax upstream"),
    pytest.param('token1,"user1,uid1\n', id="unterminated quote"),
])
def test_files_kube_apiserver_refuses(text: str) -> None:
    with pytest.raises(TokenFileError):
        parse(text)


def test_blank_lines_empty_tokens_and_duplicates() -> None:
    tokens = parse("\n\ntoken1,user1,uid1\n\n,nobody,0\ntoken1,later,uid9\n")
    assert tokens == {"token1": UserInfo("later", "uid9")}


def test_message_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text("abc,def\n")
    with pytest.raises(TokenFileError, match=r"token file '.*tokens.csv' must have at least 3 columns \(token, user "
                                             r"name, user uid\), found 2"):
        load(path)
    with pytest.raises(TokenFileError, match="cannot read token file"):
        load(tmp_path / "missing.csv")


def test_read_token(tmp_path: Path) -> None:
    (tmp_path / "t").write_text("  s3cret\n")
    assert read_token(tmp_path / "t") == "s3cret"
    (tmp_path / "two").write_text("a b\n")
    with pytest.raises(TokenFileError):
        read_token(tmp_path / "two")


def test_component_tokens_are_generated_into_a_new_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    tokens = ensure_component_tokens(path, ["node-1", "node-2"])
    users = parse(path.read_text())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert users[tokens.admin] == UserInfo(ADMIN_USER, ADMIN_USER, ("system:masters",))
    assert users[tokens.nodes["node-2"]] == UserInfo("system:node:node-2", "system:node:node-2", ("system:nodes",))
    assert users[tokens.scheduler].name == "system:kube-scheduler"
    assert tokens.for_component("kubelet-node-1") == tokens.for_component("proxy-node-1") == tokens.nodes["node-1"]
    assert tokens.for_component("controllers") == tokens.controllers
    # The informers the proxy agents share list and watch as kube-proxy (system:node-proxier), not as the admin.
    assert tokens.for_component("proxy") == tokens.proxy
    assert users[tokens.proxy] == UserInfo("system:kube-proxy", "system:kube-proxy")
    assert len({tokens.admin, tokens.scheduler, tokens.controllers, tokens.dns, tokens.proxy,
                *tokens.nodes.values()}) == 7
    # A second run finds them all and adds nothing.
    before = path.read_text()
    assert ensure_component_tokens(path, ["node-1", "node-2"]) == tokens
    assert path.read_text() == before


def test_component_tokens_reuse_what_the_file_has(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text('boss-token,alice,1,"system:masters,devs"\nn1,system:node:node-1,x,system:nodes')
    tokens = ensure_component_tokens(path, ["node-1", "node-2"])
    assert (tokens.admin, tokens.nodes["node-1"]) == ("boss-token", "n1")
    users = parse(path.read_text())
    assert users["boss-token"].name == "alice" and users[tokens.nodes["node-2"]].name == "system:node:node-2"


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o666], ids=oct)
def test_a_token_file_others_can_read_is_made_0600_and_said_so(tmp_path: Path, mode: int,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text('boss-token,alice,1,"system:masters"\n')
    path.chmod(mode)
    with caplog.at_level("WARNING", logger="kubelab.tokenfile"):
        ensure_component_tokens(path, ["node-1"])  # appends the components' tokens
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [r.getMessage() for r in caplog.records] == [
        f"token file {path} was mode {mode:04o}: made it 0600, as it holds bearer tokens"]

    caplog.clear()
    ensure_component_tokens(path, ["node-1"])  # 0600 already: nothing to say
    assert caplog.records == []
