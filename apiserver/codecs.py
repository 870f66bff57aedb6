"""Request bodies in (JSON, YAML; size-limited, alias-bomb-safe) and responses out (JSON, YAML)."""

from __future__ import annotations

from typing import Any

import orjson
import yaml
from starlette.requests import Request
from starlette.responses import Response

from . import errors

MAX_BODY = 3 * 1024 * 1024  # kube-apiserver's request body limit (3 MiB)
MAX_YAML_ALIASES = 100


class _SafeLoader(yaml.SafeLoader):
    """A SafeLoader that refuses documents expanding more than a few aliases (the "billion laughs")."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_YAML_ALIASES:
                raise yaml.YAMLError("document contains excessive aliasing")
        return super().compose_node(parent, index)


def load_yaml(text: str | bytes) -> Any:
    return yaml.load(text, Loader=_SafeLoader)  # noqa: S506 - _SafeLoader is a SafeLoader


def load_yaml_all(text: str | bytes) -> list[Any]:
    return [d for d in yaml.load_all(text, Loader=_SafeLoader) if d is not None]  # noqa: S506


async def read_body(request: Request) -> bytes:
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > MAX_BODY:
        raise errors.too_large()
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise errors.too_large()
        chunks.append(chunk)
    return b"".join(chunks)


def media_type(request: Request) -> str:
    return (request.headers.get("content-type") or "application/json").split(";")[0].strip().lower()


def decode(content_type: str, raw: bytes) -> Any:
    if not raw.strip():
        raise errors.bad_request("Object 'Kind' is missing in ''" if content_type != "application/json-patch+json"
                                 else "empty patch")
    if content_type in ("application/yaml", "application/x-yaml", "text/yaml", "application/apply-patch+yaml"):
        try:
            return load_yaml(raw)
        except yaml.YAMLError as exc:
            raise errors.bad_request(f"error converting YAML to JSON: yaml: {str(exc).splitlines()[0]}") from exc
    if content_type in ("application/json", "application/merge-patch+json", "application/strategic-merge-patch+json",
                        "application/json-patch+json", "*/*", ""):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise errors.bad_request(f"couldn't get version/kind; json parse error: {exc}") from exc
    raise errors.unsupported_media_type(content_type)


def wants_yaml(request: Request) -> bool:
    accept = request.headers.get("accept") or ""
    return "application/yaml" in accept and "application/json" not in accept


def respond(request: Request, body: Any, status_code: int = 200, headers: dict[str, str] | None = None) -> Response:
    if wants_yaml(request):
        return Response(yaml.safe_dump(body, sort_keys=False), status_code=status_code,
                        media_type="application/yaml", headers=headers)
    return Response(orjson.dumps(body), status_code=status_code, media_type="application/json", headers=headers)


def status_response(exc: errors.StatusError) -> Response:
    return Response(orjson.dumps(exc.status()), status_code=exc.code, media_type="application/json")
