"""A lab PKI for `kubelab up` with tokens: a CA of its own, the API server's serving certificate, and the
certificates of the private etcd and of the API server as its client.

kubectl (client-go) sends bearer tokens only over TLS (kubernetes/kubectl#744), so a cluster that asks
for tokens must serve HTTPS, as kube-apiserver's secure port does. And a cluster that guards its API
with tokens must guard its etcd too, or any local user reads every Secret and token from etcd's
loopback port: etcd then serves https and wants a client certificate of the lab CA
(--client-cert-auth), which only the API server has, as kubeadm sets up kube-apiserver and etcd
(etcd/server.crt, apiserver-etcd-client.crt). `kubelab up` makes this PKI in `<data-dir>/pki`
(kubeadm keeps its own in /etc/kubernetes/pki) and keeps it across restarts while every certificate is
still valid and the serving one covers the addresses the API is reached by. Pods always get the CA
(ConfigMap kube-root-ca.crt) and, in the netns lab, reach the API over HTTPS with the serving
certificate (it names 10.96.0.1, the Service's names and the lab address 10.240.0.4); with
--token-auth-file the user's port serves HTTPS too, etcd wants the client certificate, and the CA goes
into the kubeconfig. The service account signing key (sa.key) lives next to them. The CA's private key is not kept: everything is signed when the CA is
made, and nothing is ever signed with it afterwards. Private keys are 0600.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from .etcd import EtcdTLS

# The names kube-apiserver's certificate carries for the kubernetes Service (kubeadm's list).
SERVICE_NAMES = ("kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
VALIDITY = datetime.timedelta(days=365)
ETCD_CLIENT_NAME = "kube-apiserver-etcd-client"  # kubeadm's common name for this certificate
# kubeadm's apiserver-kubelet-client.crt: the API server's identity towards kubelets (in system:masters).
KUBELET_CLIENT_NAME = "kube-apiserver-kubelet-client"


@dataclass(frozen=True)
class LabPKI:
    ca_file: Path
    cert_file: Path  # the API server's serving certificate
    key_file: Path
    etcd_cert_file: Path  # etcd's serving (and peer) certificate
    etcd_key_file: Path
    etcd_client_cert_file: Path  # the API server's client certificate for etcd
    etcd_client_key_file: Path
    kubelet_cert_file: Path  # the kubelets' serving certificate (every node's address)
    kubelet_key_file: Path
    kubelet_client_cert_file: Path  # the API server's client certificate for kubelets
    kubelet_client_key_file: Path

    @classmethod
    def under(cls, directory: Path) -> LabPKI:
        return cls(directory / "ca.crt", directory / "apiserver.crt", directory / "apiserver.key",
                   directory / "etcd-server.crt", directory / "etcd-server.key",
                   directory / "apiserver-etcd-client.crt", directory / "apiserver-etcd-client.key",
                   directory / "kubelet.crt", directory / "kubelet.key",
                   directory / "apiserver-kubelet-client.crt", directory / "apiserver-kubelet-client.key")

    def etcd_tls(self) -> EtcdTLS:
        return EtcdTLS(self.ca_file, self.etcd_cert_file, self.etcd_key_file, self.etcd_client_cert_file,
                       self.etcd_client_key_file)


def ensure_lab_pki(directory: Path, *, ips: list[str], names: list[str] | None = None,
                   kubelet_ips: list[str] | None = None) -> LabPKI:
    """The CA and certificates in `directory`, all made anew unless the ones there are still valid for at
    least a day, the serving certificate names every one of `ips` and `names` (plus localhost and
    the Service names) and the kubelets' names every one of `kubelet_ips` (the nodes' addresses)."""
    pki = LabPKI.under(directory)
    wanted_names = {"localhost", *SERVICE_NAMES, *(names or [])}
    wanted_ips = {ipaddress.ip_address(ip) for ip in ["127.0.0.1", *ips]}
    node_ips = {ipaddress.ip_address(ip) for ip in ["127.0.0.1", *(kubelet_ips or [])]}
    if _still_good(pki, wanted_names, wanted_ips, node_ips):
        return pki
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"kubelab-ca@{int(now.timestamp())}")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + VALIDITY)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))

    def issue(cert_file: Path, key_file: Path, common_name: str, usages: list[x509.ObjectIdentifier], *,
              dns: set[str], ips: set[ipaddress.IPv4Address | ipaddress.IPv6Address]) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
                   .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + VALIDITY)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=True, key_cert_sign=False,
                                                crl_sign=False, content_commitment=False, data_encipherment=False,
                                                key_agreement=False, encipher_only=False, decipher_only=False),
                                  critical=True)
                   .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
        sans: list[x509.GeneralName] = [x509.DNSName(n) for n in sorted(dns)]
        sans += [x509.IPAddress(ip) for ip in sorted(ips, key=str)]
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        _write(key_file, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()), 0o600)
        _write(cert_file, builder.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM), 0o644)

    loopback = {ipaddress.ip_address("127.0.0.1")}
    issue(pki.cert_file, pki.key_file, "kube-apiserver", [ExtendedKeyUsageOID.SERVER_AUTH],
          dns=wanted_names, ips=wanted_ips)
    # etcd presents one certificate to clients and, as a peer, both serves and dials with it (kubeadm's
    # etcd server certificate has both usages too). It listens on loopback only.
    issue(pki.etcd_cert_file, pki.etcd_key_file, "kubelab-etcd",
          [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH], dns={"localhost"}, ips=loopback)
    issue(pki.etcd_client_cert_file, pki.etcd_client_key_file, ETCD_CLIENT_NAME, [ExtendedKeyUsageOID.CLIENT_AUTH],
          dns=set(), ips=set())
    # The kubelet API (--tls-cert-file): one certificate for every node of the lab, checked by the API
    # server against the lab CA (--kubelet-certificate-authority); the kubelets want the API server's
    # client certificate (--client-ca-file, and nothing but this name: kubeletstub/server.py).
    issue(pki.kubelet_cert_file, pki.kubelet_key_file, "kubelab-kubelet", [ExtendedKeyUsageOID.SERVER_AUTH],
          dns={"localhost"}, ips=node_ips)
    issue(pki.kubelet_client_cert_file, pki.kubelet_client_key_file, KUBELET_CLIENT_NAME,
          [ExtendedKeyUsageOID.CLIENT_AUTH], dns=set(), ips=set())
    _write(pki.ca_file, ca.public_bytes(serialization.Encoding.PEM), 0o644)  # last: it marks the set complete
    return pki


SERVICE_ACCOUNT_KEY = "sa.key"  # kubeadm's name for the service account signing key


def ensure_service_account_key(directory: Path) -> Path:
    """The API server's service account signing key (P-256, ES256) in `directory`, made once and kept:
    tokens it signed stay valid across restarts, as kube-apiserver's --service-account-signing-key-file."""
    path = directory / SERVICE_ACCOUNT_KEY
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        if isinstance(key, ec.EllipticCurvePrivateKey):
            if path.stat().st_mode & 0o077:
                path.chmod(0o600)  # kept (a new key would void every token), but private from now on
            return path
    except (OSError, ValueError, TypeError):
        pass
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    _write(path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()), 0o600)
    return path


