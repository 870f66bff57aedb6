"""Kubernetes' protobuf wire format for request bodies (`application/vnd.kubernetes.protobuf`).

kubectl 1.32+ sends the objects its generators build (`create namespace`, `create deployment`, ...)
as protobuf. This package decodes such a body into the dict the same object has as JSON, so the rest
of the API server sees no difference. It does not encode: responses stay JSON, which kubectl accepts
for a protobuf Accept header. `wire` reads the format, `messages` holds the field table, `decoding`
builds the dict.
"""

from .decoding import ProtobufError, decode_object

__all__ = ["ProtobufError", "decode_object"]
