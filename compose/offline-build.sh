#!/bin/sh
# Builds the docker-compose lab's images without a container registry: a Debian bookworm base made with
# debootstrap from the Debian archive (with Python, iptables, iproute2, curl and etcd already in it),
# the Python dependencies as wheels downloaded with this host's pip, then `docker-compose build`, which
# then needs no network at all. Afterwards `docker-compose up -d` with the same two variables:
#
#   sh compose/offline-build.sh
#   export BASE_IMAGE=kubelab-base:bookworm ETCD_IMAGE=kubelab-base:bookworm
#   docker-compose up -d
#
# Needs root (debootstrap), Docker, docker-compose and a Python 3.11 with pip on Linux x86_64, as the
# image's (PYTHON=...; it reaches whatever index, proxy and CA bundle this host's pip is configured for).
# Variables: BASE_IMAGE (the tag made; kept and reused while it exists), DEBIAN_MIRROR (default: the
# first Debian archive apt uses here, else deb.debian.org), DEBOOTSTRAP_CACHE (where debootstrap keeps
# the .debs it fetched; default /var/cache/kubelab-debootstrap).
set -eu
cd "$(dirname "$0")/.."
BASE_IMAGE=${BASE_IMAGE:-kubelab-base:bookworm}
PYTHON=${PYTHON:-python3}
DEBOOTSTRAP_CACHE=${DEBOOTSTRAP_CACHE:-/var/cache/kubelab-debootstrap}
# What the kubelab image needs (Dockerfile) and what the etcd service runs (Debian's etcd 3.4).
PACKAGES=python3,python3-venv,iptables,iproute2,curl,ca-certificates,procps,etcd-server,etcd-client

if [ -z "${DEBIAN_MIRROR:-}" ]; then
  DEBIAN_MIRROR=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
    2>/dev/null | grep -oE 'https?://[^ ]+/debian/?( |$)' | grep -v security | head -n1 | tr -d ' ')
  DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
fi

if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  echo "base image $BASE_IMAGE: kept"
else
  echo "base image $BASE_IMAGE: debootstrap bookworm from $DEBIAN_MIRROR"
  rootfs=$(mktemp -d /var/tmp/kubelab-rootfs.XXXXXX)
  trap 'rm -rf "$rootfs"' EXIT INT TERM
  mkdir -p "$DEBOOTSTRAP_CACHE"
  debootstrap --variant=minbase --cache-dir="$DEBOOTSTRAP_CACHE" --include="$PACKAGES" \
    bookworm "$rootfs" "$DEBIAN_MIRROR" >"$rootfs.log" 2>&1 || { tail -n 30 "$rootfs.log"; exit 1; }
  rm -f "$rootfs.log"
  # etcd where the official image has it, so that one compose file serves both images.
  ln -sf /usr/bin/etcd "$rootfs/usr/local/bin/etcd"
  ln -sf /usr/bin/etcdctl "$rootfs/usr/local/bin/etcdctl"
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb
  tar -C "$rootfs" -c . | docker import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' -c 'CMD ["bash"]' - "$BASE_IMAGE"
  rm -rf "$rootfs"
  trap - EXIT INT TERM
fi

# The wheels, at compose/constraints.txt's versions (already there: not fetched again).
"$PYTHON" -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
  > compose/wheels/requirements.txt
echo 'setuptools>=68' >> compose/wheels/requirements.txt
"$PYTHON" -m pip download --quiet --only-binary=:all: --dest compose/wheels \
  -c compose/constraints.txt -r compose/wheels/requirements.txt
rm -f compose/wheels/requirements.txt

BASE_IMAGE=$BASE_IMAGE docker-compose build
