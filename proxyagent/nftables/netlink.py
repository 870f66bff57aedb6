"""A partial sync's transaction as one nf_tables netlink batch, without nft's cache.

nft 1.0.6 (Debian 12) reloads its cache of the table (~40k chains at 10k Services) before every
transaction that adds a rule or an element, because the generation id it cached is bumped by its own
last commit; that reload, not the kernel, is what a one-Service change costs (0.1 s at 1k Services,
0.3-5 s at 10k). The kernel does not need it: a batch of NFT_MSG_NEWCHAIN / DELRULE (flush) /
NEWRULE / NEWSETELEM ... messages is what nft itself sends once it has parsed the text. This module
writes that batch for the lines a partial sync of kube-proxy's nftables proxier is made of (render.py's
`_render_port` and `_finish`: per-service and per-endpoint chains, their rules, the tracked maps'
elements, stale chains and affinity sets), encoding every expression the way nft 1.0.6 encodes it, so
that the kernel holds the same rules (and `nft list table` prints the same text) whichever path
applied them.

`encode_batch` is pure: text in, the batch's messages out, or None for any line outside that grammar
(a full sync's table, base chains and fixed maps; IPv6; LoadBalancer source-range sets); the caller
then applies the text with libnftables or `nft -f`, as before. Sending the batch is libnft.py's.
"""

from __future__ import annotations

import ipaddress
import re
import struct
from dataclasses import dataclass, field

NETLINK_NETFILTER = 12
NFNL_SUBSYS_NFTABLES = 10
NFNL_MSG_BATCH_BEGIN = 0x10
NFNL_MSG_BATCH_END = 0x11

NFT_MSG_NEWCHAIN = 3
NFT_MSG_DELCHAIN = 5
NFT_MSG_NEWRULE = 6
NFT_MSG_DELRULE = 8
NFT_MSG_NEWSET = 9
NFT_MSG_DELSET = 11
NFT_MSG_NEWSETELEM = 12
NFT_MSG_DELSETELEM = 14
NFT_MSG_GETGEN = 16

NLM_F_REQUEST = 0x1
NLM_F_ACK = 0x4
NLM_F_CREATE = 0x400
NLM_F_APPEND = 0x800
NLMSG_ERROR = 2
NLMSG_DONE = 3
NLA_F_NESTED = 0x8000
NFPROTO_IPV4 = 2

# Attribute numbers (linux/netfilter/nf_tables.h).
NFTA_LIST_ELEM = 1
NFTA_CHAIN_TABLE, NFTA_CHAIN_NAME = 1, 3
NFTA_RULE_TABLE, NFTA_RULE_CHAIN, NFTA_RULE_EXPRESSIONS, NFTA_RULE_USERDATA = 1, 2, 4, 7
NFTA_EXPR_NAME, NFTA_EXPR_DATA = 1, 2
NFTA_DATA_VALUE, NFTA_DATA_VERDICT = 1, 2
NFTA_VERDICT_CODE, NFTA_VERDICT_CHAIN = 1, 2
NFTA_SET_TABLE, NFTA_SET_NAME, NFTA_SET_FLAGS, NFTA_SET_KEY_TYPE, NFTA_SET_KEY_LEN = 1, 2, 3, 4, 5
NFTA_SET_DATA_TYPE, NFTA_SET_DATA_LEN, NFTA_SET_DESC, NFTA_SET_ID, NFTA_SET_TIMEOUT = 6, 7, 9, 10, 11
NFTA_SET_USERDATA = 13
NFTA_SET_DESC_SIZE = 1
NFTA_SET_ELEM_LIST_TABLE, NFTA_SET_ELEM_LIST_SET, NFTA_SET_ELEM_LIST_ELEMENTS, NFTA_SET_ELEM_LIST_SET_ID = 1, 2, 3, 4
NFTA_SET_ELEM_KEY, NFTA_SET_ELEM_DATA, NFTA_SET_ELEM_USERDATA = 1, 2, 6

