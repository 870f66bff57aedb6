# The kubelab image: every component (apiserver, scheduler, controllers, dns, node) runs from it, as the
# docker-compose lab cluster does (docker-compose.yml).
#   docker build -t kubelab:dev .        (or: docker-compose build)
FROM python:3.11-slim-bookworm

# iptables (nft and legacy) and iproute2 for a node's proxy agent and dataplane (`ip netns exec` starts
# each pod's server); curl for health checks and for poking Services from inside a node.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends iptables iproute2 curl \
 && rm -rf /var/lib/apt/lists/*

# Log lines as they happen (`docker-compose logs -f`), no .pyc files in the layers, pip quiet about root.
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

# Dependencies first, in a layer of their own, so that editing the source does not reinstall them.
WORKDIR /src
COPY pyproject.toml README.md ./
RUN python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
      > /tmp/requirements.txt \
 && pip install -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt

COPY kubelab ./kubelab
COPY apiserver ./apiserver
COPY scheduler ./scheduler
COPY controllers ./controllers
COPY proxyagent ./proxyagent
COPY kubeletstub ./kubeletstub
COPY clusterdns ./clusterdns
RUN pip install --no-deps . && cd / && rm -rf /src

# A component's state (a node's --data-dir .kubelab, with its pods' namespace records) lives here.
WORKDIR /var/lib/kubelab
ENTRYPOINT ["kubelab"]
CMD ["--help"]
