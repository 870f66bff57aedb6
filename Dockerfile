# The kubelab image: every component (apiserver, scheduler, controllers, dns, node) runs from it, as the
# docker-compose lab cluster does (docker-compose.yml builds it once, as kubelab:dev).
#   docker build -t kubelab:dev .        (or: docker-compose build)
#
# BASE_IMAGE: any Debian bookworm with Python 3.11. The default comes from Docker Hub; a site without a
# registry builds its own from the Debian archive (compose/offline-build.sh: debootstrap, docker import),
# with the system packages below already in it, so that this build needs no network at all.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

# iptables (nft and legacy) and iproute2 for a node's proxy agent and dataplane; curl for health checks
# and for poking Services from inside a node; python3-venv where the base is plain Debian. Skipped when
# the base has them all (the offline base).
RUN if ! command -v iptables-legacy || ! command -v ip || ! command -v curl \
       || ! python3 -c 'import ensurepip, venv' ; then \
      apt-get update \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends iptables iproute2 curl \
           $(command -v python3 >/dev/null || echo python3 python3-venv) \
      && rm -rf /var/lib/apt/lists/* ; \
    fi >/dev/null

# Log lines as they happen (`docker-compose logs -f`), no .pyc files in the layers, pip quiet.
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PATH=/opt/kubelab/bin:$PATH

# Dependencies first, in a layer of their own, so that editing the source does not reinstall them; in a
# virtualenv (Debian's python3 refuses system-wide pip installs, PEP 668), at the versions of
# compose/constraints.txt (setuptools too: kubelab itself is built with it, below, without a download);
# from compose/wheels/ alone when it holds wheels (an offline build).
WORKDIR /src
COPY pyproject.toml README.md ./
COPY compose/constraints.txt compose/wheels/ /tmp/deps/
RUN python3 -m venv /opt/kubelab \
 && python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
      > /tmp/deps/requirements.txt \
 && if ls /tmp/deps/*.whl >/dev/null 2>&1; then set -- --no-index --find-links /tmp/deps; fi \
 && echo 'setuptools>=68' >> /tmp/deps/requirements.txt \
 && pip install --quiet "$@" -c /tmp/deps/constraints.txt -r /tmp/deps/requirements.txt \
 && rm -rf /tmp/deps

COPY kubelab ./kubelab
COPY launcher ./launcher
COPY apiserver ./apiserver
COPY scheduler ./scheduler
COPY controllers ./controllers
COPY proxyagent ./proxyagent
COPY kubeletstub ./kubeletstub
COPY clusterdns ./clusterdns
RUN pip install --quiet --no-deps --no-build-isolation . && cd / && rm -rf /src && kubelab --help >/dev/null

# A component's state (a node's --data-dir .kubelab, with its pods' namespace records) lives here.
WORKDIR /var/lib/kubelab
ENTRYPOINT ["kubelab"]
CMD ["--help"]