NFT_JUMP, NFT_GOTO, NF_DROP = -3, -4, 0
NFT_REG_VERDICT, NFT_REG_1, NFT_REG_2 = 0, 1, 2
NFT_PAYLOAD_NETWORK_HEADER, NFT_PAYLOAD_TRANSPORT_HEADER = 1, 2
NFT_CMP_EQ, NFT_CMP_NEQ = 0, 1
NFT_META_L4PROTO = 16
NFT_NAT_DNAT = 1
NF_NAT_RANGE_PROTO_SPECIFIED = 0x2
NFT_NG_RANDOM = 1
NFT_FIB_RESULT_ADDRTYPE = 3
NFTA_FIB_F_SADDR = 1
RTN_LOCAL = 2
NFT_DYNSET_OP_UPDATE = 1
NFT_SET_ANONYMOUS, NFT_SET_CONSTANT, NFT_SET_MAP, NFT_SET_TIMEOUT, NFT_SET_EVAL = 0x1, 0x2, 0x8, 0x10, 0x20
NFT_DATA_VERDICT = 0xFFFFFF00
TYPE_INTEGER, TYPE_IPADDR = 4, 7  # nft's datatype numbers, which the kernel stores for nft to read back
NFTNL_UDATA_RULE_COMMENT = 0
NFTNL_UDATA_SET_ELEM_COMMENT = 0
# The userdata nft 1.0.6 stores with a `numgen ... vmap` map, as the kernel gives it back (key byte
# order: host; data byte order; the key's `typeof` (numgen); ...). nft reads it to print the map's keys
# as 0, 1, 2: without it `nft list` aborts on the map.
IPADDR_SET_UDATA = bytes.fromhex("000402000000")  # key byte order: big endian
NUMGEN_MAP_UDATA = bytes.fromhex("00040100000001040000000004080004010000000100060400000000")

PROTOCOLS = {"tcp": 6, "udp": 17, "sctp": 132}
NAME = r"[A-Za-z0-9_./:-]+"


def _attr(kind: int, payload: bytes) -> bytes:
    size = 4 + len(payload)
    return struct.pack("=HH", size, kind) + payload + b"\0" * (-size % 4)


def _nest(kind: int, *parts: bytes) -> bytes:
    return _attr(kind | NLA_F_NESTED, b"".join(parts))


def _str(kind: int, text: str) -> bytes:
    return _attr(kind, text.encode() + b"\0")


def _u32(kind: int, value: int) -> bytes:
    return _attr(kind, struct.pack(">I", value & 0xFFFFFFFF))


def _value(kind: int, data: bytes) -> bytes:
    return _nest(kind, _attr(NFTA_DATA_VALUE, data))


def _verdict(kind: int, code: int, chain: str | None = None) -> bytes:
    inner = _attr(NFTA_VERDICT_CODE, struct.pack(">i", code))
    if chain is not None:
        inner += _str(NFTA_VERDICT_CHAIN, chain)
    return _nest(kind, _nest(NFTA_DATA_VERDICT, inner))


def _udata(kind: int, text: str) -> bytes:
    """A libnftnl userdata TLV (type, length, value): how nft stores a comment for itself."""
    raw = text.encode() + b"\0"
    return bytes((kind, len(raw))) + raw


def _expr(name: str, *attrs: bytes) -> bytes:
    return _nest(NFTA_LIST_ELEM, _str(NFTA_EXPR_NAME, name), _nest(NFTA_EXPR_DATA, *attrs))


class Unsupported(ValueError):
    """A line this encoder does not write: the transaction goes to nft as text."""


@dataclass
class Batch:
    """The messages between BATCH_BEGIN and BATCH_END, each with the transaction line it came from."""

    messages: list[tuple[int, int, bytes]] = field(default_factory=list)  # (type, flags, attributes)
    lines: list[str] = field(default_factory=list)
    next_set_id: int = 1

    def size(self) -> int:
        """Bytes on the wire (headers included)."""
        return sum(20 + len(attrs) for _, _, attrs in self.messages) + 40

    def add(self, msg_type: int, flags: int, attrs: bytes, line: str) -> None:
        self.messages.append((msg_type, flags, attrs))
        self.lines.append(line)


def message(msg_type: int, flags: int, seq: int, attrs: bytes, *, family: int = NFPROTO_IPV4,
            res_id: int = 0, subsys: int = NFNL_SUBSYS_NFTABLES) -> bytes:
    """One netlink message: nlmsghdr, nfgenmsg (family, version 0, res_id), attributes."""
    msg_kind = msg_type if msg_type in (NFNL_MSG_BATCH_BEGIN, NFNL_MSG_BATCH_END) else (subsys << 8) | msg_type
    body = struct.pack("=BB", family, 0) + struct.pack(">H", res_id) + attrs
    return struct.pack("=IHHII", 16 + len(body), msg_kind, flags | NLM_F_REQUEST, seq, 0) + body


