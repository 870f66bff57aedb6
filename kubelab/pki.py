"""A lab PKI for `kubelab up` with tokens: a CA of its own and the API server's serving certificate.

kubectl (client-go) sends bearer tokens only over TLS (kubernetes/kubectl#744), so a cluster that asks
for tokens must serve HTTPS, as kube-apiserver's secure port does. `kubelab up --token-auth-file`
makes this PKI in `<data-dir>/pki` (kubeadm keeps its own in /etc/kubernetes/pki) and keeps it across
restarts while the certificate still covers the addresses it is reached by; the CA goes into the
kubeconfig. The CA's private key is not kept: nothing else is ever signed with it.
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

# The names kube-apiserver's certificate carries for the kubernetes Service (kubeadm's list).
SERVICE_NAMES = ("kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
VALIDITY = datetime.timedelta(days=365)


@dataclass(frozen=True)
class ServingPKI:
    ca_file: Path
    cert_file: Path
    key_file: Path


def ensure_serving_pki(directory: Path, *, ips: list[str], names: list[str] | None = None) -> ServingPKI:
    """The CA and serving certificate in `directory`, made anew unless the ones there are still valid
    for at least a day and name every one of `ips` and `names` (plus localhost and the Service names)."""
    pki = ServingPKI(directory / "ca.crt", directory / "apiserver.crt", directory / "apiserver.key")
    wanted_names = {"localhost", *SERVICE_NAMES, *(names or [])}
    wanted_ips = {ipaddress.ip_address(ip) for ip in ["127.0.0.1", *ips]}
    if _still_good(pki, wanted_names, wanted_ips):
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
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in sorted(wanted_names)]
    sans += [x509.IPAddress(ip) for ip in sorted(wanted_ips, key=str)]
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=True, key_cert_sign=False,
                                         crl_sign=False, content_commitment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .sign(ca_key, hashes.SHA256()))
    _write(pki.key_file, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()), 0o600)
    _write(pki.cert_file, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    _write(pki.ca_file, ca.public_bytes(serialization.Encoding.PEM), 0o644)
    return pki


def _write(path: Path, data: bytes, mode: int) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    tmp.chmod(mode)
    tmp.replace(path)


def _still_good(pki: ServingPKI, names: set[str], ips: set[ipaddress.IPv4Address | ipaddress.IPv6Address]) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(pki.cert_file.read_bytes())
        ca = x509.load_pem_x509_certificate(pki.ca_file.read_bytes())
        serialization.load_pem_private_key(pki.key_file.read_bytes(), password=None)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (OSError, ValueError, x509.ExtensionNotFound):
        return False
    if cert.issuer != ca.subject:
        return False
    try:
        cert.verify_directly_issued_by(ca)
    except (InvalidSignature, ValueError, TypeError):
        return False
    soon = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1)
    return (cert.not_valid_after_utc > soon and ca.not_valid_after_utc > soon
            and names <= set(sans.get_values_for_type(x509.DNSName))
            and ips <= set(sans.get_values_for_type(x509.IPAddress)))
