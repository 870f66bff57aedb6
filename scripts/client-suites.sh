#!/usr/bin/env bash
# Run kr8s's own test suite, unchanged, against a fresh `kubelab up` (`make client-suites`; not part of `make test`:
# it downloads from PyPI and takes about ten minutes).
#
# What it does, all under one temporary directory removed at the end (KEEP=1 keeps it):
#   1. downloads the kr8s sdist from PyPI (the sdist carries the suite; the wheel does not) and checks its sha256;
#   2. makes a virtualenv of its own (never kubelab's .venv) with kr8s and the suite's test dependencies;
#   3. starts `kubelab up` (netns data plane, so root; token authentication, so HTTPS with a CA, as kr8s's
#      service-account fixtures need) on a free port with its own data dir, and seeds one Deployment in kube-system
#      (a kind cluster has kube-system pods; a dozen kr8s tests list pods cluster-wide and index the first);
#   4. runs `pytest kr8s` with scripts/client_suites/pytest_kind standing in for pytest-kind, so kr8s's conftest.py
#      gets the kubeconfig `kubelab up` wrote instead of creating a kind cluster;
#   5. stops `kubelab up` by its PID (SIGTERM: it removes its namespaces, links and processes) and checks that no
#      namespace of its lab is left.
# The exit status is 0 when every failure is one scripts/client_suites/kr8s-expected-failures.txt lists (each with
# why it is not kubelab's), 1 when another test failed, 2 when the run itself could not be made.
#
# Knobs (environment): KR8S_VERSION and KR8S_SHA256 (default 0.20.15 and its digest), PYTEST_ARGS (extra pytest
# arguments, e.g. "-k exec"), KUBELAB (the kubelab command, default .venv/bin/kubelab), KEEP=1.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
KR8S_VERSION="${KR8S_VERSION:-0.20.15}"
KR8S_SHA256="${KR8S_SHA256:-484d5206bbebd48f8cc00dd3ed749d4419294d2f08cd50c6232114cf62ed6d3a}"
KUBELAB="${KUBELAB:-$repo/.venv/bin/kubelab}"
PYTHON="${PYTHON:-python3}"
expected="$here/client_suites/kr8s-expected-failures.txt"