def frame(batch: Batch, first_seq: int) -> tuple[bytes, int]:
    """BATCH_BEGIN, the messages (sequence numbers first_seq + 1 ...), BATCH_END, as one buffer.
    Returns it and the last sequence number used."""
    seq = first_seq
    out = [message(NFNL_MSG_BATCH_BEGIN, 0, seq, b"", family=0, res_id=NFNL_SUBSYS_NFTABLES)]
    for msg_type, flags, attrs in batch.messages:
        seq += 1
        out.append(message(msg_type, flags, seq, attrs))
    seq += 1
    out.append(message(NFNL_MSG_BATCH_END, 0, seq, b"", family=0, res_id=NFNL_SUBSYS_NFTABLES))
    return b"".join(out), seq


# ---------------------------------------------------------------- lines -> messages

_LINE = re.compile(rf"(add|flush|delete) (chain|rule|element|set) ip (\S+) ({NAME})(?: (.*))?", re.ASCII)
_ELEMENT = re.compile(r'\{ ((?:(?! : )[^"{}])*?)( comment "((?:[^"\\]|\\.)*)")?(?: : ([^{}]*))? \}', re.ASCII)
_COMMENT = re.compile(r'(.*?) comment "((?:[^"\\]|\\.)*)"', re.ASCII)
_VMAP = re.compile(r"numgen random mod ([0-9]{1,9}) vmap \{ (.*) \}", re.ASCII)
_ARM = re.compile(rf"([0-9]{{1,9}}) : goto ({NAME})", re.ASCII)
_DNAT = re.compile(r"dnat to ([0-9.]+):([0-9]{1,5})", re.ASCII)


def encode_batch(text: str, *, table: str = "kube-proxy") -> Batch:
    """The batch for `text` (one operation per line, as render.py writes them for the `ip` family).
    Raises Unsupported for anything else."""
    batch = Batch()
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            _encode_line(batch, line, table)
    return batch


def try_encode(text: str, *, table: str = "kube-proxy") -> Batch | None:
    try:
        return encode_batch(text, table=table)
    except Unsupported:
        return None


def _unquote(text: str) -> str:
    if "\\" in text:
        raise Unsupported("escaped comment")  # render.py's comments are plain names
    return text


def _encode_line(batch: Batch, line: str, table: str) -> None:
    m = _LINE.fullmatch(line)
    if m is None or m.group(3) != table:
        raise Unsupported(line)
    verb, kind, name, rest = m.group(1), m.group(2), m.group(4), m.group(5)
    tbl = _str(NFTA_CHAIN_TABLE, table)  # TABLE is attribute 1 in chains, rules, sets and element lists
    if kind == "chain" and rest is None:
        if verb == "add":
            batch.add(NFT_MSG_NEWCHAIN, NLM_F_CREATE, tbl + _str(NFTA_CHAIN_NAME, name), line)
        elif verb == "flush":
            batch.add(NFT_MSG_DELRULE, 0, tbl + _str(NFTA_RULE_CHAIN, name), line)
        else:
            batch.add(NFT_MSG_DELCHAIN, 0, tbl + _str(NFTA_CHAIN_NAME, name), line)
    elif kind == "set" and verb == "delete" and rest is None:
        batch.add(NFT_MSG_DELSET, 0, tbl + _str(NFTA_SET_NAME, name), line)
    elif kind == "set" and verb == "add" and rest is not None:
        _encode_affinity_set(batch, name, rest, line, tbl)
    elif kind == "element" and verb in ("add", "delete") and rest is not None:
        _encode_element(batch, verb, name, rest, line, tbl)
    elif kind == "rule" and verb == "add" and rest is not None:
        _encode_rule(batch, name, rest, line, tbl)
    else:
        raise Unsupported(line)


def _key_part(token: str) -> bytes:
    if token in PROTOCOLS:
        return struct.pack("=I", PROTOCOLS[token])[:1] + b"\0\0\0"
    if _port(token):
        return struct.pack(">H", int(token)) + b"\0\0"
    return _ipv4(token)


