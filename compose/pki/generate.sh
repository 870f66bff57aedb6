#!/bin/sh
# Regenerates the docker-compose lab's PKI: a CA and the API server's serving certificate.
# LAB ONLY: the private key is committed to the repository on purpose, so that `docker-compose up` and
# kubectl work without a setup step. Never use these files for anything but this lab.
#   sh compose/pki/generate.sh          (needs openssl; writes ca.crt, apiserver.crt, apiserver.key)
set -eu
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -sha256 -days 3650 \
  -subj "/CN=kubelab-compose-ca" -keyout "$tmp/ca.key" -out ca.crt \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"

# The names the API server is reached by: the compose service name and its static IP (10.240.0.4),
# the published port on the docker host (127.0.0.1, localhost), and the kubernetes Service.
cat > "$tmp/ext.cnf" <<'CNF'
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:apiserver,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.240.0.4,IP:10.96.0.1
CNF
openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -sha256 \
  -subj "/CN=kube-apiserver" -keyout apiserver.key -out "$tmp/apiserver.csr"
openssl x509 -req -in "$tmp/apiserver.csr" -CA ca.crt -CAkey "$tmp/ca.key" -CAcreateserial \
  -CAserial "$tmp/ca.srl" -sha256 -days 3650 -extfile "$tmp/ext.cnf" -out apiserver.crt
chmod 644 apiserver.key  # read by the apiserver container's user, whatever uid the bind mount shows