def _write(path: Path, data: bytes, mode: int) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.unlink(missing_ok=True)  # created afresh with `mode`: a key is never readable by others, not even briefly
    tmp.touch(mode)
    tmp.chmod(mode)
    tmp.write_bytes(data)
    tmp.replace(path)


def _still_good(pki: LabPKI, names: set[str], ips: set[ipaddress.IPv4Address | ipaddress.IPv6Address],
                node_ips: set[ipaddress.IPv4Address | ipaddress.IPv6Address]) -> bool:
    soon = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1)
    try:
        ca = x509.load_pem_x509_certificate(pki.ca_file.read_bytes())
        certs = []
        for cert_file, key_file in ((pki.cert_file, pki.key_file), (pki.etcd_cert_file, pki.etcd_key_file),
                                    (pki.etcd_client_cert_file, pki.etcd_client_key_file),
                                    (pki.kubelet_cert_file, pki.kubelet_key_file),
                                    (pki.kubelet_client_cert_file, pki.kubelet_client_key_file)):
            cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
            key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
            if cert.public_key() != key.public_key() or cert.issuer != ca.subject:
                return False
            cert.verify_directly_issued_by(ca)
            if key_file.stat().st_mode & 0o077:
                return False
            certs.append(cert)
        sans = certs[0].extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        kubelet_sans = certs[3].extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (OSError, ValueError, TypeError, InvalidSignature, x509.ExtensionNotFound):
        return False
    return (all(c.not_valid_after_utc > soon for c in [ca, *certs])
            and names <= set(sans.get_values_for_type(x509.DNSName))
            and ips <= set(sans.get_values_for_type(x509.IPAddress))
            and node_ips <= set(kubelet_sans.get_values_for_type(x509.IPAddress)))
