#!/bin/sh
# Regenerates the docker-compose lab's PKI, as kubelab up makes its own (kubelab/pki.py, kubeadm's names):
# a CA, the API server's serving certificate, the kubelets' serving certificate and the API server's
# client certificate for them, and the service account signing key the API server signs pods' tokens with.
# LAB ONLY: the private keys are committed to the repository on purpose, so that `docker-compose up` and
# kubectl work without a setup step. Never use these files for anything but this lab.
#   sh compose/pki/generate.sh          (needs openssl; writes every file here but itself)
set -eu
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -sha256 -days 3650 \
  -subj "/CN=kubelab-compose-ca" -keyout "$tmp/ca.key" -out ca.crt \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"

# issue NAME CN USAGE SANS: NAME.crt and NAME.key, signed by the CA (the CA's key is thrown away after).
issue() {
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$3"
    [ -z "$4" ] || echo "subjectAltName=$4"
  } > "$tmp/$1.cnf"
  openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -sha256 \
    -subj "/CN=$2" -keyout "$1.key" -out "$tmp/$1.csr" 2>/dev/null
  openssl x509 -req -in "$tmp/$1.csr" -CA ca.crt -CAkey "$tmp/ca.key" -CAcreateserial \
    -CAserial "$tmp/ca.srl" -sha256 -days 3650 -extfile "$tmp/$1.cnf" -out "$1.crt" 2>/dev/null
  chmod 644 "$1.key"  # read by the container's user, whatever uid the bind mount shows
}

# The names the API servers are reached by: the compose service names and their static IPs (apiserver
# 10.240.0.4; apiserver-2 .8 and apiserver-3 .9 of docker-compose.ha.yml, which serve with this same
# certificate, as kube-apiservers behind one name share theirs), the published ports on the docker host
# (127.0.0.1, localhost), and the kubernetes Service, which spreads over all of them.
issue apiserver kube-apiserver serverAuth \
  "DNS:apiserver,DNS:apiserver-2,DNS:apiserver-3,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.240.0.4,IP:10.240.0.8,IP:10.240.0.9,IP:10.96.0.1"
# The kubelet API (10250) of every node container: one certificate naming the three nodes' addresses,
# which the API server checks against this CA (--kubelet-certificate-authority).
issue kubelet kubelab-kubelet serverAuth \
  "DNS:node-1,DNS:node-2,DNS:node-3,DNS:localhost,IP:10.240.0.11,IP:10.240.0.12,IP:10.240.0.13,IP:127.0.0.1"
# The API server's identity towards kubelets (kubeadm's apiserver-kubelet-client.crt); the kubelets take
# this common name only (kubeletstub/server.py, kubelab.pki.KUBELET_CLIENT_NAME).
issue apiserver-kubelet-client kube-apiserver-kubelet-client clientAuth ""

# kube-apiserver's --service-account-signing-key-file (kubeadm's sa.key): P-256, ES256 tokens. Every
# API server of the lab gets this one, so a token one of them issued is good at all of them and
# across restarts.
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out sa.key
chmod 644 sa.key
