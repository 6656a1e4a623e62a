"""The host's certificate and key for the HTTP/3 listeners, read and judged before anything binds.

QUIC has no cleartext mode, so an h3 listener needs ``--tls-cert`` and
``--tls-key``; this server mints no certificate (seed 000, Transports 4:
one it made itself would teach every client to skip verifying). Every way
the pair can be wrong refuses the start by its own name, because "TLS
failed" is the least useful thing a server can say at startup:

* :class:`TlsFilesRequiredError`: an h3 listener with one of the two files
  not named, or the files named with no h3 listener to use them (h1 and h2
  are cleartext here; the host terminates their TLS at its edge);
* :class:`CertificateFileMissingError`: a named file does not exist;
* :class:`CertificateFileUnreadableError`: it exists and cannot be read,
  or a block in it does not parse;
* :class:`CertificateBlockMissingError`: the certificate file holds no
  ``CERTIFICATE`` PEM block;
* :class:`PrivateKeyBlockMissingError`: the key file holds no ``PRIVATE KEY``
  PEM block;
* :class:`KeyMismatchError`: the key is not the certificate's.

A refused start binds nothing, and never falls back to h2 on the address
that asked for h3: a host that asked for h3 and got h2 would advertise h3 and
be wrong.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from aioquic.quic.configuration import QuicConfiguration
from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

_CERTIFICATE = re.compile(rb"-----BEGIN CERTIFICATE-----\r?\n.*?-----END CERTIFICATE-----", re.S)
_PRIVATE_KEY = re.compile(rb"-----BEGIN ((?:RSA |EC |ENCRYPTED )?PRIVATE KEY)-----\r?\n.*?-----END \1-----", re.S)


class CertificateError(Exception):
    """The start is refused over the TLS files; ``name`` says which refusal, ``path`` which file."""

    name = "CertificateError"

    def __init__(self, path: str | os.PathLike[str] | None, reason: str) -> None:
        self.path = os.fspath(path) if path is not None else None
        self.reason = reason
        super().__init__(f"{self.name}: {self.path + ': ' if self.path else ''}{reason}")


class TlsFilesRequiredError(CertificateError):
    name = "TlsFilesRequiredError"


class CertificateFileMissingError(CertificateError):
    name = "CertificateFileMissingError"


class CertificateFileUnreadableError(CertificateError):
    name = "CertificateFileUnreadableError"


class CertificateBlockMissingError(CertificateError):
    name = "CertificateBlockMissingError"


class PrivateKeyBlockMissingError(CertificateError):
    name = "PrivateKeyBlockMissingError"


class KeyMismatchError(CertificateError):
    name = "KeyMismatchError"


_UNPARSED = (ValueError, TypeError, UnsupportedAlgorithm)


def _spki(public_key: object) -> bytes:
    return public_key.public_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


@dataclass(frozen=True)
class Certificate:
    """A judged pair: the files, for the QUIC configuration to load (``load_cert_chain``)."""

    cert_path: Path
    key_path: Path
    subject: str


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise CertificateFileMissingError(path, "no such file") from None
    except OSError as exc:
        raise CertificateFileUnreadableError(path, exc.strerror or str(exc)) from None


def judge(cert: str | None, key: str | None, h3_listeners: int) -> Certificate | None:
    """The pair the h3 listeners serve, or None when there are none and no file is named; else the refusal."""
    if h3_listeners == 0:
        if cert is None and key is None:
            return None
        raise TlsFilesRequiredError(
            None,
            "--tls-cert and --tls-key serve h3 listeners, and none is named "
            "(h1 and h2 are cleartext here: terminate their TLS at the edge)",
        )
    if cert is None or key is None:
        missing = " and ".join(flag for flag, value in (("--tls-cert", cert), ("--tls-key", key)) if value is None)
        raise TlsFilesRequiredError(
            None, f"an h3 listener needs {missing}: QUIC has no cleartext mode, and this server mints no certificate"
        )
    cert_path, key_path = Path(cert), Path(key)
    cert_pem, key_pem = _read(cert_path), _read(key_path)
    blocks = _CERTIFICATE.findall(cert_pem)
    if not blocks:
        raise CertificateBlockMissingError(cert_path, "no -----BEGIN CERTIFICATE----- block")
    found = _PRIVATE_KEY.search(key_pem)
    if found is None:
        raise PrivateKeyBlockMissingError(key_path, "no -----BEGIN PRIVATE KEY----- block")
    # cryptography parses a certificate's parts lazily and names a bad part with a bare ValueError (or
    # UnsupportedAlgorithm for a mangled algorithm id), so every part the judge reads is read inside a try.
    try:
        leaf = x509.load_pem_x509_certificate(blocks[0])
        leaf_key, subject = _spki(leaf.public_key()), leaf.subject.rfc4514_string()
    except _UNPARSED as exc:
        raise CertificateFileUnreadableError(cert_path, f"the first CERTIFICATE block does not parse: {exc}") from None
    try:
        private_key = _spki(serialization.load_pem_private_key(found.group(0), password=None).public_key())
    except _UNPARSED as exc:
        raise CertificateFileUnreadableError(key_path, f"the PRIVATE KEY block does not parse: {exc}") from None
    if private_key != leaf_key:
        raise KeyMismatchError(key_path, f"this key is not the key of the certificate in {cert_path} ({subject})")
    try:  # what the h3 listener will do with the files: a pair judged good is a pair that loads
        QuicConfiguration(is_client=False).load_cert_chain(cert_path, key_path)
    except Exception as exc:  # noqa: BLE001 - any failure of the load is this refusal, named, before a bind
        raise CertificateFileUnreadableError(cert_path, f"the QUIC stack cannot load the pair: {exc!r}") from None
    return Certificate(cert_path, key_path, subject)
