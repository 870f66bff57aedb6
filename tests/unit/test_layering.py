"""The layering docs/ARCHITECTURE.md describes, checked on the source: components never import each other, the shared
library `kubelab` imports no component and not the launcher (only the launcher assembles components), and only
apiserver/storage.py imports the etcd client; only kubelab/client imports an HTTP client library."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPONENTS = ("apiserver", "scheduler", "controllers", "proxyagent", "kubeletstub", "clusterdns")
LAUNCHER = "launcher"
# `python -m kubelab` is the `kubelab` command: its entry point hands over to the launcher and is no library code.
ENTRY_POINT = "kubelab/__main__.py"


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("component", COMPONENTS)
def test_components_do_not_import_each_other(component: str) -> None:
    offenders = []
    for path in sources(component):
        for module in imported_modules(path):
            top = module.split(".", 1)[0]
            if top in COMPONENTS and top != component:
                offenders.append(f"{path.relative_to(ROOT)} imports {module}")
    assert not offenders, "\n".join(offenders)


def test_the_library_imports_no_component_and_not_the_launcher() -> None:
    offenders = []
    for path in sources("kubelab"):
        rel = str(path.relative_to(ROOT))
        if rel == ENTRY_POINT:
            continue
        for module in imported_modules(path):
            if module.split(".", 1)[0] in (*COMPONENTS, LAUNCHER):
                offenders.append(f"{rel} imports {module}")
    assert not offenders, "\n".join(offenders)


@pytest.mark.parametrize("component", COMPONENTS)
def test_components_do_not_import_the_launcher(component: str) -> None:
    offenders = [f"{path.relative_to(ROOT)} imports {module}" for path in sources(component)
                 for module in imported_modules(path) if module.split(".", 1)[0] == LAUNCHER]
    assert not offenders, "\n".join(offenders)


def test_only_storage_imports_the_etcd_client() -> None:
    users = sorted(str(p.relative_to(ROOT)) for package in ("kubelab", LAUNCHER, *COMPONENTS) for p in sources(package)
                   if any(m == "aetcd" or m.startswith("aetcd.") for m in imported_modules(p)))
    assert users == ["apiserver/storage.py"], users


def test_only_the_client_speaks_http_to_the_api_server() -> None:
    """kubelab/client is the one HTTP client of the API server: every other package (the launcher's tools
    included) asks through it and catches its TransportError, so no module outside it imports an HTTP
    client library."""
    http_libraries = ("httpx", "aiohttp")
    users = sorted(str(p.relative_to(ROOT)) for package in ("kubelab", LAUNCHER, *COMPONENTS) for p in sources(package)
                   if any(m.split(".", 1)[0] in http_libraries for m in imported_modules(p)))
    assert all(user.startswith("kubelab/client/") for user in users), users