def _port(token: str) -> bool:
    return re.fullmatch(r"[0-9]{1,5}", token) is not None and int(token) < 65536


def _ipv4(token: str) -> bytes:
    try:
        return ipaddress.IPv4Address(token).packed
    except ValueError as exc:
        raise Unsupported(token) from exc


def _target(text: str) -> bytes:
    """A verdict as a map element's data: `goto CHAIN`, `jump CHAIN` or `drop`."""
    if text == "drop":
        return _verdict(NFTA_SET_ELEM_DATA, NF_DROP)
    verb, _, chain = text.partition(" ")
    if verb not in ("goto", "jump") or not re.fullmatch(NAME, chain):
        raise Unsupported(text)
    return _verdict(NFTA_SET_ELEM_DATA, NFT_GOTO if verb == "goto" else NFT_JUMP, chain)


def _encode_element(batch: Batch, verb: str, container: str, rest: str, line: str, tbl: bytes) -> None:
    m = _ELEMENT.fullmatch(rest)
    if m is None:
        raise Unsupported(line)
    key_text, comment, value = m.group(1).strip(), m.group(3), m.group(4)
    parts = key_text.split(" . ")
    key = b"".join(_key_part(p) for p in parts) if len(parts) > 1 else _ipv4(key_text)
    elem = _value(NFTA_SET_ELEM_KEY, key)
    if verb == "delete":
        if comment is not None or value is not None:
            raise Unsupported(line)
    else:
        if value is not None:
            elem += _target(value.strip())
        if comment is not None:
            elem += _attr(NFTA_SET_ELEM_USERDATA, _udata(NFTNL_UDATA_SET_ELEM_COMMENT, _unquote(comment)))
    attrs = tbl + _str(NFTA_SET_ELEM_LIST_SET, container) + \
        _nest(NFTA_SET_ELEM_LIST_ELEMENTS, _nest(NFTA_LIST_ELEM, elem))
    batch.add(NFT_MSG_NEWSETELEM if verb == "add" else NFT_MSG_DELSETELEM,
              NLM_F_CREATE if verb == "add" else 0, attrs, line)


_AFFINITY = re.compile(r"\{ type ipv4_addr ; flags dynamic,timeout ; timeout ([0-9]{1,9})s ; \}", re.ASCII)


def _encode_affinity_set(batch: Batch, name: str, rest: str, line: str, tbl: bytes) -> None:
    """A session affinity set (`type ipv4_addr ; flags dynamic,timeout ; timeout Ns ;`), with what
    nft 1.0.6 adds: 65535 as its size and the key's byte order (big endian) in its userdata."""
    m = _AFFINITY.fullmatch(rest)
    if m is None or int(m.group(1)) >= 2**32:
        raise Unsupported(line)
    set_id = batch.next_set_id
    batch.next_set_id += 1
    batch.add(NFT_MSG_NEWSET, NLM_F_CREATE, tbl + _str(NFTA_SET_NAME, name)
              + _u32(NFTA_SET_FLAGS, NFT_SET_TIMEOUT | NFT_SET_EVAL) + _u32(NFTA_SET_KEY_TYPE, TYPE_IPADDR)
              + _u32(NFTA_SET_KEY_LEN, 4) + _attr(NFTA_SET_TIMEOUT, struct.pack(">Q", int(m.group(1)) * 1000))
              + _nest(NFTA_SET_DESC, _u32(NFTA_SET_DESC_SIZE, 65535))
              + _u32(NFTA_SET_ID, set_id) + _attr(NFTA_SET_USERDATA, IPADDR_SET_UDATA), line)


# ---------------------------------------------------------------- rules

def _payload(base: int, offset: int, length: int) -> bytes:
    return _expr("payload", _u32(1, NFT_REG_1), _u32(2, base), _u32(3, offset), _u32(4, length))


def _cmp(op: int, data: bytes) -> bytes:
    return _expr("cmp", _u32(1, NFT_REG_1), _u32(2, op), _value(3, data))


