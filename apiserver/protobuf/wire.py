"""The protobuf wire format, read-only: varints, fixed-width values and length-delimited fields.

Kubernetes writes proto2 with gogo-protobuf; a message is a sequence of (field number, wire type,
value) records. This module splits bytes into those records and nothing more; what a field means is
`messages.py`'s business. Pure: bytes in, tuples out.
"""

from __future__ import annotations

from collections.abc import Iterator

VARINT, FIXED64, LENGTH, START_GROUP, END_GROUP, FIXED32 = 0, 1, 2, 3, 4, 5


class WireError(ValueError):
    """The bytes are not well-formed protobuf."""


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """A base-128 varint at `pos`: its value (unsigned, at most 64 bits) and the position after it."""
    value = shift = 0
    while True:
        if pos >= len(data):
            raise WireError("unexpected end of data inside a varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift >= 70:
            raise WireError("varint longer than 10 bytes")
    return value & 0xFFFFFFFFFFFFFFFF, pos


def signed(value: int, bits: int) -> int:
    """Two's complement: a negative int32 travels as a 10-byte varint of its 64-bit form, so
    int32 -1 arrives as 2**64 - 1."""
    value &= (1 << 64) - 1
    if value >= 1 << 63:
        value -= 1 << 64
    if bits == 32 and not -(1 << 31) <= value < 1 << 31:
        raise WireError(f"value {value} does not fit in an int32")
    return value


def fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """Each record of a message: (field number, wire type, value). Varints come as unsigned ints,
    fixed-width values as raw bytes, length-delimited ones as bytes."""
    pos = 0
    end = len(data)
    while pos < end:
        key, pos = read_varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise WireError("field number 0 is not allowed")
        if wire_type == VARINT:
            value, pos = read_varint(data, pos)
            yield number, wire_type, value
        elif wire_type == LENGTH:
            length, pos = read_varint(data, pos)
            if pos + length > end:
                raise WireError(f"field {number} claims {length} bytes, {end - pos} remain")
            yield number, wire_type, data[pos:pos + length]
            pos += length
        elif wire_type in (FIXED64, FIXED32):
            size = 8 if wire_type == FIXED64 else 4
            if pos + size > end:
                raise WireError(f"field {number} is truncated")
            yield number, wire_type, data[pos:pos + size]
            pos += size
        else:
            raise WireError(f"field {number} has unsupported wire type {wire_type}")


def packed_varints(data: bytes) -> list[int]:
    """A packed repeated scalar field: varints back to back."""
    values, pos = [], 0
    while pos < len(data):
        value, pos = read_varint(data, pos)
        values.append(value)
    return values
