"""A certificate authority made in the test: server and client certificates signed by it."""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclasses.dataclass(frozen=True)
class Pair:
    cert: str
    key: str


class Authority:
    """A CA whose PEM is at ``self.cert``; ``issue`` writes a leaf certificate and key."""

    def __init__(self, directory: Path, name: str = "tidemark test ca") -> None:
        self._directory = directory
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        certificate = (
            _builder(self._name, self._name, self._key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.cert = str(directory / f"{name.replace(' ', '-')}.pem")
        Path(self.cert).write_bytes(certificate.public_bytes(serialization.Encoding.PEM))

    def issue(
        self, name: str, *, server: bool, dns_names: tuple[str, ...] = ("localhost",)
    ) -> Pair:
        """A leaf; a server's names ``dns_names`` (wildcards too) and 127.0.0.1."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        builder = _builder(subject, self._name, key.public_key())
        if server:
            names: list[x509.GeneralName] = [x509.DNSName(dns) for dns in dns_names]
            names.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        certificate = builder.sign(self._key, hashes.SHA256())
        pair = Pair(str(self._directory / f"{name}.crt"), str(self._directory / f"{name}.key"))
        Path(pair.cert).write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        Path(pair.key).write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return pair


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