def _addr_match(offset: int, text: str, op: int) -> list[bytes]:
    """`ip saddr|daddr [!=] ADDR|CIDR` as nft 1.0.6 writes it: a prefix on a byte boundary loads
    only its bytes; any other prefix loads the address, masks it, and compares."""
    try:
        net = ipaddress.IPv4Network(text, strict=True)
    except ValueError as exc:
        raise Unsupported(text) from exc
    plen = net.prefixlen
    if plen == 0:
        raise Unsupported(text)  # nft drops the match altogether
    if plen % 8 == 0:
        n = plen // 8
        return [_payload(NFT_PAYLOAD_NETWORK_HEADER, offset, n), _cmp(op, net.network_address.packed[:n])]
    bitwise = _expr("bitwise", _u32(1, NFT_REG_1), _u32(2, NFT_REG_1), _u32(3, 4),
                    _value(4, net.netmask.packed), _value(5, b"\0\0\0\0"))
    return [_payload(NFT_PAYLOAD_NETWORK_HEADER, offset, 4), bitwise, _cmp(op, net.network_address.packed)]


def _l4proto(proto: str) -> list[bytes]:
    if proto not in PROTOCOLS:
        raise Unsupported(proto)
    return [_expr("meta", _u32(1, NFT_REG_1), _u32(2, NFT_META_L4PROTO)),
            _cmp(NFT_CMP_EQ, bytes((PROTOCOLS[proto],)))]


def _immediate_verdict(verb: str, chain: str) -> bytes:
    if verb not in ("jump", "goto") or not re.fullmatch(NAME, chain):
        raise Unsupported(f"{verb} {chain}")
    return _expr("immediate", _u32(1, NFT_REG_VERDICT),
                 _verdict(2, NFT_JUMP if verb == "jump" else NFT_GOTO, chain))


def _encode_rule(batch: Batch, chain: str, rest: str, line: str, tbl: bytes) -> None:
    comment = None
    m = _COMMENT.fullmatch(rest)
    if m is not None:
        rest, comment = m.group(1), _unquote(m.group(2))
    exprs: list[bytes] = []
    pre: list[tuple[int, int, bytes]] = []  # an anonymous map and its elements, sent before the rule
    tokens = rest.split(" ")
    i = 0
    while i < len(tokens):
        t = tokens[i:]
        if t[:2] in (["ip", "daddr"], ["ip", "saddr"]) and len(t) >= 3 and not t[2].startswith("@"):
            offset = 16 if t[1] == "daddr" else 12
            if t[2] == "!=":
                if len(t) < 4:
                    raise Unsupported(line)
                exprs += _addr_match(offset, t[3], NFT_CMP_NEQ)
                i += 4
            else:
                exprs += _addr_match(offset, t[2], NFT_CMP_EQ)
                i += 3
        elif t[:2] == ["ip", "saddr"] and len(t) >= 3 and t[2].startswith("@"):
            exprs += [_payload(NFT_PAYLOAD_NETWORK_HEADER, 12, 4),
                      _expr("lookup", _str(1, _set_name(t[2][1:])), _u32(2, NFT_REG_1))]
            i += 3
        elif len(t) >= 3 and t[0] in PROTOCOLS and t[1] == "dport" and _port(t[2]):
            exprs += _l4proto(t[0])
            exprs += [_payload(NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2), _cmp(NFT_CMP_EQ, struct.pack(">H", int(t[2])))]
            i += 3
        elif t[:4] == ["fib", "saddr", "type", "local"]:
            exprs += [_expr("fib", _u32(1, NFT_REG_1), _u32(2, NFT_FIB_RESULT_ADDRTYPE), _u32(3, NFTA_FIB_F_SADDR)),
                      _cmp(NFT_CMP_EQ, struct.pack("=I", RTN_LOCAL))]
            i += 4
        elif t[:2] == ["meta", "l4proto"] and len(t) >= 3:
            exprs += _l4proto(t[2])
            i += 3
        elif len(t) == 2 and t[0] in ("jump", "goto"):
            exprs.append(_immediate_verdict(t[0], t[1]))
            i += 2
        elif len(t) == 1 and t[0] == "drop":
            exprs.append(_expr("immediate", _u32(1, NFT_REG_VERDICT), _verdict(2, NF_DROP)))
            i += 1
        elif len(t) == 3 and t[:2] == ["dnat", "to"]:
            d = _DNAT.fullmatch(" ".join(t))
            if d is None or int(d.group(2)) > 65535:
                raise Unsupported(line)
            exprs += [_expr("immediate", _u32(1, NFT_REG_1), _value(2, _ipv4(d.group(1)))),
                      _expr("immediate", _u32(1, NFT_REG_2), _value(2, struct.pack(">H", int(d.group(2))))),
                      _expr("nat", _u32(1, NFT_NAT_DNAT), _u32(2, NFPROTO_IPV4), _u32(3, NFT_REG_1),
                            _u32(5, NFT_REG_2), _u32(7, NF_NAT_RANGE_PROTO_SPECIFIED))]
            i += 3
        elif t == ["update", t[1] if len(t) > 1 else "", "{", "ip", "saddr", "}"] and t[1].startswith("@"):
            exprs += [_payload(NFT_PAYLOAD_NETWORK_HEADER, 12, 4),
                      _expr("dynset", _str(1, _set_name(t[1][1:])), _u32(2, 0), _u32(3, NFT_DYNSET_OP_UPDATE),
                            _u32(4, NFT_REG_1))]
            i += 6
        elif t[:2] == ["numgen", "random"]:
            exprs += _numgen_vmap(batch, " ".join(t), tbl, pre, line)
            i = len(tokens)
        else:
            raise Unsupported(line)
    attrs = tbl + _str(NFTA_RULE_CHAIN, chain) + _nest(NFTA_RULE_EXPRESSIONS, *exprs)
    if comment is not None:
        attrs += _attr(NFTA_RULE_USERDATA, _udata(NFTNL_UDATA_RULE_COMMENT, comment))
    for msg_type, flags, body in pre:
        batch.add(msg_type, flags, body, line)
    batch.add(NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, attrs, line)