[ "$(id -u)" = 0 ] || { echo "client-suites: needs root (kubelab up's netns data plane runs the suite's pods)" >&2; exit 2; }
[ -x "$KUBELAB" ] || { echo "client-suites: $KUBELAB not found (make venv first)" >&2; exit 2; }
command -v kubectl >/dev/null || { echo "client-suites: kubectl not on PATH" >&2; exit 2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/kubelab-client-suites.XXXXXX")"
up_pid=""
prefix=""

cleanup() {
    local rc=$?
    if [ -n "$up_pid" ] && kill -0 "$up_pid" 2>/dev/null; then
        # SIGTERM is Ctrl-C to kubelab up (SIGINT stays ignored in a script's background job until Python's
        # handler replaces it; SIGTERM needs no such care).
        kill -TERM "$up_pid" 2>/dev/null || true
        for _ in $(seq 1 120); do kill -0 "$up_pid" 2>/dev/null || break; sleep 0.5; done
        if kill -0 "$up_pid" 2>/dev/null; then
            echo "client-suites: kubelab up ($up_pid) still running 60 s after SIGTERM; SIGKILL" >&2
            kill -KILL "$up_pid" 2>/dev/null || true
            rc=2
        fi
        wait "$up_pid" 2>/dev/null || true
    fi
    if [ -n "$prefix" ] && ip netns list 2>/dev/null | grep -q "^$prefix-"; then
        echo "client-suites: namespaces of $prefix left behind:" >&2
        ip netns list | grep "^$prefix-" >&2
        rc=2
    fi
    if [ "${KEEP:-0}" = 1 ]; then
        echo "client-suites: kept $work"
    else
        rm -rf "$work"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 1. The sdist, found in PyPI's simple index (PEP 691's JSON form, what pip reads), checked against its digest.
url="$(curl -fsS --retry 3 -H 'Accept: application/vnd.pypi.simple.v1+json' https://pypi.org/simple/kr8s/ \
    | "$PYTHON" -c 'import json, sys; name = f"kr8s-{sys.argv[1]}.tar.gz"
print(next(f["url"] for f in json.load(sys.stdin)["files"] if f["filename"] == name))' "$KR8S_VERSION")"
echo "client-suites: downloading $url"
curl -fsSL --retry 3 -o "$work/kr8s.tar.gz" "$url"
echo "$KR8S_SHA256  $work/kr8s.tar.gz" | sha256sum -c --quiet -
tar -xzf "$work/kr8s.tar.gz" -C "$work"
suite="$work/kr8s-$KR8S_VERSION"

# 2. The suite's virtualenv. Two test dependencies are held below releases newer than this kr8s: httpx-ws 0.9
# wraps an ExecError raised inside the WebSocket in an ExceptionGroup (pytest.raises(ExecError) then misses it),
# and kubernetes 37 no longer has kubernetes.client.models.v1_pod as an attribute (test_cast_to_from_kubernetes).
"$PYTHON" -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --upgrade pip
"$work/venv/bin/pip" install --quiet "$suite" pytest pytest-asyncio pytest-timeout pytest-rerunfailures pytest-cov \
    trio lightkube 'kubernetes<37' pykube-ng kubernetes-asyncio kubernetes-validate 'httpx-ws<0.9'

# 3. A fresh kubelab up.
port="$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
: > "$work/tokens.csv"
"$KUBELAB" up --data-dir "$work/kubelab" --listen "127.0.0.1:$port" --token-auth-file "$work/tokens.csv" \
    > "$work/kubelab-up.log" 2>&1 &
up_pid=$!
for _ in $(seq 1 240); do
    grep -q "^kubelab is up" "$work/kubelab-up.log" && break
    kill -0 "$up_pid" 2>/dev/null || { echo "client-suites: kubelab up exited:" >&2; tail -30 "$work/kubelab-up.log" >&2; exit 2; }
    sleep 0.5
done
grep -q "^kubelab is up" "$work/kubelab-up.log" || { echo "client-suites: kubelab up not ready in 120 s" >&2; exit 2; }
prefix="$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1])).get("netnsPrefix") or "")' \
    "$work/kubelab/cluster.json")"
export KUBELAB_KUBECONFIG="$work/kubelab/kubeconfig"
KUBECONFIG="$KUBELAB_KUBECONFIG" kubectl -n kube-system create deployment kubelab-seed \
    --image=registry.k8s.io/pause:3.10 >/dev/null
KUBECONFIG="$KUBELAB_KUBECONFIG" kubectl -n kube-system rollout status deployment/kubelab-seed --timeout=120s >/dev/null

# 4. The suite, unchanged. --no-cov: kr8s's addopts measure coverage of kr8s, which is not what is tested here.
echo "client-suites: running kr8s $KR8S_VERSION's suite against kubelab up at https://127.0.0.1:$port"
set +e
(cd "$suite" && PYTHONPATH="$here/client_suites" "$work/venv/bin/pytest" -p pytest_kind.plugin -p no:cacheprovider \
    --no-cov -q -rfEsx --junitxml="$work/junit.xml" ${PYTEST_ARGS:-} kr8s) | tee "$work/pytest.log"
pytest_rc=${PIPESTATUS[0]}
set -e
[ -s "$work/junit.xml" ] || { echo "client-suites: pytest wrote no report (exit $pytest_rc)" >&2; exit 2; }

# 5. Which failures are not in the expected list. (kubelab up is stopped by the EXIT trap.)
"$PYTHON" - "$work/junit.xml" "$expected" <<'EOF'
import sys
import xml.etree.ElementTree as ET

report, expected_file = sys.argv[1], sys.argv[2]
expected = {line.split("#", 1)[0].strip() for line in open(expected_file)} - {""}
failed = set()
for case in ET.parse(report).iter("testcase"):
    if case.find("failure") is not None or case.find("error") is not None:
        module = case.get("classname", "").replace(".", "/")
        failed.add(f"{module}.py::{case.get('name')}")
unexpected = sorted(failed - expected)
print(f"client-suites: {len(failed)} failed or errored, {len(failed & expected)} of them expected "
      f"(scripts/client_suites/kr8s-expected-failures.txt says why each is not kubelab's)")
for test in unexpected:
    print(f"client-suites: UNEXPECTED {test}")
sys.exit(1 if unexpected else 0)
EOF
