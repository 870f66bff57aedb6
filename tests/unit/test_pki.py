"""The lab PKI `kubelab up --token-auth-file` serves HTTPS with, and guards its etcd with: kept while it fits,
made anew when not."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from cryptography import x509

from kubelab.pki import ensure_lab_pki


def sans(path: Path) -> tuple[set[str], set[str]]:
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return set(ext.get_values_for_type(x509.DNSName)), {str(ip) for ip in ext.get_values_for_type(x509.IPAddress)}


def test_the_serving_certificate_names_the_api_server_as_kubeadm_does(tmp_path: Path) -> None:
    pki = ensure_lab_pki(tmp_path / "pki", ips=["10.96.0.1"])

    names, ips = sans(pki.cert_file)
    assert names == {"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                     "kubernetes.default.svc.cluster.local"}
    assert ips == {"127.0.0.1", "10.96.0.1"}
    assert pki.key_file.stat().st_mode & 0o077 == 0
    # A TLS client trusting only the CA completes a handshake for the names on the certificate only.
    handshake(pki.ca_file, pki.cert_file, pki.key_file, "127.0.0.1")
    handshake(pki.ca_file, pki.cert_file, pki.key_file, "kubernetes.default.svc")
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(pki.ca_file, pki.cert_file, pki.key_file, "192.0.2.1")


def test_etcd_wants_the_api_servers_client_certificate(tmp_path: Path) -> None:
    pki = ensure_lab_pki(tmp_path / "pki", ips=["10.96.0.1"])

    assert sans(pki.etcd_cert_file) == ({"localhost"}, {"127.0.0.1"})  # etcd listens on loopback only
    for key in (pki.key_file, pki.etcd_key_file, pki.etcd_client_key_file):
        assert key.stat().st_mode & 0o777 == 0o600, key
    # etcd (--client-cert-auth, --trusted-ca-file ca.crt) completes a handshake with the API server's
    # client certificate, and with no certificate at all does not.
    handshake(pki.ca_file, pki.etcd_cert_file, pki.etcd_key_file, "127.0.0.1",
              client_cert=(pki.etcd_client_cert_file, pki.etcd_client_key_file))
    with pytest.raises(ssl.SSLError):
        handshake(pki.ca_file, pki.etcd_cert_file, pki.etcd_key_file, "127.0.0.1", client_cert=None)


def handshake(ca: Path, cert: Path, key: Path, name: str, *,
              client_cert: tuple[Path, Path] | None | bool = False) -> None:
    """A TLS handshake between a client trusting `ca` and a server with `cert`, in memory. With
    `client_cert` (None or a certificate and key) the server requires a client certificate of `ca`."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    client_ctx = ssl.create_default_context(cafile=str(ca))
    if client_cert is not False:
        server_ctx.verify_mode = ssl.CERT_REQUIRED
        server_ctx.load_verify_locations(cafile=str(ca))
        if client_cert:
            client_ctx.load_cert_chain(*client_cert)
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname=name)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    done = [False, False]
    for _ in range(10):
        for i, (side, out, peer_in) in enumerate(((client, c_out, s_in), (server, s_out, c_in))):
            if not done[i]:
                try:
                    side.do_handshake()
                    done[i] = True
                except ssl.SSLWantReadError:
                    pass
            peer_in.write(out.read())
        if all(done):
            return
    raise AssertionError("the handshake did not finish")


def test_kept_across_restarts_and_made_anew_when_it_no_longer_fits(tmp_path: Path) -> None:
    first = ensure_lab_pki(tmp_path, ips=["10.96.0.1"])
    cert, ca = first.cert_file.read_bytes(), first.ca_file.read_bytes()

    assert ensure_lab_pki(tmp_path, ips=["10.96.0.1"]).cert_file.read_bytes() == cert  # a restart

    ensure_lab_pki(tmp_path, ips=["10.96.0.1", "192.0.2.7"])  # now listening on another address
    assert "192.0.2.7" in sans(first.cert_file)[1] and first.ca_file.read_bytes() != ca

    first.key_file.write_text("not a key")
    ensure_lab_pki(tmp_path, ips=["10.96.0.1"])
    assert first.key_file.read_text().startswith("-----BEGIN PRIVATE KEY-----")

    cert = first.etcd_client_cert_file.read_bytes()
    first.etcd_client_key_file.chmod(0o644)  # a key someone else could have read is not kept
    ensure_lab_pki(tmp_path, ips=["10.96.0.1"])
    assert first.etcd_client_cert_file.read_bytes() != cert
    assert first.etcd_client_key_file.stat().st_mode & 0o777 == 0o600


def test_the_service_account_key_is_made_once_and_kept(tmp_path: Path) -> None:
    """Tokens signed before a restart stay valid: the key is reused, a readable one made private, not replaced."""
    import stat

    from kubelab.pki import ensure_service_account_key

    path = ensure_service_account_key(tmp_path / "pki")
    first = path.read_bytes()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and b"PRIVATE KEY" in first
    path.chmod(0o644)
    assert ensure_service_account_key(tmp_path / "pki").read_bytes() == first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.write_text("garbage")
    assert ensure_service_account_key(tmp_path / "pki").read_bytes() not in (first, b"garbage")