def _set_name(name: str) -> str:
    if not re.fullmatch(NAME, name):
        raise Unsupported(name)
    return name


def _numgen_vmap(batch: Batch, text: str, tbl: bytes, pre: list[tuple[int, int, bytes]], line: str) -> list[bytes]:
    """`numgen random mod N vmap { 0 : goto A , ... }`: an anonymous constant verdict map (nft names
    it `__map%d`; the kernel picks the number) holding the arms, and numgen + lookup into it."""
    m = _VMAP.fullmatch(text)
    if m is None:
        raise Unsupported(line)
    mod = int(m.group(1))
    arms = [_ARM.fullmatch(a) for a in m.group(2).split(" , ")]
    if not 0 < mod < 2**31 or len(arms) != mod or any(a is None or int(a.group(1)) != k
                                                       for k, a in enumerate(arms)):
        raise Unsupported(line)
    set_id = batch.next_set_id
    batch.next_set_id += 1
    name = "__map%d"
    pre.append((NFT_MSG_NEWSET, NLM_F_CREATE, tbl + _str(NFTA_SET_NAME, name)
                + _u32(NFTA_SET_FLAGS, NFT_SET_ANONYMOUS | NFT_SET_CONSTANT | NFT_SET_MAP)
                + _u32(NFTA_SET_KEY_TYPE, TYPE_INTEGER) + _u32(NFTA_SET_KEY_LEN, 4)
                + _u32(NFTA_SET_DATA_TYPE, NFT_DATA_VERDICT) + _u32(NFTA_SET_DATA_LEN, 16)
                + _nest(NFTA_SET_DESC, _u32(NFTA_SET_DESC_SIZE, mod))
                + _u32(NFTA_SET_ID, set_id) + _attr(NFTA_SET_USERDATA, NUMGEN_MAP_UDATA)))
    elems = [_nest(NFTA_LIST_ELEM, _value(NFTA_SET_ELEM_KEY, struct.pack("=I", k)),
                   _verdict(NFTA_SET_ELEM_DATA, NFT_GOTO, a.group(2)))
             for k, a in enumerate(arms) if a is not None]
    pre.append((NFT_MSG_NEWSETELEM, NLM_F_CREATE, tbl + _str(NFTA_SET_ELEM_LIST_SET, name)
                + _u32(NFTA_SET_ELEM_LIST_SET_ID, set_id) + _nest(NFTA_SET_ELEM_LIST_ELEMENTS, *elems)))
    return [_expr("numgen", _u32(1, NFT_REG_1), _u32(2, mod), _u32(3, NFT_NG_RANDOM), _u32(4, 0)),
            _expr("lookup", _str(1, name), _u32(2, NFT_REG_1), _u32(3, NFT_REG_VERDICT), _u32(4, set_id))]
