# The kubelab image: every component (apiserver, scheduler, controllers, node) runs from it.
#   docker build -t kubelab .
FROM python:3.11-slim-bookworm

# iptables (nft and legacy) and iproute2 for the node's proxy agent and dataplane; curl for health
# checks and for poking Services from inside a node.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends iptables iproute2 curl \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY pyproject.toml README.md ./
COPY kubelab ./kubelab
COPY apiserver ./apiserver
COPY scheduler ./scheduler
COPY controllers ./controllers
COPY proxyagent ./proxyagent
COPY kubeletstub ./kubeletstub
COPY clusterdns ./clusterdns
RUN pip install --no-cache-dir . && rm -rf /src/build

WORKDIR /
ENTRYPOINT ["kubelab"]
CMD ["--help"]
